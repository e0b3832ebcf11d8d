"""The Training page's parts: the settings form, the live plots, the thread-sweep and benchmark tabs.

Each part builds and redraws its own widgets from what it is given (the
session's series, a typed lab result); none starts a job or decides what a
figure means. :class:`cpudoctor.gui.training_page.TrainingPage` puts them
together and runs the jobs.
"""

from __future__ import annotations

import html
from typing import Any

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtGui import QPalette
from PySide6.QtWidgets import (QCheckBox, QComboBox, QFileDialog, QFormLayout, QFrame, QGridLayout, QGroupBox,
                               QHBoxLayout, QLabel, QLineEdit, QPushButton, QScrollArea, QSizePolicy, QSpinBox,
                               QToolButton, QVBoxLayout, QWidget)

from cpudoctor.gui.palette_plot import PalettePlot
from cpudoctor.gui.training_session import LiveSeries, SweepSeries
from cpudoctor.lab.settings import MODELS, SweepSettings, TrainSettings
from cpudoctor.render import lab as words

LINE_COLOURS = ("#4a90c2", "#e0a030", "#3fa36b", "#b05cc6", "#d9534f")
# the sweep's series: (group, legend name, symbol, colour); the legend lists only those with points
SWEEP_SERIES = (("threads", "threads, not pinned", "o", LINE_COLOURS[0]),
                ("pinning", "pinned", "s", LINE_COLOURS[1]),
                ("default", "PyTorch defaults", "t", LINE_COLOURS[4]))
SYMBOL_GLYPHS = {"o": "●", "s": "■", "t": "▼"}
# A lab plot's height that leaves its data area 60 px or more under the title and the step axis with its label
# (those take about 70 px): lower, a curve is a flat line (the layout test checks every plot's data area).
PLOT_MIN_PX = 132


def spin(lo: int, hi: int, value: int, special: str = "") -> QSpinBox:
    box = QSpinBox()
    box.setRange(lo, hi)
    box.setValue(value)
    if special:
        box.setSpecialValueText(special)
    return box


def lab_plot(widget: QWidget, title: str, y_label: str, x_label: str = "step", tip: str = "") -> pg.PlotWidget:
    """A plot in the palette's colours (readable in light and dark mode), like the Monitor page's."""
    w = PalettePlot()
    w.setPalette(widget.palette())
    w.apply_palette()
    item = w.getPlotItem()
    w.titled(title)
    for name in ("left", "bottom"):
        item.getAxis(name).enableAutoSIPrefix(False)        # never "samples/s (x0.001)"
    item.getAxis("bottom").setTickDensity(0.35)      # step numbers must not run together in a narrow plot
    w.labelled("bottom", x_label)
    if y_label:
        w.labelled("left", y_label)
    w.showGrid(x=True, y=True, alpha=0.15)
    w.setDownsampling(mode="peak")
    w.setClipToView(True)
    w.setMenuEnabled(False)
    w.setMouseEnabled(x=False, y=False)
    w.setMinimumWidth(90)
    if tip:
        w.setToolTip(tip)
    return w


class TrainingForm(QGroupBox):
    """Micro-training's settings as a form; :meth:`settings` validates them (SettingsError names the field)."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__("Micro-training", parent)
        form = QFormLayout(self)
        form.setRowWrapPolicy(QFormLayout.RowWrapPolicy.DontWrapRows)
        self.form = form
        self.model_box = QComboBox()
        for key, label in words.MODEL_LABELS.items():
            self.model_box.addItem(label, key)
            self.model_box.setItemData(self.model_box.count() - 1, MODELS[key], Qt.ItemDataRole.ToolTipRole)
        form.addRow("&Model", self.model_box)
        self.data_box = QComboBox()
        self.data_box.addItem("Synthetic (learnable, no download)", "synthetic")
        self.data_box.addItem("MNIST from a folder", "mnist")
        self.data_box.currentIndexChanged.connect(self._data_changed)
        form.addRow("&Data", self.data_box)
        self.mnist_edit = QLineEdit()
        self.mnist_edit.setPlaceholderText("folder with train-images-idx3-ubyte[.gz]")
        self.mnist_browse = QToolButton()
        self.mnist_browse.setText("…")
        self.mnist_browse.setToolTip("Choose the folder with the MNIST IDX files")
        self.mnist_browse.clicked.connect(self._browse_mnist)
        row = QHBoxLayout()
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(self.mnist_edit, 1)
        row.addWidget(self.mnist_browse)
        self.mnist_row = QWidget()
        self.mnist_row.setLayout(row)
        form.addRow("MNIST folder", self.mnist_row)
        self.threads_spin = spin(0, 1024, 0, "PyTorch default")
        self.threads_spin.setToolTip("torch.set_num_threads: intra-op threads")
        form.addRow("&Threads", self.threads_spin)
        self.interop_spin = spin(0, 1024, 0, "PyTorch default")
        self.interop_spin.setToolTip("torch.set_num_interop_threads: inter-op threads")
        form.addRow("&Inter-op", self.interop_spin)
        self.batch_spin = spin(1, 8192, 64)
        form.addRow("&Batch size", self.batch_spin)
        self.opt_box = QComboBox()
        self.opt_box.addItem("Adam", "adam")
        self.opt_box.addItem("SGD (momentum 0.9)", "sgd")
        form.addRow("&Optimizer", self.opt_box)
        self.dtype_box = QComboBox()
        self.dtype_box.addItem("fp32", "fp32")
        self.dtype_box.addItem("bf16 autocast", "bf16")
        self.dtype_box.setToolTip("bf16 is fast only with AVX512_BF16 or AMX; a bf16 run also measures fp32 in "
                                  "the same job, so the ratio is measured, not assumed")
        form.addRow("&Precision", self.dtype_box)
        self.bf16_hint = QLabel("")
        self.bf16_hint.setWordWrap(True)
        self.bf16_hint.setStyleSheet("color: palette(placeholder-text);")
        form.addRow("", self.bf16_hint)
        self.channels_last = QCheckBox("channels_last memory format")
        form.addRow("", self.channels_last)
        self.compile_check = QCheckBox("torch.compile (needs a C compiler)")
        form.addRow("", self.compile_check)
        self.length_box = QComboBox()
        self.length_box.addItem("seconds", "seconds")
        self.length_box.addItem("steps", "steps")
        self.length_spin = spin(1, 100_000, 20)
        lrow = QHBoxLayout()
        lrow.setContentsMargins(0, 0, 0, 0)
        lrow.addWidget(self.length_spin)
        lrow.addWidget(self.length_box)
        lw = QWidget()
        lw.setLayout(lrow)
        form.addRow("&Run for", lw)
        self.pin_box = QComboBox()
        self.pin_box.addItem("No pinning", None)
        self.pin_box.setToolTip("Pin the training process to a CCX, NUMA node or core set (sched_setaffinity)")
        form.addRow("Pi&n to", self.pin_box)
        self._data_changed()
        for combo in self.findChildren(QComboBox):
            # long entries ("Synthetic (learnable, no download)") elide instead of widening the form
            combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
            combo.setMinimumContentsLength(8)

    def set_hint(self, text: str) -> None:
        self.bf16_hint.setText(text)
        self.form.setRowVisible(self.bf16_hint, bool(text))    # no empty gap under Precision

    def set_pinning(self, choices: list[tuple[str, list[int]]]) -> None:
        self.pin_box.clear()
        self.pin_box.addItem("No pinning", None)
        for label, cpus in choices:
            self.pin_box.addItem(label, cpus)

    def settings(self) -> TrainSettings:
        """The form as validated settings (SettingsError names the bad field)."""
        by_steps = self.length_box.currentData() == "steps"
        s = TrainSettings(
            model=self.model_box.currentData(),
            data=self.data_box.currentData(),
            mnist_dir=self.mnist_edit.text().strip() or None,
            batch_size=self.batch_spin.value(),
            optimizer=self.opt_box.currentData(),
            dtype=self.dtype_box.currentData(),
            channels_last=self.channels_last.isChecked(),
            compile=self.compile_check.isChecked(),
            threads=self.threads_spin.value() or None,
            interop_threads=self.interop_spin.value() or None,
            steps=self.length_spin.value() if by_steps else None,
            seconds=None if by_steps else float(self.length_spin.value()),
            cpus=self.pin_box.currentData(),
        )
        return s.validate()

    def _data_changed(self) -> None:
        self.mnist_row.setEnabled(self.data_box.currentData() == "mnist")

    def _browse_mnist(self) -> None:
        folder = QFileDialog.getExistingDirectory(self, "Folder with the MNIST IDX files", self.mnist_edit.text())
        if folder:
            self.mnist_edit.setText(folder)


def scrolled(widget: QWidget) -> QScrollArea:
    """``widget`` in a frameless scroll area that never scrolls sideways."""
    area = QScrollArea()
    area.setWidgetResizable(True)
    area.setFrameShape(QFrame.Shape.NoFrame)
    area.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
    area.setWidget(widget)
    return area


class LivePlots(QWidget):
    """Loss, accuracy and samples/s of the running training job, with the job's own metric definitions.

    The titles are short (a narrow window must not cut them); each plot's
    tooltip holds its whole definition, the one the runs table uses.
    """

    ONE_ROW_PX = 390         # narrower: loss and accuracy side by side, samples/s below them

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.grid = QGridLayout(self)
        self.grid.setContentsMargins(0, 0, 0, 0)
        self._one_row: bool | None = None
        self.loss_plot = lab_plot(self, "Loss", "", tip=f"Loss: {words.metric_definition('loss')}")
        self.acc_plot = lab_plot(self, "Accuracy", "", tip=f"Accuracy: {words.metric_definition('accuracy')}")
        self.acc_plot.setYRange(0, 1)
        self.speed_plot = lab_plot(self, "Samples/s", "",
                                   tip=f"Samples/s: {words.metric_definition('samples_per_s')}")
        self.speed_legend = self.speed_plot.addLegend(offset=(-10, -10))
        self.curves = {
            "loss": self.loss_plot.plot(pen=pg.mkPen(LINE_COLOURS[0], width=1.5)),
            "accuracy": self.acc_plot.plot(pen=pg.mkPen(LINE_COLOURS[2], width=1.5)),
            "samples_per_s": self.speed_plot.plot(pen=pg.mkPen(LINE_COLOURS[1], width=1.5)),
            "reference_samples_per_s": self.speed_plot.plot(pen=pg.mkPen(LINE_COLOURS[3], width=1.5,
                                                                         style=Qt.PenStyle.DashLine)),
        }
        self.speed_legend.setVisible(False)
        for p in (self.loss_plot, self.acc_plot, self.speed_plot):
            p.setMinimumHeight(PLOT_MIN_PX)      # never squashed flat in a short window
        self._arrange(True)

    def _arrange(self, one_row: bool) -> None:
        """Three plots in a row, or two over one in a narrow column (three in a row cut their titles)."""
        if one_row == self._one_row:
            return
        self._one_row = one_row
        for p in (self.loss_plot, self.acc_plot, self.speed_plot):
            self.grid.removeWidget(p)
        if one_row:
            for col, p in enumerate((self.loss_plot, self.acc_plot, self.speed_plot)):
                self.grid.addWidget(p, 0, col)
        else:
            self.grid.addWidget(self.loss_plot, 0, 0)
            self.grid.addWidget(self.acc_plot, 0, 1)
            self.grid.addWidget(self.speed_plot, 1, 0, 1, 2)
        for col in range(3):
            self.grid.setColumnStretch(col, 1 if one_row or col < 2 else 0)

    def resizeEvent(self, event) -> None:  # noqa: N802 - Qt API
        super().resizeEvent(event)
        self._arrange(event.size().width() >= self.ONE_ROW_PX)

    def reset(self, live: LiveSeries) -> None:
        """Empty plots for a new run: no curve, and no y range left over from the previous run."""
        for curve in self.curves.values():
            curve.setData([], [])
        self.speed_legend.clear()
        self.speed_legend.setVisible(False)
        for plot in (self.loss_plot, self.speed_plot):
            plot.disableAutoRange(axis="y")
            plot.setYRange(0, 1, padding=0)
        self.set_ranges(live)

    def set_ranges(self, live: LiveSeries) -> None:
        """x from step 0 to the last step (at least 10): empty plots never show negative or fractional steps.

        Samples/s starts at 0, so a wobble of 1 sample/s never fills the plot like a collapse would.
        """
        lo, hi = live.x_range()
        for plot in (self.loss_plot, self.acc_plot, self.speed_plot):
            plot.setXRange(lo, hi, padding=0.02)
        loss = live.top("loss")
        if loss is not None:                 # an empty plot keeps its neutral range, not the previous run's
            self.loss_plot.enableAutoRange(axis="y")
        top = live.top("samples_per_s", "reference_samples_per_s")
        if top:
            self.speed_plot.setYRange(0, top * 1.1, padding=0)

    def draw(self, live: LiveSeries, dtype: str) -> None:
        for key, curve in self.curves.items():
            # a series with one known point is a dot (a line needs two; a 10 s run on a busy machine may make one)
            alone = sum(1 for v in live.values[key] if v == v) == 1
            curve.setData(live.steps, live.values[key], connect="finite", symbol="o" if alone else None,
                          symbolSize=7, symbolPen=curve.opts["pen"], symbolBrush=curve.opts["pen"].color())
        if live.has("reference_samples_per_s") and not self.speed_legend.isVisible():
            self.speed_legend.addItem(self.curves["samples_per_s"], dtype)
            self.speed_legend.addItem(self.curves["reference_samples_per_s"], "fp32, same job")
            self.speed_legend.setVisible(True)
        self.set_ranges(live)


class SweepPanel(QWidget):
    """The thread sweep: its button and budget, medians with their spread against threads, its verdict.

    The legend is a line above the plot (inside the plot it covered the
    1-thread point; in the title it did not fit a narrow window) and names
    only the series that have points.
    """

    TITLE = "Samples/s by thread count"

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        lay = QVBoxLayout(self)
        row = QHBoxLayout()
        self.sweep_button = QPushButton("Run thread sweep")
        self.sweep_button.setToolTip("Trains the chosen model at 1..N threads and in pinning variants, one warm "
                                     "process each, measured in turns until they can be told apart")
        self.sweep_budget = spin(10, 3600, int(SweepSettings.budget_s))
        self.sweep_budget.setSuffix(" s budget")
        self.sweep_budget.setToolTip("The whole sweep ends within this time, start-up included")
        row.addWidget(self.sweep_button)
        row.addWidget(self.sweep_budget)
        row.addStretch(1)
        lay.addLayout(row)
        # the legend: what each mark is (only those drawn), on its own line, wrapping in a narrow window
        self.legend = QLabel("")
        self.legend.setWordWrap(True)
        self.legend.setTextFormat(Qt.TextFormat.RichText)
        self.legend.setVisible(False)
        lay.addWidget(self.legend)
        self.sweep_plot = lab_plot(self, self.TITLE, "", "threads",
                                   tip="Each point: the median of a variant's segments; the bar: their spread "
                                       "(samples/s)")
        self.series = {}
        for group, name, symbol, colour in SWEEP_SERIES:
            pen = pg.mkPen(colour, width=1.5) if group == "threads" else None
            self.series[group] = self.sweep_plot.plot(pen=pen, symbol=symbol, symbolBrush=colour, name=name)
        self.sweep_unpinned, self.sweep_pinned, self.sweep_default = (self.series[g] for g, *_ in SWEEP_SERIES)
        self.sweep_bars = pg.ErrorBarItem(x=np.zeros(0), y=np.zeros(0), top=np.zeros(0), bottom=np.zeros(0),
                                          beam=0.15, pen=pg.mkPen(LINE_COLOURS[0], width=1))
        self.sweep_plot.addItem(self.sweep_bars)
        muted = self.palette().color(QPalette.ColorRole.PlaceholderText)
        self.empty_text = pg.TextItem("Run a thread sweep: each setting's samples/s appear here",
                                      color=muted, anchor=(0.5, 0.5))
        self.sweep_plot.addItem(self.empty_text, ignoreBounds=True)
        lay.addWidget(self.sweep_plot, 1)
        # What the sweep says about its figures (its verdict, a busy machine, failed variants): under the plot.
        self.sweep_notes = QLabel("")
        self.sweep_notes.setWordWrap(True)
        self.sweep_notes.setTextFormat(Qt.TextFormat.RichText)
        self.sweep_notes.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.sweep_notes.setVisible(False)
        lay.addWidget(self.sweep_notes)
        self.sweep_plot.setMinimumHeight(PLOT_MIN_PX)
        self.legend_names: list[str] = []

    def resizeEvent(self, event) -> None:  # noqa: N802 - Qt API
        super().resizeEvent(event)
        self._fit_labels()

    def _fit_labels(self) -> None:
        """Wrapped lines get the height their text takes (the plot gives way), never a cut last line."""
        for label in (self.legend, self.sweep_notes):
            width = label.width()
            needed = label.heightForWidth(width) if width > 0 and label.text() else 0
            if needed > 0 and label.minimumHeight() != needed:
                label.setMinimumHeight(needed)

    def redraw(self, series: SweepSeries, cpus: int) -> None:
        """The latest figure of each variant, whole thread counts on the x axis; an empty plot spans 1..CPUs."""
        groups = {g: series.group(g) for g, *_ in SWEEP_SERIES}
        for group, curve in self.series.items():
            pts = groups[group]
            curve.setData([x for x, *_ in pts], [y for _, y, *_ in pts])
        every = [p for pts in groups.values() for p in pts]
        self.sweep_bars.setData(x=np.array([x for x, *_ in every], float), y=np.array([y for _, y, *_ in every], float),
                                top=np.array([hi - y for _, y, _, hi in every], float),
                                bottom=np.array([y - lo for _, y, lo, _ in every], float))
        self._title([(name, symbol, colour) for group, name, symbol, colour in SWEEP_SERIES if groups[group]])
        plot = self.sweep_plot.getPlotItem()
        axis = plot.getAxis("bottom")
        counts = series.thread_counts()
        self.empty_text.setVisible(not counts)
        plot.getAxis("left").setStyle(showValues=bool(counts))
        if counts:
            self.sweep_plot.setXRange(min(counts) - 0.5, max(counts) + 0.5, padding=0)
            # Thread counts are whole numbers: tick exactly the measured ones (never "1.2 threads").
            axis.setTicks([[(float(n), str(n)) for n in counts]] if len(counts) <= 16
                          else [whole_ticks(min(counts), max(counts))])
            # samples/s from zero: a wobble of 0.6 samples/s must not fill the plot like a tenfold difference
            top = max(hi for pts in groups.values() for *_, hi in pts)
            self.sweep_plot.setYRange(0, top * 1.1, padding=0)
            return
        top = max(2, cpus)
        axis.setTicks([whole_ticks(1, top)])
        self.sweep_plot.setXRange(1, top, padding=0.05)
        self.sweep_plot.setYRange(0, 1, padding=0)
        self.empty_text.setPos((1 + top) / 2, 0.5)

    def _title(self, shown: list[tuple[str, str, str]]) -> None:
        """``● threads, not pinned  ■ pinned``: the legend beside the buttons, each name in its mark's colour."""
        self.legend_names = [name for name, _s, _c in shown]
        self.legend.setText("&nbsp;&nbsp; ".join(f'<span style="color:{colour}">{SYMBOL_GLYPHS[symbol]}</span>'
                                                 f"&nbsp;{html.escape(name)}" for name, symbol, colour in shown))
        self.legend.setVisible(bool(shown))
        self._fit_labels()

    def show_notes(self, result, caveat_colour: str) -> None:
        """The sweep's verdict, how quiet the machine was and failed variants, under its plot."""
        self.sweep_notes.setText(words.sweep_notes_html(result, caveat_colour) if result is not None else "")
        self.sweep_notes.setVisible(result is not None)
        self._fit_labels()


def whole_ticks(lo: int, hi: int, most: int = 12) -> list[tuple[float, str]]:
    """Ticks at whole numbers from ``lo`` to ``hi`` (thread counts), every 1, 2, 4, 8 … so at most ``most`` show."""
    step = 1
    while (hi - lo) // step + 1 > most:
        step *= 2
    first = lo if step == 1 else step * max(1, -(-lo // step))
    return [(float(n), str(n)) for n in ([lo] if step > 1 and lo < first else []) + list(range(first, hi + 1, step))]


class BenchPanel(QWidget):
    """GEMM against the CPU's peak, and dynamic int8 against fp32, with their results below the buttons."""

    INTRO = ("GEMM shows how close matmul gets to the theoretical peak (cores × clock × FLOP/cycle); int8 shows "
             "what VNNI buys.")

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        lay = QVBoxLayout(self)
        row = QHBoxLayout()
        self.gemm_button = QPushButton("Run GEMM")
        self.gemm_button.setToolTip("torch and numpy matmul GFLOP/s against this CPU's theoretical peak")
        self.gemm_size = spin(0, 16384, 0, "n = auto")
        self.gemm_size.setPrefix("n = ")
        self.gemm_size.setToolTip("auto: one multiply takes about a quarter of a second (at most 4096); a path "
                                  "this CPU emulates is measured at 512")
        self.quant_button = QPushButton("Run int8 vs fp32")
        self.quant_button.setToolTip("Dynamic int8 quantisation of an MLP against fp32, in the same job: latency "
                                     "at batch 1 and 64")
        for x in (self.gemm_button, self.gemm_size, self.quant_button):
            row.addWidget(x)
        row.addStretch(1)
        lay.addLayout(row)
        self.bench_text = QLabel(self.INTRO)
        self.bench_text.setWordWrap(True)
        self.bench_text.setTextFormat(Qt.TextFormat.RichText)
        self.bench_text.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.bench_text.setAlignment(Qt.AlignmentFlag.AlignTop | Qt.AlignmentFlag.AlignLeft)
        self.bench_text.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Minimum)
        lay.addWidget(scrolled(self.bench_text), 1)

    def show_result(self, result: Any) -> None:
        self.bench_text.setText(words.gemm_html(result) if result.kind == "gemm" else words.quant_html(result))
