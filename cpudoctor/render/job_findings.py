"""A job's findings laid out for ``inspect``, ``run`` and ``bench``: text, Markdown and HTML from the view.

The report's pages group findings by category (:mod:`.text`, :mod:`.markdown`,
:mod:`.doctor`); a job's pages list them worst first under one heading. Either
way each finding's words come from its :class:`~cpudoctor.render.finding_view.FindingView`,
so a finding reads the same on every surface; this module only lays out (marks,
indentation, a code fence longer than any backtick run in the snippet:
:func:`cpudoctor.kits.escape.md_fence`).
"""

from __future__ import annotations

from collections.abc import Sequence

from cpudoctor.kits.escape import md_escape, md_fence
from cpudoctor.kits.format import wrap
from cpudoctor.model import Finding, worst
from cpudoctor.render.finding_html import finding_html
from cpudoctor.render.finding_view import FIX, WHY, ShellChoice, finding_view
from cpudoctor.render.words import bracketed, plural, severity

WIDTH = 100


def count_line(findings: Sequence[Finding]) -> str:
    """``2 findings (worst: warning).``"""
    return f"{plural(len(findings), 'finding')} (worst: {severity(worst(list(findings))).name.lower()})."


def text_lines(findings: Sequence[Finding], shell: str | ShellChoice | None = None, *, heading: str = "Findings",
               none: str = "No problem found.") -> list[str]:
    """``[!] CODE title``, the why and the fix wrapped under it, the snippet (``$ `` before a shell command),
    then the count; ``none`` (after an ok mark) when there is nothing."""
    if not findings:
        return [f"{bracketed('ok')} {none}"]
    out = [heading] if heading else []
    for f in findings:
        v = finding_view(f, shell)
        out.append(f"{v.bracketed()} {v.code} {v.title}")
        for label, text in ((WHY, v.why), (FIX, v.fix)):
            if text:
                out.extend(wrap(f"{label}: {text}", WIDTH, indent=4, hang=5))
        for line in v.snippet.text.splitlines():
            out.append(f"      {'$ ' if v.snippet.shell else ''}{line}".rstrip())
    out.append(count_line(findings))
    return out


def md_lines(findings: Sequence[Finding], shell: str | ShellChoice | None = None, *,
             none: str = "No problem found.") -> list[str]:
    """One ``###`` section per finding: severity, code and title, the why, the fix, the snippet fenced."""
    if not findings:
        return [md_escape(none), ""]
    out: list[str] = []
    for f in findings:
        v = finding_view(f, shell)
        out += [f"### {v.severity.name} {v.code}: {md_escape(v.title)}", ""]
        if v.why:
            out += [md_escape(v.why), ""]
        if v.fix:
            out += [f"**{FIX}.** {md_escape(v.fix)}", ""]
        if v.snippet:
            out += [*md_fence(v.snippet.text, v.snippet.lang), ""]
    return out


def html(findings: Sequence[Finding], shell: str | ShellChoice | None = None, *,
         none: str = "No problem found.") -> str:
    """Each finding as the export page lays one out (:func:`~cpudoctor.render.finding_html.finding_html`)."""
    from cpudoctor.kits.escape import html_escape

    if not findings:
        return f"<p>{html_escape(none)}</p>"
    return "".join(finding_html(finding_view(f, shell), "page") for f in findings)
