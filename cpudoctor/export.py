"""Exporting a report: pick a format, redact by default, render, write atomically.

The one path the GUI (toolbar button, Export as..., Report page) and the CLI
(``cpudoctor report --format ... -o FILE``) share, so that privacy and file
safety cannot differ between them.
"""

from __future__ import annotations

import datetime as _dt
from pathlib import Path

from cpudoctor.fileio import WriteError, atomic_write
from cpudoctor.privacy import Identity, Redactor, redact_markdown, redact_report
from cpudoctor.render import FORMATS, Scrub, format_for_path, render
from cpudoctor.model import Report, utc_now_iso

__all__ = ["FORMATS", "ExportError", "default_filename", "export_report", "format_for_path", "render_export",
           "render_qt_html", "unique_path"]


class ExportError(Exception):
    """Export failed; ``str()`` says what happened and what to do."""


def default_filename(fmt: str = "html", when: _dt.datetime | None = None) -> str:
    """``cpudoctor-report-2026-11-30-1012.html``: sorts by time, never collides within a minute's clicks."""
    when = when or _dt.datetime.now()
    return f"cpudoctor-report-{when:%Y-%m-%d-%H%M}{FORMATS[fmt].suffix}"


def unique_path(folder: Path, name: str) -> Path:
    """``folder/name``, or ``name-2``, ``name-3``... when it exists (one-click export never overwrites)."""
    path = folder / name
    stem, suffix = path.stem, path.suffix
    n = 2
    while path.exists():
        path = folder / f"{stem}-{n}{suffix}"
        n += 1
    return path


def render_export(report: Report, fmt: str, include_identifying: bool = False, shell: str | None = None,
                  exported_at: str | None = None) -> bytes:
    """The bytes of ``report`` in ``fmt``; redacted unless ``include_identifying``; the fixes' commands for
    ``shell`` (None: the shell of the machine the report describes). The documents say when they were exported
    (``exported_at``, default now) beside when the report's facts were collected."""
    if fmt not in FORMATS:
        raise ExportError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")
    shared = redact_report(report, include_identifying=include_identifying)
    scrub = None if include_identifying else _scrubber(Redactor(Identity.current(report)), FORMATS[fmt].markup)
    try:
        out = render(shared, fmt, scrub=scrub, shell=shell, exported_at=exported_at or utc_now_iso())
    except RuntimeError as exc:          # the PDF writer could not start Qt: the message says what to do
        raise ExportError(str(exc)) from None
    if isinstance(out, bytes):
        return out
    from cpudoctor.kits.escape import terminal_safe

    return terminal_safe(out).encode("utf-8")     # the one sanitiser of text sinks: the GUI's files too


def _scrubber(redactor: Redactor, markup: str) -> Scrub:
    """The text pass of the redactor that suits the output's markup (escaped placeholders in HTML/Markdown)."""
    if markup == "html":
        return lambda text: redactor.text(text, html=True)
    if markup == "md":
        return lambda text: redact_markdown(redactor, text)
    return redactor.text


def render_qt_html(report: Report, include_identifying: bool = False) -> tuple[str, dict[str, str]]:
    """The HTML report as Qt's rich text can show it, redacted exactly like the exported file.

    For the Report page's preview (a QTextBrowser knows no inline SVG, CSS
    variables or ``<details>``): the page the PDF is made from, and its
    pictures by name. Pass both to :func:`cpudoctor.render.pdf.attach_pictures`
    with the browser's document, then ``setHtml`` the page it returns.
    """
    from cpudoctor.render.html import build_html

    shared = redact_report(report, include_identifying=include_identifying)
    page, pictures = build_html(shared, images="resources")
    if not include_identifying:
        redactor = Redactor(Identity.current(report))
        page = redactor.text(page, html=True)
        pictures = {name: redactor.text(svg, html=True) for name, svg in pictures.items()}
    return page, pictures


def export_report(report: Report, fmt: str, path: Path | str, include_identifying: bool = False,
                  overwrite: bool = False) -> Path:
    """Render and write atomically; ExportError with a clear message on any failure, nothing half-written."""
    data = render_export(report, fmt, include_identifying)
    try:
        return atomic_write(path, data, overwrite=overwrite)
    except WriteError as exc:
        raise ExportError(exc.strerror or str(exc)) from None
