"""Markdown sections for findings, benchmarks and long lists, paste-ready for GitHub issues.

Long parts (all flags, evidence, package lists, benchmark series) go inside
``<details>`` so a pasted report stays short until someone opens it. GitHub
renders Markdown inside ``<details>`` only with a blank line after
``<summary>``, which is why the blank lines below matter.
"""

from __future__ import annotations

from typing import Any

from cpudoctor.kits.escape import md_code, md_escape, md_fence
from cpudoctor.kits.format import metric, number
from cpudoctor.render.finding_view import (  # noqa: F401 - evidence_value: settings below, and its old home
    DETAILS,
    EVIDENCE,
    FIX,
    ShellChoice,
    evidence_value,
    finding_view,
)
from cpudoctor.render.svg_chart import (
    find_charts,
    measurement_tables,
    metric_label,
    split_constant_columns,
)
from cpudoctor.render.words import bracketed, counts_text, finding_order, plural, to_fix
from cpudoctor.model import Report, ThreadRecommendation
# Lab job kinds as the Training page names them.
KIND_TITLES = {"train": "Micro-training", "sweep": "Thread sweep", "gemm": "GEMM throughput",
               "quant": "Dynamic int8 vs fp32 inference", "peak": "Peak FLOP/s",
               "roofline": "Roofline: measured roofs and memory bandwidth",
               "infer": "Inference latency per variant"}


def when(stamp: str) -> str:
    """``2026-11-30T09:38:47+00:00`` as ``2026-11-30 09:38 UTC``; anything unparsable as it is."""
    import datetime as dt

    try:
        t = dt.datetime.fromisoformat(stamp)
    except ValueError:
        return stamp
    if t.utcoffset() is None:
        return f"{t:%Y-%m-%d %H:%M}"
    return f"{t:%Y-%m-%d %H:%M} " + ("UTC" if not t.utcoffset() else f"{t:%z}"[:3] + ":" + f"{t:%z}"[3:])


def made_words(collected: str, exported: str | None = None) -> str:
    """"collected 2026-11-30 15:16 UTC, exported 2026-11-30 15:35 UTC": a file exported later than its facts were
    read says both (one stamp read as the other misdates the facts); the same minute says it once."""
    parts = [f"collected {when(collected)}"] if collected else []
    if exported and (not collected or when(exported) != when(collected)):
        parts.append(f"exported {when(exported)}")
    return ", ".join(parts)


def kind_title(kind: str) -> str:
    return KIND_TITLES.get(kind, kind)


def measurements_title(name: str, n: int) -> str:
    """``8 measurements`` for a job's own ``points``; other lists keep their name."""
    count = plural(n, "measurement")
    return count if name in ("points", "series", "results") else f"{count} ({name})"


def settings_text(settings: dict[str, Any], limit: int = 60) -> list[str]:
    """``label: value`` items of a job's settings in a reader's words (``time budget (s): 45``, never
    ``budget_s=45``); a nested dict (a sweep's training settings) flattened into the list."""
    from cpudoctor.render.svg_chart import metric_label

    out: list[str] = []
    for k, v in settings.items():
        if isinstance(v, dict):
            out += settings_text(v, limit)
        elif v is None or v == [] or v == {}:
            continue
        else:
            out.append(f"{metric_label(k)}: {evidence_value(v, limit)}")
    return out


def recommendation_text(rec: ThreadRecommendation) -> str:
    """"2 threads, 1 inter-op, pinned to CPUs 0-7 (one CCX): 1.14× the PyTorch default"."""
    from cpudoctor.kits.cpulist import format_cpulist

    text = plural(rec.threads, "thread")
    if rec.interop_threads:
        text += f", {rec.interop_threads} inter-op"
    if rec.cpus:
        text += f", pinned to CPUs {format_cpulist(rec.cpus)}"
    # The sweep names plain thread-count variants "4 threads": saying it twice reads as a typo.
    if rec.variant and rec.variant.strip().lower() not in (f"{rec.threads} threads", f"{rec.threads} thread"):
        text += f" ({rec.variant})"
    if rec.samples_per_s:
        text += f": {number(rec.samples_per_s)} samples/s"
        if rec.default_samples_per_s:
            text += f", {rec.samples_per_s / rec.default_samples_per_s:.2f}× the PyTorch default"
    if rec.model:
        text += f" (model {rec.model})"
    return text


def details(summary: str, body: list[str]) -> list[str]:
    return ["<details>", f"<summary>{summary}</summary>", "", *body, "", "</details>", ""]


def flags_lines(report: Report) -> list[str]:
    flags = report.cpu.flags
    if not flags:
        return []
    return details(f"All {len(flags)} CPU flags", md_fence(" ".join(flags), "text"))


def findings_lines(report: Report, shell: str | None = None) -> list[str]:
    out = ["## Findings", ""]
    if not report.findings:
        return out + ["_The advisor has not run on this report (or found nothing to say)._", ""]
    ordered = sorted(report.findings, key=finding_order)
    problems = [f for f in ordered if f.severity != "ok"]
    passed = [f for f in ordered if f.severity == "ok"]
    out += [f"**{md_escape(counts_line(report))}**", ""]
    choice = ShellChoice.for_report(report, shell)
    for f in problems:
        v = finding_view(f, choice)
        # Title, why and fix are separate paragraphs of the list item: consecutive lines would
        # run together into one paragraph on GitHub.
        out += [f"- **{v.bracketed()} {md_escape(v.title)}** {md_code(v.code)} {md_escape(v.symbol)}", ""]
        if v.why:
            out += [f"  {md_escape(v.why)}", ""]
        if v.fix:
            out += [f"  **{FIX}:** {md_escape(v.fix)}", ""]
        if v.snippet:
            out += [*md_fence(v.snippet.text, v.snippet.lang, indent="  "), ""]
        if v.evidence:
            out += ["  " + ln if ln else "" for ln in details(
                EVIDENCE, [f"- {md_code(_short(line.key, 80))}: {md_escape(line.value)}" for line in v.evidence])]
        out += [f"  {DETAILS}: {md_code(v.explain)}"
                + (f" · [{md_escape(v.docs_label)}]({v.docs_url})" if v.docs_url else ""), ""]
    if passed:
        out += details(plural(len(passed), "check passed", "checks passed"),
                       [f"- {bracketed('ok')} {md_escape(f.title)} {md_code(f.code)}" for f in passed])
    return out


def _short(value: Any, limit: int = 200) -> str:
    text = value if isinstance(value, str) else repr(value)
    text = text.replace("\n", " ")
    return text if len(text) <= limit else text[: limit - 1] + "…"


def counts_line(report: Report) -> str:
    """``To look at: 2 warnings, 4 suggestions, 9 checks passed`` (or that there is nothing to fix)."""
    head = "Nothing to fix" if not to_fix(report.findings) else "To look at"
    return f"{head}: {counts_text(report.findings)}"


def benchmarks_lines(report: Report) -> list[str]:
    if not report.benchmarks and report.recommendation is None:
        return []
    out = ["## Benchmarks", ""]
    rec = report.recommendation
    if rec is not None:
        out += [f"**Recommended:** {md_escape(recommendation_text(rec))}", ""]
    from cpudoctor.render.roofline import roof_lines

    roofs = roof_lines(report.benchmarks)
    if roofs:
        out += ["| roofline | |", "|---|---|"] + [f"| {md_escape(k)} | {md_escape(v)} |" for k, v in roofs] + [""]
    for run in report.benchmarks:
        status = "" if run.status == "ok" else f" — **{md_escape(run.status)}**"
        out.append(f"### {md_escape(kind_title(run.kind))}{status}")
        out.append("")
        if run.started_at:
            out += [f"_started {md_escape(run.started_at)}_", ""]
        if run.settings:
            out.append("Settings: " + ", ".join(md_escape(_short(item, 80)) for item in settings_text(run.settings)))
            out.append("")
        if run.kind == "infer":             # its own table, verdicts and code (render/infer.py)
            from cpudoctor.render.infer import markdown_lines

            out += markdown_lines(run.metrics, md_escape, md_fence)
            if run.note:
                out += [md_escape(run.note), ""]
            continue
        scalars = [(k, v) for k, v in run.metrics.items() if not isinstance(v, (list, dict)) and v is not None]
        if scalars:
            out += ["| metric | value |", "|---|---|"]
            out += [f"| {md_escape(metric_label(k))} | {md_escape(metric(k, v))} |" for k, v in scalars]
            out.append("")
        for chart in find_charts(run.metrics, kind_title(run.kind)):
            if chart.bars:
                label, value = max(chart.bars, key=lambda b: b[1])
                out.append(f"- Best: **{md_escape(label)}**, {number(value)} {md_escape(chart.y_label)}")
            for series in chart.series:
                x, y = max(series.points, key=lambda p: p[1])
                unit = "" if chart.y_label in series.name else f" {chart.y_label}"
                out.append(f"- Peak {md_escape(series.name)}: **{number(y)}**{md_escape(unit)} "
                           f"at {md_escape(chart.x_label)} {x:g}")
        out.append("")
        for name, cols, rows in measurement_tables(run.metrics):
            cols, rows, same = split_constant_columns(cols, rows)
            body = [f"Every row: {md_escape(', '.join(same))}", ""] if same else []
            body += ["| " + " | ".join(md_escape(c) for c in cols) + " |", "|" + "---|" * len(cols)]
            body += ["| " + " | ".join(md_escape(v) for v in row) + " |" for row in rows]
            out += details(md_escape(measurements_title(name, len(rows))), body)
        if run.note:
            out += [md_escape(run.note), ""]
    return out
