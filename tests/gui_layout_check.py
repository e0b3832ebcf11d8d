"""Find layout breakage in a live widget tree: text drawn over text, labels and buttons cut off.

Generic on purpose, so every page (and every page added later) is covered by
the same rules, without knowing its widgets:

* **Overlap.** Every visible text widget (QLabel with text, QAbstractButton
  with text, QLineEdit, QComboBox) is mapped to the window; two that
  intersect by more than a pixel or two, where neither contains the other
  and neither is a child of the other, are drawn on top of each other. The
  rectangles are clipped to what the widgets really show (a scroll area's
  viewport), so scrolled-away rows do not count.
* **Cut off.** A label must show its text: a one-line label needs its text
  width, a word-wrapped label the height its text takes at its width. A
  label that elides on purpose says so (an "…" in its text) and carries
  the full text in its tooltip. A button needs its size hint's width (its
  text plus the style's margins and menu arrow). A custom text widget that
  says whether its text fits (``text_fits()``, the Monitor's live values)
  must fit. A text widget must not be cut by its container (a splitter that
  squeezes a column, a row wider than its page); what a scroll area hides
  is fine.
* **Plots.** A pyqtgraph title or axis label must fit the plot it belongs to.
* **Tables.** A table with room to spare must not elide a cell.
* **Toolbars.** Nothing may hide in a toolbar's overflow (») menu.

Widgets of other top-level windows (menus, tooltips) are not looked at.
"""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import QRect, Qt
from PySide6.QtGui import Qt as GuiQt
from PySide6.QtWidgets import (QAbstractButton, QAbstractScrollArea, QAbstractSpinBox, QComboBox, QLabel, QLineEdit,
                               QTabBar, QWidget)

SLACK_PX = 2                  # rounding in layouts and fonts


@dataclass(frozen=True)
class Problem:
    kind: str                 # "overlap" | "cut"
    what: str

    def __str__(self) -> str:
        return f"{self.kind}: {self.what}"


def _name(w: QWidget) -> str:
    text = ""
    if isinstance(w, (QLabel, QAbstractButton)):
        text = w.text()
    elif isinstance(w, QLineEdit):
        text = w.text() or w.placeholderText()
    elif isinstance(w, QComboBox):
        text = w.currentText()
    text = " ".join(text.split())
    text = text if len(text) <= 40 else text[:39] + "…"
    owner = w.parentWidget()
    while owner is not None and not owner.objectName() and type(owner).__module__.startswith("PySide6"):
        owner = owner.parentWidget()
    where = type(owner).__name__ if owner is not None else "?"
    return f"{type(w).__name__} {text!r} in {where}"


def _is_text_widget(w: QWidget) -> bool:
    if isinstance(w, QLabel):
        return bool(w.text().strip()) and w.pixmap().isNull()
    if isinstance(w, QAbstractButton):
        return bool(w.text().strip())
    return isinstance(w, (QLineEdit, QComboBox))


def _shown_rect(w: QWidget, window: QWidget) -> QRect:
    """The part of ``w`` on screen, in window coordinates (clipped by every ancestor, e.g. a scroll viewport)."""
    region = w.visibleRegion()
    if region.isEmpty():
        return QRect()
    rect = region.boundingRect()
    return QRect(w.mapTo(window, rect.topLeft()), rect.size())


def text_widgets(window: QWidget) -> list[QWidget]:
    out = []
    for w in window.findChildren(QWidget):
        if w.window() is not window or not w.isVisible() or w.width() <= 0 or w.height() <= 0:
            continue
        if isinstance(w.parentWidget(), (QComboBox, QTabBar)) or isinstance(w.parentWidget(), QLineEdit):
            continue              # a combo's own line edit, a tab bar's scroll buttons: parts of one widget
        if _is_text_widget(w) and not _shown_rect(w, window).isEmpty():
            out.append(w)
    return out


def _related(a: QWidget, b: QWidget) -> bool:
    return a.isAncestorOf(b) or b.isAncestorOf(a)


def overlaps(window: QWidget) -> list[Problem]:
    widgets = text_widgets(window)
    rects = {id(w): _shown_rect(w, window) for w in widgets}
    found = []
    for i, a in enumerate(widgets):
        for b in widgets[i + 1:]:
            if _related(a, b):
                continue
            inter = rects[id(a)].intersected(rects[id(b)])
            if inter.width() > SLACK_PX and inter.height() > SLACK_PX:
                found.append(Problem("overlap", f"{_name(a)} and {_name(b)} share {inter.width()}x{inter.height()} px "
                                                f"at ({inter.x()}, {inter.y()})"))
    return found


def _label_cut(label: QLabel) -> str | None:
    text = label.text()
    tooltip = label.toolTip()
    if "…" in text and tooltip:
        return None               # elided on purpose, the whole text one hover away
    room = label.contentsRect()
    if room.width() <= 0 or room.height() <= 0:
        return "has no room at all"
    if label.wordWrap():
        needed = label.heightForWidth(label.width())
        if needed > label.height() + SLACK_PX:
            return f"needs {needed} px of height at its width {label.width()}, has {label.height()}"
        return None
    if GuiQt.mightBeRichText(text) or label.textFormat() == Qt.TextFormat.RichText:
        hint = label.minimumSizeHint()
        needed_w, needed_h = hint.width() - 2 * label.margin(), hint.height() - 2 * label.margin()
    else:
        if label.buddy() is not None:        # "&Model": the & marks the mnemonic and is not drawn
            text = text.replace("&&", "\0").replace("&", "").replace("\0", "&")
        lines = text.splitlines() or [""]
        fm = label.fontMetrics()
        needed_w = max(fm.horizontalAdvance(line) for line in lines)
        needed_h = fm.height() + fm.lineSpacing() * (len(lines) - 1)
    if needed_w > room.width() + SLACK_PX + 1:
        return f"needs {needed_w} px of width, has {room.width()}"
    if needed_h > room.height() + SLACK_PX + 1:
        return f"needs {needed_h} px of height, has {room.height()}"
    return None


def _button_cut(button: QAbstractButton) -> str | None:
    from PySide6.QtWidgets import QToolButton

    if isinstance(button, QToolButton) and button.toolButtonStyle() == Qt.ToolButtonStyle.ToolButtonIconOnly \
            and not button.icon().isNull():
        return None               # an icon, its text in the tooltip
    fm = button.fontMetrics()
    text = button.text().replace("&&", "\0").replace("&", "").replace("\0", "&")
    # the text and the style's smallest frame around it (a push button's 2 x 4 px margin)
    needed = fm.horizontalAdvance(text) + 8 + (button.iconSize().width() + 4 if not button.icon().isNull() else 0)
    if getattr(button, "menu", None) is not None and button.menu() is not None:
        needed += 12
    if needed > button.width() + SLACK_PX:
        return f"needs {needed} px for its text, has {button.width()}"
    return None


def _runs_out_of_view(label: QLabel, window: QWidget) -> str | None:
    """A wrapped label wider than the scroll area it sits in: the page must be scrolled sideways to read it."""
    if not label.wordWrap():
        return None
    shown = _shown_rect(label, window)
    if shown.width() < label.width() - SLACK_PX and shown.x() > label.mapTo(window, label.rect().topLeft()).x() - 1:
        return f"runs {label.width() - shown.width()} px out of view to the right (the page scrolls sideways)"
    return None


def _cut_by_container(w: QWidget, window: QWidget) -> str | None:
    """The part of ``w`` its ancestors' rectangles leave, narrower than ``w``: a squeezed splitter pane or a
    row wider than its page. Inside a scroll area's viewport that is scrolling, not cutting."""
    rect = QRect(w.mapTo(window, w.rect().topLeft()), w.size())
    shown = QRect(rect)
    parent = w.parentWidget()
    while parent is not None and parent is not window:
        if isinstance(parent.parentWidget(), QAbstractScrollArea):
            return None               # the scroll area's viewport: content out of view scrolls into it
        shown = shown.intersected(QRect(parent.mapTo(window, parent.rect().topLeft()), parent.size()))
        parent = parent.parentWidget()
    shown = shown.intersected(window.rect())
    if shown.width() < rect.width() - SLACK_PX - 1:
        side = "left" if shown.x() > rect.x() else "right"
        return f"is cut by its container: {rect.width() - shown.width()} px hidden at its {side} edge"
    return None


def cut_texts(window: QWidget) -> list[Problem]:
    found = []
    for w in text_widgets(window):
        if isinstance(w, QLabel):
            why = _label_cut(w) or _runs_out_of_view(w, window) or _cut_by_container(w, window)
        elif isinstance(w, QAbstractButton) and not isinstance(w.parentWidget(), QAbstractScrollArea):
            why = _button_cut(w) or _cut_by_container(w, window)
        else:
            why = None
        if why:
            found.append(Problem("cut", f"{_name(w)} {why}"))
    for w in window.findChildren(QWidget):
        fits = getattr(w, "text_fits", None)
        if callable(fits) and w.window() is window and w.isVisible() and not _shown_rect(w, window).isEmpty() \
                and not fits():
            found.append(Problem("cut", f"{type(w).__name__} {w.text()!r} does not fit its {w.width()} px"))
    return found + plot_texts_cut(window) + table_cells_cut(window) + toolbar_overflow(window)


def plot_texts_cut(window: QWidget) -> list[Problem]:
    """pyqtgraph titles and axis labels wider than their plot (Qt's checks cannot see into a scene)."""
    try:
        import pyqtgraph as pg
    except ImportError:                # pragma: no cover - the app depends on it
        return []
    found = []
    for view in window.findChildren(pg.GraphicsView):
        if view.window() is not window or not view.isVisible() or _shown_rect(view.viewport(), window).isEmpty():
            continue
        # what the view shows of its scene: a plot laid out wider than its view (its title's width) is cut there
        seen = view.mapToScene(view.viewport().rect()).boundingRect()
        for item in view.scene().items():
            if not isinstance(item, pg.PlotItem) or not item.isVisible():
                continue
            title = item.titleLabel
            if title.isVisible() and title.text:
                text_rect = title.item.sceneBoundingRect()
                room = item.sceneBoundingRect().intersected(seen)
                if text_rect.left() < room.left() - SLACK_PX or text_rect.right() > room.right() + SLACK_PX:
                    text = " ".join(title.item.toPlainText().split())
                    found.append(Problem("cut", f"plot title {text[:40]!r} needs {text_rect.width():.0f} px, its plot "
                                                f"shows {room.width():.0f}"))
            for name in ("left", "bottom"):
                axis = item.getAxis(name)
                if axis.isVisible() and axis.label.isVisible() and axis.label.toPlainText().strip():
                    need = axis.label.boundingRect().width()
                    have = item.boundingRect().height() if name == "left" else item.boundingRect().width()
                    if need > have + SLACK_PX:
                        found.append(Problem("cut", f"axis label {axis.label.toPlainText()!r} needs {need:.0f} px, "
                                                    f"has {have:.0f}"))
    return found


def table_cells_cut(window: QWidget) -> list[Problem]:
    """A table that elides a cell while its columns leave room to spare (the room went to empty columns)."""
    from PySide6.QtWidgets import QTableWidget

    found = []
    for table in window.findChildren(QTableWidget):
        if table.window() is not window or not table.isVisible() or table.wordWrap():
            continue
        cols = [c for c in range(table.columnCount()) if not table.isColumnHidden(c)]
        spare = table.viewport().width() - sum(table.columnWidth(c) for c in cols)
        fm = table.fontMetrics()
        for r in range(table.rowCount()):
            if table.isRowHidden(r):
                continue
            for c in cols:
                item = table.item(r, c)
                if item is None or not item.text():
                    continue
                need = fm.horizontalAdvance(item.text()) + 12          # the cell's margins
                short = need - table.columnWidth(c)
                if short > SLACK_PX and spare >= short:
                    found.append(Problem("cut", f"table cell {item.text()[:40]!r} is elided while the table has "
                                                f"{spare} px to spare"))
    return found


def toolbar_overflow(window: QWidget) -> list[Problem]:
    """A toolbar too narrow for its items shows an extension button (») and hides the rest in its menu."""
    from PySide6.QtWidgets import QToolBar, QToolButton

    found = []
    for bar in window.findChildren(QToolBar):
        if bar.window() is not window or not bar.isVisible():
            continue
        for button in bar.findChildren(QToolButton, "qt_toolbar_ext_button"):
            if button.isVisible():
                hidden = [a.text() or type(a).__name__ for a in bar.actions()
                          if bar.widgetForAction(a) is not None and not bar.widgetForAction(a).isVisible()]
                found.append(Problem("cut", f"toolbar {bar.windowTitle()!r} hides items in its overflow menu "
                                            f"({', '.join(x for x in hidden if x) or 'some'})"))
    return found


def squeezed(window: QWidget) -> list[Problem]:
    """Leaf widgets given less than their minimum size hint: custom-painted legends and scale bars, which the
    text rules cannot read. Containers are left out (their children are checked), and so are widgets that
    scroll their content or are parts of a compound widget (a spin box's line edit)."""
    found = []
    for w in window.findChildren(QWidget):
        if w.window() is not window or not w.isVisible() or _shown_rect(w, window).isEmpty():
            continue
        if _is_text_widget(w) or isinstance(w, QAbstractButton):
            continue              # the text rules above judge these by their text, not by the style's minimum
        if w.layout() is not None or isinstance(w, QAbstractScrollArea) or isinstance(
                w.parentWidget(), (QComboBox, QTabBar, QAbstractScrollArea, QAbstractSpinBox)):
            continue
        if any(c.isVisible() for c in w.findChildren(QWidget)):
            continue
        hint = w.minimumSizeHint()
        if hint.isValid() and (w.width() < hint.width() - SLACK_PX or w.height() < hint.height() - SLACK_PX):
            found.append(Problem("squeezed", f"{_name(w)} is {w.width()}x{w.height()}, needs "
                                             f"{hint.width()}x{hint.height()}"))
    return found


def page_fits(page: QWidget, room: QWidget) -> list[Problem]:
    """A page needs no more than ``room`` (the window's page area) offers; else Qt squeezes it below its
    minimum, and that is how rows end up drawn on top of each other."""
    need, have = page.minimumSizeHint(), room.size()
    if need.width() > have.width() + SLACK_PX or need.height() > have.height() + SLACK_PX:
        return [Problem("too small", f"{type(page).__name__} needs {need.width()}x{need.height()} "
                                     f"but gets {have.width()}x{have.height()}")]
    return []


def layout_problems(window: QWidget) -> list[Problem]:
    return overlaps(window) + cut_texts(window) + squeezed(window)
