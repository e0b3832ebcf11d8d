"""The doctor's whole run, from a source to the page it prints: ``cpudoctor doctor`` and the window's launcher.

When there is no display, ``cpudoctor`` (and ``cpudoctor-gui``) print the doctor's
page instead of the window. The window cannot import the commands (they are its
siblings), so the run lives here, beneath both: the same pipeline, the same page,
the same check of what the terminal can print and the same terminal escaping,
whichever of the two asks.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import TextIO

from cpudoctor.kits.escape import terminal_safe
from cpudoctor import pipeline
from cpudoctor.advisor import snippets
from cpudoctor.pipeline import Source
from cpudoctor.render import doctor as page

FORMATS = page.FORMATS
MARKS = "✓✗•"            # what the text page prints beyond ASCII


@dataclass(frozen=True)
class DoctorPage:
    """What the doctor prints, and the exit code it ends with (1 when something is an error)."""

    text: str
    exit_code: int


def run(source: Source, *, fmt: str = "text", verbose: bool = False, fast: bool = False,
        only: set[str] | None = None, ascii_only: bool = False, shell: str | None = None) -> DoctorPage:
    """Build the report of ``source`` (``fast``: no child processes; ``only`` these rules) and lay out the page.

    The fixes' commands are written for ``shell`` (None: the user's shell, PowerShell for Windows).

    Raises :class:`cpudoctor.model.ReportError` for a saved report that cannot be read.
    """
    report = pipeline.build_report(source, children=not fast, only=only)
    findings, label = report.findings, source.label
    shell = shell or snippets.user_shell(report)
    if fmt == "json":
        text = page.render_json(report, findings, label, shell=shell)
    elif fmt == "md":
        text = page.render_md(report, findings, label, verbose=verbose, shell=shell)
    else:
        text = page.render_text(report, findings, label, verbose=verbose, ascii_only=ascii_only, shell=shell)
    return DoctorPage(text, page.exit_code(findings))


def can_print(stream: TextIO | None = None, text: str = MARKS) -> bool:
    """True when ``stream`` (stdout) can encode ``text``; False on an ASCII-only console."""
    stream = sys.stdout if stream is None else stream
    try:
        text.encode(getattr(stream, "encoding", None) or "ascii")
    except (UnicodeEncodeError, LookupError):
        return False
    return True


def print_page(text: str, stream: TextIO | None = None) -> None:
    """Write ``text`` to a terminal: escape sequences and control characters from report data removed."""
    stream = sys.stdout if stream is None else stream
    text = terminal_safe(text)
    stream.write(text if text.endswith("\n") else text + "\n")
    stream.flush()
