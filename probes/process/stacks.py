"""Sampled stacks of every Python thread of a process and its children, from py-spy.

py-spy (a pinned dependency: its wheel ships the binary) reads the target's
memory from outside, so the job needs no change and no restart. It runs as

    py-spy record --pid PID --rate HZ --format raw --threads --idle --native
                  --subprocesses --full-filenames --output FILE [--duration S]

``record`` rather than repeated ``dump --json`` calls: one attach for the whole
window (a ``dump`` re-reads the symbol tables of libtorch, ~0.5 s, every call);
``raw`` is one line per distinct (process, thread, stack) with its sample count:
``--threads`` keeps the OS thread id, ``--subprocesses`` puts the chain of
processes in front (DataLoader workers, compile workers), ``--native`` adds the
C/C++ frames below the Python ones (oneDNN, MKL, libgomp), and ``--idle`` keeps
the samples of threads that wait (a loop waiting on its data loader must count).
``--nonblocking`` is not used: py-spy cannot unwind native stacks without
pausing the threads; that pause is the sampler's main cost, which sets the
default rates (measured with benchmarks/sampling_overhead.py).

py-spy samples threads that run Python; native-only threads (OpenMP workers)
and non-Python children (a C++ compiler) are seen by :mod:`.threadstates`.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import sys
import sysconfig
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from cpudoctor.kits.child.captured import run_captured
from cpudoctor.kits.child.runner import ChildProcess
from cpudoctor.kits.child.streams import Capture

# Samples a second. With --native py-spy pauses every thread of the job while it unwinds the stacks
# (libtorch's are deep, and OpenMP threads spin at barriers while their team is being stopped):
# benchmarks/sampling_overhead.py measured median slowdowns of 36 % at 50 Hz, 11 % at 20 Hz and 9-12 % at
# 10 Hz of an MLP training job using both CPUs of a 2-CPU machine, and on a quiet machine 7.2 % at 5 Hz,
# 1.7 % at 3 Hz (12-second windows) and -2.1 % at 2 Hz: `inspect` samples at 3 Hz, within the 5 % budget;
# `run` (0.3 % at 5 Hz over a 60-second job) at 5 Hz. A window needs MIN_DRIVER_SAMPLES (breakdown.py):
# `inspect` samples 12 s (36 samples).
DEFAULT_RATE = 3
RUN_RATE = 5
MAX_LINE = 200_000          # a raw line longer than this is dropped (a runaway recursion)
MAX_LINES = 200_000
MAX_STDERR = 64_000         # what py-spy says is kept (its last lines: "Samples: N Errors: M", the error)


@dataclass(frozen=True)
class Frame:
    name: str                       # function or symbol, or 0x... for an unresolved address
    module: str = ""                # native: the library's file name ('?' for code with no file)
    file: str = ""                  # Python: the source path, forward slashes
    line: int | None = None
    python: bool = False

    def text(self) -> str:
        if self.python:
            return f"{self.name} ({_short(self.file)}:{self.line})" if self.line else f"{self.name} ({_short(self.file)})"
        return f"{self.name} ({self.module})" if self.module else self.name


@dataclass
class StackSample:
    """``count`` samples of one thread with the same stack (root first)."""

    pids: tuple[int, ...]           # the process chain py-spy followed, the owning process last
    tid: int
    thread: str
    frames: tuple[Frame, ...]
    count: int

    @property
    def pid(self) -> int:
        """The owning process; 0 when py-spy printed no process (it samples one only)."""
        return self.pids[-1] if self.pids else 0


@dataclass
class StackRecord:
    """What py-spy saw in the window, or why it saw nothing."""

    samples: list[StackSample] = field(default_factory=list)
    rate_hz: int = DEFAULT_RATE
    commands: dict[int, str] = field(default_factory=dict)    # pid -> command py-spy printed
    error: str | None = None        # one line: why there are no stacks (refused, not Python, no py-spy)
    error_kind: str | None = None   # denied | not_python | missing | failed
    sampler: str = ""               # "py-spy 0.4.3"
    errors: int = 0                 # samples py-spy could not take (it reports them)

    @property
    def total(self) -> int:
        return sum(s.count for s in self.samples)


def _short(path: str) -> str:
    """``.../site-packages/torch/nn/modules/linear.py`` -> ``torch/nn/modules/linear.py``; home as ~."""
    m = re.search(r"/(?:site|dist)-packages/(.+)$", path)
    if m:
        return m.group(1)
    home = os.path.expanduser("~")
    if home and home != "/" and path.startswith(home + "/"):
        return "~" + path[len(home):]
    return path


# --- the raw format ----------------------------------------------------------------------------

_PROCESS_RE = re.compile(r'process (\d+):"(.*?)";', re.DOTALL)
_THREAD_RE = re.compile(r"thread \((0x[0-9a-fA-F]+|\d+)\)(?:: ([^;]*))?;?")
_FRAME_RE = re.compile(r"^(.*) \(([^()]*?)(?::(\d+))?\)$")


def parse_frame(text: str) -> Frame:
    """One frame of py-spy's raw output: ``name (file.py:12)``, ``symbol (lib.so)`` or ``0x7f.. (?)``."""
    m = _FRAME_RE.match(text)
    if not m:
        return Frame(name=text.strip())
    name, where, line = m.group(1), m.group(2), m.group(3)
    if where.endswith(".py") or where.startswith("<"):
        return Frame(name=name, file=where.replace("\\", "/"), line=int(line) if line else None, python=True)
    module = where.rsplit("/", 1)[-1] if where not in ("?", "") else "?"
    if module.endswith((".c", ".h", ".cpp", ".cc")):
        # a native frame with source information (a Python built with debug info): keep the symbol,
        # the source file stands in for the library
        return Frame(name=name, module=module, file=where, line=int(line) if line else None)
    return Frame(name=name, module=module)


_COMPLETE_RE = re.compile(r"thread \((?:0x[0-9a-fA-F]+|\d+)\)[^\"]*\s\d+$")


def _records(lines):
    """Whole records: a command line with newlines in it (``python -c "..."``) spans several physical lines."""
    buffer = ""
    for n, line in enumerate(lines):
        if n >= MAX_LINES:
            break
        line = line.rstrip("\n")
        if line.startswith(("process ", "thread (")):
            buffer = ""                   # a record starts: what was left over was no record
        buffer = f"{buffer}\n{line}" if buffer else line
        if len(buffer) > MAX_LINE:
            buffer = ""
            continue
        if _COMPLETE_RE.search(buffer):
            yield buffer
            buffer = ""


def parse_raw(lines) -> tuple[list[StackSample], dict[int, str]]:
    """py-spy's ``--format raw`` lines (``--threads``, ``--subprocesses``) into samples.

    A line is ``process PID:"CMD";[process PID:"CMD";...]thread (TID): NAME;frame;...;frame COUNT``
    with the root frame first. Lines that do not have this shape are skipped.
    """
    samples: list[StackSample] = []
    commands: dict[int, str] = {}
    for line in _records(lines):
        body, _, count_text = line.rpartition(" ")
        if not count_text.isdigit() or not body:
            continue
        pos = 0
        pids: list[int] = []
        while True:
            m = _PROCESS_RE.match(body, pos)
            if not m:
                break
            pid = int(m.group(1))
            pids.append(pid)
            commands.setdefault(pid, m.group(2))
            pos = m.end()
        t = _THREAD_RE.match(body, pos)
        if not t:
            continue
        tid_text = t.group(1)
        tid = int(tid_text, 16) if tid_text.startswith("0x") else int(tid_text)
        rest = body[t.end():]
        frames = tuple(parse_frame(f) for f in rest.split(";") if f) if rest else ()
        samples.append(StackSample(tuple(pids), tid, (t.group(2) or "").strip(), frames, int(count_text)))
    return samples, commands


# --- finding and running py-spy -----------------------------------------------------------------


def find_pyspy() -> str | None:
    """The py-spy binary: next to this interpreter (the wheel's scripts folder), else on PATH."""
    names = ("py-spy.exe", "py-spy") if os.name == "nt" else ("py-spy",)
    folders = [Path(sys.executable).parent]
    try:
        folders.append(Path(sysconfig.get_path("scripts")))
    except (KeyError, TypeError):
        pass
    for folder in folders:
        for name in names:
            candidate = folder / name
            if candidate.is_file() and os.access(candidate, os.X_OK):
                return str(candidate)
    return shutil.which("py-spy")


def pyspy_version(exe: str) -> str:
    out = run_captured([exe, "--version"], 10.0, max_output=4096, what="py-spy").text.strip()
    return out.splitlines()[0][:80] if out else "py-spy"


_DENIED_RE = re.compile(r"(os error (1|13)\b|Permission denied|Operation not permitted|ptrace)", re.IGNORECASE)
_NOT_PYTHON_RE = re.compile(r"(Failed to find python version|Failed to get process executable name|"
                            r"not a python|doesn't look like a python)", re.IGNORECASE)
_GONE_RE = re.compile(r"(No such process|os error 3\b|Failed to open process)", re.IGNORECASE)


def classify_failure(stderr: str) -> str:
    """denied | not_python | gone | failed, from what py-spy printed."""
    if _DENIED_RE.search(stderr):
        return "denied"
    if _NOT_PYTHON_RE.search(stderr):
        return "not_python"
    if _GONE_RE.search(stderr):
        return "gone"
    return "failed"


class StackSampler:
    """One ``py-spy record`` over a process tree: :meth:`start`, then :meth:`stop` (or :meth:`wait`).

    ``duration`` None samples until :meth:`stop` (SIGINT: py-spy writes what it has). py-spy runs on the
    kit's runner (:class:`cpudoctor.kits.child.runner.ChildProcess`): its own session, the last
    :data:`MAX_STDERR` bytes of what it says kept, stopped in stages.
    """

    def __init__(self, pid: int, rate: int = DEFAULT_RATE, duration: float | None = None,
                 subprocesses: bool = True, native: bool = True, exe: str | None = None):
        self.pid = pid
        self.rate = max(1, min(int(rate), 1000))
        self.duration = duration
        self.subprocesses = subprocesses
        self.native = native
        self.exe = exe if exe is not None else find_pyspy()
        self._child: ChildProcess | None = None
        self._err = Capture(MAX_STDERR, over="tail")
        self._dir: tempfile.TemporaryDirectory | None = None
        self._out: Path | None = None
        self.started_at: float | None = None

    def command(self) -> list[str]:
        assert self.exe is not None and self._out is not None
        cmd = [self.exe, "record", "--pid", str(self.pid), "--rate", str(self.rate), "--format", "raw",
               "--threads", "--idle", "--full-filenames", "--output", str(self._out)]
        if self.native:
            cmd.append("--native")
        if self.subprocesses:
            cmd.append("--subprocesses")
        if self.duration is not None:
            cmd += ["--duration", str(max(1, int(round(self.duration))))]
        return cmd

    def start(self) -> bool:
        """Start py-spy; False (and nothing running) when there is no py-spy or it cannot start."""
        if self.exe is None:
            return False
        self._dir = tempfile.TemporaryDirectory(prefix="cpudoctor-stacks-")
        self._out = Path(self._dir.name) / "stacks.txt"
        child = ChildProcess(self.command(), what="py-spy", stdout=Capture(MAX_STDERR, over="tail"),
                             stderr=self._err, interrupt=signal.SIGINT, term_wait=1.0).start()
        if child.end is not None and child.end.start_error:
            self._dir.cleanup()
            return False
        self._child = child
        self.started_at = time.monotonic()
        return True

    @property
    def sampler_pid(self) -> int | None:
        """py-spy's own pid (it is no part of the job it samples)."""
        return self._child.pid if self._child is not None else None

    @property
    def running(self) -> bool:
        return self._child is not None and self._child.running()

    def stop(self, timeout: float = 15.0) -> StackRecord:
        """Ask py-spy to finish (SIGINT: it writes its samples), then collect; SIGTERM ``timeout`` s later."""
        if self._child is not None:
            self._child.cancel(ask_wait=timeout)
        return self.wait(timeout + 2.0)

    def wait(self, timeout: float = 30.0) -> StackRecord:
        """Wait for py-spy to end by itself (duration passed, or the target exited), then collect."""
        if self.exe is None:
            return StackRecord(rate_hz=self.rate, error="py-spy is not installed next to CPU Doctor, "
                               "so only thread states were sampled",
                               error_kind="missing")
        if self._child is None:
            return StackRecord(rate_hz=self.rate, error=f"py-spy could not be started ({self.exe})",
                               error_kind="failed")
        end = self._child.wait(timeout)
        return self._collect(end.returncode)

    def _collect(self, returncode: int | None) -> StackRecord:
        assert self._dir is not None and self._out is not None
        rec = StackRecord(rate_hz=self.rate, sampler=pyspy_version(self.exe or "py-spy"))
        stderr = self._err.text()
        m = re.search(r"Samples: (\d+) Errors: (\d+)", stderr)
        if m:
            rec.errors = int(m.group(2))
        try:
            with open(self._out, encoding="utf-8", errors="replace") as fh:
                rec.samples, rec.commands = parse_raw(fh)
        except OSError:
            pass
        if not rec.samples:
            kind = classify_failure(stderr) if stderr.strip() else "failed"
            rec.error_kind = kind
            last = next((ln.strip() for ln in reversed(stderr.splitlines()) if ln.strip()
                         and not ln.startswith("py-spy> You can use")), "")
            rec.error = last[:300] or f"py-spy ended with exit code {returncode} and no samples"
        self._dir.cleanup()
        return rec
