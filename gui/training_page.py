"""The Training page: micro-training, thread sweep, GEMM and int8 benchmarks, measured here.

Widgets only: every job runs in a child process through :class:`JobRunner`
(torch is never imported in the GUI), and what a job's lines and outcome mean
is decided by :class:`cpudoctor.gui.training_session.LabSession` and worded by
:mod:`cpudoctor.render.lab` and :mod:`cpudoctor.render.training`, the same
reading the CLI uses. The parts (the form, the live plots, the sweep and
benchmark tabs, the runs table) live in :mod:`cpudoctor.gui.training_widgets`
and :mod:`cpudoctor.gui.training_runs`. Live plots follow the running job with
the job's own metric definitions, the runs table keeps every run to compare
(kept between sessions per machine and environment when the window gives a
:class:`~cpudoctor.gui.training_runs.RunStore`; a saved report shows its own
runs), and "Use these settings" hands a conclusive sweep's (or a quiet run's)
setting to the advisor as a ThreadRecommendation, or says why there is none.
The jobs run in the Python environment chosen in the toolbar; a line at the
top says which interpreter that is.
"""

from __future__ import annotations

import html
import os
import time
from typing import Any, Callable

from PySide6.QtCore import QCoreApplication, Qt, QTimer
from PySide6.QtWidgets import QHBoxLayout, QLabel, QPushButton, QSplitter, QTabWidget, QVBoxLayout, QWidget

from cpudoctor.gui.environments import job_python
from cpudoctor.gui.inference_tab import InferencePanel
from cpudoctor.gui.job_runner import JobRunner
from cpudoctor.gui.model import AppModel
from cpudoctor.gui.roofline_view import RooflineView
from cpudoctor.gui.tab_titles import FittedTabTitles
from cpudoctor.gui.torch_banner import TorchMissingBanner
from cpudoctor.gui.training_runs import RunsPanel, RunStore, store_key
from cpudoctor.gui.training_session import LabSession
from cpudoctor.gui.training_widgets import BenchPanel, LivePlots, SweepPanel, TrainingForm, scrolled
from cpudoctor.lab import deadlines
from cpudoctor.lab.results import LabResult
from cpudoctor.lab.runner import JobOutcome, job_command
from cpudoctor.lab.settings import SWEEP_TRAIN_KEYS, SettingsError, SweepSettings, TrainSettings
from cpudoctor.model import BenchRun
from cpudoctor.render import lab as lab_words
from cpudoctor.render import training as words
from cpudoctor.render.env_choice import jobs_text
from cpudoctor.render.words import reason_of

CAVEAT_COLOUR = "#c98a1a"      # the page's calm amber (status warnings use it too)
LIVE_TAB, SWEEP_TAB, BENCH_TAB, ROOFLINE_TAB, INFER_TAB = range(5)
RUNS_TAB = "R&uns"
# A page lower than this shows the runs in a tab beside the plots (under them, the plots were 11 px high at 760x520).
RUNS_IN_TAB_BELOW_PX = 600
# long title -> the short one a narrow tab bar shows (its tooltip has the long one)
TAB_TITLES = {"&Live": "&Live", "Thread &sweep": "&Sweep", "&GEMM && int8": "&GEMM", "&Roofline": "&Roof",
              "&Inference": "&Infer", RUNS_TAB: RUNS_TAB}
# A page narrower than this has thin side margins: at 760x520 six short tab titles need 333 px, 7 more than the
# default margins leave the tab bar.
THIN_SIDES_BELOW_PX = 800
THIN_SIDE_PX = 2


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
        self.store: RunStore | None = None           # where runs are kept between sessions (the window sets it)
        self._kept: dict[str, list[BenchRun]] = {}   # this machine's runs per environment, newest last
        self._earlier: dict[str, int] = {}           # how many of them are from earlier sessions
        self._started_from: QWidget | None = None    # the control that started the running job (focus returns)
        self._clock = QTimer(self)           # the status line's seconds while a training run starts and runs
        self._clock.setObjectName("job clock")
        self._clock.setInterval(500)
        self._clock.timeout.connect(self._tick)
        self._job_t0 = 0.0
        self._last_progress: dict | None = None
        self.runner = JobRunner(self, python=self.job_python)
        self.runner.progress.connect(self._on_progress)
        self.runner.log.connect(self._on_log)
        self.runner.finished.connect(self._on_finished)
        self._build()
        self._job_tips = {b: b.toolTip() for b in self.job_buttons}
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
        self._root, self._margins = root, root.contentsMargins()
        split = QSplitter(Qt.Orientation.Horizontal)
        split.setChildrenCollapsible(False)
        root.addWidget(split)
        split.addWidget(self._build_left())
        split.addWidget(self._build_right())
        split.setStretchFactor(1, 1)
        split.setSizes([300, 700])           # the plots get the room; the form's combos elide
        self.job_buttons = (self.train_button, self.sweep_button, self.gemm_button, self.quant_button,
                            self.roofline_tab.measure, self.infer.run_button)

    def _build_left(self) -> QWidget:
        """The form (scrolls in a short window), with Train and Cancel under it, always in view."""
        left = QWidget()
        lv = QVBoxLayout(left)
        lv.setContentsMargins(0, 0, 0, 0)
        self.form = TrainingForm()
        form_scroll = scrolled(self.form)
        # as wide as the form needs (a scroll area alone would let the splitter cut the form off)
        form_scroll.setMinimumWidth(self.form.minimumSizeHint().width()
                                    + form_scroll.verticalScrollBar().sizeHint().width())
        lv.addWidget(form_scroll, 1)
        buttons = QHBoxLayout()
        self.train_button = QPushButton("Train")
        self.train_button.setToolTip("Train the model with these settings and plot it live")
        self.train_button.clicked.connect(self.start_training)
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setEnabled(False)
        self.cancel_button.clicked.connect(self.cancel)
        buttons.addWidget(self.train_button)
        buttons.addWidget(self.cancel_button)
        lv.addLayout(buttons)
        return left

    def _build_right(self) -> QWidget:
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
        self.status = QLabel(words.READY)
        self.status.setWordWrap(True)
        self.status.setTextFormat(Qt.TextFormat.RichText)
        self.status.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        # two lines' height whatever it says: a status going from one line to two must not move the tabs under
        # the pointer (they jumped 14 px as a run's status wrapped)
        fm = self.status.fontMetrics()
        self.status.setMinimumHeight(fm.height() + fm.lineSpacing() + 2)
        self.status.setAlignment(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignTop)
        rv.addWidget(self.status)
        self.live = LivePlots()
        self.sweep = SweepPanel()
        self.sweep.sweep_button.clicked.connect(self.start_sweep)
        self.bench = BenchPanel()
        self.bench.gemm_button.clicked.connect(self.start_gemm)
        self.bench.quant_button.clicked.connect(self.start_quant)
        self.sweep_button, self.gemm_button, self.quant_button = (self.sweep.sweep_button, self.bench.gemm_button,
                                                                  self.bench.quant_button)
        self.tabs = QTabWidget()
        self.tabs.addTab(self.live, "&Live")
        self.tabs.addTab(self.sweep, "Thread &sweep")
        self.tabs.addTab(self.bench, "&GEMM && int8")
        self.roofline_tab = RooflineView()               # its own module: the picture, its key, its saving
        self.roofline_tab.measure.clicked.connect(self.start_roofline)
        self.roofline_tab.save_requested.connect(self.save_roofline)
        self.tabs.addTab(self.roofline_tab, "&Roofline")
        self.infer = InferencePanel()                     # its own module: the form, the box plots, the verdict
        self.infer.run_button.clicked.connect(self.start_infer)
        self.tabs.addTab(self.infer, "&Inference")
        rv.addWidget(self.tabs, 3)
        self.runs_panel = RunsPanel()
        self.runs_panel.clear_button.clicked.connect(self.clear_runs)
        self.table = self.runs_panel.table
        self._right = rv
        self.tab_titles = FittedTabTitles(self.tabs, TAB_TITLES)
        self._runs_in_tab: bool | None = None
        self._place_runs(False)
        use_row = QHBoxLayout()
        self.best_label = QLabel(words.NO_RUNS)
        self.best_label.setWordWrap(True)
        self.use_button = QPushButton("Use these settings")
        self.use_button.setToolTip("Hand the fastest measured setting to the advisor's snippets")
        self.use_button.setEnabled(False)
        self.use_button.clicked.connect(self.use_best)
        use_row.addWidget(self.best_label, 1)
        use_row.addWidget(self.use_button, 0, Qt.AlignmentFlag.AlignTop)
        rv.addLayout(use_row)
        self.live.set_ranges(self.session.live)
        return right

    def _place_runs(self, in_tab: bool) -> None:
        """The runs table under the tabs, or (a short window) in a tab of its own, so the plots keep the height
        their curves need."""
        if in_tab == self._runs_in_tab:
            return
        self._runs_in_tab = in_tab
        if in_tab:
            self._right.removeWidget(self.runs_panel)
            self.tabs.addTab(self.runs_panel, RUNS_TAB)
        else:
            index = self.tabs.indexOf(self.runs_panel)
            if index >= 0:
                self.tabs.removeTab(index)
            self._right.insertWidget(self._right.indexOf(self.tabs) + 1, self.runs_panel, 2)
            self.runs_panel.show()
        self.runs_panel.heading.setVisible(not in_tab)       # the tab's title says it
        self.tab_titles.fit()                                # one tab more or less: long titles or short

    def resizeEvent(self, event) -> None:  # noqa: N802 - Qt API
        super().resizeEvent(event)
        self._place_runs(event.size().height() < RUNS_IN_TAB_BELOW_PX)
        m, side = self._margins, THIN_SIDE_PX if event.size().width() < THIN_SIDES_BELOW_PX else None
        self._root.setContentsMargins(side or m.left(), m.top(), side or m.right(), m.bottom())

    # ------------------------------------------------------------------ model

    def _on_environment(self) -> None:
        self.runner.python = self.job_python
        c = self.environments
        if c.decided:
            self.env_line.setText(jobs_text(c.current, read_only=bool(self.model.read_only)))
            self.env_line.setToolTip(f"Interpreter: {c.current.python}" if c.current is not None else "")
        else:
            self.env_line.setText("Jobs run in the Python environment chosen in the toolbar (being looked up…)")
        self._show_runs()

    def _on_report(self, report) -> None:
        """Pinning choices come from the topology of the machine being shown; so do the runs."""
        choices = []
        if report is not None and report.topology is not None:
            from cpudoctor.lab.variants import pinning_choices

            try:
                allowed = report.topology.affinity.allowed_cpus or report.topology.online_cpus or None
                choices = list(pinning_choices(report.topology, allowed))
            except Exception as exc:  # noqa: BLE001 - a strange topology must not break the page
                self._set_status(f"Pinning choices unavailable: {html.escape(reason_of(exc))}", "info")
        self.form.set_pinning(choices)
        if not self.session.sweep.latest:
            self._redraw_sweep()
        self.roofline_tab.show_runs(report.benchmarks if report is not None else [])
        self.form.set_hint(words.bf16_hint(report.cpu if report is not None else None))
        self._sync_job_buttons()
        if self.model.read_only:
            self._set_status(html.escape(words.SAVED_REPORT), "info")
        elif self.status.text() == html.escape(words.SAVED_REPORT):
            self._set_status(html.escape(words.READY), "info")      # back to this machine: the lab is on again
        self._on_environment()                           # "on this machine" while a saved report is shown

    # ------------------------------------------------------------------ settings

    def train_settings(self) -> TrainSettings:
        """The form as validated settings (SettingsError names the bad field)."""
        return self.form.settings()

    # ------------------------------------------------------------------ jobs

    def start_training(self) -> None:
        try:
            settings = self.train_settings().to_dict()
        except SettingsError as exc:
            self._set_status(html.escape(words.settings_problem(str(exc))), "warning")
            return
        self.tabs.setCurrentIndex(LIVE_TAB)              # the live plots follow the run
        self._start("train", settings)

    def start_sweep(self) -> None:
        try:
            s = self.train_settings()
            sweep = SweepSettings(train={k: getattr(s, k) for k in SWEEP_TRAIN_KEYS},
                                  budget_s=float(self.sweep.sweep_budget.value())).validate()
        except SettingsError as exc:
            self._set_status(html.escape(words.settings_problem(str(exc))), "warning")
            return
        self.tabs.setCurrentIndex(SWEEP_TAB)
        self._start("sweep", sweep.to_dict())

    def start_gemm(self) -> None:
        self.tabs.setCurrentIndex(BENCH_TAB)
        self._start("gemm", {"size": self.bench.gemm_size.value() or None})

    def start_quant(self) -> None:
        self.tabs.setCurrentIndex(BENCH_TAB)
        self._start("quant", {})

    def start_roofline(self) -> None:
        self.tabs.setCurrentIndex(ROOFLINE_TAB)
        self._start("roofline", {})

    def start_infer(self) -> None:
        try:
            settings = self.infer.settings()
        except SettingsError as exc:
            self._set_status(html.escape(words.settings_problem(str(exc))), "warning")
            return
        settings["cwd"] = os.getcwd()
        self.tabs.setCurrentIndex(INFER_TAB)
        self.infer.reset()
        self._start("infer", settings)

    def save_roofline(self, path: str | None = None) -> None:
        """The picture shown, as SVG or PNG (by the file's extension); quick: the picture is drawn from data."""
        from cpudoctor.render.pdf import write_picture
        from cpudoctor.render.svg_roofline import render_svg

        picture = self.roofline_tab.picture
        path = path or self.roofline_tab.ask_save_path()
        if not path or picture is None:
            return
        if not path.lower().endswith((".svg", ".png")):
            path += ".svg"
        try:
            write_picture(render_svg(picture), path)
        except (OSError, RuntimeError) as exc:
            self._set_status(f"The picture was not saved: {html.escape(str(exc))}", "warning")
            return
        self._set_status(f"Saved the roofline picture to {html.escape(path)}", "ok")

    def _start(self, job: str, settings: dict[str, Any]) -> None:
        if self.runner.is_running():
            self._set_status(html.escape(words.ALREADY_RUNNING), "info")
            return
        args = self.session.begin(job, settings, self.model.report)
        if job == "train":
            self.live.reset(self.session.live)
        if job == "sweep":
            self._redraw_sweep()
            self.sweep.show_notes(None, CAVEAT_COLOUR)
        focus = self.focusWidget()
        self._started_from = focus if focus is not None and self.isAncestorOf(focus) else None
        self._set_running(True)
        self.cancel_button.setFocus(Qt.FocusReason.OtherFocusReason)   # Space stops it; no spin box grabs focus
        self._set_status(html.escape(words.running_text(job)), "info")
        self._job_t0, self._last_progress = time.monotonic(), None
        # the deadlines of its settings, as in the CLI (a job that ignores its length must not run for ever)
        self.runner.start_argv(self.job_argv(job, args), job=job, limits=deadlines.for_job(job, args))
        if job == "train":
            self._clock.start()
            self._tick()

    def running_job(self) -> str:
        """The job running now, in words ("the training run"); "" when none (the window asks before quitting)."""
        return f"the {words.job_name(self.runner.job or self.session.job or '')}" if self.runner.is_running() else ""

    def cancel(self) -> None:
        if self.runner.is_running():
            self._set_status(html.escape(words.STOPPING), "info")
            self.runner.cancel()

    def _set_running(self, running: bool) -> None:
        self._sync_job_buttons(running)
        self.cancel_button.setEnabled(running)

    def _sync_job_buttons(self, running: bool | None = None) -> None:
        """The job buttons are off while a job runs, while a saved report is shown, and while the chosen
        environment has no PyTorch (the banner above says what to do); the tooltip says which."""
        running = self.runner.is_running() if running is None else running
        why = words.jobs_off_reason(bool(self.model.read_only), self.torch_banner.missing)
        for b in self.job_buttons:
            b.setEnabled(not running and not why)
            b.setToolTip(why or self._job_tips.get(b, ""))

    # ------------------------------------------------------------------ live data

    def _on_progress(self, data: dict) -> None:
        job = self.session.job or ""
        changed = self.session.progress(data)
        if changed == "train":
            self.live.draw(self.session.live, self.session.settings.get("dtype", "bf16"))
            self._last_progress = data
            self._tick()
            return
        if changed == "sweep":
            self._redraw_sweep()
        elif job == "infer":
            self.infer.show_progress(data)
        elif job == "gemm" and data.get("phase") != "partial":
            self.bench.show_result(self.session.preview(self.runner.outcome, self.model.report))
        text = words.progress_text(job, changed, data)
        if text:
            self._set_status(html.escape(text), "info")

    def _tick(self) -> None:
        """A training run's status line: before its first step what start-up has taken, then its latest figures;
        with a budget in seconds, what is left of it."""
        if self.session.job != "train" or not self.runner.is_running():
            self._clock.stop()
            return
        elapsed = time.monotonic() - self._job_t0
        budget = self.session.settings.get("seconds")
        if self._last_progress is None:
            text = words.starting_text(elapsed, budget)
        else:
            text = words.progress_text("train", "train", self._last_progress, budget, elapsed)
        self._set_status(html.escape(text or ""), "info")

    def _redraw_sweep(self) -> None:
        """The sweep's points; before any, the axis spans 1..CPUs of the machine shown, never '0.2 threads'."""
        report = self.model.report
        topo = report.topology if report is not None else None
        cpus = (topo.affinity.allowed_cpus or topo.online_cpus) if topo is not None else []
        self.sweep.redraw(self.session.sweep, len(cpus))

    def _on_log(self, text: str) -> None:
        if text.strip():
            self.status.setToolTip(text[-500:])

    # ------------------------------------------------------------------ finished

    def _on_finished(self, outcome: JobOutcome) -> None:
        self._clock.stop()
        job = self.session.job or self.runner.job
        holds_focus = self.cancel_button.hasFocus()          # disabling it hands the focus to the next widget
        self._set_running(False)
        result = self.session.finish(outcome, self.model.report, job)
        run = result.bench_run()
        self.model.add_benchmark(run)
        self._keep(run)
        if job == "train":
            self.live.draw(self.session.live, self.session.settings.get("dtype", "bf16"))
        if job in ("gemm", "quant") and result.points:
            self.bench.show_result(result)
        if job == "sweep":
            self._redraw_sweep()
            self.sweep.show_notes(result, CAVEAT_COLOUR)
        if job == "infer":
            self.infer.show_result(run.metrics)
        if self.session.consider(result):
            self._show_best()
        elif self.session.best is None:
            self.best_label.setText(html.escape(words.no_best_text(self._rows())))
        text, severity = words.finished_text(job, result, outcome.message, bool(outcome.progress))
        self._set_status(html.escape(text), severity)
        target = self._started_from if self._started_from is not None and self._started_from.isEnabled() \
            else self.train_button
        if holds_focus and target.isEnabled():
            target.setFocus(Qt.FocusReason.OtherFocusReason)     # back where the user started the job
        self._started_from = None

    def _show_best(self) -> None:
        rec = self.session.best
        if rec is None:
            self.best_label.setText(html.escape(words.no_best_text(self._rows())))
            self.use_button.setEnabled(False)
            return
        self.best_label.setText(html.escape(lab_words.best_text(rec)))
        self.use_button.setEnabled(True)
        self.use_button.setToolTip("Hand the fastest measured setting to the advisor's snippets")

    def use_best(self) -> None:
        rec = self.session.best
        if rec is None:
            return
        self.model.set_recommendation(rec)
        text = lab_words.adopted_text(rec)
        self.model.status_message.emit(text)
        self._set_status(html.escape(text), "ok")

    # ------------------------------------------------------------------ runs kept

    def set_run_store(self, store: RunStore | None) -> None:
        """Keep runs between sessions in ``store`` (per machine and environment); shows the kept ones."""
        self.store = store
        self._kept.clear()
        self._earlier.clear()
        self._show_runs()

    def _key(self) -> str:
        return store_key(self.model.report, self.job_python)

    def _rows(self) -> list[BenchRun]:
        key = self._key()
        if key not in self._kept:
            kept = self.store.load(key) if self.store is not None else []
            self._kept[key], self._earlier[key] = kept, len(kept)
        return self._kept[key]

    def _keep(self, run: BenchRun) -> None:
        if self.model.read_only:
            return
        rows = self._rows()
        rows.append(run)
        if self.store is not None:
            self.store.save(self._key(), rows)
        self.runs_panel.add(run)

    def _show_runs(self) -> None:
        """This machine's runs in the chosen environment, or a saved report's own runs."""
        report = self.model.report
        if self.model.read_only:
            self.runs_panel.show_runs(list(report.benchmarks) if report is not None else [], saved=True)
            return
        if report is None:
            self.runs_panel.show_runs([])
            return
        rows = self._rows()
        self.runs_panel.show_runs(rows, earlier=self._earlier.get(self._key(), 0))
        if self.session.best is None:
            self.best_label.setText(html.escape(words.no_best_text(rows)))

    def clear_runs(self) -> None:
        """Forget the runs kept for this machine and environment (Clear)."""
        key = self._key()
        self._kept[key], self._earlier[key] = [], 0
        if self.store is not None:
            self.store.save(key, [])
        self.session.best = None
        self.use_button.setEnabled(False)
        self.runs_panel.show_runs([])
        self.best_label.setText(html.escape(words.NO_RUNS))

    # ------------------------------------------------------------------ status

    def _set_status(self, text: str, severity: str = "info") -> None:
        colour = {"ok": "#3fa36b", "warning": CAVEAT_COLOUR, "info": "palette(text)"}.get(severity, "palette(text)")
        self.status.setText(f"<span style='color:{colour}'>{text}</span>" if severity != "info" else text)

    def closeEvent(self, event) -> None:  # noqa: N802 - Qt API
        self.shutdown()
        super().closeEvent(event)

    def shutdown(self) -> None:
        """Stop a running job (the window calls this on quit; tests on teardown)."""
        self._clock.stop()
        if self.runner.is_running():
            self.runner.cancel()
            if not self.runner.wait_finished(2000):
                self.runner.kill()
                self.runner.wait_finished(3000)
