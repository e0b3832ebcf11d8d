"""Small shared pieces of the window: cards, badges, severity colours.

Words and number formats come from :mod:`cpudoctor.render` like everywhere
else; an unknown value in a card or table is a dash (:data:`~cpudoctor.render.words.DASH`)
with the probe's note as its tooltip.

Colours follow the palette (``palette(...)`` in style sheets) so the same code
reads well in light and dark mode; the few fixed colours (badge states,
severities) are chosen to keep contrast on both.
"""

from __future__ import annotations

from PySide6.QtCore import QSize, Qt
from PySide6.QtWidgets import QFormLayout, QFrame, QLabel, QVBoxLayout, QWidget

from cpudoctor.render.finding_html import WIDGET_COLOURS
from cpudoctor.render.words import DASH

SEVERITY_COLOUR = WIDGET_COLOURS           # the findings' own colours in the window's rich text

# badge state -> (background, foreground)
BADGE_STYLE = {
    "yes": ("#2e8b57", "#ffffff"),
    "caveat": ("#c98a1a", "#ffffff"),
    "no": ("#8a8f96", "#ffffff"),
    "unknown": ("#b8bcc2", "#2b2b2b"),
}


class Card(QFrame):
    """A titled panel with a two-column form, like one box of CPU-Z."""

    def __init__(self, title: str, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("card")
        self.setStyleSheet(
            "QFrame#card { border: 1px solid palette(midlight); border-radius: 8px; background: palette(base); }"
            "QFrame#card QLabel { background: transparent; }")
        outer = QVBoxLayout(self)
        outer.setContentsMargins(14, 10, 14, 12)
        outer.setSpacing(6)
        heading = QLabel(title)
        heading.setObjectName("cardTitle")
        font = heading.font()
        font.setBold(True)
        heading.setFont(font)
        outer.addWidget(heading)
        self.form = QFormLayout()
        self.form.setLabelAlignment(Qt.AlignmentFlag.AlignLeft)
        self.form.setHorizontalSpacing(16)
        self.form.setVerticalSpacing(4)
        self.form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.AllNonFixedFieldsGrow)
        outer.addLayout(self.form)
        outer.addStretch(1)
        self._values: dict[str, QLabel] = {}

    def row(self, label: str) -> QLabel:
        """The value label of row ``label`` (created on first use)."""
        if label not in self._values:
            name = QLabel(label)
            name.setStyleSheet("color: palette(placeholder-text);")
            value = QLabel(DASH)
            value.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
            value.setWordWrap(True)
            self.form.addRow(name, value)
            self._values[label] = value
        return self._values[label]

    def rows(self) -> list[tuple[str, str]]:
        """(label, text) of every row, top to bottom."""
        return [(label, value.text()) for label, value in self._values.items()]

    def label_width(self) -> int:
        """Width the row labels need (for lining up several cards' value columns)."""
        return max((self.form.labelForField(v).sizeHint().width() for v in self._values.values()), default=0)

    def set_label_width(self, width: int) -> None:
        for value in self._values.values():
            self.form.labelForField(value).setMinimumWidth(width)

    def clear(self) -> None:
        """Remove every row: a new report must not keep rows only the previous one had."""
        while self.form.rowCount():
            self.form.removeRow(0)
        self._values.clear()

    def set(self, label: str, text: str, tooltip: str = "") -> None:
        value = self.row(label)
        value.setText(text)
        value.setToolTip(tooltip)
        self._fit_wrapped_rows()

    def resizeEvent(self, event) -> None:  # noqa: N802 - Qt API
        super().resizeEvent(event)
        self._fit_wrapped_rows()

    def _fit_wrapped_rows(self) -> None:
        """Give each wrapped value the height its text needs at its current width.

        A word-wrapped QLabel inside a scroll area is otherwise laid out at its
        one-line height and its second line is cut off (QScrollArea does not ask
        for height-for-width).
        """
        for value in self._values.values():
            width = value.width()
            if width <= 0:
                continue
            needed = value.heightForWidth(width)
            if needed > 0 and value.minimumHeight() != needed:
                value.setMinimumHeight(needed)

    def value(self, label: str) -> str:
        return self._values[label].text() if label in self._values else ""


class Badge(QLabel):
    """A rounded pill: 'AVX2', green when present, grey when not, amber with a caveat."""

    def __init__(self, text: str = "", state: str = "unknown", parent: QWidget | None = None):
        super().__init__(text, parent)
        self.state = ""
        self.set_state(state)

    def set_state(self, state: str, text: str | None = None, tooltip: str | None = None) -> None:
        bg, fg = BADGE_STYLE[state]
        self.state = state
        if text is not None:
            self.setText(text)
        if tooltip is not None:
            self.setToolTip(tooltip)
        self.setStyleSheet(
            f"QLabel {{ background: {bg}; color: {fg}; border-radius: 9px; padding: 2px 10px; font-weight: 600; }}")


def severity_dot(severity: str) -> str:
    """Rich-text coloured dot for a severity (used inline in labels)."""
    return f'<span style="color:{SEVERITY_COLOUR.get(severity, "#888")}">●</span>'


class ElidedLabel(QLabel):
    """One line of plain text, elided with "…" to the width it gets; the whole text is its tooltip."""

    def __init__(self, text: str = "", parent: QWidget | None = None):
        super().__init__(parent)
        self.full = ""
        self.setMinimumWidth(40)
        self.set_full(text)

    def set_full(self, text: str, tooltip: str = "") -> None:
        self.full = text
        self.setToolTip("\n".join(t for t in (text, tooltip) if t) if text else tooltip)
        self.updateGeometry()                 # the layout asks for the new text's width
        self._fit()

    def resizeEvent(self, event) -> None:  # noqa: N802 - Qt API
        super().resizeEvent(event)
        self._fit()

    def _fit(self) -> None:
        room = max(self.contentsRect().width(), 40)
        self.setText(self.fontMetrics().elidedText(self.full, Qt.TextElideMode.ElideRight, room))

    def minimumSizeHint(self) -> QSize:  # noqa: N802 - Qt API
        return QSize(40, super().minimumSizeHint().height())

    def sizeHint(self) -> QSize:  # noqa: N802 - Qt API
        margins = self.contentsMargins()
        return QSize(self.fontMetrics().horizontalAdvance(self.full) + margins.left() + margins.right() + 4,
                     super().sizeHint().height())
