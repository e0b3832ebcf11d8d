"""The window's pages, the heavy ones built just after the window is on screen.

The Monitor and Training pages draw with pyqtgraph: its import (numpy with it)
and their plots were about half of the work before the window's first paint.
The window does not wait for them. A page whose module is in :data:`LATE`
stands in the sidebar (title and icon known without importing it) and in the
stack (an empty placeholder) until it is shown, looked up
(``window.pages["Monitor"]`` builds it), or built by the window once its first
facts are on screen (:meth:`PageSet.build_next`). Built, it takes the
placeholder's place and index; nothing else changes.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator, Mapping

from PySide6.QtWidgets import QStackedWidget, QWidget

# module -> (title, icon_name): what the sidebar shows before the module is imported
# (tests/test_gui_first_seconds.py checks that they agree with the classes).
LATE: dict[str, tuple[str, str]] = {
    "monitor_page": ("Monitor", "monitor"),
    "training_page": ("Training", "training"),
}


class PageSet(Mapping):
    """Title -> page, in sidebar order; a late page is built the first time it is looked up."""

    def __init__(self, stack: QStackedWidget, make: Callable[[type], QWidget],
                 on_built: Callable[[str, QWidget], None]):
        self.stack = stack
        self.make = make                       # constructs a page from its class
        self.on_built = on_built               # wires a page once it exists (navigation, the Monitor's rate)
        self.titles: list[str] = []
        self.icons: dict[str, str] = {}
        self._pages: dict[str, QWidget] = {}
        self._pending: dict[str, tuple[str, str, QWidget]] = {}   # title -> (module, class, placeholder)

    def add(self, module: str, cls_name: str, late: bool) -> str:
        """Add the page of ``module`` (built now, or a placeholder when ``late``); returns its title."""
        if late and module in LATE:
            title, icon_name = LATE[module]
            placeholder = QWidget()
            placeholder.setObjectName(f"placeholder:{title}")
            self._pending[title] = (module, cls_name, placeholder)
            self.stack.addWidget(placeholder)
        else:
            cls = getattr(importlib.import_module(f"cpudoctor.gui.{module}"), cls_name)
            title, icon_name = cls.title, cls.icon_name
            self._pages[title] = page = self.make(cls)
            self.stack.addWidget(page)
        self.titles.append(title)
        self.icons[title] = icon_name
        if title in self._pages:
            self.on_built(title, self._pages[title])
        return title

    # -- the mapping ----------------------------------------------------------------------------

    def __getitem__(self, title: str) -> QWidget:
        if title in self._pending:
            return self.build(title)
        return self._pages[title]

    def __iter__(self) -> Iterator[str]:
        return iter(self.titles)

    def __len__(self) -> int:
        return len(self.titles)

    def built(self, title: str) -> QWidget | None:
        """The page if it exists, without building it."""
        return self._pages.get(title)

    def title_at(self, index: int) -> str:
        return self.titles[index] if 0 <= index < len(self.titles) else ""

    @property
    def pending(self) -> list[str]:
        return [t for t in self.titles if t in self._pending]

    # -- building -------------------------------------------------------------------------------

    def build(self, title: str) -> QWidget:
        module, cls_name, placeholder = self._pending.pop(title)
        _configure_pyqtgraph()
        cls = getattr(importlib.import_module(f"cpudoctor.gui.{module}"), cls_name)
        page = self.make(cls)
        index = self.titles.index(title)
        current = self.stack.currentIndex()
        self.stack.insertWidget(index, page)
        self.stack.removeWidget(placeholder)
        placeholder.deleteLater()
        if current == index:
            self.stack.setCurrentIndex(index)
        self._pages[title] = page
        self.on_built(title, page)
        return page

    def build_next(self) -> bool:
        """Build one pending page (one per turn of the event loop keeps the window answering); False when none."""
        pending = self.pending
        if not pending:
            return False
        self.build(pending[0])
        return bool(self.pending)


_configured = False


def _configure_pyqtgraph() -> None:
    """pyqtgraph's options, once, before the first page that draws with it."""
    global _configured
    if _configured:
        return
    import pyqtgraph as pg

    pg.setConfigOptions(antialias=True)
    _configured = True
