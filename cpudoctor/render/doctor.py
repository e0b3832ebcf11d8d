"""The doctor's page: one line per check, flutter-doctor style, as text, Markdown or JSON.

``cpudoctor doctor`` prints it, and so does the window's launcher when there
is no display. Checks are grouped by category with a mark for the worst
finding of each ([✓] fine, [!] worth fixing, [✗] broken); the why and the fix
are indented under each problem; a closing line counts everything.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from cpudoctor.kits.format import wrap
from cpudoctor import docs_url
from cpudoctor.kits.escape import md_code, md_escape, md_fence, strip_controls
from cpudoctor.render.finding_view import EVIDENCE, FIX, ShellChoice, finding_data, finding_view
from cpudoctor.render.words import (
    bracketed,
    category_order,
    category_title,
    counts_text,
    finding_order,
    plural,
    severity,
    severity_counts,
    to_fix,
)
from cpudoctor.model import Finding, Report, worst

FORMATS = ("text", "json", "md")
WIDTH = 100


def machine_line(report: Report) -> str:
    """``AMD EPYC 9354 (zen4) · 32 cores, 64 threads · Ubuntu``: which machine the page is about."""
    cpu, topo = report.cpu, report.topology
    parts = [cpu.brand or "unknown CPU"]
    if cpu.microarchitecture:
        parts.append(f"({cpu.microarchitecture})")
    counts = []
    if topo.cores:
        counts.append(plural(topo.cores, "core"))
    if topo.logical_cpus:
        counts.append(plural(topo.logical_cpus, "thread"))
    if counts:
        parts.append("· " + ", ".join(counts))
    sw = report.software
    if sw is not None and sw.os.system:
        parts.append(f"· {sw.os.distro or sw.os.system}")
    return " ".join(parts)


def environment_line(report: Report) -> str | None:
    """``Python environment: amd_dl (conda, Python 3.10.13): the environment you most likely train in``;
    None where no environment was described (a captured tree, a report without software)."""
    from cpudoctor.render.software import environment_words

    sw = report.software
    if sw is None or sw.captured or (sw.python.version is None and sw.python.executable is None):
        return None
    return f"Python environment: {environment_words(sw.python)}"


def grouped(findings: Sequence[Finding]) -> list[tuple[str, str, list[Finding]]]:
    """(category, title, findings worst first) in the categories' display order."""
    groups: dict[str, list[Finding]] = {}
    for f in findings:
        groups.setdefault(f.category, []).append(f)
    return [(cat, category_title(cat), sorted(groups[cat], key=finding_order))
            for cat in sorted(groups, key=category_order)]


def _category_mark(items: list[Finding]) -> str:
    """A category is marked by its worst finding; suggestions alone leave it fine."""
    w = worst(items)
    return "ok" if w == "info" else w


def summary_line(findings: Sequence[Finding]) -> str:
    """``Doctor found issues in 2 categories (1 problem, 2 warnings, 4 suggestions, 9 checks passed).``"""
    counts = counts_text(findings)
    if not to_fix(findings):
        return "No issues found!" + (f" ({counts})" if counts else "")
    bad = [cat for cat, _, items in grouped(findings) if worst(items) in ("warning", "error")]
    return f"Doctor found issues in {plural(len(bad), 'category', 'categories')} ({counts})."


def exit_code(findings: Sequence[Finding]) -> int:
    """1 when something is broken (a problem), else 0: scripts and CI gate on it."""
    return 1 if any(f.severity == "error" for f in findings) else 0


def render_text(report: Report, findings: Sequence[Finding], label: str, *, verbose: bool = False,
                ascii_only: bool = False, shell: str | None = None) -> str:
    """The page for a terminal; the fixes' commands for ``shell`` (None: the shell of the report's machine)."""
    choice = ShellChoice.for_report(report, shell)
    lines = [f"CPU Doctor — {label}: {machine_line(report)}"]
    env = environment_line(report)
    lines += ([env] if env else []) + [""]
    if not findings:
        lines.append("No rule had enough facts to check anything (is the report empty?).")
    for _cat, title, items in grouped(findings):
        lines.append(f"{bracketed(_category_mark(items), ascii_only)} {title}")
        for f in items:
            v = finding_view(f, choice)
            # a long title (a list of packages) wraps under itself instead of running past the terminal
            lines += wrap(f"{v.mark(ascii_only)} {v.title} ({v.code})", WIDTH, 4, hang=2)
            if v.detailed or (verbose and v.severity.key == "info"):
                lines += wrap(v.why, WIDTH, 8)
                if v.fix:
                    lines += wrap(f"{FIX}: {v.fix}", WIDTH, 8)
                if v.snippet:
                    lines += ["          " + line for line in v.snippet.text.splitlines()]
            elif v.severity.key == "info" and v.fix:
                lines += wrap(v.fix, WIDTH, 8)
            if verbose and v.evidence:
                lines += wrap(f"{EVIDENCE}: {v.evidence_text()}", WIDTH, 8)
    from cpudoctor.render.verify import saved_text_lines

    saved = saved_text_lines(report)
    lines += ["", *saved] if saved else []
    lines += ["", summary_line(findings)]
    if to_fix(findings):
        lines.append("Run `cpudoctor explain CODE` for the full story of a check.")
    text = strip_controls("\n".join(lines)) + "\n"       # report data never steers the terminal (as render.text)
    if ascii_only:
        text = text.replace("—", "-").replace("·", "-")
        text = text.encode("ascii", "replace").decode("ascii")
    return text


def render_json(report: Report, findings: Sequence[Finding], label: str, *, shell: str | None = None) -> str:
    """The page as data: each finding with its snippet as typed in ``shell`` (:func:`finding_data`)."""
    choice = ShellChoice.for_report(report, shell)
    data = {
        "source": label,
        "machine": machine_line(report),
        "environment": environment_line(report),
        "summary": summary_line(findings),
        "exit_code": exit_code(findings),
        "counts": {key: n for key, n in reversed(severity_counts(findings).items())},
        "findings": [finding_data(f, choice) for f in findings],
    }
    from cpudoctor.render.verify import data as verified_data, saved_verifications

    saved = saved_verifications(report)
    if saved:
        data["verified"] = verified_data(saved[-1])
    from cpudoctor.model.report import json_text

    return json_text(data)


def render_md(report: Report, findings: Sequence[Finding], label: str, *, verbose: bool = False,
              shell: str | None = None) -> str:
    choice = ShellChoice.for_report(report, shell)
    env = environment_line(report)
    lines = [f"## CPU Doctor — {md_escape(label)}", "", f"**{md_escape(machine_line(report))}**", ""]
    lines += [md_escape(env), ""] if env else []
    for _cat, title, items in grouped(findings):
        lines.append(f"### {severity(_category_mark(items)).emoji} {md_escape(title)}")
        lines.append("")
        for f in items:
            v = finding_view(f, choice)
            symbol = f"[{md_escape(v.symbol)}]({v.docs_url})" if v.docs_url else md_escape(v.symbol)
            lines.append(f"- {v.severity.emoji} **{md_escape(v.title)}** ({md_code(v.code)} {symbol})")
            if v.detailed or (v.severity.key == "info" and (verbose or v.snippet)):
                if v.why:
                    lines.append(f"  {md_escape(v.why)}")
                if v.fix:
                    lines.append(f"  **{FIX}:** {md_escape(v.fix)}")
                if v.snippet:
                    lines += ["", *md_fence(v.snippet.text, v.snippet.lang, indent="  ")]
        lines.append("")
    from cpudoctor.render.verify import md_lines, saved_verifications

    saved = saved_verifications(report)
    if saved:
        lines += md_lines(saved[-1])
    lines.append(f"_{md_escape(summary_line(findings))}_")
    return "\n".join(lines) + "\n"


def render_rules(rules: Sequence[Any], fmt: str, process_rules: Sequence[Any] = ()) -> str:
    """The rule registry as a table (text), JSON list, or Markdown table.

    ``process_rules`` (judged on a running process by ``cpudoctor inspect``) are
    mentioned under the text table, since ``explain`` knows them too.
    """
    if fmt == "json":
        return json.dumps([{"code": r.code, "symbol": r.symbol, "category": r.category, "severity": r.severity,
                            "title": r.title, "docs": r.docs_anchor} for r in rules], indent=2)
    if fmt == "md":
        rows = ["| Code | Symbol | Category | At worst | Title |", "|---|---|---|---|---|"]
        rows += [f"| [{r.code}]({docs_url(r.docs_anchor)}) | `{r.symbol}` | {category_title(r.category)} | {severity(r.severity).name} | "
                 f"{md_escape(r.title)} |" for r in rules]
        return "\n".join(rows) + "\n"
    w_sym = max(len(r.symbol) for r in rules)
    w_cat = max(len(r.category) for r in rules)
    lines = [f"{'CODE':<9}{'SYMBOL':<{w_sym + 2}}{'CATEGORY':<{w_cat + 2}}{'WORST':<11}TITLE"]
    lines += [f"{r.code:<9}{r.symbol:<{w_sym + 2}}{r.category:<{w_cat + 2}}{severity(r.severity).name:<11}{r.title}"
              for r in rules]
    lines.append(f"\n{plural(len(rules), 'rule')}. `cpudoctor explain CODE` prints one in full.")
    if process_rules:
        lines.append(f"{len(process_rules)} more ({process_rules[0].code}-{process_rules[-1].code}) "
                     "check a running job: `cpudoctor inspect PID`.")
    return "\n".join(lines) + "\n"
