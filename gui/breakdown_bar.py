"""The time breakdown as one horizontal bar: a segment per category, widest first, its label inside
when it fits, and a tooltip naming the category, its share, seconds and samples (compute by library).

Colours and labels come from resources/sample_rules.json through :mod:`cpudoctor.render.breakdown`,
so the bar and the text tables name each category the same way.
"""

from __future__ import annotations

from PySide6.QtCore import QRectF, QSize, Qt
from PySide6.QtGui import QColor, QPainter
from PySide6.QtWidgets import QSizePolicy, QToolTip, QWidget

from cpudoctor.kits.format import percent
from cpudoctor.model.breakdown import Share
from cpudoctor.render.breakdown import colour, label, share_text


class BreakdownBar(QWidget):
    """Shows a list of :class:`Share` (their shares add up to 1)."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.shares: list[Share] = []
        self.setMinimumHeight(28)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.setMouseTracking(True)

    def sizeHint(self) -> QSize:  # noqa: N802 - Qt API
        return QSize(400, 30)

    def set_shares(self, shares: list[Share]) -> None:
        self.shares = sorted(shares, key=lambda s: -s.share)
        self.setToolTip("" if self.shares else "Nothing sampled yet")
        self.update()

    def segments(self) -> list[tuple[Share, QRectF]]:
        """Each share's rectangle in widget coordinates (also what the tooltip and the tests read)."""
        out = []
        x = 0.0
        width = float(self.width())
        for s in self.shares:
            w = s.share * width
            out.append((s, QRectF(x, 0, w, float(self.height()))))
            x += w
        return out

    def paintEvent(self, _event) -> None:  # noqa: N802 - Qt API
        p = QPainter(self)
        p.setRenderHint(QPainter.RenderHint.Antialiasing, False)
        if not self.shares:
            p.fillRect(self.rect(), self.palette().window())
            p.drawText(self.rect(), Qt.AlignmentFlag.AlignCenter, "no breakdown yet")
            return
        for s, rect in self.segments():
            fill = QColor(colour(s.category))
            p.fillRect(rect, fill)
            text = f"{label(s.category)} {percent(s.share, fraction=True)}"
            if p.fontMetrics().horizontalAdvance(text) + 8 < rect.width():
                p.setPen(QColor("#ffffff") if fill.lightnessF() < 0.6 else QColor("#000000"))
                p.drawText(rect, Qt.AlignmentFlag.AlignCenter, text)
        p.end()

    def mouseMoveEvent(self, event) -> None:  # noqa: N802 - Qt API
        pos = event.position()
        for s, rect in self.segments():
            if rect.contains(pos):
                QToolTip.showText(event.globalPosition().toPoint(),
                                  f"{share_text(s)}\n{s.seconds:.2f} thread-seconds, {s.samples} samples", self)
                return
        QToolTip.hideText()
