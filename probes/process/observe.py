"""Start a command, pass its output and exit code through, and observe it: ``cpudoctor run``'s facts.

The job runs as a child with these diagnostics switched on where it
does not already set them: oneDNN's verbose profile (``ONEDNN_VERBOSE=profile_exec``:
the kernel, ISA, shapes and time of every primitive), oneMKL's (``MKL_VERBOSE=1``:
each GEMM's sizes, time and threads; PyTorch's fp32 linear layers go there), PyTorch's recompilation log
(``TORCH_LOGS=+recompiles`` added to what is there), Python's fault handler
(``PYTHONFAULTHANDLER=1``: a job that dies of a signal prints its Python stack, which
goes on to the job's stderr and is kept for :mod:`cpudoctor.probes.process.crash`) and, on Linux, the Yama
permission to be traced by CPU Doctor's sampler (``prctl(PR_SET_PTRACER)``),
so that ``run`` needs no extra rights for its own child.

The diagnostics print into the job's own streams; such a stream therefore goes
through a filter (:class:`cpudoctor.kits.child.streams.PassThrough`) that holds
back exactly the lines those libraries print in their own format (only the ones
CPU Doctor switched on: a job that sets ``ONEDNN_VERBOSE`` itself keeps its lines,
and a job's own line that merely contains ``dnnl_verbose,`` is the job's) and
passes every other byte on unchanged, as it comes (a progress bar's ``\\r``
included), within bounded memory. A stream with nothing to hold back is the
job's own: it writes straight to CPU Doctor's stdout (``run -- yes | head`` ends
when ``head`` does); a filtered stream whose reader goes away is closed, so the
job gets its SIGPIPE all the same.

The job runs through the kit's runner (:mod:`cpudoctor.kits.child.runner`) in
its own process group, so every signal reaches its whole tree (a shell's
children, multiprocessing's workers). It ends by itself, by Ctrl-C (forwarded to
its group, as the terminal would send it), by SIGTERM or SIGHUP to CPU Doctor
(stopped the same way), or after ``seconds``: SIGINT, after a grace period
SIGTERM, then SIGKILL. Should CPU Doctor die without a word (SIGKILL), the job
gets SIGKILL from the kernel (a parent-death signal) and a small guard ends the
rest of its group.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import BinaryIO

from cpudoctor.kits.child.runner import ChildProcess
from cpudoctor.kits.child.streams import INHERIT, PassThrough
from cpudoctor.model.evidence import RunObservation
from cpudoctor.probes.process import mkl_verbose
from cpudoctor.probes.process.crash import FaultTap, could_start_fault, job_crash
from cpudoctor.probes.process.onednn_verbose import PREFIXES, parse_onednn_verbose, printed_by_onednn
from cpudoctor.probes.process.timing import TimeSampler
from cpudoctor.probes.process.torch_logs import logged_limit, logged_recompile, parse_recompiles

GRACE_S = 5.0                 # after SIGINT, then after SIGTERM
PR_SET_PTRACER = 0x59616D61
PR_SET_PTRACER_ANY = -1
# Signals to CPU Doctor that stop the job as Ctrl-C does (ended_by says which).
STOP_SIGNALS = ("SIGINT", "SIGTERM", "SIGHUP")


VERBOSE_WINDOWS = "CPUDOCTOR_VERBOSE_WINDOWS"     # probes/child/scripts/verbose_window.py's plan: "on=2,every=10"


def diagnostic_env(base: dict[str, str], windows: str | None = None) -> tuple[dict[str, str], dict[str, str]]:
    """(the job's environment, the variables CPU Doctor added) — nothing the job set is overridden. ``windows``
    (``"on=2,every=10"``) asks the job's probe to keep the verbose lines on for those windows only."""
    env = dict(base)
    added: dict[str, str] = {}
    if windows:
        env[VERBOSE_WINDOWS] = added[VERBOSE_WINDOWS] = windows
    if "ONEDNN_VERBOSE" not in env and "DNNL_VERBOSE" not in env:
        env["ONEDNN_VERBOSE"] = added["ONEDNN_VERBOSE"] = "profile_exec"
    if "MKL_VERBOSE" not in env:
        env["MKL_VERBOSE"] = added["MKL_VERBOSE"] = "1"
    logs = env.get("TORCH_LOGS", "")
    if "recompiles" not in logs:
        env["TORCH_LOGS"] = added["TORCH_LOGS"] = (logs + "," if logs else "") + "+recompiles"
    if "PYTHONFAULTHANDLER" not in env:
        env["PYTHONFAULTHANDLER"] = added["PYTHONFAULTHANDLER"] = "1"   # a crash prints the Python stack
    return env, added


def _could_be_onednn(rest: bytes) -> bool:
    head = rest[:16]
    return any(p.encode().startswith(head) or head.startswith(p.encode())
               for p in PREFIXES + (mkl_verbose.PREFIX,))


def _keeper(added: dict[str, str]) -> Callable[[str], bool]:
    """Which of the job's stdout lines are CPU Doctor's to hold back: those in the exact format of the verbose
    modes it switched on (oneDNN's, oneMKL's); a job's own line that merely starts like one is the job's."""
    onednn, mkl = "ONEDNN_VERBOSE" in added, "MKL_VERBOSE" in added
    return lambda t: (onednn and printed_by_onednn(t)) or (mkl and mkl_verbose.printed_by_mkl(t))


def _could_be_stderr_line(rest: bytes) -> bool:
    """A line on the job's stderr that may still become one of PyTorch's log lines or Python's fault report."""
    return _could_be_torch_log(rest) or could_start_fault(rest)


def _could_be_torch_log(rest: bytes) -> bool:
    # PyTorch's log lines start with the level and the date: "V1201 15:50:06.136000 ..." ("[rank0]:V1201" when
    # distributed)
    if rest.startswith(b"[rank") or b"[rank".startswith(rest):
        rest = rest.split(b"]:", 1)[1] if b"]:" in rest else b""
    return len(rest) < 2 or (rest[:1] in (b"V", b"I", b"W", b"E", b"D", b"C") and rest[1:2].isdigit())


def _allow_tracing():
    """What the child runs before exec: let CPU Doctor's sampler trace it under Yama ptrace_scope=1
    (prctl looked up here, before the fork: the child only calls it). None off Linux."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    anyone = ctypes.c_ulong(PR_SET_PTRACER_ANY & 0xFFFFFFFFFFFFFFFF)

    def allow() -> None:
        prctl(PR_SET_PTRACER, anyone, 0, 0, 0)      # never stops the job from starting: its result is ignored

    return allow


def _before_exec(allow, affinity: list[int] | None):
    """What the child runs before exec: ``allow`` (the tracing permission), then binding it to ``affinity`` (a
    relaunch's ``taskset -c``, applied so the job's own interpreter still starts first and loads its probe). A CPU
    set the system refuses leaves the job where it was: its probe then reports its CPUs as they are."""
    if affinity is None or not hasattr(os, "sched_setaffinity"):
        return allow
    cpus = set(affinity)

    def before() -> None:
        if allow is not None:
            allow()
        try:
            os.sched_setaffinity(0, cpus)
        except OSError:
            pass

    return before


def _exit_code(returncode: int | None) -> int | None:
    if returncode is None:
        return None
    return 128 - returncode if returncode < 0 else returncode


class JobRun:
    """One observed run: :meth:`start`, then :meth:`wait` (or :meth:`interrupt` / :meth:`stop` from another thread).

    ``stdout``/``stderr``: where the job's output goes (None: CPU Doctor's own streams, which a stream
    with nothing to hold back gets directly).
    """

    def __init__(self, argv: list[str], *, seconds: float | None = None, cwd: str | None = None,
                 env: dict[str, str] | None = None, stdout: BinaryIO | None = None, stderr: BinaryIO | None = None,
                 rate: int | None = None, sample: bool = True, display: str | None = None,
                 verbose_windows: str | None = None, probe: bool = True, diagnostics: bool = True,
                 affinity: list[int] | None = None):
        self.argv = list(argv)
        self.seconds = seconds
        self.cwd = cwd
        self.base_env = dict(os.environ if env is None else env)
        self._own_out, self._own_err = stdout is None, stderr is None
        self.stdout = stdout if stdout is not None else getattr(sys.stdout, "buffer", None)
        self.stderr = stderr if stderr is not None else getattr(sys.stderr, "buffer", None)
        self.rate = rate
        self.sample = sample
        self.verbose_windows = verbose_windows
        self.probe = probe                      # the job-state probe (probes/process/jobprobe.py), Python jobs only
        self.diagnostics = diagnostics          # False: no verbose lines switched on (run --verify's measured windows)
        self.affinity = affinity                # the CPUs the job is started on (None: CPU Doctor's own)
        self._channel = None
        self._probe_off = ""
        self.obs = RunObservation(command=shown_command(self.argv, display))
        self.child: ChildProcess | None = None
        self._sampler: TimeSampler | None = None
        self._out: PassThrough | None = None
        self._err: PassThrough | None = None
        self._fault: FaultTap | None = None
        self._ended_by: str | None = None
        self._t0 = 0.0

    def start(self) -> bool:
        """Launch the job and the samplers; False (with ``obs.error``) when the command cannot start."""
        from cpudoctor.probes.software.envvars import filter_thread_env

        from cpudoctor.probes.process.jobprobe import ProbeChannel

        env, added = diagnostic_env(self.base_env, self.verbose_windows) if self.diagnostics else \
            (dict(self.base_env), {})
        self.obs.diagnostics = added
        env, self._channel, self._probe_off = ProbeChannel.open(self.argv, env, enabled=self.probe)
        self.obs.env = filter_thread_env(self.base_env)
        try:
            self.obs.launch_affinity = sorted(self.affinity) if self.affinity is not None else \
                sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
        except OSError:
            self.obs.launch_affinity = None
        self._out = self._stream(self.stdout, self._own_out, "ONEDNN_VERBOSE" in added or "MKL_VERBOSE" in added,
                                 _keeper(added), _could_be_onednn)
        self._fault = FaultTap() if "PYTHONFAULTHANDLER" in added else None
        self._err = self._stream(self.stderr, self._own_err, "TORCH_LOGS" in added or self._fault is not None,
                                 logged_recompile if "TORCH_LOGS" in added else (lambda _line: False),
                                 _could_be_stderr_line, tap=self._stderr_tap)
        self._flush_own()
        self._t0 = time.monotonic()
        self.child = ChildProcess(
            self.argv, what="the job", env=env, cwd=self.cwd, inherit_stdin=True,
            stdout=self._out if self._out is not None else INHERIT,
            stderr=self._err if self._err is not None else INHERIT,
            own_session=False, interrupt=signal.SIGINT, ask_wait=GRACE_S, term_wait=GRACE_S, timeout=self.seconds,
            die_with_parent=True, before_exec=_before_exec(_allow_tracing(), self.affinity),
        ).start()
        if self._ended_by is not None:
            self.child.cancel()             # stopped while it was being started
        end = self.child.end
        if end is not None and end.start_error:
            self.obs.ended_by = "failed"
            self.obs.error = f"cannot start {self.argv[0]!r}: {end.start_reason or end.start_error}"
            self.obs.exit_code = 127 if end.start_errno in _NOT_FOUND else 126
            if self._channel is not None:
                self._channel.close()
            return False
        self.obs.pid = self.child.pid
        if self.sample and self.obs.pid is not None:
            from cpudoctor.probes.process.stacks import RUN_RATE

            self._sampler = TimeSampler(self.obs.pid, observer="run", rate=self.rate or RUN_RATE)
            self._sampler.start()
        return True

    @property
    def probe_channel(self):
        """The probe's private folder and file for this run (None: no probe)."""
        return self._channel

    def _stderr_tap(self, line: str) -> bool:
        """Lines of the job's stderr that go on and are kept too: Dynamo's recompile-limit warning, Python's
        fault report."""
        return logged_limit(line) or (self._fault is not None and self._fault(line))

    @staticmethod
    def _stream(sink, own: bool, diagnosed: bool, hold, could_be, tap=None) -> PassThrough | None:
        """The filter for one of the job's streams; None: the job writes to CPU Doctor's own stream directly."""
        if own and not diagnosed and sink is not None and _has_fd(sink):
            return None
        return PassThrough(sink, hold if diagnosed else None, could_be if diagnosed else (lambda _head: False),
                           tap=tap if diagnosed else None)

    def _flush_own(self) -> None:
        """What CPU Doctor printed before must come before the job's first byte on a shared stream."""
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError, AttributeError):
                pass

    def interrupt(self, signal_name: str = "SIGINT") -> None:
        """Ctrl-C, or SIGTERM/SIGHUP to CPU Doctor (``signal_name``): SIGINT to the job's group (the
        terminal's own SIGINT no longer reaches it), then SIGTERM and SIGKILL after the grace periods;
        a second Ctrl-C is forwarded too, as the terminal would send it."""
        if self._ended_by is None:
            self._ended_by = "interrupt" if signal_name == "SIGINT" else "terminated"
            if signal_name != "SIGINT":
                self.obs.stop_signal = signal_name
        child = self.child
        if child is None:
            return                          # not started yet: start() stops it as soon as it runs
        if child.stopping:
            child.signal(signal.SIGINT)
        else:
            child.cancel()

    def stop(self) -> None:
        """Stop the job from another thread (the window's Stop): SIGINT, then SIGTERM, then SIGKILL."""
        if self.child is not None:
            if self._ended_by is None:
                self._ended_by = "stopped"
            self.child.cancel()

    def wait(self) -> RunObservation:
        """Until the job exits, is stopped, or ``seconds`` pass (then stopped in stages); then collect."""
        child = self.child
        if child is None or child.end is not None and child.end.start_error:
            return self.obs
        end = child.wait()
        self.obs.duration_s = round(end.seconds, 2)
        self.obs.exit_code = _exit_code(end.returncode)
        self.obs.ended_by = "seconds" if end.timed_out and self._ended_by is None else self._ended_by or "exit"
        if self._sampler is not None:
            self.obs.breakdown = self._sampler.stop()
        out, err = self._out, self._err
        self.obs.onednn = parse_onednn_verbose(out.lines() if out is not None else [])
        self.obs.mkl = mkl_verbose.parse_mkl_verbose(out.lines() if out is not None else [])
        self.obs.recompiles = parse_recompiles(err.lines() if err is not None else [])
        if self.obs.ended_by == "exit":
            self.obs.crash = job_crash(end.returncode, err.lines() if err is not None else [], self.obs.duration_s)
        self.obs.dropped_kernel_lines = bool(out is not None and out.dropped)
        self.obs.dropped_recompile_lines = bool(err is not None and err.dropped)
        if out is not None and out.sink_gone and self._own_out:
            _quiet_stdout()
        self.obs.state = self._read_state()
        return self.obs

    def _read_state(self):
        """What the job's probe wrote (JobState with ``why_not`` when it was not loaded)."""
        from cpudoctor.model.jobstate import JobState

        return self._channel.read(self.obs.pid) if self._channel is not None else JobState(why_not=self._probe_off)


_NOT_FOUND = (2,)   # errno ENOENT: no such command (a shell says 127); anything else that stops a start: 126


def _has_fd(stream) -> bool:
    try:
        stream.fileno()
    except (OSError, ValueError, AttributeError):
        return False
    return True


def _quiet_stdout() -> None:
    """Our stdout's reader went away (``run -- yes | head``): point it at /dev/null, so the exit's flush of
    Python's buffer raises nothing (what Python's documentation advises for SIGPIPE)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass


def shown_command(argv: list[str], display: str | None = None) -> str:
    """The job's command line as reports show it: every value a flag list does not allow ``<redacted>``
    (``--api-key=...``, ``--password ...``, a URL's password), as ``inspect`` shows a process; homes as ``~``.

    ``display`` (the command as the user typed it, before ``--python`` replaced the interpreter) is
    split and redacted the same way."""
    import shlex

    from cpudoctor.probes.process.procfs import shown_cmdline

    args = argv
    if display is not None:
        try:
            args = shlex.split(display)
        except ValueError:
            args = display.split()
    return shown_cmdline(args, limit=400)


def run_interruptible(job) -> RunObservation:
    """``job.start()`` and ``job.wait()`` (a :class:`JobRun`, or a :class:`cpudoctor.jobrun.WatchedRun` around
    one), with Ctrl-C, SIGTERM and SIGHUP to CPU Doctor turned into ``job.interrupt(name)`` on the main thread:
    the job is stopped as :meth:`JobRun.interrupt` says and the report is still made; the previous handlers
    come back afterwards. A signal that comes while the job starts stops it as soon as it runs."""
    previous: dict[int, object] = {}
    if threading.current_thread() is threading.main_thread():
        for name in STOP_SIGNALS:
            signum = getattr(signal, name, None)
            if signum is None:
                continue
            try:
                previous[signum] = signal.signal(signum, lambda *_a, _name=name: job.interrupt(_name))
            except (OSError, ValueError):
                continue
    try:
        if not job.start():
            return job.obs
        return job.wait()
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
