"""Exporting a report: pick a format, redact by default, render, write atomically.

The one path the GUI (toolbar button, Export as..., Report page) and the CLI
(``cpudoctor report --format ... -o FILE``) share, so that privacy and file
safety cannot differ between them.
"""

from __future__ import annotations

import datetime as _dt
import json
from pathlib import Path

from cpudoctor.fileio import WriteError, atomic_write
from cpudoctor.privacy import Identity, Redactor, redact_markdown, redact_report
from cpudoctor.report import Report

# format -> (file extension, label for file dialogs)
FORMATS: dict[str, tuple[str, str]] = {
    "html": (".html", "HTML page"),
    "md": (".md", "Markdown"),
    "json": (".json", "JSON report"),
    "pdf": (".pdf", "PDF document"),
    "text": (".txt", "Plain text"),
}
_SUFFIX_TO_FORMAT = {".htm": "html", ".markdown": "md", **{ext: f for f, (ext, _) in FORMATS.items()}}


class ExportError(Exception):
    """Export failed; ``str()`` says what happened and what to do."""


def format_for_path(path: Path | str, default: str = "html") -> str:
    return _SUFFIX_TO_FORMAT.get(Path(path).suffix.lower(), default)


def default_filename(fmt: str = "html", when: _dt.datetime | None = None) -> str:
    """``cpudoctor-report-2026-11-30-1012.html``: sorts by time, never collides within a minute's clicks."""
    when = when or _dt.datetime.now()
    return f"cpudoctor-report-{when:%Y-%m-%d-%H%M}{FORMATS[fmt][0]}"


def unique_path(folder: Path, name: str) -> Path:
    """``folder/name``, or ``name-2``, ``name-3``... when it exists (one-click export never overwrites)."""
    path = folder / name
    stem, suffix = path.stem, path.suffix
    n = 2
    while path.exists():
        path = folder / f"{stem}-{n}{suffix}"
        n += 1
    return path


def _markdown_or_text(report: Report, fmt: str) -> str:
    """Markdown/text through the shared render dispatch; a built-in fallback keeps export working."""
    try:
        from cpudoctor.render import render

        return render(report, fmt)
    except (ImportError, KeyError, AttributeError):
        pass
    from cpudoctor.render import md_extra

    lines = [f"# CPU Doctor report: {md_extra.md_escape(report.cpu.brand or 'unknown CPU')}", ""]
    lines += md_extra.flags_lines(report) + md_extra.findings_lines(report) + md_extra.benchmarks_lines(report)
    return "\n".join(lines) + "\n"


def render_export(report: Report, fmt: str, include_identifying: bool = False) -> bytes:
    """The bytes of ``report`` in ``fmt``; redacted unless ``include_identifying``."""
    if fmt not in FORMATS:
        raise ExportError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")
    shared = redact_report(report, include_identifying=include_identifying)
    redactor = None if include_identifying else Redactor(Identity.current(report))
    if fmt == "json":
        text = shared.to_json(indent=2)          # strict JSON: a diverged loss becomes null
        if redactor is not None:
            cleaned = redactor.text(text)
            try:
                json.loads(cleaned)
                text = cleaned
            except ValueError:       # a replacement broke JSON quoting: keep the structured pass only
                pass
        return (text + "\n").encode("utf-8")
    if fmt == "html":
        from cpudoctor.render.html import render_html

        text = render_html(shared)
        return (redactor.text(text, html=True) if redactor else text).encode("utf-8")
    if fmt == "pdf":
        from cpudoctor.render.html import build_html
        from cpudoctor.render.pdf import pdf_from_html

        page, pictures = build_html(shared, images="resources")
        if redactor is not None:
            page = redactor.text(page, html=True)
        try:
            title = f"CPU Doctor report — {shared.cpu.brand or 'unknown CPU'}"
            return pdf_from_html(page, pictures, title=redactor.text(title) if redactor else title)
        except RuntimeError as exc:
            raise ExportError(str(exc)) from None
    text = _markdown_or_text(shared, fmt)
    if redactor is not None:
        text = redact_markdown(redactor, text) if fmt == "md" else redactor.text(text)
    return text.encode("utf-8")


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
