"""The topology map's legend: the load colour scale and what each box, ring and mark means.

One row of swatches under the map; when the page is narrower than the row,
it wraps onto a second line instead of cutting words off.
"""

from __future__ import annotations

from PySide6.QtCore import QRectF, QSize, Qt
from PySide6.QtGui import QBrush, QPainter, QPainterPath, QPalette, QPen
from PySide6.QtWidgets import QSizePolicy, QWidget

from cpudoctor.gui.load_legend import paint_gradient
from cpudoctor.gui.topology_map import SELECTED_PEN, TopologyMap, _mix


GRADIENT_W = 120.0
SWATCH_W, SWATCH_H = 18.0, 14.0
ROW_GAP = 4.0


class LoadLegend(QWidget):
    """The colour scale of the map: 0% to 100% load, plus what a box, a marker and a selection look like."""

    def __init__(self, map_widget: TopologyMap, parent: QWidget | None = None):
        super().__init__(parent)
        self.map = map_widget
        policy = QSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        policy.setHeightForWidth(True)
        self.setSizePolicy(policy)

    def entries(self) -> list[tuple[str, str]]:
        """(swatch kind, words), in order: what is drawn."""
        out = [("gradient", "Load 0–100%"), ("package", "Package"), ("numa", "NUMA node"), ("l3", "L3 / CCX")]
        if self.map.show_caches:
            out += [("l2", "L2 / L1 cache")]
        out += [("core", "Core"), ("selected", "Selected"), ("marker", "Marked thread")]
        if self.map.hybrid:
            out.append(("efficiency", "Efficiency core"))
        if any(not item.allowed for item in self.map.pu_items.values()):
            out.append(("hatched", "Not allowed (affinity / cgroup)"))
        return out

    def _entry_width(self, kind: str, text: str) -> float:
        swatch = GRADIENT_W if kind == "gradient" else (10.0 if kind == "marker" else SWATCH_W)
        return swatch + 5 + self.fontMetrics().horizontalAdvance(text) + 14

    def _rows(self, width: float) -> list[list[tuple[str, str]]]:
        rows: list[list[tuple[str, str]]] = [[]]
        x = 0.0
        for kind, text in self.entries():
            w = self._entry_width(kind, text)
            if rows[-1] and x + w > width:
                rows.append([])
                x = 0.0
            rows[-1].append((kind, text))
            x += w
        return rows

    def _row_h(self) -> float:
        return max(20.0, self.fontMetrics().height() + 6.0)

    def hasHeightForWidth(self) -> bool:  # noqa: N802 - Qt API
        return True

    def heightForWidth(self, width: int) -> int:  # noqa: N802 - Qt API
        n = len(self._rows(float(width)))
        return int(n * self._row_h() + (n - 1) * ROW_GAP + 4)

    def sizeHint(self) -> QSize:  # noqa: N802 - Qt API
        width = int(sum(self._entry_width(k, t) for k, t in self.entries()))
        return QSize(width, int(self._row_h() + 4))

    def minimumSizeHint(self) -> QSize:  # noqa: N802 - Qt API
        return QSize(200, self.heightForWidth(max(480, self.width())))

    def resizeEvent(self, event) -> None:  # noqa: N802 - Qt API
        super().resizeEvent(event)
        wanted = self.heightForWidth(self.width())
        if self.minimumHeight() != wanted:
            self.setMinimumHeight(wanted)       # a layout that ignores height-for-width still gives the rows room

    def refresh(self) -> None:
        """Entries depend on the map (caches shown, hybrid chip, disallowed CPUs): re-measure and repaint."""
        self.setMinimumHeight(self.heightForWidth(max(200, self.width())))
        self.updateGeometry()
        self.update()

    def paintEvent(self, event) -> None:  # noqa: N802 - Qt API
        c = self.map.colours
        p = QPainter(self)
        p.setRenderHint(QPainter.RenderHint.Antialiasing)
        fm = self.fontMetrics()
        text_pen = self.palette().color(QPalette.ColorRole.WindowText)
        row_h = self._row_h()
        for r, row in enumerate(self._rows(float(self.width()))):
            top = 2 + r * (row_h + ROW_GAP)
            y = top + (row_h - SWATCH_H) / 2
            x = 0.0
            for kind, text in row:
                box = QRectF(x, y, SWATCH_W, SWATCH_H)
                if kind == "gradient":
                    box = QRectF(x, y, GRADIENT_W, SWATCH_H)
                    paint_gradient(p, box, c.dark, c.box_edge["core"])
                elif kind == "marker":
                    path = QPainterPath()
                    path.moveTo(x, y)
                    path.lineTo(x + 10, y)
                    path.lineTo(x + 10, y + 10)
                    path.closeSubpath()
                    p.setPen(Qt.PenStyle.NoPen)
                    p.setBrush(c.marker)
                    p.drawPath(path)
                    box = QRectF(x, y, 10, SWATCH_H)
                else:
                    fill = {"l2": c.cache_fill, "selected": c.load(0), "efficiency": c.box_fill["core"],
                            "hatched": c.load(0)}.get(kind, c.box_fill.get(kind))
                    pen = QPen(c.box_edge.get(kind, c.box_edge["core"]), 1)
                    if kind == "selected":
                        pen = QPen(c.highlight, SELECTED_PEN)
                    elif kind == "efficiency":
                        pen.setStyle(Qt.PenStyle.DashLine)
                    elif kind == "l2":
                        pen = QPen(c.box_edge["l2"], 1)
                    p.setBrush(fill)
                    p.setPen(pen)
                    p.drawRoundedRect(box, 3, 3)
                    if kind == "hatched":
                        p.setBrush(QBrush(_mix(c.background, c.text, 0.35), Qt.BrushStyle.BDiagPattern))
                        p.setPen(Qt.PenStyle.NoPen)
                        p.drawRoundedRect(box, 3, 3)
                x = box.right() + 5
                p.setPen(text_pen)
                p.drawText(QRectF(x, top, fm.horizontalAdvance(text) + 4, row_h),
                           int(Qt.AlignmentFlag.AlignVCenter), text)
                x += fm.horizontalAdvance(text) + 14
        p.end()
