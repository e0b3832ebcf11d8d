"""Software-stack sections for text and Markdown reports.

TEMPORARY scaffold until the software issue replaces it.
"""

from __future__ import annotations

from cpudoctor.probes.software import Software


def text_lines(sw: Software | None) -> list[str]:
    return ["(software stack not probed)"] if sw is None else [f"Python {sw.python.version}"]


def markdown_lines(sw: Software | None) -> list[str]:
    return text_lines(sw)
