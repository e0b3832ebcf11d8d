"""Running a lab job in a child process, without Qt: for the CLI, the sweep and the benchmarks.

The child streams JSON lines (:mod:`cpudoctor.lab.protocol`). The process
itself is run by the app's one child runner,
:class:`cpudoctor.kits.child.runner.ChildProcess` (own session, staged stop
ask -> wait -> terminate -> kill as s-tui stops its stress workers, no
descendant left behind); this module files the messages into a
:class:`JobOutcome` (:func:`collect`) and explains the end (:func:`finish`,
:func:`classify`, with :func:`cpudoctor.kits.child.exitstatus.diagnose_exit`'s
words). The Qt :class:`cpudoctor.gui.job_runner.JobRunner` uses the same
three and :func:`job_command`, so the GUI and the CLI say the same thing.
No torch here.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from cpudoctor.lab import deadlines, jobs, protocol
from cpudoctor.lab.deadlines import Deadlines
from cpudoctor.kits.child.exitstatus import ExitDiagnosis, diagnose_exit
from cpudoctor.kits.child.own import frozen, own_command, own_script_command
from cpudoctor.kits.child.runner import ASK_WAIT_S, CHILD_FLAGS, TERM_WAIT_S, ChildEnd, ChildProcess
from cpudoctor.kits.child.runner import WAIT_SLICE_S as _runner_wait_slice

# Jobs that run in CPU Doctor's own interpreter (``python -m``): orchestrators without torch that start
# the child jobs themselves. Every other job is a standalone script in lab/jobs/ (JOB_SCRIPTS).
JOB_MODULES = {
    "sweep": "cpudoctor.lab.sweep",
    "infer": "cpudoctor.lab.infer",
}
MAX_LOG_LINES = 1000    # log lines an outcome keeps (the last ones)
JOB_SCRIPTS = tuple(j for j in jobs.JOBS if j not in JOB_MODULES)   # "infer": its workers are lab/jobs/infer.py
WAIT_SLICE_S = _runner_wait_slice  # re-exported: how often wait() returns to Python (Ctrl-C)


def job_command(job: str, args: dict[str, Any], python: str | None = None) -> list[str]:
    """The argv that starts lab job ``job`` with ``args``, in the interpreter ``python`` (default: this one).

    A child job (``train``, ``gemm``, ``quant``, or the path of a script) runs
    by path and isolated (``-I``: no user site, no PYTHON* variables, not even
    its own folder on sys.path), so it needs nothing of CPU Doctor in the
    environment it measures. An orchestrator in JOB_MODULES (the sweep) runs
    in CPU Doctor's own code (``own_command``: also in the standalone app) and
    is handed ``python`` for its workers.
    """
    tail = ["--control", "stdin"]
    if job in JOB_MODULES or job.startswith("cpudoctor."):
        if python and python != sys.executable:
            args = {**args, "python": python}
        return own_command(JOB_MODULES.get(job, job), "--json-args", json.dumps(args), *tail)
    from cpudoctor.probes.child.scripts import script_path as probe_script

    script = jobs.script_path(job) if job in JOB_SCRIPTS else Path(job)
    # Through the one launcher of standalone scripts: the user's PYTHONPATH and user site, which -I drops.
    launch = probe_script("_launch")
    if python is None and frozen():
        return own_script_command(launch, str(script), "--json-args", json.dumps(args), *tail)
    return [python or sys.executable, *CHILD_FLAGS, str(launch), str(script), "--json-args", json.dumps(args), *tail]


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


def isa_hint(root: str = "/", package: str = "torch") -> str:
    """What ``package``'s build needs vs what this CPU has, for a SIGILL message (no import of it).

    The floors are knowledge (resources/isa_floors.json); the probe says what the
    build needs against what this CPU has (probes/software/isarisk.shortfall).
    For numpy a forced ``OPENBLAS_CORETYPE`` is named first: it makes OpenBLAS
    run kernels the CPU may lack.
    """
    import os
    from importlib import metadata
    from pathlib import Path

    try:
        version = metadata.version(package)
    except metadata.PackageNotFoundError:
        version = None
    forced = os.environ.get("OPENBLAS_CORETYPE") if package in ("numpy", "scipy") else None
    prefix = f"OPENBLAS_CORETYPE={forced} forces numpy's OpenBLAS kernels; " if forced else ""
    try:
        from cpudoctor.probes import probe_cpu
        from cpudoctor.probes.software.isarisk import shortfall

        return prefix + shortfall(probe_cpu(Path(root)), package, version)
    except Exception:  # noqa: BLE001 - the hint must never fail the diagnosis
        return prefix + f"{package} {version or ''} uses an instruction this CPU does not have".replace("  ", " ")


@dataclass
class JobOutcome:
    """Everything a finished (or stopped, or crashed) job left: partial progress is kept."""

    status: str = "ok"                     # ok | cancelled | crashed | error
    result: dict[str, Any] | None = None
    progress: list[dict[str, Any]] = field(default_factory=list)
    logs: list[str] = field(default_factory=list)
    facts: dict[str, Any] = field(default_factory=dict)   # objects without a "type", merged (lines.FACTS)
    error: dict[str, Any] | None = None    # the child's own protocol error message
    diagnosis: ExitDiagnosis = field(default_factory=lambda: ExitDiagnosis("ok"))
    returncode: int | None = None
    peak_rss_bytes: int | None = None
    stderr_tail: str = ""
    elapsed: float = 0.0
    stage_library: str | None = None       # the library the job said it was running last (blamed for a crash)

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


def collect(outcome: JobOutcome, msg: protocol.Message) -> None:
    """File one message from the child into ``outcome`` (the GUI adapter files them the same way)."""
    if msg.type == protocol.PROGRESS:
        outcome.progress.append(msg.data)
    elif msg.type == protocol.RESULT:
        outcome.result = msg.data
    elif msg.type == protocol.ERROR:
        outcome.error = msg.data
    elif msg.type == protocol.FACTS:
        outcome.facts.update(msg.data)
    else:
        outcome.logs.append(msg.text)
        if msg.data.get("library"):                # the job says which library it is about to run
            outcome.stage_library = str(msg.data["library"])
        if len(outcome.logs) > MAX_LOG_LINES:      # a chatty library must not fill the memory
            del outcome.logs[: len(outcome.logs) - MAX_LOG_LINES]


def _deadline_passed(end: ChildEnd, what: str, program: str | None) -> ExitDiagnosis | None:
    """Words for a job stopped at a deadline (:mod:`cpudoctor.lab.deadlines`), None when it met them."""
    from cpudoctor.kits.escape import one_line

    interpreter = f"its interpreter ({one_line(program)})" if program else "its interpreter"
    if end.no_start == "silent":
        waited = f"{end.startup_timeout:g} s" if end.startup_timeout is not None else "its start-up time"
        return ExitDiagnosis("no_start", message=(
            f"{what} did not start: {interpreter} said nothing for {waited} and was stopped (it may hang or "
            f"not be a Python; check it with: {one_line(program or 'python')} -c 'print(1)')"))
    if end.no_start == "flooded":
        return ExitDiagnosis("no_start", message=(
            f"{what} did not start: {interpreter} printed more than {end.raw_lines - 1:,} lines that are not CPU "
            "Doctor's job protocol and was stopped (a wrapper script, or a sitecustomize printing to stdout?)"))
    if end.timed_out:
        return ExitDiagnosis("deadline", message=(
            f"{what} ran past its deadline, far beyond what its settings ask, and was stopped after "
            f"{end.seconds:.0f} s; what it measured before is kept (a hung library, or a machine far too busy)"))
    return None


def finish(outcome: JobOutcome, end: ChildEnd, what: str, program: str | None = None) -> JobOutcome:
    """Complete ``outcome`` with how the child ended: status, diagnosis, exit code, memory."""
    outcome.returncode = end.returncode
    outcome.stderr_tail = end.stderr_tail
    outcome.elapsed = round(end.seconds, 3)
    outcome.peak_rss_bytes = end.peak_rss_bytes
    if end.start_error:
        outcome.status, outcome.diagnosis = "error", ExitDiagnosis("error", message=end.start_error)
        return outcome
    late = _deadline_passed(end, what, program)
    if late is not None:
        outcome.status, outcome.diagnosis = "error", late
        return outcome
    library = outcome.stage_library               # a crash is blamed on the library that was running
    outcome.status, outcome.diagnosis = classify(
        end.returncode, result=outcome.result, error=outcome.error, stop_requested=end.stop_requested,
        stderr_tail=end.stderr_tail, peak_rss_bytes=end.peak_rss_bytes,
        what=f"{what} (running {library})" if library else what,
        isa_hint_fn=(lambda: isa_hint(package=library)) if library else isa_hint,
    )
    return outcome


class Job:
    """One lab job in a child process (:class:`~cpudoctor.kits.child.runner.ChildProcess`).

    ``outcome`` fills in while the job runs; ``on_message`` is called on the
    reader thread for every message, in order.
    """

    def __init__(self, argv: list[str], on_message: Callable[[protocol.Message], None] | None = None,
                 env: dict[str, str] | None = None, what: str = "the job", limits: Deadlines | None = None):
        self.argv = argv
        self.on_message = on_message
        self.env = env
        self.what = what
        self.outcome = JobOutcome()
        limits = limits or Deadlines(deadlines.startup_s(), None)
        self._child = ChildProcess(argv, what=what, env=env, control_stdin=True, on_message=self._collect,
                                   ask_wait=ASK_WAIT_S, term_wait=TERM_WAIT_S, timeout=limits.total_s,
                                   startup_timeout=limits.startup_s, max_raw_lines=deadlines.MAX_RAW_LINES)
        self._finished = False

    @property
    def pid(self) -> int | None:
        return self._child.pid

    @property
    def peak_rss_bytes(self) -> int | None:
        """The most memory the job's process tree has held so far (the outcome has it once the job ended)."""
        return self._child.peak_rss_bytes

    @property
    def _proc(self):
        """The child's Popen (the sweep polls it between variants)."""
        return self._child.popen

    def _collect(self, msg: protocol.Message) -> None:
        collect(self.outcome, msg)
        if self.on_message is not None:
            self.on_message(msg)

    def start(self) -> "Job":
        self._child.start()
        return self

    def send(self, line: str) -> bool:
        """Write one control line to the child (a serving job's ``measure`` command); False when it is gone."""
        return self._child.send(line)

    def signal(self, sig: int) -> None:
        """Send ``sig`` to the job's process group and every descendant the kit has seen (nothing once it ended):
        the inference lab freezes a worker with SIGSTOP while another measures."""
        self._child.signal(sig)

    def request_stop(self) -> None:
        """Stage 1: ask the job to stop (it finishes the step and sends a cancelled result)."""
        self._child.request_stop()

    def stop(self, ask_wait: float = ASK_WAIT_S, term_wait: float = TERM_WAIT_S) -> JobOutcome:
        """Ask, wait, terminate, wait, kill: the child and its helpers are gone in under a second."""
        return self._finish(self._child.stop(ask_wait, term_wait))

    def wait(self, timeout: float | None = None) -> JobOutcome:
        """Wait for the child (stop it in stages after ``timeout`` seconds) and classify its end."""
        return self._finish(self._child.wait(timeout))

    def _finish(self, end: ChildEnd) -> JobOutcome:
        if not self._finished:
            self._finished = True
            finish(self.outcome, end, self.what, program=self.argv[0] if self.argv else None)
        return self.outcome


def run_job(job: str, args: dict[str, Any], on_message: Callable[[protocol.Message], None] | None = None,
            timeout: float | None = None, stop_event: threading.Event | None = None,
            argv: list[str] | None = None, limits: Deadlines | None = None) -> JobOutcome:
    """Run one job to the end; ``stop_event`` (set from another thread) stops it in stages.

    ``limits``: its start-up and overall deadlines (default: :func:`cpudoctor.lab.deadlines.for_job`)."""
    limits = limits or deadlines.for_job(job, args)
    runner = Job(argv or job_command(job, args), on_message, what=f"the {job} job", limits=limits).start()
    if stop_event is None:
        return runner.wait(timeout)
    deadline = None if timeout is None else time.monotonic() + timeout
    while not runner._child.join(0.05):
        if stop_event.is_set() or (deadline is not None and time.monotonic() > deadline):
            return runner.stop()
    return runner.wait()


def child_env_without(*names: str) -> dict[str, str]:
    """A copy of the environment without ``names`` (e.g. thread variables a sweep sets itself)."""
    env = dict(os.environ)
    for n in names:
        env.pop(n, None)
    return env
