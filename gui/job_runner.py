"""JobRunner: a lab job in a QProcess, its JSON lines turned into Qt signals.

Any page can run a child job with it (training, sweep, GEMM, quantisation, or
any command speaking :mod:`cpudoctor.lab.protocol`). The GUI process never
imports torch: only the child does, so a SIGILL or an OOM kill takes down the
child, and the page shows the diagnosis while the app stays up.

Cancel stops in stages within a second: ``stop`` on stdin (the job finishes
its step and sends a cancelled result), then SIGTERM, then SIGKILL.
"""

from __future__ import annotations

import sys
from collections import deque
from typing import Any

from PySide6.QtCore import QObject, QProcess, QTimer, Signal

from cpudoctor.lab import protocol
from cpudoctor.lab.runner import ASK_WAIT_S, TERM_WAIT_S, JobOutcome, tree_rss, classify, job_command


class JobRunner(QObject):
    started = Signal()
    progress = Signal(dict)
    result = Signal(dict)
    log = Signal(str)
    error = Signal(dict)            # the child's own error message: {"message", "kind", ...}
    finished = Signal(object)       # JobOutcome: status, diagnosis, partial progress, result

    def __init__(self, parent: QObject | None = None, python: str | None = None):
        super().__init__(parent)
        self.python = python or sys.executable
        self.job = ""
        self._proc: QProcess | None = None
        self._buffer = protocol.LineBuffer()
        self._stderr: deque[str] = deque(maxlen=60)
        self._outcome = JobOutcome()
        self._stop_requested = False
        self._mem_timer = QTimer(self)
        self._mem_timer.setObjectName("jobMemoryWatch")
        self._mem_timer.setInterval(250)
        self._mem_timer.timeout.connect(self._sample_memory)
        self._term_timer = QTimer(self)
        self._term_timer.setObjectName("jobTerminate")
        self._term_timer.setSingleShot(True)
        self._term_timer.timeout.connect(self._terminate)
        self._kill_timer = QTimer(self)
        self._kill_timer.setObjectName("jobKill")
        self._kill_timer.setSingleShot(True)
        self._kill_timer.timeout.connect(self._kill)

    # ------------------------------------------------------------------ control

    @property
    def outcome(self) -> JobOutcome:
        """What the current (or last) job sent so far: progress, result, error."""
        return self._outcome

    def is_running(self) -> bool:
        return self._proc is not None and self._proc.state() != QProcess.ProcessState.NotRunning

    def start(self, job_module: str, args: dict[str, Any]) -> None:
        """Start lab job ``job_module`` (``train``, ``gemm``, ... or a module path) with ``args``."""
        self.start_argv(job_command(job_module, args, self.python), job=job_module)

    def start_argv(self, argv: list[str], job: str = "job") -> None:
        """Start any protocol-speaking command (tests use a tiny ``python -c`` child)."""
        if self.is_running():
            raise RuntimeError("a job is already running; cancel it first")
        self.job = job
        self._buffer = protocol.LineBuffer()
        self._stderr.clear()
        self._outcome = JobOutcome()
        self._stop_requested = False
        proc = QProcess(self)
        proc.setProgram(argv[0])
        proc.setArguments(argv[1:])
        proc.readyReadStandardOutput.connect(self._read_stdout)
        proc.readyReadStandardError.connect(self._read_stderr)
        proc.finished.connect(self._finished)
        proc.errorOccurred.connect(self._error_occurred)
        self._proc = proc
        proc.start()
        self._mem_timer.start()
        self.started.emit()

    def cancel(self) -> None:
        """Ask the job to stop; terminate after ASK_WAIT_S, kill TERM_WAIT_S later."""
        if not self.is_running():
            return
        self._stop_requested = True
        proc = self._proc
        assert proc is not None
        proc.write((protocol.STOP_COMMAND + "\n").encode())
        proc.closeWriteChannel()
        self._term_timer.start(int(ASK_WAIT_S * 1000))

    def wait_finished(self, msecs: int = 30_000) -> bool:
        """Block until the child ends (for scripts and teardown; the GUI uses signals)."""
        if self._proc is None:
            return True
        done = self._proc.waitForFinished(msecs)
        return done

    def _terminate(self) -> None:
        if self.is_running():
            self._proc.terminate()
            self._kill_timer.start(int(TERM_WAIT_S * 1000))

    def _kill(self) -> None:
        if self.is_running():
            self._proc.kill()

    # ------------------------------------------------------------------ child output

    def _read_stdout(self) -> None:
        if self._proc is None:
            return
        for line in self._buffer.feed(bytes(self._proc.readAllStandardOutput())):
            self._dispatch(line)

    def _dispatch(self, line: str) -> None:
        msg = protocol.parse_line(line)
        if msg is None:
            return
        out = self._outcome
        if msg.type == protocol.PROGRESS:
            out.progress.append(msg.data)
            self.progress.emit(msg.data)
        elif msg.type == protocol.RESULT:
            out.result = msg.data
            self.result.emit(msg.data)
        elif msg.type == protocol.ERROR:
            out.error = msg.data
            self.error.emit(msg.data)
        else:
            out.logs.append(msg.text)
            self.log.emit(msg.text)

    def _read_stderr(self) -> None:
        if self._proc is None:
            return
        text = bytes(self._proc.readAllStandardError()).decode("utf-8", "replace")
        self._stderr.extend(line for line in text.splitlines() if line.strip())

    def _sample_memory(self) -> None:
        if self._proc is None:
            return
        pid = int(self._proc.processId())
        if pid > 0:
            rss = tree_rss(pid)
            if rss is not None:
                self._outcome.peak_rss_bytes = max(rss, self._outcome.peak_rss_bytes or 0)

    def _error_occurred(self, err: QProcess.ProcessError) -> None:
        if err == QProcess.ProcessError.FailedToStart and self._proc is not None:
            self._mem_timer.stop()
            out = self._outcome
            out.status, out.diagnosis = classify(None, result=None, error=None, stop_requested=False,
                                                 what=f"the {self.job} job")
            out.diagnosis.message = f"the {self.job} job could not start: {self._proc.errorString()}"
            self._proc = None
            self.finished.emit(out)

    def _finished(self, exit_code: int, exit_status: QProcess.ExitStatus) -> None:
        self._mem_timer.stop()
        self._term_timer.stop()
        self._kill_timer.stop()
        self._read_stdout()
        self._read_stderr()
        for line in self._buffer.flush():
            self._dispatch(line)
        # QProcess gives the signal number as the exit code of a crashed child.
        crashed = exit_status == QProcess.ExitStatus.CrashExit
        returncode = -exit_code if crashed and exit_code > 0 else exit_code
        if crashed and exit_code == 0:
            returncode = None
        out = self._outcome
        out.returncode = returncode
        out.stderr_tail = "\n".join(self._stderr)
        out.status, out.diagnosis = classify(
            returncode, result=out.result, error=out.error, stop_requested=self._stop_requested,
            stderr_tail=out.stderr_tail, peak_rss_bytes=out.peak_rss_bytes, what=f"the {self.job} job",
        )
        proc, self._proc = self._proc, None
        if proc is not None:
            proc.deleteLater()
        self.finished.emit(out)
