"""Fill the model from the one report pipeline, off the GUI thread, stage by stage.

:func:`cpudoctor.pipeline.build_report` runs on a worker thread; each stage
it finishes comes back here as a snapshot and lands in the model at once:
the CPU, topology and quick software facts within milliseconds, with the
findings those support (provisional, what ``doctor --fast`` says), the child
processes' PyTorch facts seconds later, then the findings of the whole report. The same pipeline
opens a saved report (load, then the advisor), so "Open report" never
diagnoses on the GUI thread and gives the findings ``cpudoctor doctor
--from-report`` gives. A newer run (a refresh, another report opened) makes
older results stale: they are dropped, never shown over the newer state.
This machine's software stages describe the Python environment chosen in the
window (:meth:`ReportCollector.set_environment`), as ``--python`` does on the CLI.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path

from PySide6.QtCore import QObject, Signal
from shiboken6 import isValid

from cpudoctor.gui.model import AppModel
from cpudoctor.gui.workers import run_in_thread
from cpudoctor.pipeline import Cancelled, Source, StageResult, build_report, environment_python, planned_stages
from cpudoctor.render.words import reason_of, status_text
from cpudoctor.model import ReportError

log = logging.getLogger(__name__)

# What the status bar says while a stage runs (the stage before it has just finished).
RUNNING = {
    "load": "Reading the report…",
    "cpu": "Reading the CPU…",
    "topology": "Reading the topology…",
    "software-quick": "Reading the software stack…",
    "software-children": "Checking the Python stack in child processes (torch, numpy)…",
    "cpuid-cross-check": "Cross-checking CPUID in a child process…",
    "advisor": "Running the advisor…",
}
# Stages after which the model gets the report: the machine's facts after the topology (no child needed:
# milliseconds), then each stage fills in.
SHOWN = ("load", "topology", "software-quick", "software-children", "cpuid-cross-check")
# Stages after the quick software facts: the findings the window shows for those (provisional) stay on screen
# until the advisor has judged the whole report.
LATER = ("software-children", "cpuid-cross-check")


class ReportCollector(QObject):
    """Runs the pipeline for ``model``: this machine (or ``root``) with :meth:`start`, a file with :meth:`open`."""

    busy_changed = Signal(bool)
    stage_done = Signal(str)               # a pipeline stage name (cpudoctor.pipeline.STAGES)
    failed = Signal(str, str)              # stage, message
    opened = Signal(object)                # Path of a saved report now shown
    open_failed = Signal(str)              # why a saved report could not be opened

    def __init__(self, model: AppModel, root: Path = Path("/"), children: bool = True,
                 parent: QObject | None = None):
        super().__init__(parent)
        self.model = model
        self.root = Path(root)
        self.children = children           # False: no child-process stages (tests, --no-children)
        self._generation = 0
        self._busy = False
        self._kind: str | None = None       # the kind of source of the newest run
        self.environment = None            # the PythonEnv to describe; None: CPU Doctor's own
        self.chosen_by: str | None = None  # how it was chosen (PythonInfo.chosen_by)
        self._chosen = threading.Event()   # set: the environment above is decided (a waiting run goes on)
        self._chosen.set()
        self._live_shown = False           # the model shows a report this collector read of this machine

    @property
    def busy(self) -> bool:
        return self._busy

    def _set_busy(self, busy: bool) -> None:
        if busy != self._busy:
            self._busy = busy
            self.busy_changed.emit(busy)

    @property
    def live(self) -> bool:
        """True when :meth:`start` reads this machine (not a captured tree): the environment matters."""
        return Source.tree(self.root).live

    def set_environment(self, env, chosen_by: str | None) -> None:
        """The Python environment (a PythonEnv) the next :meth:`start` describes (None: CPU Doctor's own);
        a run waiting for it (``start(environment_pending=True)``) goes on with it."""
        self.environment, self.chosen_by = env, chosen_by
        self._chosen.set()

    @property
    def awaiting_environment(self) -> bool:
        """A run in progress waits for :meth:`set_environment` before its software stages."""
        return self._busy and not self._chosen.is_set()

    def start(self, *, environment_pending: bool = False) -> None:
        """Collect this machine's report again (drops any run in progress).

        ``environment_pending``: the environment to describe is still being decided; the CPU and
        topology stages run (and show) at once, the software stages wait for :meth:`set_environment`.
        """
        source = Source.tree(self.root)
        if source.live:
            source = Source.for_environment(self.environment, self.chosen_by)
            if environment_pending:
                self._chosen.clear()
        self._run(source, wait_for_environment=environment_pending and source.live)

    def open(self, path: Path | str) -> None:
        """Show a saved report read-only, diagnosed with this CPU Doctor's rules; ``opened`` or ``open_failed`` follows."""
        self._run(Source.saved(Path(path)))

    def cancel(self) -> None:
        """Forget runs in progress: their results will be dropped (and the pipeline stops at its next stage)."""
        self._generation += 1
        self._set_busy(False)

    @property
    def opening(self) -> bool:
        """A saved report is being read: a new run of this machine would drop what the user asked for."""
        return self._busy and self._kind == "saved"

    def _run(self, source: Source, wait_for_environment: bool = False) -> None:
        self._kind = source.kind
        self._generation += 1
        gen = self._generation
        self._set_busy(True)
        stages = planned_stages(source, children=self.children)
        self.model.status_message.emit(RUNNING[stages[0]])
        extra = {"environment": self._environment_waiter(gen)} if wait_for_environment else {}
        run_in_thread(build_report, source, children=self.children, **extra,
                      progress_arg="on_stage", on_progress=lambda stage: self._on_stage(gen, source, stage),
                      cancelled=lambda: gen != self._generation,
                      on_result=lambda report: self._done(gen, source, report),
                      on_error=lambda exc: self._fail(gen, source, exc))

    def _environment_waiter(self, gen: int):
        """For the pipeline's worker thread: wait until the environment is decided (or this run is dropped)."""
        chosen = self._chosen

        def wait() -> tuple[str | None, str | None]:
            while not chosen.wait(0.1):
                if gen != self._generation:
                    raise Cancelled("software-quick")
            if gen != self._generation:
                raise Cancelled("software-quick")
            return environment_python(self.environment), self.chosen_by
        return wait

    def _current(self, gen: int, source: Source) -> bool:
        """Still the newest run (and the collector still there); for this machine, also still what the model shows."""
        if not isValid(self) or gen != self._generation:
            return False
        if source.kind != "saved" and self.model.read_only:
            self._set_busy(False)           # a report was opened meanwhile: this run is moot
            return False
        return True

    def _on_stage(self, gen: int, source: Source, stage: StageResult) -> None:
        if not self._current(gen, source):
            return
        following = _next_stage(source, stage.name, self.children)
        again = stage.name != "load" and self._shows_same_environment(stage.report)
        if stage.name == "advisor":
            self.model.offer_findings(stage.report, stage.report.findings)
        elif stage.name in SHOWN and again and following not in (None, "advisor") and _fewer_facts(
                stage.report, self.model.report):
            pass        # this machine's report is built anew: what is on screen stays until the new one has as much
        elif stage.name in SHOWN:
            saved = stage.name == "load"
            self._live_shown = not saved
            self.model.set_report(stage.report, read_only=saved, label=_label(source) if saved else None,
                                  judged=saved, keep_findings=stage.name in LATER or again)
            if saved:
                self.model.status_message.emit(f"Opened {source.path.name} read-only")
                self.opened.emit(source.path)
            elif stage.name == "software-quick" and following not in (None, "advisor"):
                # The child stages take as long as `import torch` in the environment: the findings the quick
                # facts support (what `doctor --fast` says) show meanwhile, and are replaced, not blanked.
                self.model.rediagnose(provisional=True)
        self.stage_done.emit(stage.name)
        if following is not None:
            self.model.status_message.emit(RUNNING[following])

    def _shows_same_environment(self, report) -> bool:
        """The window shows this machine's report (judged, with its software facts) and ``report``, a stage of
        a newer run, describes the same Python environment (or has not reached its software facts yet): a Refresh,
        or the same environment described again. Its snapshots replace what is shown only once they know as
        much; a stage of another environment is shown at once (the switch is what the user asked for)."""
        shown = self.model.report
        if not self._live_shown or shown is None or self.model.read_only or not self.model.judged \
                or shown.software is None:
            return False
        if report.software is None:
            return True
        return _environment_key(report.software.python) == _environment_key(shown.software.python)

    def _done(self, gen: int, source: Source, report) -> None:
        if not self._current(gen, source):
            return
        self._set_busy(False)
        self.model.status_message.emit(f"Ready: {status_text(report.findings)}")

    def _fail(self, gen: int, source: Source, exc: BaseException) -> None:
        if not isValid(self) or gen != self._generation or isinstance(exc, Cancelled):
            return
        self._set_busy(False)
        if isinstance(exc, ReportError):
            message = f"{source.path.name}: {exc}"
            self.model.status_message.emit(message)
            self.open_failed.emit(message)
            return
        message = f"Reading {source.label} failed: {reason_of(exc)}"
        log.warning("%s\n%s", message, getattr(exc, "traceback_text", ""))
        self.model.status_message.emit(message)
        self.failed.emit("pipeline", message)


def _environment_key(python) -> str | None:
    return (python.prefix or python.executable) if python is not None else None


def _fewer_facts(new, shown) -> bool:
    """``new`` knows less than ``shown``: no software facts yet, or not the child checks' (torch) facts."""
    def depth(report) -> int:
        sw = report.software
        return 0 if sw is None else 2 if sw.children_ran else 1
    return depth(new) < depth(shown)


def _label(source: Source) -> str:
    text = source.label
    return text[:1].upper() + text[1:]


def _next_stage(source: Source, done: str, children: bool) -> str | None:
    stages = planned_stages(source, children=children)
    return stages[stages.index(done) + 1] if done in stages and stages.index(done) + 1 < len(stages) else None
