"""Tab titles that fit their tab bar: the whole title where there is room, a short one where there is not.

A QTabWidget too narrow for its titles hides tabs behind scroll arrows (the
Inspector's Time tab at the window's minimum size). :class:`FittedTabTitles`
gives each tab a long and a short title and shows the long ones only while
all of them fit; the tooltip always has the long one.
"""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject
from PySide6.QtWidgets import QTabWidget


def drawn(title: str) -> str:
    """A tab title as the bar draws it: ``&`` marks the mnemonic and is not drawn, ``&&`` draws one ``&``."""
    return title.replace("&&", "\0").replace("&", "").replace("\0", "&")


class FittedTabTitles(QObject):
    """Watches ``tabs``: long titles while they all fit its width, else the short ones."""

    def __init__(self, tabs: QTabWidget, titles: dict[str, str]):
        super().__init__(tabs)
        self.tabs = tabs
        self.titles = dict(titles)                   # long title -> short title
        self.short = False
        tabs.installEventFilter(self)
        self.fit()

    def add(self, long: str, short: str) -> None:
        """A tab added later (its long title is the one given to addTab)."""
        self.titles[long] = short
        self.fit()

    def _long(self, index: int) -> str:
        text = self.tabs.tabText(index)
        return next((lo for lo, sh in self.titles.items() if text in (lo, sh)), text)

    def needed(self, short: bool) -> int:
        """The width the tab bar needs with the long (or the short) titles."""
        bar = self.tabs.tabBar()
        fm = bar.fontMetrics()
        total = 0
        for i in range(self.tabs.count()):
            if not self.tabs.isTabVisible(i):
                continue
            long = self._long(i)
            text = self.titles.get(long, long) if short else long
            padding = bar.tabSizeHint(i).width() - fm.horizontalAdvance(drawn(self.tabs.tabText(i)))
            total += padding + fm.horizontalAdvance(drawn(text))
        return total

    def fit(self) -> None:
        short = self.needed(False) > self.tabs.width()
        for i in range(self.tabs.count()):
            long = self._long(i)
            text = self.titles.get(long, long) if short else long
            if self.tabs.tabText(i) != text:
                self.tabs.setTabText(i, text)
            self.tabs.setTabToolTip(i, drawn(long) if short else "")
        self.short = short

    def eventFilter(self, obj, event) -> bool:  # noqa: N802 - Qt API
        if obj is self.tabs and event.type() in (QEvent.Type.Resize, QEvent.Type.Show):
            self.fit()
        return False
