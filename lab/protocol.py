"""The JSON-lines protocol between a lab job (child process) and whoever runs it.

The child writes one JSON object per line on stdout, each with a ``type``:

* ``progress``: ``step, loss, accuracy, samples_per_s, elapsed`` (training) or
  any job-specific figures (GEMM point, sweep variant) plus ``elapsed``;
* ``result``: the job's final figures (one per job, ``status`` ok/cancelled);
* ``log``: a line of text worth showing;
* ``error``: ``message`` (and ``kind``) when the job failed in a way it could
  explain itself (bad settings, torch.compile unavailable, unreadable data).

The parent asks a job to stop by writing ``stop`` on the child's stdin (only
when the job was started with ``--control stdin``); the job then finishes the
current step, emits a ``result`` with ``status: "cancelled"`` and exits. Lines
that are not JSON (a library printing to stdout) arrive as ``log``.

This module never imports torch: the GUI and CLI parse with it too.
"""

from __future__ import annotations

import json
import math
import sys
import threading
from dataclasses import dataclass, field
from typing import Any, TextIO

PROGRESS = "progress"
RESULT = "result"
LOG = "log"
ERROR = "error"
TYPES = (PROGRESS, RESULT, LOG, ERROR)
STOP_COMMAND = "stop"


@dataclass
class Message:
    """One parsed line: its ``type`` and the remaining fields."""

    type: str
    data: dict[str, Any] = field(default_factory=dict)

    @property
    def text(self) -> str:
        """Human text for log/error messages."""
        return str(self.data.get("message", self.data.get("text", "")))


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


def emit(msg_type: str, /, stream: TextIO | None = None, **fields: Any) -> None:
    """Write one message line and flush, so the parent sees it at once."""
    line = encode(msg_type, **fields)
    out = stream or sys.stdout
    with _emit_lock:
        try:
            out.write(line + "\n")
            out.flush()
        except BrokenPipeError:
            # The parent is gone (window closed, `| head`): nobody is listening, end quietly.
            import os

            os.dup2(os.open(os.devnull, os.O_WRONLY), out.fileno())
            raise SystemExit(1) from None


def progress(**fields: Any) -> None:
    emit(PROGRESS, **fields)


def result(**fields: Any) -> None:
    emit(RESULT, **fields)


def log(text: str) -> None:
    emit(LOG, message=text)


def log_stage(text: str, *, library: str) -> None:
    """A log line that also says which library the job is about to run (the runner blames a crash on it)."""
    emit(LOG, message=text, library=library)


def error(message: str, kind: str = "error", **fields: Any) -> None:
    emit(ERROR, message=message, kind=kind, **fields)


def parse_line(line: str | bytes) -> Message | None:
    """Parse one line from a child; blank -> None, non-protocol text -> a log message."""
    if isinstance(line, bytes):
        line = line.decode("utf-8", "replace")
    line = line.strip()
    if not line:
        return None
    if line.startswith("{"):
        try:
            obj = json.loads(line)
        except json.JSONDecodeError:
            obj = None
        if isinstance(obj, dict) and obj.get("type") in TYPES:
            kind = obj.pop("type")
            return Message(kind, obj)
    return Message(LOG, {"message": line})


class LineBuffer:
    """Splits a byte stream that arrives in arbitrary chunks into whole lines."""

    def __init__(self) -> None:
        self._pending = b""

    def feed(self, chunk: bytes) -> list[str]:
        data = self._pending + chunk
        *lines, self._pending = data.split(b"\n")
        return [ln.decode("utf-8", "replace") for ln in lines]

    def flush(self) -> list[str]:
        rest, self._pending = self._pending, b""
        return [rest.decode("utf-8", "replace")] if rest.strip() else []


class StopFlag:
    """Set when the parent asks the job to stop (``stop`` on stdin, or stdin closed).

    Jobs poll :meth:`is_set` between steps; watching stdin happens on a daemon
    thread so a blocked read never delays the job's exit.
    """

    def __init__(self) -> None:
        self._event = threading.Event()

    def is_set(self) -> bool:
        return self._event.is_set()

    def set(self) -> None:
        self._event.set()

    def watch_stdin(self, stream: TextIO | None = None) -> None:
        src = stream or sys.stdin

        def _run() -> None:
            try:
                for line in src:
                    if line.strip() == STOP_COMMAND:
                        break
            except (OSError, ValueError):
                pass
            self._event.set()          # "stop" or EOF: the parent is gone or wants us to end

        threading.Thread(target=_run, name="stop-watcher", daemon=True).start()


def parse_job_argv(argv: list[str] | None = None) -> tuple[dict[str, Any], StopFlag]:
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
