"""The Inspector's Time tab and its "Run a script…" runner (kept apart from the page, which is long enough).

:class:`TimeTab` shows a :class:`~cpudoctor.model.breakdown.TimeBreakdown`:
a caption (what was sampled, whether it may be judged), the bar, the categories
and each thread. :class:`ScriptRunner` runs a script watched and diagnosed by the
job pipeline, as ``cpudoctor run`` does (:class:`cpudoctor.jobrun.WatchedRun`),
on a pool thread, and reports through signals.
"""

from __future__ import annotations

import sys
import threading
from pathlib import Path

from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import QHBoxLayout, QLabel, QPlainTextEdit, QTextBrowser, QVBoxLayout, QWidget

from cpudoctor.gui import inspector_model as im
from cpudoctor.gui.breakdown_bar import BreakdownBar
from cpudoctor.gui.run_dialog import VERIFY_BUDGET_S, OutputSink
from cpudoctor.gui.workers import run_in_thread
from cpudoctor.render.words import reason_of


class TimeTab(QWidget):
    def __init__(self, table_factory, fill, parent: QWidget | None = None):
        super().__init__(parent)
        from PySide6.QtCore import Qt

        self._fill = fill
        tl = QVBoxLayout(self)
        tl.setContentsMargins(4, 4, 4, 4)
        self.caption = QLabel(im.time_caption(None))
        self.caption.setWordWrap(True)
        self.caption.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        tl.addWidget(self.caption)
        self.bar = BreakdownBar()
        tl.addWidget(self.bar)
        # the categories beside the findings the breakdown gave (what to do about it, where it is seen)
        row = QHBoxLayout()
        self.table = table_factory(im.TIME_COLUMNS)
        header = self.table.horizontalHeaderItem(im.TIME_COLUMNS.index("Thread-seconds"))
        if header is not None:
            header.setToolTip(im.THREAD_SECONDS_TIP)
        row.addWidget(self.table, 3)
        self.findings_view = QTextBrowser()
        self.findings_view.setOpenLinks(False)
        self.findings_view.setMinimumWidth(220)
        self.findings_view.setHtml(im.evidence_findings_html([]))
        row.addWidget(self.findings_view, 2)
        tl.addLayout(row, 2)
        self.thread_table = table_factory(im.THREAD_TIME_COLUMNS)
        tl.addWidget(self.thread_table, 2)
        from cpudoctor.gui.achieved_view import AchievedView

        self.achieved = AchievedView()          # a run's kernels against the roof (hidden until one was counted)
        tl.addWidget(self.achieved, 3)
        self.output = QPlainTextEdit()
        self.output.setReadOnly(True)
        self.output.setPlaceholderText("The output of a script started with Run a script… appears here.")
        self.output.setVisible(False)
        tl.addWidget(self.output, 1)
        self.breakdown = None

    def show_time(self, bd, state=None) -> None:
        """``bd``'s bar and tables; ``state``: a run's job state from its probe (None for an inspection)."""
        self.breakdown = bd
        self.caption.setText(im.time_caption(bd, state))
        self.bar.set_shares(bd.shares if bd is not None else [])
        self._fill(self.table, im.time_rows(bd))
        self._fill(self.thread_table, im.thread_time_rows(bd))

    def show_findings(self, findings) -> None:
        """The findings the job's evidence gave, beside the breakdown (their copy links index ``findings``)."""
        self.findings_view.setHtml(im.evidence_findings_html(list(findings)))

    def show_output(self, text: str) -> None:
        self.output.setVisible(True)
        self.output.setPlainText(text)


class ScriptRunner(QObject):
    """Runs one script at a time, observed; ``done(obs, findings)`` or ``failed(exception)``, then ``finished``."""

    done = Signal(object, object)
    failed = Signal(object)
    finished = Signal()

    progress = Signal(str)             # the verification's progress, in words (from the pool thread)

    def __init__(self, parent: QObject | None = None):
        super().__init__(parent)
        self.job = None
        self.machine = None           # this machine's CPU and topology (jobrun.Machine); None: read after the run
        self.sink: OutputSink | None = None
        self._stop = threading.Event()
        self.verify: float | None = None   # the Verify switch's time limit (None: off)
        self._stopper = None
        self._argv: list[str] = []

    def start(self, python: str, script: str, arguments: str = "", seconds: float | None = None,
              verify: float | None = None) -> str:
        """Start it (``verify``: then measure its fixes on it within that many seconds, as ``cpudoctor run
        --verify``); "" when started, else what to tell the user."""
        from cpudoctor.jobrun import RoofChoice, WatchedRun

        if not script or not Path(script).is_file():
            return f"No script to run: {script or 'choose a .py file'}."
        try:
            argv = im.script_command(python, script, arguments)
        except ValueError as exc:
            return f"The arguments cannot be split: {exc}."
        self.sink = OutputSink()
        self.verify, self._argv = verify, argv
        # the roof: the window's kept roofline run, else a quick one in the script's own environment after it
        self.job = WatchedRun(argv, machine=self.machine, roof=RoofChoice(python=python), seconds=seconds,
                              stdout=self.sink, stderr=self.sink, watch_writes=verify is not None,
                              cwd=str(Path(script).resolve().parent))
        self._stop.clear()
        run_in_thread(self._run, self.job, on_result=lambda r: self.done.emit(*r), on_error=self.failed.emit,
                      on_finished=self.finished.emit)
        return ""

    def stop(self) -> None:
        self._stop.set()
        stopper = self._stopper
        if stopper is not None:
            stopper.stop()

    def _run(self, job):
        if not job.start():
            return job.obs, []
        watcher = threading.Thread(target=lambda: self._stop.wait() and job.stop(), daemon=True)
        watcher.start()
        obs = job.wait()
        stopped = self._stop.is_set()
        self._stop.set()                      # ends the watcher
        findings = job.findings
        if self.verify is not None and not stopped and obs.ended_by != "failed":
            findings = self._verify(job, obs, findings)
        return obs, findings

    def _verify(self, job, obs, findings):
        """``cpudoctor run --verify`` on the script just run (on this pool thread): the window asks no question, so
        a script that holds files open for writing in its folder is not run again (the terminal's --yes is the
        way to verify it anyway)."""
        from cpudoctor.verify import Stopper, VerifyOptions, rank_findings, real_window, verify_job

        def refuse(files: list[str]) -> str:
            return (f"not verified: the script held files open for writing in its folder ({', '.join(files[:5])}); "
                    "verifying runs it several more times. Verify it from a terminal: cpudoctor run --verify --yes")

        self._stopper = Stopper()
        try:
            machine = job.machine
            obs.verification = verify_job(self._argv, findings, obs.state, options=VerifyOptions(budget_s=self.verify),
                                          topology=machine.topology if machine is not None else None,
                                          run_window=real_window(self._argv, job.job.cwd, self._stopper),
                                          cwd=job.job.cwd, command=obs.command, writes=list(job.writes),
                                          confirm=refuse, should_stop=self._stopper,
                                          on_progress=self.progress.emit)
        finally:
            self._stopper = None
        return rank_findings(findings, obs.verification)

    def output(self) -> str:
        return self.sink.text() if self.sink is not None else ""


class RunScriptMixin:
    """The Inspector page's "Run a script…" (the page owns the widgets used here: ``time_tab``, the buttons,
    ``status_label``, ``summary_label``, ``findings``, and its model's environment)."""

    def _build_runner(self) -> None:
        self.runner = ScriptRunner(self)
        self._running = False
        self._last_run: tuple[str, str, float | None] | None = None
        self.run_dialog = None
        self.runner.done.connect(self._on_ran)
        self.runner.failed.connect(
            lambda exc: self._on_inspect_error(f"the script could not be run: {reason_of(exc)}"))
        self.runner.finished.connect(lambda: self._set_running(False))
        self.runner.progress.connect(self._on_verify_progress)
        self.stop_button.clicked.connect(self.runner.stop)

    def running_job(self) -> str:
        """What the Inspector runs now, in words; "" when nothing (the window asks before quitting)."""
        if self._running:
            return "the script run in the Inspector"
        return "the inspection in the Inspector" if self.inspections.busy else ""

    @property
    def time_breakdown(self):
        return self.time_tab.breakdown

    def ask_run_script(self) -> None:
        from cpudoctor.gui.run_dialog import RunScriptDialog

        if self.inspections.busy or self._running:
            return
        verify = self.runner.verify
        dialog = self.run_dialog = RunScriptDialog(self.job_python(), self, *self.last_run()[:2],
                                                   seconds=self.last_run()[2], verify=verify is not None,
                                                   budget=verify or VERIFY_BUDGET_S)
        if dialog.exec() == _accepted():
            verify, budget = dialog.verify_values()
            self.run_script(*dialog.values(), verify=budget if verify else None)

    def last_run(self) -> tuple[str, str, float | None]:
        """(script, arguments, seconds) of the last "Run a script…", this session's or remembered in the settings."""
        if self._last_run is not None:
            return self._last_run
        settings = getattr(self.model.environments, "settings", None)
        if settings is None:
            return "", "", RUN_SECONDS
        seconds = settings.value(RUN_KEYS[2], RUN_SECONDS)
        try:
            seconds = float(seconds) if seconds not in (None, "", "0") else None
        except (TypeError, ValueError):
            seconds = RUN_SECONDS
        return str(settings.value(RUN_KEYS[0], "") or ""), str(settings.value(RUN_KEYS[1], "") or ""), seconds

    def _remember_run(self, script: str, arguments: str, seconds: float | None) -> None:
        self._last_run = (script, arguments, seconds)
        settings = getattr(self.model.environments, "settings", None)
        if settings is not None:
            for key, value in zip(RUN_KEYS, (script, arguments, seconds or 0)):
                settings.setValue(key, value)

    def job_python(self) -> str:
        """The window's environment's interpreter (CPU Doctor's own when none was chosen)."""
        return self.model.environments.python or sys.executable

    def run_script(self, script: str, arguments: str = "", seconds: float | None = None,
                   verify: float | None = None) -> bool:
        """Start ``script`` observed (off the UI thread; ``verify``: then measure its fixes on it within that many
        seconds); False with a message when it cannot start."""
        if self.inspections.busy or self._running:
            return False
        self.runner.machine = self.inspections.machine
        problem = self.runner.start(self.job_python(), script, arguments, seconds, verify=verify)
        if problem:
            self.status_label.setText(problem)
            return False
        self._remember_run(script, arguments, seconds)
        self._set_running(True)
        then = ", then verifying its fixes" if verify is not None else ""
        self.status_label.setText(f"Running {Path(script).name}" + (f" for up to {seconds:g} s" if seconds else "")
                                  + f"{then}…")
        self.model.status_message.emit(self.status_label.text())
        return True

    def _set_running(self, running: bool) -> None:
        self._running = running
        self.inspect_button.setEnabled(not running)
        self.run_button.setEnabled(not running)
        self.stop_button.setEnabled(running)
        self.progress.setVisible(running)

    def _on_verify_progress(self, text: str) -> None:
        self.status_label.setText(f"Verifying the fixes: {text}…")
        self.model.status_message.emit(self.status_label.text())

    def _on_ran(self, obs, findings) -> None:
        self.findings = list(findings)
        self.shown_run = obs                     # Copy as text now copies the run's report
        self.copy_all_button.setEnabled(True)
        self._fill_findings()
        if obs.verification is not None:         # the measured table above the findings it ranks
            from cpudoctor.render.verify import html

            self.findings_view.setHtml(html(obs.verification) + im.findings_html(self.findings))
        self.time_tab.show_time(obs.breakdown, obs.state)
        self.time_tab.show_findings(self.findings)
        self.time_tab.achieved.show_achieved(obs.achieved)
        self._show_run_memory(obs)
        self._forget_process(obs.pid)
        self.time_tab.show_output(self.runner.output() if obs.error is None else obs.error)
        self.summary_label.setText(im.run_message(obs))
        self.status_label.setText(im.run_message(obs))
        self.model.status_message.emit(self.status_label.text())
        self.run_done.emit(obs)


    def _show_run_memory(self, obs) -> None:
        """The Memory card: the script's memory over its life, with what its probe counted of its training."""
        if obs.process is None or obs.process.memory is None:
            return
        self.memory_card.clear()                 # rows the previous process had (workers, cgroup) do not stay
        for label, text in im.memory_facts(obs.process):
            self.memory_card.set(label, text)

    def _forget_process(self, pid: int | None) -> None:
        """The script's process has ended: out of the list, the selection and the PID field, and the list read
        again (a PID left there would be inspected as a process that is gone, or as a newcomer reusing it)."""
        if pid is None:
            return
        if self.pid_edit.text().strip() == str(pid):
            self.pid_edit.clear()
        if any(e.pid == pid for e in self.inspections.entries):
            self.inspections.entries = [e for e in self.inspections.entries if e.pid != pid]
            self._fill_processes()
        self.refresh_processes()


RUN_KEYS = ("inspector/run_script", "inspector/run_arguments", "inspector/run_seconds")
RUN_SECONDS = 60.0               # "Stop after" the first time


def _accepted():
    from PySide6.QtWidgets import QDialog

    return QDialog.DialogCode.Accepted
