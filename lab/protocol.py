"""The JSON-lines protocol between a lab job (child process) and whoever runs it.

The child writes one JSON object per line on stdout, each with a ``type``:

* ``progress``: ``step, loss, accuracy, samples_per_s, elapsed`` (training) or
  any job-specific figures (GEMM point, sweep variant) plus ``elapsed``;
* ``result``: the job's final figures (one per job, ``status`` ok/cancelled);
* ``log``: a line of text worth showing;
* ``error``: ``message`` (and ``kind``) when the job failed in a way it could
  explain itself (bad settings, torch.compile unavailable, unreadable data).

An object without ``type`` is read as ``facts`` (what probe children print),
and any other line as ``log``: :mod:`cpudoctor.probes.child.lines` is the one
reader for every child of the app.

The parent asks a job to stop by writing ``stop`` on the child's stdin (only
when the job was started with ``--control stdin``); the job then finishes the
current step, emits a ``result`` with ``status: "cancelled"`` and exits.

This module never imports torch: the GUI and CLI parse with it too.
"""

from __future__ import annotations

import json
import math
import sys
import threading
from typing import Any, TextIO

# The line format and its one reader are shared with the probe children.
from cpudoctor.probes.child.lines import (  # noqa: E402,F401 - re-exported: the lab's vocabulary
    ERROR, FACTS, LOG, PROGRESS, RESULT, STOP_COMMAND, TYPES, Message, parse_line,
)


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
