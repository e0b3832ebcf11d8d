"""Monitor: per-core load as a heat strip grouped by CCX, total load, clocks, temperatures, memory.

Samples arrive through ``model.sample`` (see gui/sampler.py) and go into
fixed-size ring buffers (:class:`~cpudoctor.gui.monitor_model.MonitorHistory`,
no Qt, beside the application model), so hours of monitoring use the same
memory as a minute. Drawing happens only while the
page is visible; a hidden page just appends. A sensor that is missing (VMs,
containers) is shown as unavailable, never as a flat zero line.
"""

from __future__ import annotations

import html
import textwrap
from collections.abc import Callable

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QRectF, QSize, Qt, Signal
from PySide6.QtGui import QPainter, QPalette
from PySide6.QtWidgets import (QComboBox, QFrame, QGraphicsItem, QHBoxLayout, QLabel, QPushButton, QSizePolicy,
                               QVBoxLayout, QWidget)

from cpudoctor.gui.icons import icon
from cpudoctor.gui.load_legend import LoadScaleBar
from cpudoctor.gui.load_scale import lookup_table
from cpudoctor.gui.model import AppModel
from cpudoctor.gui.monitor_fit import MonitorFit
from cpudoctor.gui.monitor_model import (GIB, TITLE_SERIES, CpuGroup, MonitorHistory, cpu_groups, decimate,
                                          heat_columns, sensor_name, temperature_range)
from cpudoctor.gui.sampler import DEFAULT_HZ, RATES_HZ
from cpudoctor.probes.live.sample import Sample
from cpudoctor.kits.format import clock, percent, size
from cpudoctor.render.words import DASH
from cpudoctor.model import Report

WINDOWS_S: tuple[tuple[str, int], ...] = (("last 1 min", 60), ("last 2 min", 120), ("last 5 min", 300),
                                         ("last 15 min", 900))
DEFAULT_WINDOW_S = 120
_COLOUR_NAMES = {"#4a90c2": "blue", "#e07b39": "orange", "#3fa36b": "green", "#b05fc2": "purple", "#d9534f": "red",
                 "#8a8f96": "grey", "#c9a227": "yellow", "#2bb3b3": "teal"}
CHART_MIN_MOVE_PX = 6          # charts redraw once new data moves them this far (see MonitorPage.chart_interval)
CHART_MAX_WAIT_S = 2.0
LINE_COLOURS = ("#4a90c2", "#e07b39", "#3fa36b", "#b05fc2", "#d9534f", "#8a8f96", "#c9a227", "#2bb3b3")


class ViewCurve(pg.PlotCurveItem):
    """A curve told its bounds with its data, instead of measuring them again.

    PlotCurveItem computes its bounding rectangle after every new sample with
    NaN-aware minimum and maximum and a pixel-padding transform; the Monitor
    has the data's extent at hand (:meth:`set_points`), so it passes it along.
    Tight bounds also keep a flat line's repaint to a thin strip of its plot.
    """

    PAD_PX = 2.0

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._bounds: QRectF | None = None

    def set_points(self, x: np.ndarray, y: np.ndarray) -> None:
        self.prepareGeometryChange()
        finite = y[np.isfinite(y)]
        if x.size and finite.size:
            view = self.getViewBox()
            px, py = view.viewPixelSize() if view is not None else (0.0, 0.0)
            lo, hi = float(finite.min()), float(finite.max())
            pad_x, pad_y = px * self.PAD_PX, py * self.PAD_PX
            self._bounds = QRectF(float(x[0]) - pad_x, lo - pad_y, float(x[-1] - x[0]) + 2 * pad_x,
                                  hi - lo + 2 * pad_y)
        else:
            self._bounds = QRectF()
        self.setData(x, y)

    def boundingRect(self):  # noqa: N802 - Qt API
        return self._bounds if self._bounds is not None else super().boundingRect()


class LiveText(QWidget):
    """Text that changes every tick (a tile's value) without re-laying out the page.

    A QLabel asks its layout to recompute on every new text, which at 2 Hz was a
    noticeable part of the Monitor's cost; this widget keeps its size (``lines``
    lines of its font, at least a few characters wide) and only repaints. Longer
    text wraps at spaces onto the next of its ``lines``; what still does not fit
    is elided, with the whole text in the tooltip. ``whole``: the widget asks for
    its whole text as its minimum (a short line that must never be cut).
    """

    def __init__(self, text: str = "", muted: bool = False, relayout: bool = False, parent: QWidget | None = None,
                 *, lines: int = 1, whole: bool = False):
        super().__init__(parent)
        self._text = text
        self._muted = muted
        self._relayout = relayout or whole       # a rarely changing text may ask for the room it needs
        self._lines = max(1, lines)
        self._whole = whole
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        # paints its own background, so a new value does not make the styled tile behind it repaint too
        self.setAttribute(Qt.WidgetAttribute.WA_OpaquePaintEvent)

    def text(self) -> str:
        return self._text

    def set_lines(self, lines: int) -> None:
        """How many lines the text may take (a short window gives its tiles' detail one)."""
        if max(1, lines) != self._lines:
            self._lines = max(1, lines)
            self.updateGeometry()
            self.update()

    def setText(self, text: str) -> None:  # noqa: N802 - QLabel's name, for callers and tests
        if text != self._text:
            self._text = text
            if self._relayout:
                self.updateGeometry()
            self.update()

    def _height(self) -> int:
        fm = self.fontMetrics()
        return fm.height() + fm.lineSpacing() * (self._lines - 1) + 2

    def sizeHint(self) -> QSize:  # noqa: N802 - Qt API
        fm = self.fontMetrics()
        return QSize(max(fm.horizontalAdvance(self._text), fm.horizontalAdvance("0000000")), self._height())

    def minimumSizeHint(self) -> QSize:  # noqa: N802 - Qt API
        fm = self.fontMetrics()
        width = fm.horizontalAdvance(self._text) + 1 if self._whole else fm.horizontalAdvance("000")
        return QSize(width, self._height())

    def shown_lines(self) -> list[str]:
        """The lines drawn at the current width: wrapped at spaces, the last one elided when needed."""
        fm = self.fontMetrics()
        width = max(1, self.width())
        words, out = self._text.split(" "), []
        line = ""
        for i, word in enumerate(words):
            candidate = f"{line} {word}" if line else word
            if fm.horizontalAdvance(candidate) <= width or not line:
                line = candidate
                continue
            if len(out) == self._lines - 1:
                line = " ".join([line, *words[i:]])
                break
            out.append(line)
            line = word
        out.append(line)
        out[-1] = fm.elidedText(out[-1], Qt.TextElideMode.ElideRight, width)
        return [fm.elidedText(x, Qt.TextElideMode.ElideRight, width) for x in out]

    def text_fits(self) -> bool:
        """True when the whole text is drawn (for the layout checks: nothing elided, nothing cut)."""
        return " ".join(self.shown_lines()) == " ".join(self._text.split(" "))

    def paintEvent(self, event) -> None:  # noqa: N802 - Qt API
        p = QPainter(self)
        p.fillRect(self.rect(), self.palette().color(self.backgroundRole()))
        role = QPalette.ColorRole.PlaceholderText if self._muted else QPalette.ColorRole.WindowText
        p.setPen(self.palette().color(role))
        lines = self.shown_lines()
        if self._lines == 1:
            p.drawText(self.rect(), int(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter), lines[0])
        else:
            fm = self.fontMetrics()
            for i, line in enumerate(lines):
                p.drawText(0, 1 + fm.ascent() + i * fm.lineSpacing(), line)
        p.end()
        tip = "" if self.text_fits() else self._text
        if self.toolTip() != tip:
            self.setToolTip(tip)


class MonitorPage(QWidget):
    title = "Monitor"
    icon_name = "monitor"

    paused_changed = Signal(bool)          # True = paused (the window stops its sampler)
    rate_changed = Signal(float)           # Hz

    def __init__(self, model: AppModel, parent: QWidget | None = None):
        super().__init__(parent)
        self.model = model
        self.history = MonitorHistory()
        self.window_s = DEFAULT_WINDOW_S
        self.paused = False
        self._resumed = False
        self._topology_report: Report | None = None
        self._groups: list[CpuGroup] = []
        self._order: np.ndarray | None = None     # column indexes of per_cpu in display order
        self._dirty = True
        self._clock_top = 0.5
        self._clock_ranged = False
        self._charts = True                      # this redraw updates the charts (else only the tiles)
        self._last_chart_t: float | None = None  # sample time the charts were last drawn up to
        self._empty_curves: dict[int, bool] = {}
        self._y_ranges: dict[int, tuple[float, float]] = {}
        self._build()
        model.sample.connect(self.on_sample)
        model.report_changed.connect(self.on_report)
        if model.report is not None:
            self.on_report(model.report)

    # -- layout -------------------------------------------------------------
    def _build(self) -> None:
        v = QVBoxLayout(self)
        v.setContentsMargins(18, 12, 18, 12)
        v.setSpacing(8)
        self._outer = v
        v.addLayout(self._build_bar())
        v.addLayout(self._build_tiles())
        pal = self.palette()
        self._fg = pal.color(QPalette.ColorRole.Text)
        self._muted = pal.color(QPalette.ColorRole.PlaceholderText)
        self.graphics = pg.GraphicsLayoutWidget()
        # Lines without antialiasing, as system monitors draw them: the plots repaint twice a second, and
        # antialiased stroking was the largest part of that (text stays antialiased).
        self.graphics.setAntialiasing(False)
        self.graphics.setBackground(pal.color(QPalette.ColorRole.Base))
        self.graphics.ci.setContentsMargins(4, 4, 4, 4)
        self.graphics.ci.setSpacing(10)
        v.addWidget(self.graphics, 1)
        self._build_plots()
        self.set_window(self.window_s)

    def _build_bar(self) -> QHBoxLayout:
        """Pause, rate and history, the one-line summary and the load colour scale."""
        bar = QHBoxLayout()
        self.pause_button = QPushButton(icon("pause"), "Pause")
        self.pause_button.setCheckable(True)
        self.pause_button.toggled.connect(self.set_paused)
        self.rate_box = QComboBox()
        self.rate_box.setToolTip("Sample rate: how often the monitor reads the CPUs (it costs more CPU at 10 Hz)")
        for hz in RATES_HZ:
            self.rate_box.addItem(f"every {1 / hz:g} s" if hz < 1 else f"{hz:g} Hz", hz)
        self.rate_box.setCurrentIndex(RATES_HZ.index(DEFAULT_HZ))
        self.rate_box.currentIndexChanged.connect(lambda i: self.rate_changed.emit(float(self.rate_box.itemData(i))))
        self.window_box = QComboBox()
        self.window_box.setToolTip("How much history the charts show")
        for label, secs in WINDOWS_S:
            self.window_box.addItem(label, secs)
        self.window_box.setCurrentIndex([s for _, s in WINDOWS_S].index(DEFAULT_WINDOW_S))
        self.window_box.currentIndexChanged.connect(lambda i: self.set_window(self.window_box.itemData(i)))
        # A short line that always fits: it asks for its whole text (a long one elides, the tooltip keeps it)
        self.summary = LiveText("Waiting for the first sample…", muted=True, relayout=True, whole=True)
        self.summary.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Fixed)
        # the combos say what they are ("2 Hz", "last 2 min"): captions beside them pushed the bar past a small window
        bar.addWidget(self.pause_button)
        bar.addSpacing(8)
        bar.addWidget(self.rate_box)
        bar.addWidget(self.window_box)
        bar.addStretch(1)
        bar.addWidget(self.summary)
        bar.addSpacing(12)
        self.heat_scale = LoadScaleBar("Load")
        bar.addWidget(self.heat_scale)
        return bar

    def _build_tiles(self) -> QHBoxLayout:
        """Four value tiles: a caption, the value, and a detail line that wraps to a second line."""
        tiles = QHBoxLayout()
        tiles.setSpacing(10)
        self.tiles: dict[str, LiveText] = {}
        for key, caption in (("load", "Total load"), ("clock", "Clock"), ("temp", "Temperature"),
                             ("memory", "Memory")):
            frame = QFrame()
            frame.setObjectName("tile")
            frame.setStyleSheet("QFrame#tile { border: 1px solid palette(midlight); border-radius: 8px;"
                                " background: palette(base); } QFrame#tile QLabel { background: transparent; }")
            fl = QVBoxLayout(frame)
            fl.setContentsMargins(12, 6, 12, 8)
            fl.setSpacing(0)
            cap = QLabel(caption)
            cap.setStyleSheet("color: palette(placeholder-text);")
            value = LiveText("—")
            value.setBackgroundRole(QPalette.ColorRole.Base)        # the tile's colour
            font = value.font()
            font.setPointSizeF(font.pointSizeF() * 1.35)
            font.setBold(True)
            value.setFont(font)
            detail = LiveText("", muted=True, lines=2)
            detail.setBackgroundRole(QPalette.ColorRole.Base)
            fl.addWidget(cap)
            fl.addWidget(value)
            fl.addWidget(detail)
            self.tiles[key] = value
            self.tiles[key + "_detail"] = detail
            tiles.addWidget(frame, 1)
        return tiles

    def _build_plots(self) -> None:
        """The heat strip over the whole width, four small plots below it in an even grid."""
        self.heat_plot = self._plot("Per-core load", row=0, col=0, colspan=2)
        # the four small plots sit in their own grid so their columns share the width evenly
        self.small = self.graphics.ci.addLayout(row=1, col=0)
        self.small.setSpacing(10)
        self.heat = pg.ImageItem(axisOrder="row-major")
        self.heat.setLookupTable(self._heat_lut())
        self.heat.setLevels([0, 100])
        self.heat_plot.addItem(self.heat)
        self.heat_plot.invertY(True)
        self.heat_plot.showGrid(x=False, y=False)
        self.heat_plot.getAxis("left").setWidth(58)
        self._separators: list[pg.InfiniteLine] = []

        # Each series is named in its plot's title, in its colour: a legend inside the plot covers lines.
        self.total_plot = self._plot("Total load", row=1, col=0, parent=self.small)
        # 0 to 100 % with both ends labelled: fixed ticks, and a little room past each end so pyqtgraph draws them
        # (its own ticks on a range padded past 100 stopped at 80; on 0..100 exactly it leaves out both ends)
        self.total_plot.setYRange(-4, 104, padding=0)
        self.total_plot.getAxis("left").setTicks([[(v, str(v)) for v in (0, 25, 50, 75, 100)]])

        self.total_plot.setLabel("left", "%", color=self._muted.name())
        self.total_curve = self._curve(self.total_plot, LINE_COLOURS[0], 2)
        self.clock_plot = self._plot("Clock", row=1, col=1, parent=self.small)
        self.clock_plot.setLabel("left", "GHz", color=self._muted.name())
        self.clock_avg = self._curve(self.clock_plot, LINE_COLOURS[0], 2)
        self.clock_max = self._curve(self.clock_plot, LINE_COLOURS[1], 1)
        self._series_title(self.clock_plot, "Clock", [("average", LINE_COLOURS[0]), ("fastest core", LINE_COLOURS[1])])
        self.temp_plot = self._plot("Temperature", row=2, col=0, parent=self.small)
        self.temp_plot.setLabel("left", "°C", color=self._muted.name())
        self.temp_curves: dict[str, pg.PlotCurveItem] = {}
        self.mem_plot = self._plot("Memory", row=2, col=1, parent=self.small)
        self.mem_plot.setLabel("left", "GiB", color=self._muted.name())
        self.mem_curve = self._curve(self.mem_plot, LINE_COLOURS[2], 2)
        self.swap_curve = self._curve(self.mem_plot, LINE_COLOURS[3], 1)
        self._series_title(self.mem_plot, "Memory", [("used", LINE_COLOURS[2]), ("swap used", LINE_COLOURS[3])])
        self.small.layout.setColumnStretchFactor(0, 1)
        self.small.layout.setColumnStretchFactor(1, 1)
        self.graphics.ci.layout.setRowStretchFactor(0, 2)
        self.graphics.ci.layout.setRowStretchFactor(1, 3)
        for plot in self.small_plots:
            plot.setLabel("bottom", "seconds ago", color=self._muted.name())
        self.fit = MonitorFit(self)              # a short window: one row of charts, thin margins (gui/monitor_fit.py)

        self.unavailable: dict[str, pg.TextItem] = {}
        for key, plot in (("clock", self.clock_plot), ("temp", self.temp_plot)):
            item = pg.TextItem("", color=self._muted, anchor=(0.5, 0.5))
            item.setVisible(False)
            plot.addItem(item, ignoreBounds=True)
            self.unavailable[key] = item

    @property
    def small_plots(self) -> list[pg.PlotItem]:
        return [self.total_plot, self.clock_plot, self.temp_plot, self.mem_plot]

    def _plot(self, title: str, row: int, col: int, colspan: int = 1, parent=None) -> pg.PlotItem:
        layout = parent if parent is not None else self.graphics.ci
        p = layout.addPlot(row=row - (1 if parent is not None else 0), col=col, colspan=colspan)
        if parent is not None:
            p.setPreferredWidth(100)      # equal start, so the stretch factors split the width evenly
        p.setTitle(title, color=self._fg.name(), size="10pt")
        p.setMouseEnabled(x=False, y=False)
        p.setMenuEnabled(False)
        p.hideButtons()
        # No auto-range: every range is set here, so a new sample never makes the view measure the data.
        p.disableAutoRange()
        p.showGrid(x=False, y=True, alpha=0.15)
        for name in ("left", "bottom"):
            axis = p.getAxis(name)
            axis.setTextPen(self._muted)
            axis.setPen(pg.mkPen(self._muted, width=1))
            # Axes (and the grid they draw) change only when a range changes, yet the
            # view repaints them every tick: drawing text is most of a frame's cost,
            # so keep them as pixmaps until they really change.
            axis.setCacheMode(QGraphicsItem.CacheMode.DeviceCoordinateCache)
            # no "(x1e+03)" prefixes on %, GHz, °C, GiB or seconds; and pyqtgraph re-renders an axis
            # label's HTML (and re-lays out the plot grid) on every range change while this is on
            axis.enableAutoSIPrefix(False)
        p.getAxis("left").setWidth(58)
        if colspan == 2:
            p.setLabel("bottom", "seconds ago", color=self._muted.name())
        return p

    @staticmethod
    def _curve(plot: pg.PlotItem, colour: str, width: float) -> pg.PlotCurveItem:
        """A bare line: PlotDataItem's clipping and downsampling machinery costs more than drawing a few
        hundred points (the data are decimated by :func:`decimate` beforehand), and a filled area under
        it made Qt's raster engine fill most of the plot, with its thread pool, twice a second."""
        curve = ViewCurve(pen=pg.mkPen(colour, width=width), connect="finite", antialias=False)
        plot.addItem(curve)
        return curve

    def _series_title(self, plot: pg.PlotItem, title: str, series: list[tuple[str, str]],
                      short: Callable[[str], str] = str) -> None:
        """``Clock  ━ average  ━ fastest core``: the legend in the title, where it never covers a line.

        At most :data:`TITLE_SERIES` names (``short`` ones) fit beside the title; more are counted, and the
        plot's tooltip names them all.
        """
        plot.series_args = (title, series, short)            # titled again when the plots are rearranged
        fit = getattr(self, "fit", None)
        narrow = bool(fit is not None and fit.one_row)         # four plots in a row: the colours, named in the tooltip
        shown = series[:TITLE_SERIES]
        names = "&nbsp;".join(
            f'<span style="color:{colour}">━{"" if narrow else "&nbsp;" + html.escape(short(name))}</span>'
            for name, colour in shown)
        if len(series) > len(shown):
            names += f"&nbsp;&nbsp;+{len(series) - len(shown)}"
        plot.setTitle(f"{html.escape(title)}&nbsp;&nbsp;&nbsp;<span style='font-size:8pt'>{names}</span>",
                      color=self._fg.name(), size="10pt")
        if short is not str or narrow or len(series) > len(shown):
            plot.setToolTip("\n".join(f"━ {name}" + (f" ({_COLOUR_NAMES.get(colour, colour)})" if narrow else "")
                                      for name, colour in series))
        plot.series_names = [name for name, _colour in series]     # what the title names, for tests

    def _heat_lut(self) -> np.ndarray:
        """The topology map's load colours (gui/load_scale.py): one scale on every page."""
        return lookup_table(self.palette().color(QPalette.ColorRole.Base).lightness() < 128)

    # -- controls -----------------------------------------------------------
    def set_paused(self, paused: bool) -> None:
        """Freeze the monitor (the window also stops sampling while paused)."""
        if paused == self.paused:
            return
        self.paused = paused
        self._resumed = not paused
        self.pause_button.blockSignals(True)
        self.pause_button.setChecked(paused)
        self.pause_button.blockSignals(False)
        self.pause_button.setText("Resume" if paused else "Pause")
        self.pause_button.setIcon(icon("resume" if paused else "pause"))
        self.paused_changed.emit(paused)
        if paused and self.isVisible() and self.history.last is not None:
            self.redraw()                       # the charts show every sample taken before the pause
        self._update_summary()

    def set_rate(self, hz: float) -> None:
        """Show ``hz`` as the selected rate (nearest offered value)."""
        i = min(range(len(RATES_HZ)), key=lambda k: abs(RATES_HZ[k] - hz))
        self.rate_box.blockSignals(True)
        self.rate_box.setCurrentIndex(i)
        self.rate_box.blockSignals(False)
        self._update_summary()

    @property
    def rate_hz(self) -> float:
        return float(self.rate_box.currentData())

    def set_window(self, seconds: int) -> None:
        self.window_s = int(seconds)
        for p in (self.heat_plot, self.total_plot, self.clock_plot, self.temp_plot, self.mem_plot):
            p.setXRange(-self.window_s, 0, padding=0)
        self._dirty = True
        self.redraw()

    # -- data ---------------------------------------------------------------
    def on_report(self, report: Report) -> None:
        # Grouping must describe *this* machine: a report opened from a file
        # describes another one, so keep the last live topology.
        if not self.model.read_only:
            self._topology_report = report
            self._order = None
            self._dirty = True

    def on_sample(self, sample: Sample) -> None:
        if self.paused:
            return
        if self._resumed and self.history.cpu_ids == sample.cpu_ids:
            self.history.append_gap(sample.t - 1e-3)
        self._resumed = False
        self.history.append(sample)
        self._dirty = True
        if self.isVisible():
            due = self._last_chart_t is None or sample.t - self._last_chart_t >= self.chart_interval() - 1e-6
            self.redraw(charts=due)

    def changeEvent(self, event) -> None:  # noqa: N802 - Qt API
        super().changeEvent(event)
        if event.type() == event.Type.PaletteChange and hasattr(self, "graphics"):
            # the desktop switched light/dark: plots are drawn with palette colours
            pal = self.palette()
            self.graphics.setBackground(pal.color(QPalette.ColorRole.Base))
            self.heat.setLookupTable(self._heat_lut())

    def showEvent(self, event) -> None:  # noqa: N802 - Qt API
        super().showEvent(event)
        if self._dirty:
            self.redraw()

    def _update_order(self) -> None:
        ids = self.history.cpu_ids
        self._groups = cpu_groups(self._topology_report, ids)
        index = {c: i for i, c in enumerate(ids)}
        order = [index[c] for g in self._groups for c in g.cpus]
        self._order = np.array(order, dtype=np.intp)
        # axis ticks: group names at group middles, CPU numbers when they fit
        major, minor, row = [], [], 0
        for line in self._separators:
            self.heat_plot.removeItem(line)
        self._separators = []
        for gi, g in enumerate(self._groups):
            if len(self._groups) > 1:
                major.append((row + len(g.cpus) / 2, g.label))
            if gi > 0:
                gap = pg.mkPen(self.palette().color(QPalette.ColorRole.Base), width=2)
                sep = pg.InfiniteLine(pos=row, angle=0, pen=gap)
                self.heat_plot.addItem(sep, ignoreBounds=True)
                self._separators.append(sep)
            row += len(g.cpus)
        n = len(order)
        if n <= 32:
            minor = [(i + 0.5, f"cpu {ids[k]}") for i, k in enumerate(order)]
        elif not major:
            step = next(st for st in (8, 16, 32, 64, 128, 256, 1 << 20) if n / st <= 8)
            minor = [(i + 0.5, f"cpu {ids[k]}") for i, k in enumerate(order) if i % step == 0]
        axis = self.heat_plot.getAxis("left")
        axis.setTicks([major, minor] if major else [minor])
        self.heat_plot.setYRange(0, max(n, 1), padding=0)

    def chart_interval(self) -> float:
        """Seconds of data between two chart redraws: the time the charts need to move
        :data:`CHART_MIN_MOVE_PX` pixels at the current history window, at most :data:`CHART_MAX_WAIT_S`.

        Redrawing a scrolling chart for a shift of three or four pixels costs as much
        as for a shift of eight, and the repaint is most of the Monitor's cost; the
        tiles show every sample, the charts every sample that moved them visibly.
        """
        width = max(1.0, float(self.heat_plot.getViewBox().width()))
        return min(CHART_MAX_WAIT_S, self.window_s / width * CHART_MIN_MOVE_PX)

    def redraw(self, charts: bool = True) -> None:
        """Draw the visible window from the buffers; ``charts=False`` updates the value tiles only."""
        self._dirty = False
        h = self.history
        n, x = h.window(self.window_s)
        if n == 0 or h.per_cpu is None:
            return
        self._charts = charts
        if charts:
            self._last_chart_t = float(h.last.t)
            if self._order is None or len(self._order) != h.per_cpu.width:
                self._update_order()
            rows = h.per_cpu.last(n)[:, self._order]            # (time, cpu)
            img, x0 = heat_columns(x, rows)
            self.heat.setImage(img, autoLevels=False, levels=(0, 100))
            self.heat.setRect(QRectF(x0, 0, -x0, img.shape[0]))

        self._set_curve(self.total_curve, x, h.total.last(n))
        last = h.last
        self._tile("load", percent(last.total_percent),
                   f"busiest CPU {percent(max(last.cpu_percent))}" if last.cpu_percent else "")

        favg = h.freq_avg.last(n)
        clocks_ok = last.freq_mhz is not None
        self._set_unavailable("clock", self.clock_plot, bool(not clocks_ok and np.isnan(favg).all()),
                              "Clock speed unavailable here\n(no cpufreq: VM or container)")
        fmax = h.freq_max.last(n)
        self._set_curve(self.clock_avg, x, favg)
        self._set_curve(self.clock_max, x, fmax)
        if clocks_ok:
            # from zero, so a steady clock reads as steady instead of as noise around 2.596
            top = max(self._clock_top, float(np.nanmax(fmax)) * 1.15)
            if top != self._clock_top or not self._clock_ranged:
                self._clock_top, self._clock_ranged = top, True
                self.clock_plot.setYRange(0, top, padding=0)
            self._tile("clock", clock(sum(last.freq_mhz) / len(last.freq_mhz), DASH),
                       f"average · fastest core {clock(max(last.freq_mhz), DASH)}")
        else:
            self._tile("clock", "unavailable", "no clock sensor here (VM or container)")

        self._draw_temps(x, n)

        self._set_curve(self.mem_curve, x, h.mem_used.last(n))
        self._set_curve(self.swap_curve, x, h.swap_used.last(n))
        if last.mem_total_bytes:
            self._set_y_range(self.mem_plot, 0.0, last.mem_total_bytes / GIB * 1.02)
            swap = ""
            if last.swap_total_bytes:
                swap = f", swap {size(last.swap_used_bytes, DASH)} of {size(last.swap_total_bytes, DASH)}"
            self._tile("memory", f"{size(last.mem_used_bytes, DASH)}",
                       f"in use of {size(last.mem_total_bytes, DASH)}{swap}")
        self._update_summary()

    def _draw_temps(self, x: np.ndarray, n: int) -> None:
        h = self.history
        for i, (key, buf) in enumerate(h.temps.items()):
            curve = self.temp_curves.get(key)
            if curve is None:
                curve = self._curve(self.temp_plot, LINE_COLOURS[i % len(LINE_COLOURS)], 2 if i == 0 else 1)
                self.temp_curves[key] = curve
                self._series_title(self.temp_plot, "Temperature",
                                   [(k, LINE_COLOURS[j % len(LINE_COLOURS)]) for j, k in enumerate(self.temp_curves)],
                                   short=sensor_name)
            self._set_curve(curve, x, buf.last(n))
        temps = h.last.temps_c if h.last else {}
        if temps and self._charts:
            self._set_y_range(self.temp_plot, *temperature_range(h, n))
        why = h.last.temps_unavailable if h.last else ""
        self._set_unavailable("temp", self.temp_plot, not temps,
                              "No CPU temperature\n" + textwrap.fill(why or "(VM, container, or driver not loaded)",
                                                                      48))
        if temps:
            hottest = max(temps.items(), key=lambda kv: kv[1])
            self._tile("temp", f"{hottest[1]:.0f} °C", hottest[0])
        else:
            self._tile("temp", "unavailable", "no CPU sensor (VM, container, or driver)")

    def _set_curve(self, curve: pg.PlotCurveItem, x: np.ndarray, y: np.ndarray) -> None:
        """New data for ``curve``, decimated; a series with no value at all (no sensor) is not redrawn."""
        if not self._charts:
            return
        empty = bool(np.isnan(y).all())
        if empty and self._empty_curves.get(id(curve)):
            return
        self._empty_curves[id(curve)] = empty
        curve.set_points(*decimate(x, y))

    def _set_y_range(self, plot: pg.PlotItem, lo: float, hi: float) -> None:
        """Set a y range only when it changes (each call makes the view recompute its transform)."""
        if self._y_ranges.get(id(plot)) != (lo, hi):
            self._y_ranges[id(plot)] = (lo, hi)
            plot.setYRange(lo, hi, padding=0)

    def _tile(self, key: str, value: str, detail: str = "") -> None:
        """Set a live value tile; Qt relayouts only when the text really changes."""
        for label, text in ((self.tiles[key], value), (self.tiles[key + "_detail"], detail)):
            if label.text() != text:
                label.setText(text)

    def _set_unavailable(self, key: str, plot: pg.PlotItem, missing: bool, text: str) -> None:
        if not self._charts:
            return
        item = self.unavailable[key]
        if missing == item.isVisible() and (not missing or item.toPlainText() == text):
            if missing and item.pos().x() != -self.window_s / 2:
                item.setPos(-self.window_s / 2, 0.5)
            return
        if missing:
            self._set_y_range(plot, 0.0, 1.0)
            plot.getAxis("left").setStyle(showValues=False)
            item.setText(text)
            item.setPos(-self.window_s / 2, 0.5)
        elif item.isVisible():
            plot.getAxis("left").setStyle(showValues=True)
            self._y_ranges.pop(id(plot), None)          # the real range is set with the next data
            self._clock_ranged = self._clock_ranged and plot is not self.clock_plot
        item.setVisible(missing)

    def _update_summary(self) -> None:
        h = self.history
        if self.paused:
            text = "Paused"
        elif h.last is None:
            return
        else:
            groups = len(self._groups)
            where = f" in {groups} groups" if groups > 1 else ""
            text = f"Live · {self.rate_hz:g} Hz · {len(h.cpu_ids)} CPUs{where}"
        self.summary.setText(text)

    def is_unavailable(self, key: str) -> bool:
        """True while the plot ``key`` ('clock' or 'temp') shows 'unavailable' (for tests)."""
        return self.unavailable[key].isVisible()
