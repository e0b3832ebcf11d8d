"""The Training page: micro-training, thread sweep, GEMM and int8 benchmarks, measured here.

Widgets only: every job runs in a child process through :class:`JobRunner`
(torch is never imported in the GUI), and what a job's lines and outcome mean
is decided by :class:`cpudoctor.gui.training_session.LabSession` and worded by
:mod:`cpudoctor.render.lab`, the same reading the CLI uses. Live plots follow
the running job with the job's own metric definitions (their titles say
which), a table keeps every run to compare (partial results of a cancelled or
crashed run stay), and "Use these settings" hands a conclusive sweep's (or a
quiet run's) setting to the advisor as a ThreadRecommendation. The jobs run in
the Python environment chosen in the toolbar (the model's ``environments``);
a line at the top says which interpreter that is.
"""

from __future__ import annotations

import html
from typing import Any, Callable

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QCoreApplication, Qt
from PySide6.QtGui import QPalette
from PySide6.QtWidgets import (QAbstractItemView, QCheckBox, QComboBox, QFileDialog, QFormLayout,
                               QFrame, QGroupBox, QHBoxLayout, QHeaderView, QLabel, QLineEdit, QPushButton,
                               QScrollArea, QSpinBox, QSplitter, QTableWidget, QTableWidgetItem, QTabWidget,
                               QVBoxLayout, QWidget)

from cpudoctor.gui.environments import job_python
from cpudoctor.gui.job_runner import JobRunner
from cpudoctor.gui.roofline_view import RooflineView
from cpudoctor.gui.model import AppModel
from cpudoctor.gui.training_session import LabSession
from cpudoctor.lab.results import LabResult
from cpudoctor.gui.torch_banner import TorchMissingBanner
from cpudoctor.lab.runner import JobOutcome, job_command
from cpudoctor.lab.settings import MODELS, SWEEP_TRAIN_KEYS, SettingsError, SweepSettings, TrainSettings
from cpudoctor.lab.verdicts import busy_caveat
from cpudoctor.render import lab as words
from cpudoctor.render.env_choice import jobs_text

LINE_COLOURS = ("#4a90c2", "#e0a030", "#3fa36b", "#b05cc6", "#d9534f")
TABLE_COLUMNS = words.RUN_COLUMNS
CAVEAT_COLOUR = "#c98a1a"      # the page's calm amber (status warnings use it too)
# Columns that take the room left and elide, so Status and Note never scroll out of a narrow window.
STRETCH_COLUMNS = ("Settings", "Result", "Note")


class TrainingPage(QWidget):
    title = "Training"
    icon_name = "training"

    def __init__(self, model: AppModel, parent: QWidget | None = None):
        super().__init__(parent)
        self.model = model
        self.environments = model.environments
        # The argv for a job (in the chosen environment); tests swap in a tiny fake child speaking the protocol.
        self.job_argv: Callable[[str, dict[str, Any]], list[str]] = self.job_command
        self.session = LabSession()
        self.runner = JobRunner(self, python=self.job_python)
        self.runner.progress.connect(self._on_progress)
        self.runner.log.connect(self._on_log)
        self.runner.finished.connect(self._on_finished)
        self._build()
        self._job_tips = {b: b.toolTip() for b in self._job_buttons}
        self.torch_banner.checked.connect(lambda _setup: self._sync_job_buttons())
        model.report_changed.connect(self._on_report)
        model.benchmarks_changed.connect(self.roofline_tab.show_runs)
        self._on_report(model.report)
        self.environments.chosen.connect(lambda _env, _how: self._on_environment())
        app = QCoreApplication.instance()
        if app is not None:
            app.aboutToQuit.connect(self.shutdown)      # never leave a training child behind

    @property
    def job_python(self) -> str | None:
        """The interpreter the jobs run in: the chosen environment's (None: CPU Doctor's own)."""
        return job_python(self.environments.current)

    def job_command(self, job: str, args: dict[str, Any]) -> list[str]:
        """The argv of lab job ``job`` in the chosen environment."""
        return job_command(job, args, self.job_python)

    def _on_environment(self) -> None:
        self.runner.python = self.job_python
        c = self.environments
        if c.decided:
            self.env_line.setText(jobs_text(c.current, read_only=bool(self.model.read_only)))
            self.env_line.setToolTip(c.current.python if c.current is not None else "")
        else:
            self.env_line.setText("Jobs run in the Python environment chosen in the toolbar (being looked up…)")

    @property
    def runs(self) -> list[LabResult]:
        return self.session.results

    @property
    def best(self):
        return self.session.best

    def showEvent(self, event) -> None:  # noqa: N802 - Qt's name
        super().showEvent(event)
        self.torch_banner.look_once()                    # environments are looked up off the UI thread, once

    # ------------------------------------------------------------------ layout

    def _build(self) -> None:
        root = QHBoxLayout(self)
        split = QSplitter(Qt.Orientation.Horizontal)
        root.addWidget(split)
        # the form scrolls in a short window instead of squashing the bf16 hint and the buttons
        form_scroll = QScrollArea()
        form_scroll.setWidgetResizable(True)
        form_scroll.setFrameShape(QFrame.Shape.NoFrame)
        form_scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        form = self._build_form()
        form_scroll.setWidget(form)
        # as wide as the form needs (a scroll area alone would let the splitter cut the form off)
        form_scroll.setMinimumWidth(form.minimumSizeHint().width() + form_scroll.verticalScrollBar().sizeHint().width())
        split.addWidget(form_scroll)
        right = QWidget()
        rv = QVBoxLayout(right)
        rv.setContentsMargins(0, 0, 0, 0)
        self.env_line = QLabel("")                       # which interpreter the jobs run in
        self.env_line.setWordWrap(True)
        self.env_line.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.env_line.setStyleSheet("color: palette(placeholder-text);")
        rv.addWidget(self.env_line)
        # shown only when the chosen environment has no PyTorch
        self.torch_banner = TorchMissingBanner(self.model.environments, self)
        rv.addWidget(self.torch_banner)
        self.status = QLabel("Ready. Jobs run in a separate process; the window stays responsive.")
        self.status.setWordWrap(True)
        self.status.setTextFormat(Qt.TextFormat.RichText)
        self.status.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        rv.addWidget(self.status)
        self.tabs = QTabWidget()
        self.tabs.addTab(self._build_live_plots(), "Live")
        self.tabs.addTab(self._build_sweep_tab(), "Thread sweep")
        self.tabs.addTab(self._build_bench_tab(), "GEMM && int8")
        self.roofline_tab = RooflineView()
        self.roofline_tab.measure.clicked.connect(self.start_roofline)
        self.roofline_tab.save_requested.connect(self.save_roofline)
        self.tabs.addTab(self.roofline_tab, "Roofline")
        rv.addWidget(self.tabs, 3)
        runs = QLabel("<b>Runs</b> — compare settings; cancelled and crashed runs keep their partial figures")
        runs.setWordWrap(True)        # a narrow window wraps it instead of cutting it off
        rv.addWidget(runs)
        rv.addWidget(self._build_table(), 2)
        use_row = QHBoxLayout()
        self.best_label = QLabel("No measured setting yet.")
        self.best_label.setWordWrap(True)
        self.use_button = QPushButton("Use these settings")
        self.use_button.setToolTip("Hand the fastest measured setting to the advisor's snippets")
        self.use_button.setEnabled(False)
        self.use_button.clicked.connect(self.use_best)
        use_row.addWidget(self.best_label, 1)
        use_row.addWidget(self.use_button)
        rv.addLayout(use_row)
        split.addWidget(right)
        split.setStretchFactor(1, 1)
        split.setSizes([320, 680])           # the plots get the room; the form's combos elide

    def _build_table(self) -> QTableWidget:
        self.table = QTableWidget(0, len(TABLE_COLUMNS))
        self.table.setHorizontalHeaderLabels(TABLE_COLUMNS)
        self.table.verticalHeader().setVisible(False)
        self.table.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        self.table.setSelectionBehavior(QTableWidget.SelectionBehavior.SelectRows)
        self.table.setWordWrap(False)                 # one line per run, like the Inspector's tables
        self.table.setTextElideMode(Qt.TextElideMode.ElideRight)
        self.table.setHorizontalScrollMode(QAbstractItemView.ScrollMode.ScrollPerPixel)
        # Never wider than the view: the long columns share what is left and elide (the tooltip has the text).
        self.table.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        header = self.table.horizontalHeader()
        header.setMinimumSectionSize(40)
        for i, name in enumerate(TABLE_COLUMNS):
            mode = QHeaderView.ResizeMode.Stretch if name in STRETCH_COLUMNS else QHeaderView.ResizeMode.ResizeToContents
            header.setSectionResizeMode(i, mode)
            item = self.table.horizontalHeaderItem(i)
            if item is not None and name in ("Samples/s", "Accuracy"):
                key = "samples_per_s" if name == "Samples/s" else "accuracy"
                item.setToolTip(words.metric_definition(key))
        self.table.verticalHeader().setDefaultSectionSize(self.table.fontMetrics().height() + 8)
        return self.table

    def _build_form(self) -> QWidget:
        box = QGroupBox("Micro-training")
        form = QFormLayout(box)
        self._form = form
        self.model_box = QComboBox()
        for key, label in words.MODEL_LABELS.items():
            self.model_box.addItem(label, key)
            self.model_box.setItemData(self.model_box.count() - 1, MODELS[key], Qt.ItemDataRole.ToolTipRole)
        form.addRow("Model", self.model_box)
        self.data_box = QComboBox()
        self.data_box.addItem("Synthetic (learnable, no download)", "synthetic")
        self.data_box.addItem("MNIST from a folder", "mnist")
        self.data_box.currentIndexChanged.connect(self._data_changed)
        form.addRow("Data", self.data_box)
        self.mnist_edit = QLineEdit()
        self.mnist_edit.setPlaceholderText("folder with train-images-idx3-ubyte[.gz]")
        self.mnist_browse = QPushButton("Browse…")
        self.mnist_browse.clicked.connect(self._browse_mnist)
        row = QHBoxLayout()
        row.addWidget(self.mnist_edit, 1)
        row.addWidget(self.mnist_browse)
        self.mnist_row = QWidget()
        self.mnist_row.setLayout(row)
        row.setContentsMargins(0, 0, 0, 0)
        form.addRow("MNIST folder", self.mnist_row)
        self.threads_spin = self._spin(0, 1024, 0, "PyTorch default")
        self.threads_spin.setToolTip("torch.set_num_threads: intra-op threads")
        form.addRow("Threads", self.threads_spin)
        self.interop_spin = self._spin(0, 1024, 0, "PyTorch default")
        self.interop_spin.setToolTip("torch.set_num_interop_threads")
        form.addRow("Inter-op threads", self.interop_spin)
        self.batch_spin = self._spin(1, 8192, 64)
        form.addRow("Batch size", self.batch_spin)
        self.opt_box = QComboBox()
        self.opt_box.addItem("Adam", "adam")
        self.opt_box.addItem("SGD (momentum 0.9)", "sgd")
        form.addRow("Optimizer", self.opt_box)
        self.dtype_box = QComboBox()
        self.dtype_box.addItem("fp32", "fp32")
        self.dtype_box.addItem("bf16 autocast", "bf16")
        self.dtype_box.setToolTip("bf16 is fast only with AVX512_BF16 or AMX; a bf16 run also measures fp32 in "
                                  "the same job, so the ratio is measured, not assumed")
        form.addRow("Precision", self.dtype_box)
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
        self.length_spin = self._spin(1, 100_000, 20)
        lrow = QHBoxLayout()
        lrow.setContentsMargins(0, 0, 0, 0)
        lrow.addWidget(self.length_spin)
        lrow.addWidget(self.length_box)
        lw = QWidget()
        lw.setLayout(lrow)
        form.addRow("Run for", lw)
        self.pin_box = QComboBox()
        self.pin_box.addItem("No pinning", None)
        self.pin_box.setToolTip("Pin the training process to a CCX, NUMA node or core set (sched_setaffinity)")
        form.addRow("Pin to", self.pin_box)
        buttons = QHBoxLayout()
        self.train_button = QPushButton("Train")
        self.train_button.clicked.connect(self.start_training)
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setEnabled(False)
        self.cancel_button.clicked.connect(self.cancel)
        buttons.addWidget(self.train_button)
        buttons.addWidget(self.cancel_button)
        form.addRow(buttons)
        self._data_changed()
        for combo in box.findChildren(QComboBox):
            # long entries ("Synthetic (learnable, no download)") elide instead of widening the form
            combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
            combo.setMinimumContentsLength(10)
        return box

    @staticmethod
    def _spin(lo: int, hi: int, value: int, special: str = "") -> QSpinBox:
        spin = QSpinBox()
        spin.setRange(lo, hi)
        spin.setValue(value)
        if special:
            spin.setSpecialValueText(special)
        return spin


    def _plot(self, title: str, y_label: str, x_label: str = "step", tip: str = "") -> pg.PlotWidget:
        """A plot in the palette's colours (readable in light and dark mode), like the Monitor page."""
        pal = self.palette()
        fg, muted = pal.color(QPalette.ColorRole.Text), pal.color(QPalette.ColorRole.PlaceholderText)
        w = pg.PlotWidget()
        w.setBackground(pal.color(QPalette.ColorRole.Base))
        item = w.getPlotItem()
        item.setTitle(title, color=fg.name(), size="10pt")
        item.hideButtons()
        for name in ("left", "bottom"):
            axis = item.getAxis(name)
            axis.setTextPen(muted)
            axis.setPen(pg.mkPen(muted, width=1))
        item.getAxis("bottom").setTickDensity(0.35)      # step numbers must not run together in a narrow plot
        w.setLabel("bottom", x_label, color=muted.name())
        if y_label:
            w.setLabel("left", y_label, color=muted.name())
        w.showGrid(x=True, y=True, alpha=0.15)
        w.setDownsampling(mode="peak")
        w.setClipToView(True)
        w.setMenuEnabled(False)
        w.setMouseEnabled(x=False, y=False)
        if tip:
            w.setToolTip(tip)
        return w

    def _build_live_plots(self) -> QWidget:
        w = QWidget()
        lay = QHBoxLayout(w)
        # No rotated axis labels (the titles say what is plotted): three plots share a narrow column.
        # The titles name the metric's definition, the same the runs table uses.
        self.loss_plot = self._plot(words.metric_label("loss"), "", tip=words.metric_definition("loss"))
        self.acc_plot = self._plot(words.metric_label("accuracy"), "", tip=words.metric_definition("accuracy"))
        self.acc_plot.setYRange(0, 1)
        self.speed_plot = self._plot(words.metric_label("samples_per_s"), "",
                                     tip=words.metric_definition("samples_per_s"))
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
            lay.addWidget(p)
        self._set_live_ranges()
        return w

    def _build_sweep_tab(self) -> QWidget:
        w = QWidget()
        lay = QVBoxLayout(w)
        row = QHBoxLayout()
        self.sweep_button = QPushButton("Run thread sweep")
        self.sweep_button.setToolTip("Trains the chosen model at 1..N threads and in pinning variants, one warm "
                                     "process each, measured in turns until they can be told apart")
        self.sweep_button.clicked.connect(self.start_sweep)
        self.sweep_budget = self._spin(10, 3600, int(SweepSettings.budget_s))
        self.sweep_budget.setSuffix(" s budget")
        self.sweep_budget.setToolTip("The whole sweep ends within this time, start-up included")
        row.addWidget(self.sweep_button)
        row.addWidget(self.sweep_budget)
        row.addStretch(1)
        lay.addLayout(row)
        self.sweep_plot = self._plot("Samples/s against threads (median and spread)", "samples/s", "threads",
                                     tip="Each point: the median of a variant's segments; the bar: their spread")
        self.sweep_plot.addLegend(offset=(10, 10))
        self.sweep_unpinned = self.sweep_plot.plot(pen=pg.mkPen(LINE_COLOURS[0], width=1.5), symbol="o",
                                                   symbolBrush=LINE_COLOURS[0], name="threads, not pinned")
        self.sweep_pinned = self.sweep_plot.plot(pen=None, symbol="s", symbolBrush=LINE_COLOURS[1],
                                                 name="pinned variants")
        self.sweep_default = self.sweep_plot.plot(pen=None, symbol="t", symbolBrush=LINE_COLOURS[4],
                                                  name="PyTorch defaults")
        self.sweep_bars = pg.ErrorBarItem(x=np.zeros(0), y=np.zeros(0), top=np.zeros(0), bottom=np.zeros(0), beam=0.15,
                                          pen=pg.mkPen(LINE_COLOURS[0], width=1))
        self.sweep_plot.addItem(self.sweep_bars)
        lay.addWidget(self.sweep_plot)
        # What the sweep says about its figures (its verdict, a busy machine, failed variants): under the plot.
        self.sweep_notes = QLabel("")
        self.sweep_notes.setWordWrap(True)
        self.sweep_notes.setTextFormat(Qt.TextFormat.RichText)
        self.sweep_notes.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.sweep_notes.setVisible(False)
        lay.addWidget(self.sweep_notes)
        return w

    def _build_bench_tab(self) -> QWidget:
        w = QWidget()
        lay = QVBoxLayout(w)
        row = QHBoxLayout()
        self.gemm_button = QPushButton("Run GEMM")
        self.gemm_button.setToolTip("torch and numpy matmul GFLOP/s against this CPU's theoretical peak")
        self.gemm_button.clicked.connect(self.start_gemm)
        self.gemm_size = self._spin(0, 16384, 0, "n = auto")
        self.gemm_size.setPrefix("n = ")
        self.gemm_size.setToolTip("auto: one multiply takes about a quarter of a second (at most 4096); a path "
                                  "this CPU emulates is measured at 512")
        self.quant_button = QPushButton("Run int8 vs fp32")
        self.quant_button.setToolTip("Dynamic int8 quantisation of an MLP against fp32, in the same job: latency "
                                     "at batch 1 and 64")
        self.quant_button.clicked.connect(self.start_quant)
        for x in (self.gemm_button, self.gemm_size, self.quant_button):
            row.addWidget(x)
        row.addStretch(1)
        lay.addLayout(row)
        self.bench_text = QLabel("GEMM shows how close matmul gets to the theoretical peak "
                                 "(cores × clock × FLOP/cycle); int8 shows what VNNI buys.")
        self.bench_text.setWordWrap(True)
        self.bench_text.setTextFormat(Qt.TextFormat.RichText)
        self.bench_text.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.bench_text.setAlignment(Qt.AlignmentFlag.AlignTop | Qt.AlignmentFlag.AlignLeft)
        scroll = QScrollArea()
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QFrame.Shape.NoFrame)
        scroll.setWidget(self.bench_text)
        lay.addWidget(scroll, 1)
        return w

    # ------------------------------------------------------------------ model

    def _on_report(self, report) -> None:
        """Pinning choices come from the topology of the machine being shown."""
        self.pin_box.clear()
        self.pin_box.addItem("No pinning", None)
        if report is not None and report.topology is not None:
            from cpudoctor.lab.variants import pinning_choices

            try:
                allowed = report.topology.affinity.allowed_cpus or report.topology.online_cpus or None
                for label, cpus in pinning_choices(report.topology, allowed):
                    self.pin_box.addItem(label, cpus)
            except Exception as exc:  # noqa: BLE001 - a strange topology must not break the page
                self._set_status(f"Pinning choices unavailable: {exc}", "info")
        if not self.session.sweep.latest:
            self._redraw_sweep()
        self.roofline_tab.show_runs(report.benchmarks if report is not None else [])
        hint = self._bf16_hint(report)
        self.bf16_hint.setText(hint)
        self._form.setRowVisible(self.bf16_hint, bool(hint))    # no empty gap under Precision
        read_only = bool(self.model.read_only)
        self._sync_job_buttons()
        if read_only:
            self._set_status("This is a saved report: the lab measures this machine, so its jobs are off while "
                             "a saved report is shown.", "info")
        self._on_environment()                           # "on this machine" while a saved report is shown

    @staticmethod
    def _bf16_hint(report) -> str:
        """Whether bf16 can pay off on the CPU shown: native bf16 math (AVX512_BF16 or AMX) or not."""
        from cpudoctor.lab.native import native_support

        if report is None or not report.cpu.flags:
            return ""
        native = native_support(report.cpu)
        if native.bf16:
            return (f"This CPU has {' and '.join(native.bf16_via)}: bf16 can pay off for conv-heavy models; a bf16 "
                    "run measures fp32 beside it.")
        return ("This CPU has no native bf16 math (no AVX512_BF16/AMX): bf16 autocast is emulated and usually "
                "slower than fp32; a bf16 run measures both.")

    def _data_changed(self) -> None:
        self.mnist_row.setEnabled(self.data_box.currentData() == "mnist")

    def _browse_mnist(self) -> None:
        folder = QFileDialog.getExistingDirectory(self, "Folder with the MNIST IDX files", self.mnist_edit.text())
        if folder:
            self.mnist_edit.setText(folder)

    # ------------------------------------------------------------------ settings

    def train_settings(self) -> TrainSettings:
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

    # ------------------------------------------------------------------ jobs

    def start_training(self) -> None:
        try:
            settings = self.train_settings().to_dict()
        except SettingsError as exc:
            self._set_status(f"Check the settings: {html.escape(str(exc))}", "warning")
            return
        self._start("train", settings)

    def start_sweep(self) -> None:
        try:
            s = self.train_settings()
            sweep = SweepSettings(train={k: getattr(s, k) for k in SWEEP_TRAIN_KEYS},
                                  budget_s=float(self.sweep_budget.value())).validate()
        except SettingsError as exc:
            self._set_status(f"Check the settings: {html.escape(str(exc))}", "warning")
            return
        self.tabs.setCurrentIndex(1)
        self._start("sweep", sweep.to_dict())

    def start_gemm(self) -> None:
        self.tabs.setCurrentIndex(2)
        self._start("gemm", {"size": self.gemm_size.value() or None})

    def start_quant(self) -> None:
        self.tabs.setCurrentIndex(2)
        self._start("quant", {})

    def start_roofline(self) -> None:
        self.tabs.setCurrentWidget(self.roofline_tab)
        self._start("roofline", {})

    def save_roofline(self, path: str | None = None) -> None:
        """The picture shown, as SVG or PNG (by the file's extension); quick: the picture is drawn from data."""
        from cpudoctor.render.svg_roofline import render_svg

        picture = self.roofline_tab.picture
        path = path or self.roofline_tab.ask_save_path()
        if not path or picture is None:
            return
        from cpudoctor.render.pdf import write_picture

        if not path.lower().endswith((".svg", ".png")):
            path += ".svg"
        try:
            write_picture(render_svg(picture), path)
        except (OSError, RuntimeError) as exc:
            self._set_status(f"The picture was not saved: {html.escape(str(exc))}", "warning")
            return
        self._set_status(f"Saved the roofline picture to {html.escape(path)}", "ok")

    @property
    def _job_buttons(self) -> tuple[QPushButton, ...]:
        return (self.train_button, self.sweep_button, self.gemm_button, self.quant_button, self.roofline_tab.measure)

    def _start(self, job: str, settings: dict[str, Any]) -> None:
        if self.runner.is_running():
            self._set_status("A job is already running; cancel it first.", "info")
            return
        args = self.session.begin(job, settings, self.model.report)
        if job == "train":
            self._reset_live()
        if job == "sweep":
            self._redraw_sweep()
            self._show_sweep_notes(None)
        self._set_running(True)
        self._set_status(f"Running the {job} job … (Cancel stops it within a second)", "info")
        self.runner.start_argv(self.job_argv(job, args), job=job)

    def cancel(self) -> None:
        if self.runner.is_running():
            self._set_status("Stopping …", "info")
            self.runner.cancel()

    def _set_running(self, running: bool) -> None:
        self._sync_job_buttons(running)
        self.cancel_button.setEnabled(running)

    def _sync_job_buttons(self, running: bool | None = None) -> None:
        """The job buttons are off while a job runs, while a saved report is shown, and while the chosen
        environment has no PyTorch (the banner above says what to do); the tooltip says which."""
        running = self.runner.is_running() if running is None else running
        why = ""
        if self.model.read_only:
            why = "A saved report is shown: the lab measures this machine. Choose Back to this machine first."
        elif self.torch_banner.missing:
            why = "The chosen Python environment has no PyTorch: install it (the command above) or choose another."
        for b in self._job_buttons:
            b.setEnabled(not running and not why)
            b.setToolTip(why or self._job_tips.get(b, ""))

    # ------------------------------------------------------------------ live data

    def _reset_live(self) -> None:
        for curve in self.curves.values():
            curve.setData([], [])
        self.speed_legend.clear()
        self.speed_legend.setVisible(False)
        self._set_live_ranges()

    def _set_live_ranges(self) -> None:
        """x from step 0 to the last step (at least 10): empty plots never show negative or fractional steps.

        Samples/s starts at 0, so a wobble of 1 sample/s never fills the plot like a collapse would.
        """
        live = self.session.live
        lo, hi = live.x_range()
        for plot in (self.loss_plot, self.acc_plot, self.speed_plot):
            plot.setXRange(lo, hi, padding=0.02)
        self.loss_plot.enableAutoRange(axis="y")
        top = live.top("samples_per_s", "reference_samples_per_s")
        if top:
            self.speed_plot.setYRange(0, top * 1.1, padding=0)
        else:
            self.speed_plot.enableAutoRange(axis="y")

    def _draw_live(self) -> None:
        live = self.session.live
        for key, curve in self.curves.items():
            curve.setData(live.steps, live.values[key], connect="finite")
        if live.has("reference_samples_per_s") and not self.speed_legend.isVisible():
            dtype = self.session.settings.get("dtype", "bf16")
            self.speed_legend.addItem(self.curves["samples_per_s"], dtype)
            self.speed_legend.addItem(self.curves["reference_samples_per_s"], "fp32, same job")
            self.speed_legend.setVisible(True)
        self._set_live_ranges()

    def _on_progress(self, data: dict) -> None:
        job = self.session.job
        changed = self.session.progress(data)
        if changed == "train":
            self._draw_live()
            self._set_status(f"Training: step {data.get('step')}, loss {_fmt(data.get('loss'), '.3f')}, accuracy "
                             f"{_fmt(data.get('accuracy'), '.0%')}, {_fmt(data.get('samples_per_s'))} samples/s",
                             "info")
        elif changed == "sweep":
            self._redraw_sweep()
            self._set_status(f"Sweep round {data.get('round')}: {html.escape(str(data.get('variant')))} "
                             f"{_fmt(data.get('segment_samples_per_s'))} samples/s", "info")
        elif job == "sweep" and data.get("phase") == "plan":
            self._set_status(f"Sweep: warming up {len(data.get('variants') or [])} training workers …", "info")
        elif job == "gemm":
            if data.get("phase") == "partial":
                done = ", ".join(f"{b} {g:,.0f}" for b, g in (data.get("gflops_so_far") or {}).items())
                self._set_status(f"GEMM at {data.get('threads')} threads: {done} GFLOP/s so far", "info")
            else:
                self._set_status(f"GEMM {data.get('step')}/{data.get('total')}: {data.get('backend')} at "
                                 f"{data.get('threads')} threads, {_fmt(data.get('gflops'), ',.1f')} GFLOP/s", "info")
                self._show_gemm(self.session.preview(self.runner.outcome, self.model.report))
        elif job == "quant":
            self._set_status(f"int8 vs fp32: batch {data.get('batch')} done", "info")
        elif job == "roofline":
            self._set_status(html.escape(words.roofline_progress(data)), "info")

    def _redraw_sweep(self) -> None:
        series = self.session.sweep
        unpinned, pinned, default = series.group("threads"), series.group("pinning"), series.group("default")
        for curve, pts in ((self.sweep_unpinned, unpinned), (self.sweep_pinned, pinned), (self.sweep_default, default)):
            curve.setData([x for x, *_ in pts], [y for _, y, *_ in pts])
        every = unpinned + pinned + default
        self.sweep_bars.setData(x=np.array([x for x, *_ in every], float), y=np.array([y for _, y, *_ in every], float),
                                top=np.array([hi - y for _, y, _, hi in every], float),
                                bottom=np.array([y - lo for _, y, lo, _ in every], float))
        axis = self.sweep_plot.getPlotItem().getAxis("bottom")
        counts = series.thread_counts()
        if counts:
            self.sweep_plot.setXRange(min(counts) - 0.5, max(counts) + 0.5, padding=0)
            # Thread counts are whole numbers: tick exactly the measured ones (never "1.2 threads").
            axis.setTicks([[(float(n), str(n)) for n in counts]] if len(counts) <= 16 else None)
            self.sweep_plot.enableAutoRange(axis="y")
        else:
            axis.setTicks(None)
            self._sweep_empty_range()

    def _sweep_empty_range(self) -> None:
        """No points yet: the axis spans 1..CPUs of the machine shown, never '0.2 threads'."""
        report = self.model.report
        topo = report.topology if report is not None else None
        cpus = (topo.affinity.allowed_cpus or topo.online_cpus) if topo is not None else []
        self.sweep_plot.setXRange(1, max(2, len(cpus)), padding=0.05)

    def _on_log(self, text: str) -> None:
        if text.strip():
            self.status.setToolTip(text[-500:])

    # ------------------------------------------------------------------ finished

    def _on_finished(self, outcome: JobOutcome) -> None:
        job = self.session.job or self.runner.job
        self._set_running(False)
        result = self.session.finish(outcome, self.model.report, job)
        self.model.add_benchmark(result.bench_run())
        self._add_row(result)
        if job == "train":
            self._draw_live()           # the last progress line carries the result's figures
        if job == "gemm" and result.points:
            self._show_gemm(result)
        if job == "quant" and result.points:
            self._show_quant(result)
        if job == "sweep":
            self._redraw_sweep()
            self._show_sweep_notes(result)
        changed = self.session.consider(result)
        if changed:
            self._show_best()
        self._set_status(*self._finished_words(job, result, outcome))

    def _finished_words(self, job: str, result: LabResult, outcome: JobOutcome) -> tuple[str, str]:
        if result.status == "ok" and job == "sweep" and not result.conclusive:
            return (f"The sweep finished without a recommendation ({html.escape(result.reason)}); the advisor keeps "
                    "its own thread advice.", "info")
        if result.status == "ok" and result.quiet is False:
            return (f"The {job} job finished, {html.escape(busy_caveat(result.interference.share))}.", "info")
        if result.status == "ok":
            return f"The {job} job finished.", "ok"
        if result.status == "cancelled":
            return f"The {job} job was cancelled; what it measured so far is kept below.", "info"
        kept = " Partial results are kept below." if outcome.progress else ""
        return (f"The {job} job stopped: {html.escape(outcome.message)}.{kept} The app is fine; change the settings "
                "and try again.", "warning")

    def _add_row(self, result: LabResult) -> None:
        r = self.table.rowCount()
        self.table.insertRow(r)
        for c, (text, tip) in enumerate(words.run_row(result)):
            item = QTableWidgetItem(text)
            if tip or text:
                item.setToolTip(tip or text)         # the full text behind a short or elided cell
            self.table.setItem(r, c, item)

    def _show_best(self) -> None:
        rec = self.session.best
        if rec is None:
            return
        self.best_label.setText(html.escape(words.best_text(rec)))
        self.use_button.setEnabled(True)
        self.use_button.setToolTip("Hand the fastest measured setting to the advisor's snippets")

    def use_best(self) -> None:
        rec = self.session.best
        if rec is None:
            return
        self.model.set_recommendation(rec)
        text = words.adopted_text(rec)
        self.model.status_message.emit(text)
        self._set_status(html.escape(text), "ok")

    def _show_sweep_notes(self, result) -> None:
        """The sweep's verdict, how quiet the machine was and failed variants, under its plot."""
        self.sweep_notes.setText(words.sweep_notes_html(result, CAVEAT_COLOUR) if result is not None else "")
        self.sweep_notes.setVisible(result is not None)

    def _show_gemm(self, result) -> None:
        self.bench_text.setText(words.gemm_html(result))

    def _show_quant(self, result) -> None:
        self.bench_text.setText(words.quant_html(result))

    # ------------------------------------------------------------------ status

    def _set_status(self, text: str, severity: str = "info") -> None:
        colour = {"ok": "#3fa36b", "warning": "#c98a1a", "info": "palette(text)"}.get(severity, "palette(text)")
        self.status.setText(f"<span style='color:{colour}'>{text}</span>" if severity != "info" else text)

    def closeEvent(self, event) -> None:  # noqa: N802 - Qt API
        self.shutdown()
        super().closeEvent(event)

    def shutdown(self) -> None:
        """Stop a running job (the window calls this on quit; tests on teardown)."""
        if self.runner.is_running():
            self.runner.cancel()
            if not self.runner.wait_finished(2000):
                self.runner.kill()
                self.runner.wait_finished(3000)


def _fmt(value: Any, spec: str = ",.0f", unknown: str = "—") -> str:
    return unknown if value is None else format(value, spec)
