"""Running a lab job in a child process, without Qt: for the CLI, the sweep and the benchmarks.

The child streams JSON lines (:mod:`cpudoctor.lab.protocol`); this module
collects them, calls back on each message, stops the child in stages
(ask -> wait -> terminate -> kill, as s-tui stops its stress workers), and
explains a death with :func:`cpudoctor.probes.exitstatus.diagnose_exit`.
The Qt :class:`cpudoctor.gui.job_runner.JobRunner` shares :func:`classify`
and :func:`job_command`, so the GUI and the CLI say the same thing.
No torch here.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable

from cpudoctor.lab import protocol
from cpudoctor.probes.exitstatus import ExitDiagnosis, diagnose_exit

JOB_MODULES = {
    "train": "cpudoctor.lab.train",
    "gemm": "cpudoctor.lab.gemm",
    "quant": "cpudoctor.lab.quant",
    "sweep": "cpudoctor.lab.sweep",
}
ASK_WAIT_S = 0.5        # after writing "stop": time to finish the step and send a result
TERM_WAIT_S = 0.3       # after SIGTERM, before SIGKILL: the whole stop stays under a second
WAIT_SLICE_S = 0.2      # wait() returns to Python this often, so Ctrl-C is seen while a job runs


def job_command(job: str, args: dict[str, Any], python: str | None = None) -> list[str]:
    """The argv that starts lab job ``job`` (a short name or a module path) with ``args``."""
    module = JOB_MODULES.get(job, job)
    return [python or sys.executable, "-m", module, "--json-args", json.dumps(args), "--control", "stdin"]


def format_bytes(n: float | None) -> str:
    if n is None:
        return "unknown"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1024
    return f"{n:.1f} TiB"


def memory_total() -> int | None:
    try:
        import psutil

        return int(psutil.virtual_memory().total)
    except Exception:  # noqa: BLE001 - psutil missing or unsupported platform
        return None


def isa_hint(root: str = "/") -> str:
    """What the torch build needs vs what this CPU has, for a SIGILL message (no torch import).

    The floors are data (resources/isa_floors.json, read by probes/isarisk.py).
    """
    from importlib import metadata
    from pathlib import Path

    try:
        version = metadata.version("torch")
    except metadata.PackageNotFoundError:
        version = None
    try:
        from cpudoctor.probes.cpu import probe_cpu
        from cpudoctor.probes.isarisk import isa_hint as floor_hint

        return floor_hint(probe_cpu(Path(root)), "torch", version)
    except Exception:  # noqa: BLE001 - the hint must never fail the diagnosis
        return f"torch {version or ''} uses an instruction this CPU does not have".replace("  ", " ")


@dataclass
class JobOutcome:
    """Everything a finished (or stopped, or crashed) job left: partial progress is kept."""

    status: str = "ok"                     # ok | cancelled | crashed | error
    result: dict[str, Any] | None = None
    progress: list[dict[str, Any]] = field(default_factory=list)
    logs: list[str] = field(default_factory=list)
    error: dict[str, Any] | None = None    # the child's own protocol error message
    diagnosis: ExitDiagnosis = field(default_factory=lambda: ExitDiagnosis("ok"))
    returncode: int | None = None
    peak_rss_bytes: int | None = None
    stderr_tail: str = ""
    elapsed: float = 0.0

    @property
    def message(self) -> str:
        """One line for people: what happened."""
        if self.status == "ok":
            return "finished"
        if self.status == "cancelled":
            return "cancelled; partial results kept"
        return self.diagnosis.message or (self.error or {}).get("message", "failed")


def classify(
    returncode: int | None,
    *,
    result: dict[str, Any] | None,
    error: dict[str, Any] | None,
    stop_requested: bool,
    stderr_tail: str = "",
    peak_rss_bytes: int | None = None,
    what: str = "the job",
    isa_hint_fn: Callable[[], str] = isa_hint,
) -> tuple[str, ExitDiagnosis]:
    """Status and diagnosis of a finished child, from its exit code and what it said.

    A child we asked to stop is "cancelled" whatever signal ended it; a child
    that explained its own failure (protocol ``error``) is "error" with its
    words; a death by signal is "crashed" with :func:`diagnose_exit`'s words.
    """
    if returncode == 0 and result is not None:
        status = str(result.get("status", "ok"))
        return ("cancelled" if status == "cancelled" else "ok"), ExitDiagnosis("ok")
    if stop_requested:
        return "cancelled", ExitDiagnosis("ok", message="stopped on request")
    if error is not None:
        return "error", ExitDiagnosis("error", message=str(error.get("message", "the job failed")))
    signum = -returncode if (returncode is not None and returncode < 0) else None
    hint = isa_hint_fn() if signum == signal.SIGILL else ""
    mem = ""
    if signum == signal.SIGKILL:
        total = memory_total()
        mem = f"the job used up to {format_bytes(peak_rss_bytes)}"
        mem += f" of {format_bytes(total)} memory" if total else ""
    if returncode == 0:
        return "error", ExitDiagnosis("error", message=f"{what} ended without a result")
    diag = diagnose_exit(returncode, stderr_tail=stderr_tail, isa_hint=hint, memory_hint=mem, what=what)
    return ("crashed" if diag.kind in ("illegal_instruction", "out_of_memory", "signal") else "error"), diag


def tree_rss(pid: int) -> int | None:
    """Resident memory of the child and its children (the sweep starts grandchildren)."""
    try:
        import psutil

        proc = psutil.Process(pid)
        total = proc.memory_info().rss
        for child in proc.children(recursive=True):
            try:
                total += child.memory_info().rss
            except psutil.Error:
                pass
        return total
    except Exception:  # noqa: BLE001 - gone already, or no psutil
        return None


class Job:
    """One child process speaking the protocol. Callbacks run on a reader thread."""

    def __init__(self, argv: list[str], on_message: Callable[[protocol.Message], None] | None = None,
                 env: dict[str, str] | None = None, what: str = "the job"):
        self.argv = argv
        self.on_message = on_message
        self.env = env
        self.what = what
        self.outcome = JobOutcome()
        self._proc: subprocess.Popen | None = None
        self._stop_requested = False
        self._stderr = deque(maxlen=60)
        self._threads: list[threading.Thread] = []
        self._done = threading.Event()
        self._start_time = 0.0

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    def start(self) -> "Job":
        self._start_time = time.perf_counter()
        self._proc = subprocess.Popen(
            self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            env=self.env, close_fds=True,
        )
        for target in (self._read_stdout, self._read_stderr, self._watch_memory):
            t = threading.Thread(target=target, daemon=True)
            t.start()
            self._threads.append(t)
        return self

    def _read_stdout(self) -> None:
        assert self._proc and self._proc.stdout
        for raw in self._proc.stdout:
            msg = protocol.parse_line(raw)
            if msg is None:
                continue
            if msg.type == protocol.PROGRESS:
                self.outcome.progress.append(msg.data)
            elif msg.type == protocol.RESULT:
                self.outcome.result = msg.data
            elif msg.type == protocol.ERROR:
                self.outcome.error = msg.data
            else:
                self.outcome.logs.append(msg.text)
            if self.on_message is not None:
                try:
                    self.on_message(msg)
                except Exception:  # noqa: BLE001 - a display bug must not kill the reader
                    pass

    def _read_stderr(self) -> None:
        assert self._proc and self._proc.stderr
        for raw in self._proc.stderr:
            self._stderr.append(raw.decode("utf-8", "replace").rstrip())

    def _watch_memory(self) -> None:
        while not self._done.is_set() and self._proc is not None and self._proc.poll() is None:
            rss = tree_rss(self._proc.pid)
            if rss is not None:
                self.outcome.peak_rss_bytes = max(rss, self.outcome.peak_rss_bytes or 0)
            self._done.wait(0.2)

    def request_stop(self) -> None:
        """Stage 1: ask the job to stop (it finishes the step and sends a cancelled result)."""
        self._stop_requested = True
        proc = self._proc
        if proc is None or proc.poll() is not None or proc.stdin is None:
            return
        try:
            proc.stdin.write(protocol.STOP_COMMAND.encode() + b"\n")
            proc.stdin.flush()
            proc.stdin.close()
        except (OSError, ValueError):
            pass

    def stop(self, ask_wait: float = ASK_WAIT_S, term_wait: float = TERM_WAIT_S) -> JobOutcome:
        """Ask, wait, terminate, wait, kill: the child is gone in under a second."""
        self.request_stop()
        proc = self._proc
        if proc is not None:
            try:
                proc.wait(ask_wait)
            except subprocess.TimeoutExpired:
                proc.terminate()
                try:
                    proc.wait(term_wait)
                except subprocess.TimeoutExpired:
                    proc.kill()
        return self.wait()

    def wait(self, timeout: float | None = None) -> JobOutcome:
        """Wait for the child (stop it in stages after ``timeout`` seconds) and classify its end."""
        proc = self._proc
        if proc is None:
            raise RuntimeError("the job was not started")
        deadline = None if timeout is None else time.monotonic() + timeout
        while proc.poll() is None:
            if deadline is not None and time.monotonic() >= deadline:
                return self.stop()
            # Short slices, not one blocking waitpid: Ctrl-C that the kernel hands to a reader thread
            # is only flagged there, and this (main) thread raises KeyboardInterrupt when it next runs
            # Python code. Blocked in waitpid, that would be when the job ends.
            left = WAIT_SLICE_S if deadline is None else max(0.0, min(WAIT_SLICE_S, deadline - time.monotonic()))
            try:
                proc.wait(left)
            except subprocess.TimeoutExpired:
                pass
        for t in self._threads[:2]:
            t.join(2.0)
        self._done.set()
        if proc.stdin and not proc.stdin.closed:
            try:
                proc.stdin.close()
            except OSError:
                pass
        out = self.outcome
        out.returncode = proc.returncode
        out.stderr_tail = "\n".join(self._stderr)
        out.elapsed = round(time.perf_counter() - self._start_time, 3)
        out.status, out.diagnosis = classify(
            proc.returncode, result=out.result, error=out.error, stop_requested=self._stop_requested,
            stderr_tail=out.stderr_tail, peak_rss_bytes=out.peak_rss_bytes, what=self.what,
        )
        return out


def run_job(job: str, args: dict[str, Any], on_message: Callable[[protocol.Message], None] | None = None,
            timeout: float | None = None, stop_event: threading.Event | None = None,
            argv: list[str] | None = None) -> JobOutcome:
    """Run one job to the end; ``stop_event`` (set from another thread) stops it in stages."""
    runner = Job(argv or job_command(job, args), on_message, what=f"the {job} job").start()
    if stop_event is None:
        return runner.wait(timeout)
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        assert runner._proc is not None
        if runner._proc.poll() is not None:
            return runner.wait()
        if stop_event.is_set() or (deadline is not None and time.monotonic() > deadline):
            return runner.stop()
        stop_event.wait(0.05)


def child_env_without(*names: str) -> dict[str, str]:
    """A copy of the environment without ``names`` (e.g. thread variables a sweep sets itself)."""
    env = dict(os.environ)
    for n in names:
        env.pop(n, None)
    return env
