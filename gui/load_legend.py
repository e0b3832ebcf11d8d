"""The load colour scale drawn as a small legend: a gradient bar with 0 / 50 / 100 % under it.

Both the topology map's legend and the Monitor's heat strip use
:func:`paint_gradient`, so the two pages show one scale the same way
(the colours themselves come from :mod:`cpudoctor.gui.load_scale`).
"""

from __future__ import annotations

from PySide6.QtCore import QRectF, QSize, Qt
from PySide6.QtGui import QColor, QLinearGradient, QPainter, QPalette, QPen
from PySide6.QtWidgets import QSizePolicy, QWidget

from cpudoctor.gui.load_scale import TICKS_PERCENT, stops
from cpudoctor.kits.format import percent

BAR_W, BAR_H = 120.0, 10.0


def is_dark(palette: QPalette) -> bool:
    return palette.color(QPalette.ColorRole.Window).lightness() < 128


def paint_gradient(p: QPainter, rect: QRectF, dark: bool, edge: QColor) -> None:
    grad = QLinearGradient(rect.topLeft(), rect.topRight())
    for t, colour in stops(dark):
        grad.setColorAt(t, QColor(colour))
    p.setBrush(grad)
    p.setPen(QPen(edge, 1))
    p.drawRoundedRect(rect, 3, 3)


class LoadScaleBar(QWidget):
    """``Load`` and the gradient with its ticks (0, 50, 100 %): what a colour in the heat strip means."""

    def __init__(self, caption: str = "Load", parent: QWidget | None = None):
        super().__init__(parent)
        self.caption = caption
        self.setSizePolicy(QSizePolicy.Policy.Fixed, QSizePolicy.Policy.Fixed)
        self.setToolTip("Colour of a CPU's load: the same scale as the topology map")

    def sizeHint(self) -> QSize:  # noqa: N802 - Qt API
        fm = self.fontMetrics()
        small = self._tick_font().pointSizeF() / max(self.font().pointSizeF(), 1.0)
        width = fm.horizontalAdvance(self.caption) + 8 + BAR_W + 2
        return QSize(int(width), int(BAR_H + fm.height() * small + 6))

    def minimumSizeHint(self) -> QSize:  # noqa: N802 - Qt API
        return self.sizeHint()

    def _tick_font(self):
        font = self.font()
        font.setPointSizeF(max(6.5, font.pointSizeF() * 0.8))
        return font

    def paintEvent(self, event) -> None:  # noqa: N802 - Qt API
        p = QPainter(self)
        p.setRenderHint(QPainter.RenderHint.Antialiasing)
        pal = self.palette()
        text = pal.color(QPalette.ColorRole.WindowText)
        fm = self.fontMetrics()
        p.setPen(text)
        p.drawText(QRectF(0, 0, fm.horizontalAdvance(self.caption) + 2, BAR_H + 4),
                   int(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter), self.caption)
        x = fm.horizontalAdvance(self.caption) + 8.0
        bar = QRectF(x, 2, BAR_W, BAR_H)
        paint_gradient(p, bar, is_dark(pal), pal.color(QPalette.ColorRole.Mid))
        p.setFont(self._tick_font())
        p.setPen(pal.color(QPalette.ColorRole.PlaceholderText))
        tick_h = self.height() - bar.bottom()
        for pct in TICKS_PERCENT:
            # the end ticks sit inside the bar's ends, so they never run into the caption or out of the widget
            align = (Qt.AlignmentFlag.AlignLeft if pct == TICKS_PERCENT[0] else
                     Qt.AlignmentFlag.AlignRight if pct == TICKS_PERCENT[-1] else Qt.AlignmentFlag.AlignHCenter)
            cx = bar.left() + BAR_W * pct / 100.0
            box = (QRectF(cx, bar.bottom() + 1, 60, tick_h) if pct == TICKS_PERCENT[0] else
                   QRectF(cx - 60, bar.bottom() + 1, 60, tick_h) if pct == TICKS_PERCENT[-1] else
                   QRectF(cx - 30, bar.bottom() + 1, 60, tick_h))
            p.drawText(box, int(align), percent(pct))
        p.end()
