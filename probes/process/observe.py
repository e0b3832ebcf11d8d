"""Start a command, pass its output and exit code through, and observe it: ``cpudoctor run``'s facts.

The job runs as a child with three low-cost diagnostics switched on where it
does not already set them: oneDNN's verbose profile (``ONEDNN_VERBOSE=profile_exec``:
the kernel, ISA and time of every primitive), PyTorch's recompilation log
(``TORCH_LOGS=+recompiles`` added to what is there) and, on Linux, the Yama
permission to be traced by CPU Doctor's sampler (``prctl(PR_SET_PTRACER)``),
so that ``run`` needs no extra rights for its own child.

The diagnostics print into the job's own streams; the job's stdout and stderr
therefore go through a filter that takes out exactly those lines (only the ones
CPU Doctor switched on: a job that sets ``ONEDNN_VERBOSE`` itself keeps its lines)
and passes every other byte on unchanged, as it comes (a progress bar's ``\\r``
included). The job ends by itself, by Ctrl-C (it gets the SIGINT with the
terminal's process group, as it would without CPU Doctor), or after
``seconds``: then SIGINT, after a grace period SIGTERM, then SIGKILL.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import BinaryIO

from cpudoctor.model.evidence import RunObservation
from cpudoctor.probes.process.onednn_verbose import PREFIXES, is_verbose_line, parse_onednn_verbose
from cpudoctor.probes.process.timing import TimeSampler
from cpudoctor.probes.process.torch_logs import is_recompile_line, parse_recompiles

GRACE_S = 5.0                 # after SIGINT, then after SIGTERM
MAX_KEPT_LINES = 400_000      # diagnostic lines kept for the parsers (older ones are dropped)
PR_SET_PTRACER = 0x59616D61
PR_SET_PTRACER_ANY = -1


def diagnostic_env(base: dict[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    """(the job's environment, the variables CPU Doctor added) — nothing the job set is overridden."""
    env = dict(base)
    added: dict[str, str] = {}
    if "ONEDNN_VERBOSE" not in env and "DNNL_VERBOSE" not in env:
        env["ONEDNN_VERBOSE"] = added["ONEDNN_VERBOSE"] = "profile_exec"
    logs = env.get("TORCH_LOGS", "")
    if "recompiles" not in logs:
        env["TORCH_LOGS"] = added["TORCH_LOGS"] = (logs + "," if logs else "") + "+recompiles"
    return env, added


class _Filter:
    """Copies one stream of the job to ``sink``, keeping the lines ``keep`` picks for CPU Doctor instead.

    Bytes go on as soon as they arrive; only a partial line that could still
    become a diagnostic line (it starts like one) is held until its end.
    """

    def __init__(self, source: BinaryIO, sink: BinaryIO | None, keep: Callable[[str], bool],
                 could_be: Callable[[bytes], bool]):
        self.source, self.sink, self.keep, self.could_be = source, sink, keep, could_be
        self.kept: list[str] = []
        self.dropped = 0
        self.thread = threading.Thread(target=self._run, name="cpudoctor-run-filter", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def _write(self, data: bytes) -> None:
        if not data or self.sink is None:
            return
        try:
            self.sink.write(data)
            self.sink.flush()
        except (OSError, ValueError):
            self.sink = None              # the reader went away: keep draining the job

    def _run(self) -> None:
        pending = b""
        fd = self.source.fileno()
        while True:
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                chunk = b""
            if not chunk:
                break
            data = pending + chunk
            pending = b""
            out = bytearray()
            start = 0
            while True:
                nl = data.find(b"\n", start)
                if nl < 0:
                    break
                line = data[start:nl + 1]
                start = nl + 1
                text = line.decode("utf-8", "replace")
                if self.keep(text):
                    self._remember(text)
                else:
                    out += line
            rest = data[start:]
            if rest and self.could_be(rest) and len(rest) < 65536:
                pending = rest
            else:
                out += rest
            self._write(bytes(out))
        if pending:
            text = pending.decode("utf-8", "replace")
            if self.keep(text):
                self._remember(text)
            else:
                self._write(pending)

    def _remember(self, text: str) -> None:
        self.kept.append(text)
        if len(self.kept) > MAX_KEPT_LINES:
            del self.kept[: len(self.kept) // 4]
            self.dropped += 1


def _could_be_onednn(rest: bytes) -> bool:
    head = rest[:16]
    return any(p.encode().startswith(head) or head.startswith(p.encode())
               for p in PREFIXES)


def _could_be_torch_log(rest: bytes) -> bool:
    # PyTorch's log lines start with the level and the date: "V1201 15:50:06.136000 ..."
    return len(rest) < 2 or (rest[:1] in (b"V", b"I", b"W", b"E") and rest[1:2].isdigit())


def _allow_tracing() -> None:
    """In the child before exec: let CPU Doctor's sampler trace it under Yama ptrace_scope=1."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PTRACER, ctypes.c_ulong(PR_SET_PTRACER_ANY & 0xFFFFFFFFFFFFFFFF), 0, 0, 0)
    except Exception:  # noqa: BLE001 - never stop the job from starting
        pass


def _exit_code(returncode: int | None) -> int | None:
    if returncode is None:
        return None
    return 128 - returncode if returncode < 0 else returncode


class JobRun:
    """One observed run: :meth:`start`, then :meth:`wait` (or :meth:`interrupt` from another thread)."""

    def __init__(self, argv: list[str], *, seconds: float | None = None, cwd: str | None = None,
                 env: dict[str, str] | None = None, stdout: BinaryIO | None = None, stderr: BinaryIO | None = None,
                 rate: int | None = None, sample: bool = True, display: str | None = None, probe: bool = True):
        from cpudoctor.probes.process.procfs import redact_paths

        self.argv = list(argv)
        self.seconds = seconds
        self.cwd = cwd
        self.base_env = dict(os.environ if env is None else env)
        self.stdout = stdout if stdout is not None else getattr(sys.stdout, "buffer", None)
        self.stderr = stderr if stderr is not None else getattr(sys.stderr, "buffer", None)
        self.rate = rate
        self.sample = sample
        self.probe = probe                      # the job-state probe (probes/process/jobprobe.py), Python jobs only
        self._channel = None
        self._probe_off = ""
        self.obs = RunObservation(command=redact_paths(display or " ".join(self.argv))[:400])
        self._proc: subprocess.Popen | None = None
        self._sampler: TimeSampler | None = None
        self._filters: list[_Filter] = []
        self._interrupted = threading.Event()
        self._stop_requested = threading.Event()
        self._t0 = 0.0

    def start(self) -> bool:
        """Launch the job and the samplers; False (with ``obs.error``) when the command cannot start."""
        from cpudoctor.probes.software.envvars import filter_thread_env

        from cpudoctor.probes.process.jobprobe import ProbeChannel

        env, added = diagnostic_env(self.base_env)
        self.obs.diagnostics = added
        env, self._channel, self._probe_off = ProbeChannel.open(self.argv, env, enabled=self.probe)
        self.obs.env = filter_thread_env(self.base_env)
        try:
            self.obs.launch_affinity = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
        except OSError:
            self.obs.launch_affinity = None
        self._t0 = time.monotonic()
        try:
            self._proc = subprocess.Popen(self.argv, cwd=self.cwd, env=env, stdin=None, stdout=subprocess.PIPE,
                                          stderr=subprocess.PIPE,
                                          preexec_fn=_allow_tracing if sys.platform.startswith("linux") else None)
        except OSError as exc:
            self.obs.ended_by = "failed"
            self.obs.error = f"cannot start {self.argv[0]!r}: {exc.strerror or exc}"
            self.obs.exit_code = 127 if isinstance(exc, FileNotFoundError) else 126
            if self._channel is not None:
                self._channel.close()
            return False
        self.obs.pid = self._proc.pid
        keep_out = (lambda t: is_verbose_line(t)) if "ONEDNN_VERBOSE" in added else (lambda t: False)
        keep_err = (lambda t: is_recompile_line(t)) if "TORCH_LOGS" in added else (lambda t: False)
        assert self._proc.stdout is not None and self._proc.stderr is not None
        self._filters = [_Filter(self._proc.stdout, self.stdout, keep_out, _could_be_onednn),
                         _Filter(self._proc.stderr, self.stderr, keep_err, _could_be_torch_log)]
        for f in self._filters:
            f.start()
        if self.sample:
            from cpudoctor.probes.process.stacks import RUN_RATE

            self._sampler = TimeSampler(self._proc.pid, observer="run", rate=self.rate or RUN_RATE)
            self._sampler.start()
        return True

    def interrupt(self) -> None:
        """Ctrl-C: the job got the terminal's SIGINT itself; make sure it did, and stop waiting for it."""
        self._interrupted.set()

    def stop(self) -> None:
        """Stop the job from another thread (the window's Stop): SIGINT, then SIGTERM, then SIGKILL."""
        self._stop_requested.set()

    def wait(self, poll: float = 0.2) -> RunObservation:
        """Until the job exits, is interrupted, or ``seconds`` pass; then stop it in stages and collect."""
        proc = self._proc
        if proc is None:
            return self.obs
        deadline = self._t0 + self.seconds if self.seconds else None
        while proc.poll() is None:
            if self._interrupted.is_set():
                self.obs.ended_by = "interrupt"
                self._stop_job(already_signalled=True)
                break
            if deadline is not None and time.monotonic() >= deadline:
                self.obs.ended_by = "seconds"
                self._stop_job(already_signalled=False)
                break
            if self._stop_requested.is_set():
                self.obs.ended_by = "stopped"
                self._stop_job(already_signalled=False)
                break
            try:
                proc.wait(poll)
            except subprocess.TimeoutExpired:
                pass
        proc.wait()
        self.obs.duration_s = round(time.monotonic() - self._t0, 2)
        self.obs.exit_code = _exit_code(proc.returncode)
        if self._sampler is not None:
            self.obs.breakdown = self._sampler.stop()
        for f in self._filters:
            f.thread.join(10)
        out, err = self._filters
        self.obs.onednn = parse_onednn_verbose(out.kept)
        self.obs.recompiles = parse_recompiles(err.kept)
        self.obs.dropped_kernel_lines = bool(out.dropped)
        self.obs.state = self._read_state()
        return self.obs

    def _read_state(self):
        from cpudoctor.model.jobstate import JobState

        return self._channel.read(self.obs.pid) if self._channel is not None else JobState(why_not=self._probe_off)

    def _stop_job(self, already_signalled: bool) -> None:
        proc = self._proc
        assert proc is not None
        stages = [signal.SIGTERM, signal.SIGKILL] if already_signalled else [signal.SIGINT, signal.SIGTERM,
                                                                             signal.SIGKILL]
        if already_signalled:
            try:
                proc.wait(GRACE_S)
                return
            except subprocess.TimeoutExpired:
                pass
        for sig in stages:
            try:
                proc.send_signal(sig)
            except OSError:
                return
            try:
                proc.wait(GRACE_S)
                return
            except subprocess.TimeoutExpired:
                continue


def wait_interruptible(job) -> RunObservation:
    """``job.wait()`` with Ctrl-C (SIGINT) turned into ``job.interrupt()`` while it waits, on the main thread:
    the job got the terminal's SIGINT itself; CPU Doctor stops waiting, stops the job in stages and reports."""
    previous = None
    if threading.current_thread() is threading.main_thread():
        previous = signal.signal(signal.SIGINT, lambda *_: job.interrupt())
    try:
        return job.wait()
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)
