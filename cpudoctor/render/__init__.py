"""Rendering a Report as text, Markdown, HTML or PDF. No Qt except in the PDF path.

:func:`render` dispatches through :data:`FORMATS`, a small dict of
``format -> "module:function"`` imported lazily, so asking for text never
imports the HTML or PDF (Qt) machinery. To add a format, add one entry here.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cpudoctor.report import Report

# format name -> "module:function(report) -> str | bytes"
FORMATS: dict[str, str] = {
    "json": "cpudoctor.render:render_json",
    "md": "cpudoctor.render.markdown:render",
    "text": "cpudoctor.render.text:render",
    "html": "cpudoctor.render.html:render_html",
    "pdf": "cpudoctor.render.pdf:render_pdf",
}


def render(report: "Report", fmt: str) -> str | bytes:
    """``report`` in ``fmt`` (json, md, text, html, pdf): str, or bytes for binary formats."""
    try:
        target = FORMATS[fmt]
    except KeyError:
        raise KeyError(f"unknown report format {fmt!r}; choose one of {', '.join(FORMATS)}") from None
    module_name, _, func_name = target.partition(":")
    func = getattr(importlib.import_module(module_name), func_name)
    return func(report)


def render_json(report: "Report") -> str:
    return report.to_json() + "\n"
