"""The child end of the lab's JSON-lines protocol, and the boilerplate every job shares.

A job writes one JSON object per line on stdout, each with a ``type``:

* ``progress``: figures while it runs (training steps, a GEMM point, a sweep segment);
* ``result``: the job's final figures (one per job, ``status`` ok/cancelled);
* ``log``: a line of text worth showing (a library's warning, a note);
* ``error``: ``message`` and ``kind`` when the job failed in a way it can explain
  (bad settings, torch.compile unavailable, unreadable data).

The parent controls a job started with ``--control stdin`` by writing lines on
its stdin: ``stop`` (finish the step, send a cancelled result, exit) or a
command such as ``measure 1.0`` (a sweep worker measures one more segment).
Closing stdin means stop: the parent is gone.

Standard library only, Python 3.8+: this file runs inside the user's own
environment, where CPU Doctor is not installed. The parent imports its
constants (:mod:`cpudoctor.lab.protocol`) so both ends share one spelling.
"""

from __future__ import annotations

import json
import math
import os
import queue
import re
import sys
import threading
import time
import warnings
from typing import Any, Callable, Dict, Optional, TextIO, Tuple

_IMPORTED = time.perf_counter()     # the fallback start of this job (see process_age)

PROGRESS = "progress"
RESULT = "result"
LOG = "log"
ERROR = "error"
TYPES = (PROGRESS, RESULT, LOG, ERROR)
STOP_COMMAND = "stop"
MEASURE_COMMAND = "measure"          # "measure SECONDS": a serving job measures one segment


class JobError(Exception):
    """A failure the job can explain: one line for people, a ``kind`` for programs, an exit code."""

    kind = "error"
    exit_code = 1

    def __init__(self, message: str, kind: Optional[str] = None, exit_code: Optional[int] = None):
        super().__init__(message)
        if kind is not None:
            self.kind = kind
        if exit_code is not None:
            self.exit_code = exit_code


def _clean(value: Any) -> Any:
    """JSON has no NaN/inf: send them as null so every parser accepts the line."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    return value


def encode(msg_type: str, /, **fields: Any) -> str:
    """One protocol line (without the newline). Fields may use any name, even ``kind``."""
    if msg_type not in TYPES:
        raise ValueError(f"unknown message type {msg_type!r}; one of {', '.join(TYPES)}")
    return json.dumps({"type": msg_type, **_clean(fields)}, separators=(",", ":"), allow_nan=False)


_emit_lock = threading.Lock()


def emit(msg_type: str, /, stream: Optional[TextIO] = None, **fields: Any) -> None:
    """Write one message line and flush, so the parent sees it at once."""
    line = encode(msg_type, **fields)
    out = stream or sys.stdout
    with _emit_lock:
        try:
            out.write(line + "\n")
            out.flush()
        except BrokenPipeError:
            # The parent is gone (window closed, `| head`): nobody is listening, end quietly.
            os.dup2(os.open(os.devnull, os.O_WRONLY), out.fileno())
            raise SystemExit(1) from None


def started() -> None:
    """The job's first line, before it imports torch: the parent's start-up deadline measures the
    interpreter, not torch's import (a fact object: merged into the outcome's facts, never shown)."""
    line = json.dumps({"job_started": True, "pid": os.getpid()})
    with _emit_lock:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def progress(**fields: Any) -> None:
    emit(PROGRESS, **fields)


def result(**fields: Any) -> None:
    emit(RESULT, **fields)


def log(text: str) -> None:
    emit(LOG, message=text)


def log_stage(text: str, library: str) -> None:
    """A log line that also says which library the job is about to run: a crash after it is blamed on that
    library (numpy's OpenBLAS, not torch), not on the job as a whole."""
    emit(LOG, message=text, library=library)


def error(message: str, kind: str = "error", **fields: Any) -> None:
    emit(ERROR, message=message, kind=kind, **fields)


class StopFlag:
    """Set when the parent asks the job to stop (``stop`` on stdin, or stdin closed).

    Jobs poll :meth:`is_set` between steps. Other lines on stdin are commands
    for a serving job (:meth:`next_command`). Reading stdin happens on a
    daemon thread so a blocked read never delays the job's exit.
    """

    def __init__(self) -> None:
        self._event = threading.Event()
        self._commands: "queue.Queue[str]" = queue.Queue()

    def is_set(self) -> bool:
        return self._event.is_set()

    def set(self) -> None:
        self._event.set()
        self._commands.put("")           # wake a job waiting for its next command

    def wait(self, timeout: float) -> bool:
        return self._event.wait(timeout)

    def next_command(self, timeout: Optional[float] = None) -> Optional[str]:
        """The next command line from the parent; None when stopped (or after ``timeout``)."""
        if self.is_set():
            return None
        try:
            line = self._commands.get(timeout=timeout)
        except queue.Empty:
            return None
        return None if self.is_set() or not line else line

    def watch_stdin(self, stream: Optional[TextIO] = None) -> None:
        src = stream or sys.stdin

        def _run() -> None:
            try:
                for line in src:
                    text = line.strip()
                    if text == STOP_COMMAND:
                        break
                    if text:
                        self._commands.put(text)
            except (OSError, ValueError):
                pass
            self.set()          # "stop" or EOF: the parent is gone or wants us to end

        threading.Thread(target=_run, name="stop-watcher", daemon=True).start()


def parse_job_argv(argv: Optional[list] = None) -> Tuple[Dict[str, Any], StopFlag]:
    """Every job's command line: ``--json-args '{...}'`` and ``--control stdin|none``.

    Bad JSON is reported as an ``error`` message and exit code 2, so the parent
    shows one clear line rather than a traceback.
    """
    import argparse

    parser = argparse.ArgumentParser(add_help=True)
    parser.add_argument("--json-args", default="{}", help="the job's settings as a JSON object")
    parser.add_argument("--control", choices=("stdin", "none"), default="none",
                        help="stdin: stop when the parent writes 'stop' or closes stdin")
    ns = parser.parse_args(argv)
    try:
        args = json.loads(ns.json_args)
    except json.JSONDecodeError as exc:
        error(f"--json-args is not valid JSON: {exc.msg}", kind="usage")
        raise SystemExit(2) from None
    if not isinstance(args, dict):
        error("--json-args must be a JSON object", kind="usage")
        raise SystemExit(2)
    stop = StopFlag()
    if ns.control == "stdin":
        # The parent decides when to stop: Ctrl-C in a terminal reaches the whole process group,
        # and the parent turns it into a staged stop that still gets this job's partial result.
        import signal

        signal.signal(signal.SIGINT, signal.SIG_IGN)
        stop.watch_stdin()
    return args, stop


def process_age() -> float:
    """Seconds since this process started, interpreter start-up included (Linux: the kernel's start time;
    elsewhere: since this module was imported, a few tens of milliseconds later).

    A job's time budget counts from here, so ``--seconds 15`` is 15 s of the user's time, not 15 s after
    torch finished importing.
    """
    try:
        with open("/proc/self/stat") as fh:
            text = fh.read()
        start_ticks = float(text[text.rfind(")") + 2:].split()[19])     # field 22, starttime, since boot
        age = time.clock_gettime(time.CLOCK_BOOTTIME) - start_ticks / os.sysconf("SC_CLK_TCK")
        if 0 <= age < 86400 * 365:
            return age
    except (OSError, ValueError, IndexError, AttributeError):
        pass
    return time.perf_counter() - _IMPORTED


def require(module: str):
    """Import ``module`` (torch, numpy) or fail with one line that names this Python and why it may not see it."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise JobError(f"{sys.executable} cannot import {module}: {exc}; install {module} in this "
                       "environment or choose the Python that has it (cpudoctor envs lists them)",
                       kind="missing") from None


def warnings_to_log() -> None:
    """Library warnings become ``log`` lines (once each) instead of stderr noise or silence.

    A deprecation the user should know about (torch.ao.quantization) reaches
    the parent as text it can show; nothing is hidden.
    """
    seen = set()

    def _show(message, category, filename, lineno, file=None, line=None):  # noqa: ANN001 - warnings API
        text = f"{category.__name__}: {str(message).strip().splitlines()[0] if str(message).strip() else ''}"
        if text not in seen:
            seen.add(text)
            log(text)

    warnings.showwarning = _show


# How libraries say an allocation failed: torch's CPU allocator ("[enforce fail at alloc_cpu.cpp:127] ...
# DefaultCPUAllocator: can't allocate memory: you tried to allocate 4294967296 bytes. Error code 12"), C++.
_ALLOCATION_FAILED = re.compile(r"DefaultCPUAllocator: (?:not enough memory|can't allocate memory)"
                                r"(?:: you tried to allocate (\d+) bytes)?|std::bad_alloc|Cannot allocate memory")


def out_of_memory_words(message: str) -> Optional[str]:
    """The job's words for a library's raw "allocation failed" message (None when it is something else)."""
    m = _ALLOCATION_FAILED.search(message)
    if m is None:
        return None
    asked = ""
    if m.group(1):
        asked = f" (it asked for {_size(int(m.group(1)))} at once)"
    return (f"not enough memory for this job{asked}: the memory limit or the machine's free memory is lower; "
            "choose a smaller size, batch or model")


def _size(n: int) -> str:
    value = float(n)
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "bytes" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GiB"


def send_result(res: Dict[str, Any]) -> None:
    """The job's result line, with which Python ran it: the environment the figures describe (the user's)."""
    res.setdefault("python", sys.executable)
    res.setdefault("python_version", "%d.%d.%d" % sys.version_info[:3])
    result(**res)


class Deadline:
    """A job's hard end: at ``when`` (``time.perf_counter()``), unless :meth:`finish` came first, send
    ``make_result()`` as the job's result and end the process.

    A job checks its budget between steps; one step (or torch's import) can still run far past it. This
    thread is the backstop, so a budget holds whatever a step costs: it runs while the main thread is
    inside a library call (torch releases the GIL), sends what was measured so far, and exits.
    """

    def __init__(self, when: float, make_result: Callable[[], Dict[str, Any]]):
        self._when, self._make = when, make_result
        self._lock = threading.Lock()
        self._done = False
        self._cancel = threading.Event()
        threading.Thread(target=self._run, name="job-deadline", daemon=True).start()

    def _run(self) -> None:
        if self._cancel.wait(max(0.0, self._when - time.perf_counter())):
            return
        with self._lock:
            if self._done:
                return
            self._done = True
            try:
                send_result(self._make())
            except Exception as exc:  # noqa: BLE001 - still end within the budget, saying why
                error("the time budget ran out and the figures measured so far could not be put together: an internal "
                      f"error in CPU Doctor (a bug, not your setup; please report it with: {type(exc).__name__}: {exc})")
            finally:
                sys.stdout.flush()
                os._exit(0)

    def finish(self) -> bool:
        """The job ended by itself: True when this deadline had not fired (the job sends its own result)."""
        with self._lock:
            fired, self._done = self._done, True
        self._cancel.set()
        return not fired


def exit_job(code: int) -> None:
    """End the job process now that everything it had to say is written, without the interpreter's teardown.

    At a normal exit Python finalises while the job's daemon threads (the stop watcher, the hard stop) and
    the libraries' thread pools still exist; a daemon thread woken then is unwound by pthread_exit through
    C++ frames and libstdc++ aborts ("terminate called without an active exception"): the job died of
    SIGABRT after its result was sent, on some runs of the suite (gdb: the unwinding thread in
    __gxx_personality_v0 while the main thread was in Py_FinalizeEx). The job's files are its pipes, so
    flushing them is all the teardown it needs.
    """
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):
            pass
    os._exit(code)


def job_main(run: Callable[[Dict[str, Any], StopFlag], Dict[str, Any]], argv: Optional[list] = None) -> int:
    """Parse the command line, run ``run(args, stop)``, send its result; failures become one ``error`` line.

    Exit codes: 0 a result was sent, 1 the job failed, 2 bad settings, 3 an
    optional feature is missing (torch.compile, quantisation), as the job's
    :class:`JobError` says.
    """
    args, stop = parse_job_argv(argv)
    started()
    warnings_to_log()
    try:
        res = run(args, stop)
    except JobError as exc:
        error(str(exc), kind=exc.kind)
        return exc.exit_code
    except MemoryError:
        error("not enough memory for this job; choose a smaller size or batch", kind="memory")
        return 1
    except Exception as exc:  # noqa: BLE001 - anything else: one clear line, not a traceback
        short = out_of_memory_words(str(exc))
        if short is not None:
            error(short, kind="memory")
        else:
            error(f"{type(exc).__name__}: {exc}", kind="error")
        return 1
    # Which Python ran it: the environment the figures describe (the user's, chosen with --python or the picker).
    send_result(res)
    return 0
