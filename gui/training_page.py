"""The Training page: micro-training, thread sweep, GEMM and int8 benchmarks, measured here.

Every job runs in a child process through :class:`JobRunner`; this page only
reads JSON lines, so torch is never imported in the GUI. Live plots follow the
running job, a table keeps every run to compare (partial results of a
cancelled or crashed run stay), and "Use these settings" hands the best
measured setting to the advisor as a ThreadRecommendation.
"""

from __future__ import annotations

import html
from typing import Any, Callable

import pyqtgraph as pg
from PySide6.QtCore import QCoreApplication, Qt
from PySide6.QtGui import QPalette
from PySide6.QtWidgets import (QCheckBox, QComboBox, QFileDialog, QFormLayout, QFrame, QGroupBox, QHBoxLayout,
                               QHeaderView, QLabel, QLineEdit, QPushButton, QScrollArea, QSpinBox, QSplitter,
                               QTableWidget, QTableWidgetItem, QTabWidget, QVBoxLayout, QWidget)

from cpudoctor.gui.job_runner import JobRunner
from cpudoctor.gui.model import AppModel
from cpudoctor.gui.torch_banner import TorchMissingBanner
from cpudoctor.lab.runner import JobOutcome, job_command
from cpudoctor.lab.settings import MODELS, SettingsError, TrainSettings
from cpudoctor.probes._fs import format_cpulist
from cpudoctor.report import BenchRun, ThreadRecommendation, utc_now_iso

LINE_COLOURS = ("#4a90c2", "#e0a030", "#3fa36b", "#b05cc6", "#d9534f")
TABLE_COLUMNS = ("Job", "Settings", "Samples/s", "Result", "Accuracy", "Status", "Note")
MODEL_LABELS = {"simplecnn": "SimpleCNN", "lenet5": "LeNet-5", "resnet18": "ResNet-18 (28x28)"}


CAVEAT_COLOUR = "#c98a1a"      # the page's calm amber (status warnings use it too)


def _fmt(value: Any, spec: str = ",.0f", unknown: str = "—") -> str:
    return unknown if value is None else format(value, spec)


def _sweep_busy(result: dict[str, Any] | None) -> bool:
    """Other programs used the CPUs during the sweep (lab/sweep.py's ``busy``; older results: any note)."""
    result = result or {}
    return bool(result.get("busy", bool(result.get("notes"))))


def _sweep_caveat(result: dict[str, Any], status: str) -> str:
    """Why a sweep's recommendation may not hold, in a few words; empty when it can be trusted."""
    parts = []
    if _sweep_busy(result):
        parts.append("Measured on a busy machine")
    if status != "ok":
        done, total = len(result.get("points") or []), result.get("variants")
        parts.append(f"from a partial sweep ({done} of {total} variants)" if total else "from a partial sweep")
    if not parts:
        return ""
    text = ", ".join(parts)
    return text[0].upper() + text[1:]


class TrainingPage(QWidget):
    title = "Training"
    icon_name = "training"

    def __init__(self, model: AppModel, parent: QWidget | None = None):
        super().__init__(parent)
        self.model = model
        # The argv for a job; tests swap in a tiny fake child speaking the protocol.
        self.job_argv: Callable[[str, dict[str, Any]], list[str]] = job_command
        self.runner = JobRunner(self)
        self.runner.progress.connect(self._on_progress)
        self.runner.log.connect(self._on_log)
        self.runner.finished.connect(self._on_finished)
        self.current_job: str | None = None
        self.current_settings: dict[str, Any] = {}
        self.started_at: str | None = None
        self.runs: list[BenchRun] = []
        self.best: ThreadRecommendation | None = None
        self.best_caveat = ""            # why the best setting may not hold (a busy or partial sweep)
        self._steps: list[float] = []
        self._series: dict[str, list[float]] = {"loss": [], "accuracy": [], "samples_per_s": []}
        self._build()
        model.report_changed.connect(self._on_report)
        self._on_report(model.report)
        app = QCoreApplication.instance()
        if app is not None:
            app.aboutToQuit.connect(self.shutdown)      # never leave a training child behind

    def showEvent(self, event) -> None:  # noqa: N802 - Qt's name
        super().showEvent(event)
        self.torch_banner.look_once()                    # environments are listed off the UI thread, once

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
        self.torch_banner = TorchMissingBanner(self)     # shown only when no Python environment has PyTorch
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
        rv.addWidget(self.tabs, 3)
        self.table = QTableWidget(0, len(TABLE_COLUMNS))
        self.table.setHorizontalHeaderLabels(TABLE_COLUMNS)
        self.table.verticalHeader().setVisible(False)
        self.table.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        self.table.setSelectionBehavior(QTableWidget.SelectionBehavior.SelectRows)
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        self.table.horizontalHeader().setStretchLastSection(True)
        self.table.setWordWrap(False)                 # one line per run, like the Inspector's tables
        self.table.verticalHeader().setDefaultSectionSize(self.table.fontMetrics().height() + 8)
        runs = QLabel("<b>Runs</b> — compare settings; cancelled and crashed runs keep their partial figures")
        runs.setWordWrap(True)        # a narrow window wraps it instead of cutting it off
        rv.addWidget(runs)
        rv.addWidget(self.table, 2)
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

    def _build_form(self) -> QWidget:
        box = QGroupBox("Micro-training")
        form = QFormLayout(box)
        self._form = form
        self.model_box = QComboBox()
        for key, label in MODEL_LABELS.items():
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
        self.dtype_box.setToolTip("bf16 is fast only with AVX512_BF16 or AMX; elsewhere it is often slower than fp32")
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

    def _plot(self, title: str, y_label: str, x_label: str = "step") -> pg.PlotWidget:
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
        return w

    def _build_live_plots(self) -> QWidget:
        w = QWidget()
        lay = QHBoxLayout(w)
        # no rotated axis labels (the titles say what is plotted): three plots share a narrow column
        self.loss_plot = self._plot("Loss", "")
        self.acc_plot = self._plot("Accuracy", "")
        self.acc_plot.setYRange(0, 1)
        self.speed_plot = self._plot("Samples/s", "")
        self.curves = {
            "loss": self.loss_plot.plot(pen=pg.mkPen(LINE_COLOURS[0], width=1.5)),
            "accuracy": self.acc_plot.plot(pen=pg.mkPen(LINE_COLOURS[2], width=1.5)),
            "samples_per_s": self.speed_plot.plot(pen=pg.mkPen(LINE_COLOURS[1], width=1.5)),
        }
        for p in (self.loss_plot, self.acc_plot, self.speed_plot):
            lay.addWidget(p)
        self._empty_ranges()
        return w

    def _build_sweep_tab(self) -> QWidget:
        w = QWidget()
        lay = QVBoxLayout(w)
        row = QHBoxLayout()
        self.sweep_button = QPushButton("Run thread sweep")
        self.sweep_button.setToolTip("Trains the chosen model at 1..N threads and in pinning variants; "
                                     "each run in a fresh process")
        self.sweep_button.clicked.connect(self.start_sweep)
        self.sweep_seconds = self._spin(1, 600, 8)
        self.sweep_seconds.setSuffix(" s per variant")
        row.addWidget(self.sweep_button)
        row.addWidget(self.sweep_seconds)
        row.addStretch(1)
        lay.addLayout(row)
        self.sweep_plot = self._plot("Samples/s against threads", "samples/s", "threads")
        self.sweep_plot.addLegend(offset=(10, 10))
        self.sweep_unpinned = self.sweep_plot.plot(pen=pg.mkPen(LINE_COLOURS[0], width=1.5), symbol="o",
                                                   symbolBrush=LINE_COLOURS[0], name="threads, not pinned")
        self.sweep_pinned = self.sweep_plot.plot(pen=None, symbol="s", symbolBrush=LINE_COLOURS[1],
                                                 name="pinned variants")
        self.sweep_default = self.sweep_plot.plot(pen=None, symbol="t", symbolBrush=LINE_COLOURS[4],
                                                  name="PyTorch defaults")
        lay.addWidget(self.sweep_plot)
        # What the sweep itself says about its figures (a busy machine, failed variants): calm, under the plot.
        self.sweep_notes = QLabel("")
        self.sweep_notes.setWordWrap(True)
        self.sweep_notes.setTextFormat(Qt.TextFormat.RichText)
        self.sweep_notes.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.sweep_notes.setVisible(False)
        lay.addWidget(self.sweep_notes)
        self.sweep_points: list[dict[str, Any]] = []
        return w

    def _build_bench_tab(self) -> QWidget:
        w = QWidget()
        lay = QVBoxLayout(w)
        row = QHBoxLayout()
        self.gemm_button = QPushButton("Run GEMM")
        self.gemm_button.setToolTip("torch and numpy matmul GFLOP/s against this CPU's theoretical peak")
        self.gemm_button.clicked.connect(self.start_gemm)
        self.gemm_size = self._spin(64, 16384, 4096)
        self.gemm_size.setPrefix("n = ")
        self.quant_button = QPushButton("Run int8 vs fp32")
        self.quant_button.setToolTip("Dynamic int8 quantisation of an MLP: latency at batch 1 and 64")
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
        lay.addWidget(self.bench_text, 1)
        return w

    # ------------------------------------------------------------------ model

    def _on_report(self, report) -> None:
        """Pinning choices come from the topology of the machine being shown."""
        self.pin_box.clear()
        self.pin_box.addItem("No pinning", None)
        if report is not None and report.topology is not None:
            from cpudoctor.lab.sweep import pinning_choices

            try:
                allowed = report.topology.affinity.allowed_cpus or report.topology.online_cpus or None
                for label, cpus in pinning_choices(report.topology, allowed):
                    self.pin_box.addItem(label, cpus)
            except Exception as exc:  # noqa: BLE001 - a strange topology must not break the page
                self._set_status(f"Pinning choices unavailable: {exc}", "info")
        if not getattr(self, "sweep_points", None):
            self._sweep_empty_range()
        hint = self._bf16_hint(report)
        self.bf16_hint.setText(hint)
        self._form.setRowVisible(self.bf16_hint, bool(hint))    # no empty gap under Precision
        read_only = bool(self.model.read_only)
        for b in (self.train_button, self.sweep_button, self.gemm_button, self.quant_button):
            b.setEnabled(not read_only and not self.runner.is_running())
        if read_only:
            self._set_status("This is a saved report: the lab measures this machine, so its jobs are off while "
                             "a saved report is shown.", "info")

    @staticmethod
    def _bf16_hint(report) -> str:
        """Whether bf16 can pay off on the CPU shown: native bf16 math (AVX512_BF16 or AMX) or not."""
        if report is None or not report.cpu.flags:
            return ""
        isa = report.cpu.isa
        native = [n for n, ok in (("AVX512_BF16", isa.avx512_bf16 or "avx512_bf16" in report.cpu.flags),
                                  ("AMX-BF16", "bf16" in isa.amx or "amx_bf16" in report.cpu.flags)) if ok]
        if native:
            return f"This CPU has {' and '.join(native)}: bf16 can pay off for conv-heavy models; measure it."
        return "This CPU has no native bf16 math (no AVX512_BF16/AMX): bf16 autocast is usually slower than fp32."

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
            self._set_status(f"Check the settings: {exc}", "warning")
            return
        self._reset_live()
        self._start("train", settings)

    def start_sweep(self) -> None:
        try:
            s = self.train_settings()
        except SettingsError as exc:
            self._set_status(f"Check the settings: {exc}", "warning")
            return
        keep = ("model", "data", "mnist_dir", "batch_size", "optimizer", "dtype", "channels_last", "compile")
        args: dict[str, Any] = {"seconds": float(self.sweep_seconds.value()), "train": {k: getattr(s, k) for k in keep}}
        if self.model.report is not None and self.model.report.topology.online_cpus:
            from cpudoctor.serde import to_data

            args["topology"] = to_data(self.model.report.topology)
        self.sweep_points = []
        self._redraw_sweep()
        self._show_sweep_notes(None)
        self.tabs.setCurrentIndex(1)
        self._start("sweep", args)

    def start_gemm(self) -> None:
        self.tabs.setCurrentIndex(2)
        self._start("gemm", {"size": self.gemm_size.value()})

    def start_quant(self) -> None:
        self.tabs.setCurrentIndex(2)
        self._start("quant", {})

    def _start(self, job: str, args: dict[str, Any]) -> None:
        if self.runner.is_running():
            self._set_status("A job is already running; cancel it first.", "info")
            return
        self.current_job = job
        # The topology handed to a sweep is already in the report: do not store it twice.
        self.current_settings = {k: v for k, v in args.items() if k != "topology"}
        self.started_at = utc_now_iso()
        self._set_running(True)
        self._set_status(f"Running the {job} job … (Cancel stops it within a second)", "info")
        self.runner.start_argv(self.job_argv(job, args), job=job)

    def cancel(self) -> None:
        if self.runner.is_running():
            self._set_status("Stopping …", "info")
            self.runner.cancel()

    def _set_running(self, running: bool) -> None:
        off = running or bool(self.model.read_only)
        for b in (self.train_button, self.sweep_button, self.gemm_button, self.quant_button):
            b.setEnabled(not off)
        self.cancel_button.setEnabled(running)

    # ------------------------------------------------------------------ live data

    def _reset_live(self) -> None:
        self._steps = []
        for k in self._series:
            self._series[k] = []
            self.curves[k].setData([], [])
        self._empty_ranges()

    def _empty_ranges(self) -> None:
        """Steps 0-100 while there is no data: pyqtgraph's 0-1 default crowds '0.20.40.60.8' into a narrow plot."""
        for plot in (self.loss_plot, self.acc_plot, self.speed_plot):
            plot.setXRange(0, 100, padding=0.04)       # a little room so the 0 and 100 labels show
            plot.getPlotItem().getAxis("bottom").setTicks([[(0, "0"), (50, "50"), (100, "100")]])

    def _on_progress(self, data: dict) -> None:
        job = self.current_job
        if job == "train":
            step = data.get("step")
            if step is None:
                return
            self._steps.append(float(step))
            for key in self._series:
                v = data.get(key)
                self._series[key].append(float("nan") if v is None else float(v))
            if len(self._steps) == 1:
                for plot in (self.loss_plot, self.acc_plot, self.speed_plot):
                    plot.enableAutoRange(axis="x")
                    plot.getPlotItem().getAxis("bottom").setTicks(None)     # automatic ticks for real steps
            for key, curve in self.curves.items():
                curve.setData(self._steps, self._series[key], connect="finite")
            sps = data.get("samples_per_s")
            self._set_status(f"Training: step {step}, loss {_fmt(data.get('loss'), '.3f')}, accuracy "
                             f"{_fmt(data.get('accuracy'), '.0%')}, {_fmt(sps)} samples/s", "info")
        elif job == "sweep":
            self.sweep_points.append(data)
            self._redraw_sweep()
            self._set_status(f"Sweep {data.get('step')}/{data.get('total')}: {html.escape(str(data.get('variant')))} "
                             f"{_fmt(data.get('samples_per_s'))} samples/s", "info")
        elif job == "gemm":
            self._set_status(f"GEMM {data.get('step')}/{data.get('total')}: {data.get('backend')} at "
                             f"{data.get('threads')} threads, {_fmt(data.get('gflops'), ',.1f')} GFLOP/s", "info")
            self._show_gemm(self._progress_points())
        elif job == "quant":
            self._set_status(f"int8 vs fp32: batch {data.get('batch')} done", "info")

    def _progress_points(self) -> list[dict[str, Any]]:
        return list(self.runner.outcome.progress)

    def _redraw_sweep(self) -> None:
        unpinned = sorted(((p.get("threads_used") or p.get("threads"), p.get("samples_per_s"))
                           for p in self.sweep_points if p.get("group") == "threads" and p.get("samples_per_s")),
                          key=lambda t: t[0])
        pinned = [(p.get("threads_used") or p.get("threads"), p.get("samples_per_s"))
                  for p in self.sweep_points if p.get("group") == "pinning" and p.get("samples_per_s")]
        default = [(p.get("threads_used") or 0, p.get("samples_per_s"))
                   for p in self.sweep_points if p.get("group") == "default" and p.get("samples_per_s")]
        for curve, pts in ((self.sweep_unpinned, unpinned), (self.sweep_pinned, pinned), (self.sweep_default, default)):
            curve.setData([float(x) for x, _ in pts], [float(y) for _, y in pts])
        axis = self.sweep_plot.getPlotItem().getAxis("bottom")
        counts = sorted({int(x) for x, _ in (*unpinned, *pinned, *default) if x})
        if unpinned or pinned or default:
            self.sweep_plot.enableAutoRange(axis="x")
            # Thread counts are whole numbers: tick exactly the measured ones (never "1.2 threads").
            axis.setTicks([[(float(n), str(n)) for n in counts]] if 0 < len(counts) <= 16 else None)
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
        job = self.current_job or self.runner.job
        self._set_running(False)
        run = self._bench_run(job, outcome)
        self.runs.append(run)
        self.model.add_benchmark(run)
        self._add_row(job, run, outcome)
        if job == "gemm" and (outcome.result or outcome.progress):
            self._show_gemm((outcome.result or {}).get("points") or outcome.progress, outcome.result)
        if job == "quant" and outcome.result:
            self._show_quant(outcome.result)
        if job == "sweep":
            self._show_sweep_notes(outcome.result)
        self._update_best(job, outcome)
        if outcome.status == "ok" and job == "sweep" and _sweep_busy(outcome.result):
            self._set_status("The sweep finished, but other programs used the CPUs while it ran: see the note "
                             "under the plot before using its recommendation.", "info")
        elif outcome.status == "ok":
            self._set_status(f"The {job} job finished.", "ok")
        elif outcome.status == "cancelled":
            self._set_status(f"The {job} job was cancelled; what it measured so far is kept below.", "info")
        else:
            detail = html.escape(outcome.message)
            kept = " Partial results are kept below." if outcome.progress else ""
            self._set_status(f"The {job} job stopped: {detail}.{kept} The app is fine; change the settings "
                             "and try again.", "warning")
        self.current_job = None

    def _bench_run(self, job: str, outcome: JobOutcome) -> BenchRun:
        r = outcome.result or {}
        last = outcome.progress[-1] if outcome.progress else {}
        metrics: dict[str, Any]
        if job == "train":
            metrics = {k: r.get(k, last.get(k.replace("final_", "").replace("train_", "")))
                       for k in ("samples_per_s", "final_loss", "train_accuracy")}
            metrics.update({k: r.get(k) for k in ("initial_loss", "eval_accuracy", "steps", "threads",
                                                  "interop_threads", "elapsed") if k in r})
            if not r:
                metrics.update(steps=last.get("step"), elapsed=last.get("elapsed"))
        elif job == "sweep":
            metrics = {"points": r.get("points", outcome.progress), "recommendation": r.get("recommendation")}
            for k in ("notes", "failures", "busy"):
                if r.get(k):
                    metrics[k] = r[k]
        else:
            metrics = {"points": r.get("points", outcome.progress)}
            for k in ("vnni", "vnni_note", "peak_notes", "machine"):
                if k in r:
                    metrics[k] = r[k]
        note = "" if outcome.status == "ok" else outcome.message
        if job == "sweep" and r.get("notes"):
            note = "; ".join([note] * bool(note) + [n.rstrip(".") for n in r["notes"]])
        return BenchRun(kind=job, settings=dict(self.current_settings), metrics=metrics, status=outcome.status,
                        started_at=self.started_at, note=note)

    def _describe(self, job: str, settings: dict[str, Any], result: dict[str, Any] | None) -> str:
        if job == "train":
            parts = [MODEL_LABELS.get(settings.get("model"), settings.get("model")), settings.get("dtype"),
                     f"batch {settings.get('batch_size')}"]
            threads = (result or {}).get("threads") or settings.get("threads")
            parts.append(f"{threads} threads" if threads else "default threads")
            if settings.get("cpus"):
                from cpudoctor.probes._fs import format_cpulist

                parts.append(f"CPUs {format_cpulist(settings['cpus'])}")
            if settings.get("channels_last"):
                parts.append("channels_last")
            if settings.get("compile"):
                parts.append("compiled")
            return ", ".join(str(p) for p in parts)
        if job == "sweep":
            model = settings.get("train", {}).get("model", "simplecnn")
            return f"{MODEL_LABELS.get(model, model)}, {settings.get('seconds'):g} s per variant"
        if job == "gemm":
            return f"n = {settings.get('size', 4096)}"
        return "MLP, batch 1 and 64"

    def _add_row(self, job: str, run: BenchRun, outcome: JobOutcome) -> None:
        m = run.metrics
        sps = m.get("samples_per_s")
        loss = m.get("final_loss")
        acc = m.get("eval_accuracy", m.get("train_accuracy"))
        if job == "sweep" and m.get("recommendation"):
            rec = m["recommendation"]
            sps = rec.get("samples_per_s")
            loss = f"best: {rec.get('variant')}"
        if job == "gemm":
            pts = [p for p in m.get("points") or [] if p.get("gflops")]
            best = max(pts, key=lambda p: p["gflops"], default=None)
            sps = None
            loss = f"{best['gflops']:,.1f} GFLOP/s ({best['backend']})" if best else None
        if job == "quant":
            pts = m.get("points") or []
            loss = "; ".join(f"b{p['batch']}: x{p['speedup']:.2f}" for p in pts if p.get("speedup")) or None
        note = run.note
        if job == "sweep" and m.get("busy"):
            note = "busy machine: rerun" + (f"; {outcome.message}" if run.status != "ok" else "")
        values = [
            job, self._describe(job, run.settings, outcome.result),
            _fmt(sps) if isinstance(sps, (int, float)) else "—",
            (f"loss {loss:.3f}" if isinstance(loss, float) else (loss or "—")),
            _fmt(acc, ".1%") if isinstance(acc, (int, float)) else "—",
            run.status, note,
        ]
        r = self.table.rowCount()
        self.table.insertRow(r)
        for c, v in enumerate(values):
            item = QTableWidgetItem(str(v))
            if c == TABLE_COLUMNS.index("Note") and v:
                item.setToolTip(run.note or str(v))      # the full text behind a short cell
            self.table.setItem(r, c, item)

    def _update_best(self, job: str, outcome: JobOutcome) -> None:
        """The fastest measured training setting (a sweep's recommendation wins when it exists)."""
        from cpudoctor.serde import from_data

        rec = None
        caveat = ""
        if job == "sweep" and outcome.result and outcome.result.get("recommendation"):
            rec = from_data(ThreadRecommendation, outcome.result["recommendation"])
            caveat = _sweep_caveat(outcome.result, outcome.status)
        elif job == "train" and outcome.status == "ok" and outcome.result and outcome.result.get("samples_per_s"):
            r = outcome.result
            s = self.current_settings
            if self.best is None or (self.best.model == s.get("model") and r["samples_per_s"] > (self.best.samples_per_s or 0)) \
                    or self.best.model != s.get("model"):
                label = "measured run" + (f", CPUs {s['cpus']}" if s.get("cpus") else "")
                rec = ThreadRecommendation(threads=int(r.get("threads") or 1), interop_threads=s.get("interop_threads"),
                                           cpus=s.get("cpus"), variant=label, samples_per_s=r["samples_per_s"],
                                           default_samples_per_s=None, model=s.get("model"))
        if rec is None:
            return
        self.best = rec
        self.best_caveat = caveat
        extra = ""
        if rec.default_samples_per_s:
            extra = f" — {rec.samples_per_s / rec.default_samples_per_s:.2f}× the PyTorch defaults"
        pin = f", pinned to CPUs {format_cpulist(rec.cpus)}" if rec.cpus else ""
        text = (f"Best: {html.escape(rec.variant)} — {rec.threads} threads{pin}, "
                f"{_fmt(rec.samples_per_s)} samples/s{extra}")
        if caveat:
            # Said before the button, not after the click: a busy machine can rank the variants wrongly.
            text = f"<span style='color:{CAVEAT_COLOUR}'>{html.escape(caveat)}.</span> {text}"
        self.best_label.setText(text)
        self.use_button.setEnabled(True)
        self.use_button.setToolTip("Hand the fastest measured setting to the advisor's snippets"
                                   + (f" ({caveat.lower()})" if caveat else ""))

    def use_best(self) -> None:
        if self.best is None:
            return
        self.model.set_recommendation(self.best)
        self.model.status_message.emit(f"Advisor snippets now use {self.best.threads} threads "
                                       f"({self.best.variant}).")
        text = f"The advisor now uses {self.best.threads} threads ({html.escape(self.best.variant)})."
        if self.best_caveat:
            self._set_status(f"{text} {html.escape(self.best_caveat)}: rerun the sweep on an idle machine to "
                             "confirm it.", "info")
        else:
            self._set_status(text, "ok")

    def _show_sweep_notes(self, result: dict[str, Any] | None) -> None:
        """The sweep's own notes (busy machine, failed variants) under its plot; hidden when it has none."""
        result = result or {}
        items = [html.escape(n.rstrip(".")) + "." for n in result.get("notes") or []]
        failures = result.get("failures") or []
        if failures:
            items.append(f"{len(failures)} variant{'s' if len(failures) != 1 else ''} failed: "
                         + "; ".join(html.escape(str(f)) for f in failures) + ".")
        if not items:
            self.sweep_notes.clear()
            self.sweep_notes.setVisible(False)
            return
        head = "Measured on a busy machine" if _sweep_busy(result) else "Notes"
        self.sweep_notes.setText(f"<b style='color:{CAVEAT_COLOUR}'>{head}</b>"
                                 + "".join(f"<br>{i}" for i in items))
        self.sweep_notes.setVisible(True)

    # ------------------------------------------------------------------ benchmark text

    def _show_gemm(self, points: list[dict[str, Any]], result: dict[str, Any] | None = None) -> None:
        rows = []
        for p in points:
            if not p.get("backend"):
                continue
            util = f"{p['utilisation']:.0%}" if p.get("utilisation") is not None else "—"
            peak = _fmt(p.get("peak_gflops"), ",.0f")
            rows.append(f"<tr><td>{p['backend']}</td><td align='right'>{p['threads']}</td>"
                        f"<td align='right'>{p['gflops']:,.1f}</td><td align='right'>{peak}</td>"
                        f"<td align='right'>{util}</td></tr>")
        notes = ""
        if result:
            m = result.get("machine") or {}
            notes = (f"<p>Micro-architecture: {html.escape(str(m.get('microarchitecture') or 'unknown'))}, "
                     f"{m.get('physical_cores')} physical cores. "
                     + " ".join(html.escape(n.rstrip(".")) + "." for n in result.get("peak_notes", [])) + "</p>")
        self.bench_text.setText("<b>GEMM</b><table cellspacing='6'><tr><th align='left'>backend</th><th>threads</th>"
                                "<th>GFLOP/s</th><th>peak</th><th>of peak</th></tr>" + "".join(rows) + "</table>" + notes)

    def _show_quant(self, r: dict[str, Any]) -> None:
        rows = "".join(f"<tr><td align='right'>{p['batch']}</td><td align='right'>{p['fp32_ms']:.3f}</td>"
                       f"<td align='right'>{p['int8_ms']:.3f}</td><td align='right'>{_fmt(p.get('speedup'), '.2f')}×</td></tr>"
                       for p in r.get("points", []))
        self.bench_text.setText("<b>Dynamic int8 vs fp32 (MLP)</b><table cellspacing='6'><tr><th>batch</th>"
                                "<th>fp32 ms</th><th>int8 ms</th><th>speed-up</th></tr>" + rows + "</table>"
                                f"<p>{html.escape(str(r.get('vnni_note', '')))}. Top-1 agreement with fp32: "
                                f"{_fmt(r.get('top1_agreement'), '.1%')}.</p>")

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
