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
* **Tables.** A table with room to spare must not cut a cell: not beside its columns, not under rows
  that fill less than half of its height (the text could wrap), not in a wrapped row too low for it
  while the table has height for another line.
* **Plot size.** A plot's data area is at least 60 px high and wide (a curve, not a line).
* **Toolbars and tab bars.** Nothing may hide in a toolbar's overflow (») menu or behind a tab bar's
  scroll arrows.
* **Status bar.** Its message fits beside its permanent widgets.

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
    return (found + plot_texts_cut(window) + table_cells_cut(window) + tree_cells_cut(window) + toolbar_overflow(window)
            + tabs_out_of_view(window) + status_message_cut(window))


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


MIN_PLOT_PX = 60             # a plot's data area lower than this shows a line, not a curve


def _cell_texts(table) -> list[tuple[int, int, str]]:
    """(row, column, text) of every cell with text that is in the table's view (hidden rows and columns left out)."""
    from PySide6.QtCore import Qt as _Qt

    model = table.model()
    out = []
    if model is None:
        return out
    view_h = table.viewport().height()
    for r in range(model.rowCount()):
        if table.isRowHidden(r):
            continue
        y = table.rowViewportPosition(r)
        if y >= view_h or y + table.rowHeight(r) <= 0:
            continue                  # scrolled out of view: what the scroll bar is for
        for c in range(model.columnCount()):
            if table.isColumnHidden(c):
                continue
            text = model.data(model.index(r, c), _Qt.ItemDataRole.DisplayRole)
            if isinstance(text, str) and text.strip():
                out.append((r, c, text))
    return out


def _wrapped_height(fm, text: str, width: int) -> int:
    rect = fm.boundingRect(QRect(0, 0, max(1, width), 100_000), int(Qt.TextFlag.TextWordWrap), text)
    return rect.height()


def table_cells_cut(window: QWidget) -> list[Problem]:
    """Table cells that do not show their text while the table has room for it: room to spare beside its
    columns (it went to empty columns), or rows that fill less than half of its height (the text could have
    wrapped onto more lines instead of being elided). A wrapped table must give each cell the height its text
    takes. A table full of rows may elide: its tooltips and scroll bar are for that."""
    from PySide6.QtWidgets import QStyle, QTableView

    found = []
    for table in window.findChildren(QTableView):
        if table.window() is not window or not table.isVisible():
            continue
        model = table.model()
        if model is None:
            continue
        cols = [c for c in range(model.columnCount()) if not table.isColumnHidden(c)]
        spare = table.viewport().width() - sum(table.columnWidth(c) for c in cols)
        rows_h = sum(table.rowHeight(r) for r in range(model.rowCount()) if not table.isRowHidden(r))
        half_empty = rows_h * 2 <= table.viewport().height()
        fm = table.fontMetrics()
        # the margins the item delegate keeps around a cell's text (QStyledItemDelegate: the focus frame's + 1)
        margin = 2 * (table.style().pixelMetric(QStyle.PixelMetric.PM_FocusFrameHMargin, None, table) + 1)
        room_for_a_line = rows_h + fm.lineSpacing() <= table.viewport().height()
        for r, c, text in _cell_texts(table):
            width = table.columnWidth(c)
            if table.wordWrap():
                need = _wrapped_height(fm, text, width - margin)
                if need > table.rowHeight(r) + SLACK_PX and room_for_a_line:
                    found.append(Problem("cut", f"table cell {text[:40]!r} needs {need} px of height, its row has "
                                                f"{table.rowHeight(r)}"))
                continue
            short = max(fm.horizontalAdvance(line) for line in text.splitlines()) + margin - width
            if short <= SLACK_PX:
                continue
            tip = model.data(model.index(r, c), Qt.ItemDataRole.ToolTipRole)
            if table.textElideMode() == Qt.TextElideMode.ElideMiddle and isinstance(tip, str) and text in tip:
                continue              # a path or a command line, its ends kept on purpose, the whole in the tooltip
            if spare >= short:
                found.append(Problem("cut", f"table cell {text[:40]!r} is elided while the table has "
                                            f"{spare} px to spare"))
            elif half_empty and table.horizontalScrollBar().maximum() == 0:
                found.append(Problem("cut", f"table cell {text[:40]!r} is elided while its rows fill "
                                            f"{rows_h} of the table's {table.viewport().height()} px"))
    return found


def _tree_cells(tree) -> list[tuple]:
    """(index, text, its rectangle) of every cell shown in a tree (expanded rows, in view)."""
    model, out = tree.model(), []

    def walk(parent) -> None:
        for r in range(model.rowCount(parent)):
            for c in range(model.columnCount(parent)):
                index = model.index(r, c, parent)
                text = model.data(index, Qt.ItemDataRole.DisplayRole)
                if tree.isColumnHidden(c) or not isinstance(text, str) or not text.strip():
                    continue
                rect = tree.visualRect(index)
                if not rect.isEmpty() and rect.bottom() >= 0 and rect.top() <= tree.viewport().height():
                    out.append((index, text, rect))
            first = model.index(r, 0, parent)
            if tree.isExpanded(first):
                walk(first)

    walk(tree.rootIndex())
    return out


def tree_cells_cut(window: QWidget) -> list[Problem]:
    """A tree cell elided while the other columns have the room it lacks (the Advisor's titles cut at 1280 while
    its Category column had room to spare). Widths are the item delegate's own (text, icon, margins)."""
    from PySide6.QtWidgets import QTreeView

    found = []
    for tree in window.findChildren(QTreeView):
        if tree.window() is not window or not tree.isVisible() or tree.model() is None or tree.wordWrap():
            continue
        header = tree.header()
        shown = [c for c in range(tree.model().columnCount()) if not tree.isColumnHidden(c)]
        slack = {c: tree.columnWidth(c) - max(tree.sizeHintForColumn(c), header.sectionSizeHint(c)) for c in shown}
        spare = max(tree.viewport().width() - sum(tree.columnWidth(c) for c in shown), 0)
        for index, text, rect in _tree_cells(tree):
            short = tree.sizeHintForIndex(index).width() - rect.width()
            if short <= SLACK_PX:
                continue
            room = spare + sum(max(v, 0) for c, v in slack.items() if c != index.column())
            if room >= short:
                found.append(Problem("cut", f"tree cell {text[:40]!r} is elided by {short} px while other columns "
                                            f"have {room} px to spare"))
    return found


def plots_too_small(window: QWidget) -> list[Problem]:
    """pyqtgraph plots whose data area is lower (or narrower) than MIN_PLOT_PX: a curve squashed into a line."""
    try:
        import pyqtgraph as pg
    except ImportError:                # pragma: no cover - the app depends on it
        return []
    found = []
    for view in window.findChildren(pg.GraphicsView):
        if view.window() is not window or not view.isVisible() or _shown_rect(view.viewport(), window).isEmpty():
            continue
        for item in view.scene().items():
            if not isinstance(item, pg.PlotItem) or not item.isVisible():
                continue
            box = item.getViewBox().sceneBoundingRect()
            if box.height() < MIN_PLOT_PX or box.width() < MIN_PLOT_PX:
                title = " ".join((item.titleLabel.item.toPlainText() if item.titleLabel.text else "").split())
                found.append(Problem("too small", f"plot {title[:40] or type(view).__name__!r} has a "
                                                  f"{box.width():.0f}x{box.height():.0f} px data area "
                                                  f"(under {MIN_PLOT_PX} px)"))
    return found


def tabs_out_of_view(window: QWidget) -> list[Problem]:
    """A tab bar too narrow for its tabs: some sit behind its scroll arrows (the Inspector's Time tab)."""
    found = []
    for bar in window.findChildren(QTabBar):
        if bar.window() is not window or not bar.isVisible() or bar.count() < 2:
            continue
        hidden = [bar.tabText(i).replace("&&", "\0").replace("&", "").replace("\0", "&") for i in range(bar.count())
                  if bar.isTabVisible(i) and not bar.rect().contains(bar.tabRect(i))]
        arrows = [b for b in bar.findChildren(QAbstractButton) if b.isVisible()]
        if hidden or arrows:
            found.append(Problem("cut", f"tab bar hides tabs behind its scroll arrows ({', '.join(hidden) or 'some'}):"
                                        f" {bar.width()} px for tabs that need "
                                        f"{sum(bar.tabSizeHint(i).width() for i in range(bar.count()))}"))
    return found


def status_message_cut(window: QWidget) -> list[Problem]:
    """The status bar's message wider than the room its permanent widgets leave it (Qt paints it, clipped)."""
    from PySide6.QtWidgets import QMainWindow, QStatusBar

    found = []
    if not isinstance(window, QMainWindow):
        return found
    bar: QStatusBar = window.statusBar()
    text = bar.currentMessage()
    if not bar.isVisible() or not text:
        return found
    right = min((w.mapTo(bar, w.rect().topLeft()).x() for w in bar.findChildren(QWidget)
                 if w.parentWidget() is bar and w.isVisible() and w.width() > 0), default=bar.width())
    need = bar.fontMetrics().horizontalAdvance(text) + 8          # the message's margins inside the bar
    if need > right + SLACK_PX:
        found.append(Problem("cut", f"status message {text[:40]!r} needs {need} px, the status bar leaves it {right}"))
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
    return overlaps(window) + cut_texts(window) + squeezed(window) + plots_too_small(window)
