"""The Training page's Roofline tab: measured roofs, the nominal peak, and where the lab's work landed.

Draws :class:`cpudoctor.render.roofline.Picture` (the model the SVG export
draws too) with pyqtgraph on log-log axes: each measured compute roof flat
from its ridge point (every usable CPU solid, one core dashed), the memory
roof as a slope, the nominal peak and 90 % of it dashed, and the points (GEMM
runs, the roofline run's in-cache multiplies, the profiled operators of the
latest training run) coloured by dtype, with labels where the picture model
chose them and every point's full figures in its tooltip. The claim sentence
sits above the plot. The tab only shows: the page starts the job
(:attr:`measure` is its button) and hands it the report's runs.
"""

from __future__ import annotations

import math

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QPalette
from PySide6.QtWidgets import QFileDialog, QHBoxLayout, QLabel, QPushButton, QVBoxLayout, QWidget

from cpudoctor.render.roofline import Picture, picture_from_runs
from cpudoctor.render.svg_roofline import DTYPE_COLOURS, MEMORY_COLOUR, NOMINAL_COLOUR

SYMBOLS = {"gemm": "o", "gemm-ladder": "o", "operator": "s"}
EMPTY_TEXT = ("No roofs measured yet. <b>Measure roofs</b> runs the roofline job (under a minute): in-cache matrix "
              "multiplies per dtype on every usable CPU and on one core, memory bandwidth per NUMA node, and a few "
              "profiled training steps; GEMM and training runs then appear as points.")


class RooflineView(QWidget):
    """The roofline plot and its claim; :meth:`show_runs` redraws it from a report's lab runs."""

    save_requested = Signal()

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.picture: Picture | None = None
        self.point_items: dict[tuple[str, str], pg.ScatterPlotItem] = {}   # (kind, dtype) -> scatter
        self.roof_items: list[tuple[object, pg.PlotDataItem]] = []         # (Roof, line)
        self.memory_item: pg.PlotDataItem | None = None
        self.labels: list[pg.TextItem] = []
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        row = QHBoxLayout()
        self.measure = QPushButton("Measure roofs")
        self.measure.setToolTip("Measured compute roofs per dtype (every usable CPU and one core) and memory "
                                "bandwidth per NUMA node, beside the nominal peak; under a minute")
        self.save = QPushButton("Save picture…")
        self.save.setToolTip("The roofline picture as SVG or PNG, as `cpudoctor bench roofline --plot` draws it")
        self.save.setEnabled(False)
        self.save.clicked.connect(self.save_requested)
        row.addWidget(self.measure)
        row.addWidget(self.save)
        row.addStretch(1)
        lay.addLayout(row)
        self.claim = QLabel(EMPTY_TEXT)
        self.claim.setWordWrap(True)
        self.claim.setTextFormat(Qt.TextFormat.RichText)
        self.claim.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        lay.addWidget(self.claim)
        self.plot = self._make_plot()
        lay.addWidget(self.plot, 1)
        self.plot.setVisible(False)

    def _make_plot(self) -> pg.PlotWidget:
        pal = self.palette()
        fg, muted = pal.color(QPalette.ColorRole.Text), pal.color(QPalette.ColorRole.PlaceholderText)
        w = pg.PlotWidget()
        w.setBackground(pal.color(QPalette.ColorRole.Base))
        item = w.getPlotItem()
        item.hideButtons()
        item.setLogMode(x=True, y=True)
        for name in ("left", "bottom"):
            axis = item.getAxis(name)
            axis.setTextPen(muted)
            axis.setPen(pg.mkPen(muted, width=1))
        w.setLabel("bottom", "FLOP per byte moved", color=muted.name())
        w.setLabel("left", "GFLOP/s", color=muted.name())
        w.showGrid(x=True, y=True, alpha=0.15)
        w.setMenuEnabled(False)
        w.setMouseEnabled(x=False, y=False)
        self._fg = fg
        return w

    # ------------------------------------------------------------------ drawing

    def show_runs(self, runs: list) -> None:
        """Redraw from a report's lab runs (None of them a roofline run: the empty text)."""
        self.show_picture(picture_from_runs(list(runs or [])))

    def show_picture(self, picture: Picture | None) -> None:
        self.picture = picture
        self.plot.clear()
        self.point_items, self.roof_items, self.memory_item, self.labels = {}, [], None, []
        has = picture is not None and bool(picture.compute)
        self.plot.setVisible(has)
        self.save.setEnabled(has)
        if not has:
            self.claim.setText(EMPTY_TEXT)
            return
        self.claim.setText(picture.claim or "")
        xs = [p.intensity for p in picture.points] + [x for x in (picture.ridge(r) for r in picture.compute) if x]
        ys = [p.gflops for p in picture.points] + [r.gflops for r in picture.compute + picture.nominal]
        x_lo, x_hi = _decade_floor(min(xs, default=1.0) / 2), _decade_ceil(max(xs, default=100.0) * 2)
        y_lo, y_hi = _decade_floor(min(ys, default=1.0) / 2), _decade_ceil(max(ys, default=100.0) * 2)
        for roof in picture.compute:
            start = max(picture.ridge(roof) or x_lo, x_lo)
            pen = pg.mkPen(DTYPE_COLOURS.get(roof.dtype, "#34495e"), width=2.5 if roof.all_cpus else 1.5,
                           style=Qt.PenStyle.SolidLine if roof.all_cpus else Qt.PenStyle.DashLine)
            line = self.plot.plot([start, x_hi], [roof.gflops, roof.gflops], pen=pen)
            self.roof_items.append((roof, line))
            if roof.all_cpus:
                self._label(roof.label, x_hi, roof.gflops, DTYPE_COLOURS.get(roof.dtype), anchor=(1, 1))
        for roof in picture.nominal:
            for share, text, style in ((1.0, roof.label, Qt.PenStyle.DashLine),
                                       (0.9, "90 % of nominal", Qt.PenStyle.DotLine)):
                line = self.plot.plot([x_lo, x_hi], [roof.gflops * share] * 2,
                                      pen=pg.mkPen(NOMINAL_COLOUR, width=1.2, style=style))
                self.roof_items.append((roof, line))
                self._label(text, x_lo, roof.gflops * share, NOMINAL_COLOUR, anchor=(0, 0 if share == 1.0 else 1))
        if picture.memory_gbps:
            top = max((r.gflops for r in picture.compute), default=y_hi)
            lo, hi = max(x_lo, y_lo / picture.memory_gbps), top / picture.memory_gbps
            self.memory_item = self.plot.plot([lo, hi], [picture.memory_gbps * lo, picture.memory_gbps * hi],
                                              pen=pg.mkPen(MEMORY_COLOUR, width=2.5))
            self._label(picture.memory_label, lo * 1.3, picture.memory_gbps * lo * 1.3, MEMORY_COLOUR, anchor=(0, 0))
        self._points(picture)
        self.plot.setXRange(math.log10(x_lo), math.log10(x_hi), padding=0)
        self.plot.setYRange(math.log10(y_lo), math.log10(y_hi), padding=0)

    def _points(self, picture: Picture) -> None:
        """One scatter per (kind, dtype), in the view's log10 coordinates (a ScatterPlotItem is not log-aware)."""
        groups: dict[tuple[str, str], list] = {}
        for p in picture.points:
            groups.setdefault((p.kind, p.dtype or ""), []).append(p)
        base = self.palette().color(QPalette.ColorRole.Base)
        for (kind, dtype), pts in groups.items():
            colour = DTYPE_COLOURS.get(dtype, "#34495e")
            hollow = kind == "gemm-ladder"
            item = pg.ScatterPlotItem(x=np.log10([p.intensity for p in pts]), y=np.log10([p.gflops for p in pts]),
                                      data=[p.detail or p.label for p in pts], symbol=SYMBOLS.get(kind, "o"),
                                      size=7 if hollow else 10, pen=pg.mkPen(colour, width=1.5),
                                      brush=pg.mkBrush(base if hollow else colour), hoverable=True,
                                      tip=lambda x, y, data: str(data))
            self.plot.addItem(item)
            self.point_items[(kind, dtype)] = item
            for p in pts:
                if p.labelled:
                    self._label(p.label, p.intensity, p.gflops, None, anchor=(-0.1, 1.1))

    def plotted_points(self) -> list[tuple[str, str, float, float]]:
        """(kind, dtype, FLOP/byte, GFLOP/s) of every point drawn, read back from the scatter items."""
        out = []
        for (kind, dtype), item in self.point_items.items():
            xs, ys = item.getData()
            out += [(kind, dtype, 10 ** float(x), 10 ** float(y)) for x, y in zip(xs, ys)]
        return out

    def _label(self, text: str, x: float, y: float, colour: str | None, anchor=(0, 1)) -> None:
        item = pg.TextItem(text, color=colour or self._fg, anchor=anchor)
        item.setPos(math.log10(x), math.log10(y))
        self.plot.addItem(item)
        self.labels.append(item)

    # ------------------------------------------------------------------ saving

    def ask_save_path(self) -> str:
        path, _ = QFileDialog.getSaveFileName(self, "Save the roofline picture", "roofline.svg",
                                              "SVG picture (*.svg);;PNG picture (*.png)")
        return path


def _decade_floor(v: float) -> float:
    return 10.0 ** math.floor(math.log10(max(v, 1e-9)))


def _decade_ceil(v: float) -> float:
    return 10.0 ** math.ceil(math.log10(max(v, 1e-9)))
