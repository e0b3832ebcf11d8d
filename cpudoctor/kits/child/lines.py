"""The one line protocol every child process speaks: one JSON object per line on stdout.

Two kinds of children share it, and one reader (:func:`parse_line`) reads both:

* **lab jobs** send *typed* messages, objects whose ``"type"`` is one of
  :data:`TYPES` (``progress``, ``result``, ``log``, ``error``; see
  :mod:`cpudoctor.lab.protocol` for their fields);
* **probe children** (:mod:`cpudoctor.probes.child.scripts`) print plain *fact*
  objects without a ``"type"``; each becomes a :data:`FACTS` message, and
  :func:`merge_facts` merges them in order (a later object adds to or
  overwrites an earlier one), so facts printed before a crash survive it.

Everything else is a ``log`` line carrying the text as it was: a library
printing to stdout, JSON that is not an object, an object with an unknown
``"type"`` (it claims to be a message we do not understand, so it is shown,
not guessed at). Blank lines are nothing. A parent asks a child that reads
stdin to stop by writing :data:`STOP_COMMAND` and a newline.

No Qt, no torch: the probes, the lab runner and the GUI all read with this.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

PROGRESS = "progress"
RESULT = "result"
LOG = "log"
ERROR = "error"
TYPES = (PROGRESS, RESULT, LOG, ERROR)   # the values a child may put in "type"
FACTS = "facts"                          # what an object without "type" is read as
STOP_COMMAND = "stop"
MAX_LINE_BYTES = 1 << 20                 # a longer line is cut here: a child cannot fill our memory


@dataclass
class Message:
    """One parsed line: its ``type`` and the remaining fields."""

    type: str
    data: dict[str, Any] = field(default_factory=dict)
    raw: bool = False        # a line of plain text, not the protocol (a library printing, or not our child at all)

    @property
    def text(self) -> str:
        """Human text for log/error messages."""
        return str(self.data.get("message", self.data.get("text", "")))


def parse_line(line: str | bytes) -> Message | None:
    """Read one line from a child: a typed message, facts, a log line, or None when blank."""
    if isinstance(line, bytes):
        line = line.decode("utf-8", "replace")
    line = line.strip()
    if not line:
        return None
    if line.startswith("{") and line.endswith("}"):
        try:
            obj = json.loads(line)
        except (ValueError, RecursionError):  # not JSON, or nested deeper than the parser goes
            obj = None
        if isinstance(obj, dict):
            if "type" not in obj:
                return Message(FACTS, obj)
            if obj["type"] in TYPES:
                kind = obj.pop("type")
                return Message(kind, obj)
    return Message(LOG, {"message": line}, raw=True)


def merge_facts(lines: Iterable[str | bytes]) -> dict[str, Any]:
    """The facts of every ``lines`` merged in order; typed messages and other text are ignored."""
    facts: dict[str, Any] = {}
    for line in lines:
        msg = parse_line(line)
        if msg is not None and msg.type == FACTS:
            facts.update(msg.data)
    return facts
