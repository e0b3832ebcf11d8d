"""The parent's end of the lab's JSON-lines protocol: reading what a job says, and the words to control it.

The child's end (writing lines, the stop flag, argv parsing) is
:mod:`cpudoctor.lab.jobs._jobkit`, a standard-library file that runs inside
the user's environment. The reading is the one line reader of every child of
the app, :mod:`cpudoctor.kits.child.lines`: a job writes one JSON object per
line with a ``type`` (``progress``, ``result``, ``log``, ``error``), an object
without one is ``facts``, and a line that is not JSON (a library printing to
stdout) arrives as ``log``. Both ends spell the message types once each, and a
test checks that they agree.

This module never imports torch: the GUI and CLI parse with it.
"""

from __future__ import annotations

from cpudoctor.lab.jobs._jobkit import MEASURE_COMMAND
from cpudoctor.kits.child.lines import ERROR, FACTS, LOG, PROGRESS, RESULT, STOP_COMMAND, TYPES, Message, parse_line

__all__ = ["ERROR", "FACTS", "LOG", "MEASURE_COMMAND", "PROGRESS", "RESULT", "STOP_COMMAND", "TYPES", "Message",
           "measure_command", "parse_line"]


def measure_command(seconds: float) -> str:
    """The line that makes a serving job (a sweep worker) measure one segment of ``seconds``."""
    return f"{MEASURE_COMMAND} {seconds:.3f}"
