"""Markdown sections for findings, benchmarks and long lists, paste-ready for GitHub issues.

Long parts (all flags, evidence, package lists, benchmark series) go inside
``<details>`` so a pasted report stays short until someone opens it. GitHub
renders Markdown inside ``<details>`` only with a blank line after
``<summary>``, which is why the blank lines below matter.
"""

from __future__ import annotations

from typing import Any

from cpudoctor.render.svg_chart import find_charts, measurement_tables
from cpudoctor.report import Report

SEVERITY_ORDER = {"error": 0, "warning": 1, "info": 2, "ok": 3}
SEVERITY_MARK = {"error": "✗", "warning": "!", "info": "i", "ok": "✓"}


def md_escape(text: Any) -> str:
    """Escape characters that would turn report data into Markdown/HTML markup."""
    s = "" if text is None else str(text)
    for ch in "\\`*_[]<>|#":
        s = s.replace(ch, "\\" + ch)
    return s.replace("\n", " ")


def details(summary: str, body: list[str]) -> list[str]:
    return ["<details>", f"<summary>{summary}</summary>", "", *body, "", "</details>", ""]


def flags_lines(report: Report) -> list[str]:
    flags = report.cpu.flags
    if not flags:
        return []
    return details(f"All {len(flags)} CPU flags", ["```text", " ".join(flags), "```"])


def findings_lines(report: Report) -> list[str]:
    out = ["## Findings", ""]
    if not report.findings:
        return out + ["_The advisor has not run on this report (or found nothing to say)._", ""]
    for f in sorted(report.findings, key=lambda f: (SEVERITY_ORDER.get(f.severity, 9), f.code)):
        mark = SEVERITY_MARK.get(f.severity, "i")
        out.append(f"- **[{mark}] {md_escape(f.title)}** `{f.code}` {md_escape(f.symbol)}")
        if f.why:
            out.append(f"  {md_escape(f.why)}")
        if f.fix:
            out.append(f"  **Fix:** {md_escape(f.fix)}")
        if f.snippet:
            fence = "````" if "```" in f.snippet else "```"
            out += ["", f"  {fence}{f.snippet_lang}", *("  " + ln for ln in f.snippet.splitlines()), f"  {fence}"]
        if f.evidence:
            out += [""] + ["  " + ln if ln else "" for ln in details(
                "Evidence", [f"- `{_short(k, 80)}`: `{_short(v)}`" for k, v in f.evidence.items()])]
        out.append("")
    return out


def _short(value: Any, limit: int = 200) -> str:
    text = value if isinstance(value, str) else repr(value)
    text = text.replace("`", "'").replace("\n", " ")
    return text if len(text) <= limit else text[: limit - 1] + "…"


def benchmarks_lines(report: Report) -> list[str]:
    if not report.benchmarks and report.recommendation is None:
        return []
    out = ["## Benchmarks", ""]
    rec = report.recommendation
    if rec is not None:
        gain = ""
        if rec.samples_per_s and rec.default_samples_per_s:
            gain = f" ({rec.samples_per_s / rec.default_samples_per_s:.2f}× the PyTorch default)"
        out += [f"**Recommended:** {rec.threads} threads"
                + (f", {rec.interop_threads} inter-op" if rec.interop_threads else "")
                + (f", {md_escape(rec.variant)}" if rec.variant else "") + gain, ""]
    for run in report.benchmarks:
        status = "" if run.status == "ok" else f" — **{md_escape(run.status)}**"
        out.append(f"### {md_escape(run.kind)}{status}")
        out.append("")
        if run.settings:
            out.append("Settings: " + ", ".join(f"`{_short(k, 40)}={_short(v, 60)}`" for k, v in run.settings.items()))
            out.append("")
        scalars = [(k, v) for k, v in run.metrics.items() if not isinstance(v, (list, dict))]
        if scalars:
            out += ["| metric | value |", "|---|---|"]
            out += [f"| {md_escape(k)} | {f'{v:,.4g}' if isinstance(v, float) else md_escape(v)} |" for k, v in scalars]
            out.append("")
        for chart in find_charts(run.metrics, run.kind):
            if chart.bars:
                label, value = max(chart.bars, key=lambda b: b[1])
                out.append(f"- Best: **{md_escape(label)}**, {value:,.4g} {md_escape(chart.y_label)}")
            for series in chart.series:
                x, y = max(series.points, key=lambda p: p[1])
                out.append(f"- Peak {md_escape(series.name)}: **{y:,.4g}** at {md_escape(chart.x_label)} {x:g}")
        out.append("")
        for name, cols, rows in measurement_tables(run.metrics):
            body = ["| " + " | ".join(md_escape(c) for c in cols) + " |", "|" + "---|" * len(cols)]
            body += ["| " + " | ".join(md_escape(v) for v in row) + " |" for row in rows]
            out += details(f"{len(rows)} measurements ({md_escape(name)})", body)
        if run.note:
            out += [md_escape(run.note), ""]
    return out
