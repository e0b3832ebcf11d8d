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
  text plus the style's margins and menu arrow).

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


def cut_texts(window: QWidget) -> list[Problem]:
    found = []
    for w in text_widgets(window):
        if isinstance(w, QLabel):
            why = _label_cut(w) or _runs_out_of_view(w, window)
        elif isinstance(w, QAbstractButton) and not isinstance(w.parentWidget(), QAbstractScrollArea):
            why = _button_cut(w)
        else:
            why = None
        if why:
            found.append(Problem("cut", f"{_name(w)} {why}"))
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
