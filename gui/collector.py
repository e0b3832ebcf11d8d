"""Fill the model in stages, off the GUI thread, so the window is usable at once.

Stage 1 (milliseconds): CPU, topology and the cheap part of the software probe
(no child processes). Stage 2 (seconds): the full software probe, whose child
processes import torch and friends — never in this process. Stage 3: the
advisor, when it is installed. Each stage replaces what the previous one showed.
A newer refresh, or a report opened from a file, makes older results stale:
they are dropped, never shown over the newer state.
"""

from __future__ import annotations

import importlib
import logging
from pathlib import Path
from typing import Callable

from PySide6.QtCore import QObject, Signal

from cpudoctor.gui.model import AppModel
from cpudoctor.gui.workers import run_in_thread
from cpudoctor.report import Report

log = logging.getLogger(__name__)


def load_diagnose() -> Callable[[Report], list] | None:
    """``cpudoctor.advisor.diagnose`` or None while the advisor is not installed."""
    try:
        module = importlib.import_module("cpudoctor.advisor")
    except ModuleNotFoundError as exc:
        if exc.name != "cpudoctor.advisor":
            raise
        return None
    return getattr(module, "diagnose", None)


def _cheap(root: Path) -> Report:
    from cpudoctor.collect import collect_report

    return collect_report(root, software=True, children=False)


def _full_software(root: Path):
    from cpudoctor.probes import probe_software

    return probe_software(root, children=True)


class ReportCollector(QObject):
    """Runs the three stages and feeds ``model``; ``busy`` tells the window."""

    busy_changed = Signal(bool)
    stage_done = Signal(str)               # "cheap" | "software" | "advisor"
    failed = Signal(str, str)              # stage, message

    def __init__(self, model: AppModel, root: Path = Path("/"), children: bool = True,
                 parent: QObject | None = None):
        super().__init__(parent)
        self.model = model
        self.root = Path(root)
        self.children = children           # False: skip stage 2 (tests, --no-children)
        self._generation = 0
        self._busy = False

    @property
    def busy(self) -> bool:
        return self._busy

    def _set_busy(self, busy: bool) -> None:
        if busy != self._busy:
            self._busy = busy
            self.busy_changed.emit(busy)

    def _current(self, generation: int) -> bool:
        """Still the newest run, and the model still shows this machine."""
        if generation != self._generation:
            return False
        if self.model.read_only:
            self._set_busy(False)           # a report was opened meanwhile: this run is moot
            return False
        return True

    def start(self) -> None:
        """Collect this machine's report again (drops any run in progress)."""
        self._generation += 1
        gen = self._generation
        self._set_busy(True)
        self.model.status_message.emit("Reading the CPU and topology…")
        run_in_thread(_cheap, self.root,
                      on_result=lambda r: self._cheap_done(gen, r),
                      on_error=lambda e: self._fail(gen, "cheap", e))

    def cancel(self) -> None:
        """Forget runs in progress: their results will be dropped."""
        self._generation += 1
        self._set_busy(False)

    def _fail(self, gen: int, stage: str, exc: BaseException) -> None:
        if gen != self._generation:
            return
        text = {"cheap": "Reading this machine failed",
                "software": "The software probe failed",
                "advisor": "The advisor failed"}[stage]
        message = f"{text}: {exc}"
        log.warning("%s\n%s", message, getattr(exc, "traceback_text", ""))
        self.model.status_message.emit(message)
        self.failed.emit(stage, message)
        if stage == "cheap" or stage == "advisor" or not self._run_advisor(gen):
            self._set_busy(False)

    def _finish(self, message: str = "Ready") -> None:
        self._set_busy(False)
        self.model.status_message.emit(message)

    def _cheap_done(self, gen: int, report: Report) -> None:
        if not self._current(gen):
            return
        self.model.set_report(report)
        self.stage_done.emit("cheap")
        if self.children:
            self.model.status_message.emit("Checking the Python stack in child processes (torch, numpy)…")
            run_in_thread(_full_software, self.root,
                          on_result=lambda sw: self._software_done(gen, report, sw),
                          on_error=lambda e: self._fail(gen, "software", e))
        elif not self._run_advisor(gen):
            self._finish()

    def _software_done(self, gen: int, report: Report, software) -> None:
        if not self._current(gen):
            return
        report.software = software
        self.model.set_report(report)
        self.stage_done.emit("software")
        if not self._run_advisor(gen):
            self._finish()

    def _run_advisor(self, gen: int) -> bool:
        """Start the advisor on the model's report; False when there is none to run."""
        diagnose = load_diagnose()
        report = self.model.report
        if diagnose is None or report is None:
            return False
        self.model.status_message.emit("Running the advisor…")
        run_in_thread(diagnose, report,
                      on_result=lambda f: self._advisor_done(gen, f),
                      on_error=lambda e: self._fail(gen, "advisor", e))
        return True

    def diagnose_opened(self, report: Report) -> bool:
        """Diagnose a report opened from a file that carries no findings (the advisor is a
        pure function of the report, so a colleague's report can be diagnosed here)."""
        diagnose = load_diagnose()
        if diagnose is None or report.findings:
            return False
        self._generation += 1
        gen = self._generation

        def done(findings: list) -> None:
            if gen == self._generation and self.model.report is report:
                self.model.set_findings(list(findings))
                self.stage_done.emit("advisor")

        run_in_thread(diagnose, report, on_result=done,
                      on_error=lambda e: self._fail(gen, "advisor", e))
        return True

    def _advisor_done(self, gen: int, findings: list) -> None:
        if not self._current(gen):
            return
        self.model.set_findings(list(findings))
        self.stage_done.emit("advisor")
        problems = sum(1 for f in findings if getattr(f, "severity", "") in ("warning", "error"))
        self._finish(f"Ready — {problems} thing{'s' if problems != 1 else ''} to look at"
                     if problems else "Ready — no problems found")
