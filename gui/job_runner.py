"""JobRunner: the app's one child runner seen through Qt signals.

Any page can run a child job with it (training, sweep, GEMM, quantisation, or
any command speaking :mod:`cpudoctor.lab.protocol`). The process is run by
:class:`cpudoctor.kits.child.runner.ChildProcess`, exactly as the CLI runs it
(own session, staged stop, no descendant left behind); this class only moves
what its threads report onto the GUI thread. The GUI process never imports
torch: only the child does, so a SIGILL or an OOM kill takes down the child,
and the page shows the diagnosis while the app stays up.

The runner's threads put each message, then the end, on a queue and emit
``_posted``, which is connected with a *queued* connection: the slot runs on
the GUI thread and empties the queue in order, so ``progress``/``result``/
``log``/``error`` always come before ``finished``, and nothing comes after it.

Cancel stops in stages within a second: ``stop`` on stdin (the job finishes
its step and sends a cancelled result), then SIGTERM, then SIGKILL.
"""

from __future__ import annotations

import queue
from typing import Any

from PySide6.QtCore import QObject, Qt, Signal

from cpudoctor.lab import deadlines, protocol
from cpudoctor.lab.runner import ASK_WAIT_S, TERM_WAIT_S, JobOutcome, collect, finish, job_command
from cpudoctor.kits.child.runner import ChildEnd, ChildProcess


class JobRunner(QObject):
    started = Signal()
    progress = Signal(dict)
    result = Signal(dict)
    log = Signal(str)
    error = Signal(dict)            # the child's own error message: {"message", "kind", ...}
    finished = Signal(object)       # JobOutcome: status, diagnosis, partial progress, result
    _posted = Signal()              # from the runner's threads: something is on the queue

    def __init__(self, parent: QObject | None = None, python: str | None = None):
        super().__init__(parent)
        self.python = python            # None: CPU Doctor's own interpreter (the app itself when frozen)
        self.job = ""
        self._child: ChildProcess | None = None
        self._queue: queue.SimpleQueue[protocol.Message | ChildEnd] = queue.SimpleQueue()
        self._outcome = JobOutcome()
        self._program: str | None = None          # the interpreter, named when it never starts the job
        self._posted.connect(self._drain, Qt.ConnectionType.QueuedConnection)

    # ------------------------------------------------------------------ control

    @property
    def outcome(self) -> JobOutcome:
        """What the current (or last) job sent so far: progress, result, error."""
        return self._outcome

    @property
    def peak_rss_bytes(self) -> int | None:
        """The most memory the running job's process tree has held so far (then the outcome's figure)."""
        child = self._child
        return child.peak_rss_bytes if child is not None else self._outcome.peak_rss_bytes

    def is_running(self) -> bool:
        """From ``start`` until ``finished`` was emitted."""
        return self._child is not None

    def start(self, job_module: str, args: dict[str, Any]) -> None:
        """Start lab job ``job_module`` (``train``, ``gemm``, ... or a module path) with ``args``."""
        self.start_argv(job_command(job_module, args, self.python), job=job_module,
                        limits=deadlines.for_job(job_module, args))

    def start_argv(self, argv: list[str], job: str = "job", limits: deadlines.Deadlines | None = None) -> None:
        """Start any protocol-speaking command (tests use a tiny ``python -c`` child), within ``limits``
        (default: the start-up deadline only; :mod:`cpudoctor.lab.deadlines`)."""
        if self.is_running():
            raise RuntimeError("a job is already running; cancel it first")
        self.job = job
        self._outcome = JobOutcome()
        self._program = argv[0] if argv else None
        limits = limits or deadlines.Deadlines(deadlines.startup_s(), None)
        child = ChildProcess(argv, what=f"the {job} job", control_stdin=True, ask_wait=ASK_WAIT_S,
                             term_wait=TERM_WAIT_S, timeout=limits.total_s, startup_timeout=limits.startup_s,
                             max_raw_lines=deadlines.MAX_RAW_LINES)
        child.on_message = self._post
        child.on_end = self._post
        self._child = child
        self.started.emit()
        child.start()

    def cancel(self) -> None:
        """Ask the job to stop; SIGTERM its group after ASK_WAIT_S, SIGKILL TERM_WAIT_S later."""
        if self._child is not None:
            self._child.cancel()

    def kill(self) -> None:
        """SIGKILL the job's group now (the window is closing and the job did not stop)."""
        if self._child is not None:
            self._child.kill()

    def wait_finished(self, msecs: int = 30_000) -> bool:
        """Block until the child ends and ``finished`` was emitted (for shutdown and scripts; the GUI uses signals)."""
        child = self._child
        if child is None:
            return True
        if not child.join(msecs / 1000):
            return False
        self._drain()
        return True

    # ------------------------------------------------------------------ from the runner's threads

    def _post(self, item: protocol.Message | ChildEnd) -> None:
        self._queue.put(item)
        try:
            self._posted.emit()
        except RuntimeError:    # the runner was deleted while its job still reported
            pass

    # ------------------------------------------------------------------ on the GUI thread

    def _drain(self) -> None:
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                return
            if isinstance(item, ChildEnd):
                self._end(item)
            else:
                self._dispatch(item)

    def _dispatch(self, msg: protocol.Message) -> None:
        collect(self._outcome, msg)
        if msg.type == protocol.PROGRESS:
            self.progress.emit(msg.data)
        elif msg.type == protocol.RESULT:
            self.result.emit(msg.data)
        elif msg.type == protocol.ERROR:
            self.error.emit(msg.data)
        elif msg.type == protocol.LOG:
            self.log.emit(msg.text)

    def _end(self, end: ChildEnd) -> None:
        self._child = None
        self.finished.emit(finish(self._outcome, end, f"the {self.job} job", program=self._program))
