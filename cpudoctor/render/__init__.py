"""Everything people read: words, number formats, and the report in every output format.

=====================  =============================================================
:mod:`.words`          the vocabulary: severity names and marks, categories, counts
:mod:`.format`         number formats (sizes, clocks, durations, percentages), wrapping
:mod:`.markup`         escaping report data for Markdown and HTML
:mod:`.finding_view`   what one finding says, made once; every format below lays it out
:mod:`.cpu_facts`      the CPU identity rows the exports and the window's Overview share
:mod:`.text`           the report for a terminal
:mod:`.markdown`       the report for a GitHub issue (with :mod:`.md_extra`)
:mod:`.html`           the self-contained HTML page
:mod:`.pdf`            the PDF: the adapter to Qt's PDF writer (the only Qt outside the GUI)
:mod:`.doctor`         ``cpudoctor doctor``'s page
:mod:`.inspect`        ``cpudoctor inspect``'s page
=====================  =============================================================

:func:`render` dispatches through :data:`FORMATS`, one table of every output
format (its file suffix, its name in dialogs, the function that renders it),
imported lazily so asking for text never imports the HTML or PDF machinery.
To add a format, add one entry here.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cpudoctor.model import Report


@dataclass(frozen=True)
class Format:
    """One output format of a report."""

    name: str          # "md": what --format takes
    suffix: str        # ".md": the file suffix it is saved with
    label: str         # "Markdown": its name in file dialogs
    markup: str        # what the text is made of, for the privacy pass: json | md | text | html
    target: str        # "module:function(report) -> str | bytes"
    binary: bool = False   # bytes (PDF); its renderer takes the scrub function itself


FORMATS: dict[str, Format] = {f.name: f for f in (
    Format("html", ".html", "HTML page", "html", "cpudoctor.render.html:render_html"),
    Format("md", ".md", "Markdown", "md", "cpudoctor.render.markdown:render"),
    Format("json", ".json", "JSON report", "json", "cpudoctor.render:render_json"),
    Format("pdf", ".pdf", "PDF document", "html", "cpudoctor.render.pdf:render_pdf", binary=True),
    Format("text", ".txt", "Plain text", "text", "cpudoctor.render.text:render"),
)}
# Other names people type for a format, and other suffixes files carry.
ALIASES: dict[str, str] = {"markdown": "md", "txt": "text", "htm": "html"}
_SUFFIXES: dict[str, str] = {".htm": "html", ".markdown": "md", **{f.suffix: f.name for f in FORMATS.values()}}

Scrub = Callable[[str], str]


def format_name(value: str) -> str:
    """``Markdown`` -> ``md``: a format as people type it, normalised (unknown names pass through)."""
    value = value.strip().lower()
    return ALIASES.get(value, value)


def format_for_path(path: Path | str, default: str = "html") -> str:
    """The format a file name asks for by its suffix, else ``default``."""
    return _SUFFIXES.get(Path(path).suffix.lower(), default)


def format_of_suffix(path: Path | str) -> str | None:
    """The format a file name's suffix names (``.md`` -> ``md``), None for a suffix CPU Doctor writes nothing as."""
    return _SUFFIXES.get(Path(path).suffix.lower())


def render(report: "Report", fmt: str, *, scrub: Scrub | None = None, shell: str | None = None,
           exported_at: str | None = None) -> str | bytes:
    """``report`` in ``fmt``: str, or bytes for binary formats.

    ``shell``: the shell the fixes' commands are written for (None: the shell of the machine the report
    describes, :class:`~cpudoctor.render.finding_view.ShellChoice`). ``exported_at`` (ISO 8601): when the file
    is written; the documents say it beside when the facts were collected (JSON keeps the report as it is).
    ``scrub`` is a last pass over the text (the privacy redactor); for PDF it
    runs over the HTML page the PDF is made from. A scrub that would break
    JSON quoting is not applied to JSON (the report itself was redacted first).
    """
    try:
        spec = FORMATS[fmt]
    except KeyError:
        raise KeyError(f"unknown report format {fmt!r}; choose one of {', '.join(FORMATS)}") from None
    module_name, _, func_name = spec.target.partition(":")
    func = getattr(importlib.import_module(module_name), func_name)
    extra = {"exported_at": exported_at} if exported_at and spec.markup != "json" else {}
    if spec.binary:
        return func(report, scrub=scrub, shell=shell, **extra)
    text = func(report, shell=shell, **extra)
    if scrub is None:
        return text
    cleaned = scrub(text)
    if spec.markup == "json":
        try:
            json.loads(cleaned)
        except ValueError:
            return text
    return cleaned


def render_json(report: "Report", shell: str | None = None) -> str:
    """Strict JSON (a diverged loss is null, never NaN), indented, with a final newline; the findings' snippets
    as typed in ``shell`` (None: the shell of the report's machine), the bash they were written in beside them."""
    from cpudoctor.model.report import json_text
    from cpudoctor.render.finding_view import ShellChoice, finding_data

    data = report.to_dict()
    choice = ShellChoice.for_report(report, shell)
    data["findings"] = [finding_data(f, choice) for f in report.findings]
    return json_text(data, indent=2) + "\n"
