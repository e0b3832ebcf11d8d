"""The parent's end of the lab's JSON-lines protocol: parsing what a job says, and the words to control it.

The child's end (writing lines, the stop flag, argv parsing) is
:mod:`cpudoctor.lab.jobs._jobkit`, a standard-library file that runs inside
the user's environment; the message types and control words are imported from
there, so both ends spell them once. A job writes one JSON object per line
(``progress``, ``result``, ``log``, ``error``); lines that are not JSON (a
library printing to stdout) arrive as ``log``.

This module never imports torch: the GUI and CLI parse with it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from cpudoctor.lab.jobs._jobkit import ERROR, LOG, MEASURE_COMMAND, PROGRESS, RESULT, STOP_COMMAND, TYPES

__all__ = ["ERROR", "LOG", "MEASURE_COMMAND", "PROGRESS", "RESULT", "STOP_COMMAND", "TYPES", "LineBuffer",
           "Message", "measure_command", "parse_line"]


@dataclass
class Message:
    """One parsed line: its ``type`` and the remaining fields."""

    type: str
    data: dict[str, Any] = field(default_factory=dict)

    @property
    def text(self) -> str:
        """Human text for log/error messages."""
        return str(self.data.get("message", self.data.get("text", "")))


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


def measure_command(seconds: float) -> str:
    """The line that makes a serving job (a sweep worker) measure one segment of ``seconds``."""
    return f"{MEASURE_COMMAND} {seconds:.3f}"


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
