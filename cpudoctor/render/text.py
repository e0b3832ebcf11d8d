"""The whole report as plain text for a terminal: calm, aligned, at most ~100 columns.

Order: title, CPU identity, ISA verdicts (explained), flags by category,
topology, software, findings, benchmarks, notes. Marks follow flutter doctor:
[✓] fine, [!] worth a look, [✗] missing or broken, [-] not present (neutral).
"""

from __future__ import annotations

import textwrap

from cpudoctor.render import cpu as cpu_sec
from cpudoctor.render.md_extra import when
from cpudoctor.report import Report

WIDTH = 100
SEVERITY_MARK = {"error": "[✗]", "warning": "[!]", "info": "[i]", "ok": "[✓]"}
SEVERITY_ORDER = {"error": 0, "warning": 1, "info": 2, "ok": 3}


def _wrap(text: str, indent: int, hang: int = 0) -> list[str]:
    pad = " " * indent
    return textwrap.wrap(text, WIDTH, initial_indent=pad, subsequent_indent=pad + " " * hang,
                         break_on_hyphens=False) or [pad]


def _heading(title: str) -> list[str]:
    return ["", title, "─" * len(title)]


def header_lines(report: Report) -> list[str]:
    cpu = report.cpu
    title = f"CPU Doctor report: {cpu.brand or 'unknown CPU'}"
    meta = report.meta
    sub = [f"generated {when(meta.generated_at)}" if meta.generated_at else "", f"cpudoctor {meta.tool_version}" if meta.tool_version else ""]
    if meta.root and meta.root != "/":
        sub.append(f"root {meta.root}")
    lines = [title, "═" * min(len(title), WIDTH)]
    sub_text = ", ".join(s for s in sub if s)
    if sub_text:
        lines.append(sub_text)
    return lines


def cpu_lines(report: Report) -> list[str]:
    rows = cpu_sec.identity_rows(report.cpu)
    width = max(len(label) for label, _ in rows) + 2
    out = _heading("CPU")
    out += [f"  {label.ljust(width)}{value}" for label, value in rows]
    return out


def isa_lines(report: Report) -> list[str]:
    cpu = report.cpu
    out = _heading("Instruction sets for deep learning")
    rows = cpu_sec.isa_rows(cpu)
    width = max(len(r.name) for r in rows) + 2
    for row in rows:
        out.append(f"  {row.mark} {row.name.ljust(width)}{row.detail}")
        if row.explain:
            out += _wrap(row.explain, 6)
    width_text = cpu_sec.width_line(cpu)
    if width_text:
        out.append("")
        out += _wrap("Vector width: " + width_text, 2)
    return out


def flags_lines(report: Report) -> list[str]:
    flags = report.cpu.flags
    out = _heading(f"CPU flags ({len(flags)})")
    if not flags:
        return out + ["  none reported"]
    groups = cpu_sec.flag_groups(flags, report.cpu.arch, report.cpu.vendor)
    others = []
    for cat, names in groups.items():
        if cat in cpu_sec.DL_CATEGORIES:
            out += _wrap(f"{cpu_sec.category_title(cat)}: {' '.join(names)}", 2, hang=4)
        else:
            others.append(f"{cat} {len(names)}")
    if others:
        out += _wrap("Other flags by category: " + ", ".join(others) + " (all listed in the JSON/Markdown report)", 2, hang=4)
    return out


def topology_lines(report: Report) -> list[str]:
    from cpudoctor.render import topology

    return _heading("Topology") + ["  " + ln if ln else "" for ln in topology.text_lines(report.topology)]


def software_lines(report: Report) -> list[str]:
    from cpudoctor.render import software

    return _heading("Software") + ["  " + ln if ln else "" for ln in software.text_lines(report.software)]


def findings_lines(report: Report) -> list[str]:
    if not report.findings:
        return []
    out = _heading(f"Findings ({len(report.findings)})")
    for f in sorted(report.findings, key=lambda f: (SEVERITY_ORDER.get(f.severity, 9), f.code)):
        out.append(f"  {SEVERITY_MARK.get(f.severity, '[i]')} {f.title}  ({f.code} {f.symbol})")
        if f.why:
            out += _wrap(f.why, 6)
        if f.fix:
            out += _wrap("Fix: " + f.fix, 6)
        if f.snippet:
            out += ["      " + ln for ln in f.snippet.splitlines()]
    counts = {}
    for f in report.findings:
        counts[f.severity] = counts.get(f.severity, 0) + 1
    out.append("")
    out.append("  " + ", ".join(_count(n, sev) for sev, n in sorted(counts.items(), key=lambda kv: SEVERITY_ORDER.get(kv[0], 9))))
    return out


# The app's words for severities (the Advisor page groups findings under the same names).
_SEVERITY_NOUNS = {"error": ("problem", "problems"), "warning": ("warning", "warnings"),
                   "info": ("suggestion", "suggestions"), "ok": ("check passed", "checks passed")}


def _count(n: int, severity: str) -> str:
    one, many = _SEVERITY_NOUNS.get(severity, (severity, severity))
    return f"{n} {one if n == 1 else many}"


def benchmarks_lines(report: Report) -> list[str]:
    """Lab results in the same words as the Training page and the Markdown/HTML exports."""
    from cpudoctor.render.md_extra import kind_title, recommendation_text, settings_text
    from cpudoctor.render.svg_chart import fmt_metric, metric_label

    if not report.benchmarks and report.recommendation is None:
        return []
    out = _heading("Benchmarks")
    if report.recommendation is not None:
        out += _wrap("Recommended: " + recommendation_text(report.recommendation), 2)
    for run in report.benchmarks:
        status = "" if run.status == "ok" else f" [{run.status}]"
        out.append(f"  {kind_title(run.kind)}{status}" + (f"  started {run.started_at}" if run.started_at else ""))
        settings = settings_text(run.settings)
        if settings:
            out += _wrap("settings: " + ", ".join(settings), 6)
        for k, v in run.metrics.items():
            if not isinstance(v, (list, dict)):
                out.append(f"      {metric_label(k)}: {fmt_metric(k, v)}")
        series = [(k, v) for k, v in run.metrics.items() if isinstance(v, list) and v]
        for k, v in series:
            out.append(f"      {len(v)} measurement{'s' if len(v) != 1 else ''} ({metric_label(k)}): see --format md/html/json")
        if run.note:
            out += _wrap(run.note, 6)
    return out


def notes_lines(report: Report) -> list[str]:
    notes = [("cpu", n) for n in report.cpu.notes] + [("report", n) for n in report.notes]
    if not notes:
        return []
    out = _heading("Notes")
    for _, note in notes:
        out += textwrap.wrap(note, WIDTH, initial_indent="  - ", subsequent_indent="    ", break_on_hyphens=False)
    return out


def render(report: Report) -> str:
    lines = header_lines(report)
    for part in (cpu_lines, isa_lines, flags_lines, topology_lines, software_lines, findings_lines,
                 benchmarks_lines, notes_lines):
        lines += part(report)
    return "\n".join(line.rstrip() for line in lines) + "\n"
