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

import html
import math

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QPointF, QRectF, QSize, Qt, Signal
from PySide6.QtGui import QPalette
from PySide6.QtWidgets import (QFileDialog, QFrame, QHBoxLayout, QLabel, QPushButton, QScrollArea, QVBoxLayout,
                               QWidget)

from cpudoctor.gui.palette_plot import PalettePlot
from cpudoctor.render.roofline import Picture, picture_from_runs
from cpudoctor.render.svg_roofline import DTYPE_COLOURS, MEMORY_COLOUR, NOMINAL_COLOUR

SYMBOLS = {"gemm": "o", "gemm-ladder": "o", "operator": "s"}
# Where a label may sit beside its point (TextItem anchors): right above, right below, left above, left below.
LABEL_SPOTS = ((-0.12, 0.95), (-0.12, 0.05), (1.12, 0.95), (1.12, 0.05), (0.5, 1.25), (0.5, -0.25))
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
        # The claim, whole, wrapped under the buttons (elided to one line it lost its end at 1280 px); in a short
        # window it keeps two lines and scrolls, so the plot keeps its height.
        self.claim = _Claim()
        self.claim_area = _ClaimArea(self.claim)
        lay.addWidget(self.claim_area)
        self.empty = QLabel(EMPTY_TEXT)      # before any roofline run: what the button does
        self.empty.setWordWrap(True)
        self.empty.setTextFormat(Qt.TextFormat.RichText)
        lay.addWidget(self.empty)
        self.key = QLabel("")          # what each line and mark is: beside the plot, so no point hides under it
        self.key.setWordWrap(True)
        self.key.setTextFormat(Qt.TextFormat.RichText)
        self.key.setStyleSheet("color: palette(placeholder-text);")
        lay.addWidget(self.key)
        self.plot = self._make_plot()
        self.plot.setMinimumSize(240, 140)      # two to three decades stay readable in the smallest window
        lay.addWidget(self.plot, 1)
        self.plot.setVisible(False)

    def _make_plot(self) -> pg.PlotWidget:
        fg = self.palette().color(QPalette.ColorRole.Text)
        w = _RooflinePlot()
        item = w.getPlotItem()
        item.setLogMode(x=True, y=True)
        w.labelled("bottom", "FLOP per byte moved (log)")
        w.labelled("left", "GFLOP/s (log)")
        w.showGrid(x=True, y=True, alpha=0.15)
        w.setMenuEnabled(False)
        w.setMouseEnabled(x=False, y=False)
        # the labels are placed in pixels: again whenever the view's geometry changes
        w.getPlotItem().getViewBox().sigTransformChanged.connect(self.place_labels)
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
        key: list[tuple[str, str, str]] = []
        tips: list[str] = []
        has = picture is not None and bool(picture.compute)
        self.plot.setVisible(has)
        self.key.setVisible(has)
        self.empty.setVisible(not has)
        self.save.setEnabled(has)
        self.claim.show_text(picture.claim if has and picture.claim else "")
        if not has:
            return
        xs = [p.intensity for p in picture.points] + [x for x in (picture.ridge(r) for r in picture.compute) if x]
        ys = [p.gflops for p in picture.points] + [r.gflops for r in picture.compute + picture.nominal]
        # a margin around the data, not whole decades: a small window keeps its height for the data
        x_lo, x_hi = min(xs, default=1.0) / 2, max(xs, default=100.0) * 2
        y_lo, y_hi = min(ys, default=1.0) / 1.6, max(ys, default=100.0) * 1.6
        for roof in picture.compute:
            start = max(picture.ridge(roof) or x_lo, x_lo)
            pen = pg.mkPen(DTYPE_COLOURS.get(roof.dtype, "#34495e"), width=2.5 if roof.all_cpus else 1.5,
                           style=Qt.PenStyle.SolidLine if roof.all_cpus else Qt.PenStyle.DashLine)
            line = self.plot.plot([start, x_hi], [roof.gflops, roof.gflops], pen=pen)
            self.roof_items.append((roof, line))
            if roof.all_cpus:        # one key entry per dtype: every usable CPU, and one core beside it
                one = next((r for r in picture.compute if r.dtype == roof.dtype and not r.all_cpus), None)
                key.append((DTYPE_COLOURS.get(roof.dtype, "#34495e"), "━",
                            f"{roof.dtype} roof {roof.gflops:,.0f} GFLOP/s"))
                if one:
                    tips.append(f"{roof.dtype}: {roof.gflops:,.1f} GFLOP/s on every usable CPU, {one.gflops:,.1f} on "
                                "one core (dashed)")
        for roof in picture.nominal:             # one dotted line per dtype, in its colour
            colour = DTYPE_COLOURS.get(roof.dtype, NOMINAL_COLOUR)
            line = self.plot.plot([x_lo, x_hi], [roof.gflops] * 2,
                                  pen=pg.mkPen(colour, width=1.2, style=Qt.PenStyle.DotLine))
            self.roof_items.append((roof, line))
            key.append((colour, "┈", f"nominal {roof.dtype} {roof.gflops:,.0f} GFLOP/s"))
        if picture.memory_gbps:
            top = max((r.gflops for r in picture.compute), default=y_hi)
            lo, hi = max(x_lo, y_lo / picture.memory_gbps), top / picture.memory_gbps
            self.memory_item = self.plot.plot([lo, hi], [picture.memory_gbps * lo, picture.memory_gbps * hi],
                                              pen=pg.mkPen(MEMORY_COLOUR, width=2.5))
            key.append((MEMORY_COLOUR, "━", f"memory {picture.memory_gbps:,.1f} GB/s"))
        self.key.setText(" &nbsp; ".join(f"<span style='color:{c}'>{m}</span>&nbsp;{html.escape(t)}" for c, m, t in key)
                         + " &nbsp; ● GEMM ○ in-cache ■ operator")
        self.key.setToolTip("\n".join(tips) + "\n\nRoofs: the best in-cache multiply per dtype on every usable CPU (solid) and one core "
                            "(dashed); the memory roof is copy bandwidth × FLOP per byte; dotted: each dtype's nominal "
                            "peak (cores × clock × FLOP/cycle). Points: ● GEMM runs, ○ the "
                            "roofline job's in-cache multiplies, ■ the latest training run's operators (PyTorch's "
                            "profiler FLOP counts); hover one for its figures.")
        self._points(picture)
        self.plot.setXRange(math.log10(x_lo), math.log10(x_hi), padding=0)
        self.plot.setYRange(math.log10(y_lo), math.log10(y_hi), padding=0)
        item = self.plot.getPlotItem()
        for name, lo, hi in (("bottom", x_lo, x_hi), ("left", y_lo, y_hi)):
            item.getAxis(name).setTicks([_log_ticks(lo, hi), []])
        self.place_labels()

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

    def changeEvent(self, event) -> None:  # noqa: N802 - Qt's name
        super().changeEvent(event)
        if event.type() == event.Type.PaletteChange and hasattr(self, "plot"):
            # a theme switch: the labels and the hollow marks are drawn in palette colours
            self._fg = self.palette().color(QPalette.ColorRole.Text)
            if self.picture is not None:
                self.show_picture(self.picture)

    def showEvent(self, event) -> None:  # noqa: N802 - Qt's name
        super().showEvent(event)
        self.place_labels()

    def place_labels(self) -> None:
        """Each point label beside its point where it touches no other label or the plot's edge;
        hidden where it fits nowhere (the tooltip still has it). Again whenever the plot is resized."""
        vb = self.plot.getPlotItem().getViewBox()
        if not self.labels or not vb.isVisible():
            return
        box = vb.sceneBoundingRect()
        taken: list = []                       # every mark first: no label covers a point
        for item in self.point_items.values():
            xs, ys = item.getData()
            for x, y in zip(xs, ys):
                at = vb.mapViewToScene(QPointF(float(x), float(y)))
                taken.append(QRectF(at.x() - 5, at.y() - 5, 10, 10))
        for item in self.labels:
            item.setVisible(True)
            for anchor in LABEL_SPOTS:
                item.setAnchor(anchor)
                item.updateTransform(force=True)
                rect = item.sceneBoundingRect()
                if box.contains(rect) and not any(rect.intersects(t) for t in taken):
                    taken.append(rect)
                    break
            else:
                item.setVisible(False)

    # ------------------------------------------------------------------ saving

    def ask_save_path(self) -> str:
        path, _ = QFileDialog.getSaveFileName(self, "Save the roofline picture", "roofline.svg",
                                              "SVG picture (*.svg);;PNG picture (*.png)")
        return path


class _Claim(QLabel):
    """The claim sentence, wrapped, as tall as its text at its width (a scroll-less page must not cut its end)."""

    def __init__(self) -> None:
        super().__init__("")
        self.setWordWrap(True)
        self.setTextFormat(Qt.TextFormat.PlainText)
        self.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)

    @property
    def full(self) -> str:
        return self.text()

    def show_text(self, text: str) -> None:
        self.setText(text)
        area = self.parentWidget().parentWidget() if self.parentWidget() is not None else None
        if isinstance(area, _ClaimArea):
            area.setVisible(bool(text))
            area.updateGeometry()
        self._fit()

    def resizeEvent(self, event) -> None:  # noqa: N802 - Qt's name
        super().resizeEvent(event)
        self._fit()

    def _fit(self) -> None:
        needed = self.heightForWidth(self.width()) if self.text() and self.width() > 0 else 0
        if needed > 0 and self.minimumHeight() != needed:
            self.setMinimumHeight(needed)


class _ClaimArea(QScrollArea):
    """The claim in a frameless area that asks for the claim's whole height and can give way to two lines."""

    def __init__(self, claim: _Claim) -> None:
        super().__init__()
        self.setWidgetResizable(True)
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setWidget(claim)
        self.setVisible(False)

    def sizeHint(self) -> QSize:  # noqa: N802 - Qt's name
        claim = self.widget()
        width = max(self.viewport().width(), 200)
        return QSize(width, (claim.heightForWidth(width) if claim.text() else 0) + 2)

    def minimumSizeHint(self) -> QSize:  # noqa: N802 - Qt's name
        fm = self.widget().fontMetrics()
        return QSize(100, min(self.sizeHint().height(), fm.lineSpacing() * 2 + 4))


class _RooflinePlot(PalettePlot):
    """Asks for a readable size (three decades of GFLOP/s need height) yet can shrink in a small window."""

    def sizeHint(self) -> QSize:  # noqa: N802 - Qt's name
        return QSize(480, 300)


def _log_ticks(lo: float, hi: float) -> list[tuple[float, str]]:
    """Ticks at 1, 10, 100 ... inside [lo, hi]; with 2 and 5 between them when fewer than two decades show."""
    steps = (1, 2, 5) if math.log10(hi / lo) < 2 else (1,)
    out = []
    for exponent in range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1):
        for m in steps:
            v = m * 10.0 ** exponent
            if lo <= v <= hi:
                out.append((math.log10(v), f"{v / 1000:g}k" if v >= 1000 else f"{v:g}"))
    return out
