"""The whole report as plain text for a terminal: calm, aligned, at most ~100 columns.

Order: title, CPU identity, ISA verdicts (explained), flags by category,
topology, software, findings, benchmarks, notes. Marks follow flutter doctor:
[✓] fine, [!] worth a look, [✗] missing or broken, [-] not present (neutral).
"""

from __future__ import annotations

from cpudoctor.render.doctor import environment_line

from cpudoctor.render import cpu as cpu_sec
from cpudoctor.kits.format import metric, wrap
from cpudoctor.kits.escape import strip_controls
from cpudoctor.render.finding_view import FIX, ShellChoice, finding_view
from cpudoctor.render.md_extra import made_words
from cpudoctor.render.words import counts_text, finding_order, plural
from cpudoctor.model import Report

WIDTH = 100


def _heading(title: str) -> list[str]:
    return ["", title, "─" * len(title)]


def header_lines(report: Report, exported_at: str | None = None) -> list[str]:
    cpu = report.cpu
    title = f"CPU Doctor report: {cpu.brand or 'unknown CPU'}"
    meta = report.meta
    sub = [made_words(meta.generated_at, exported_at), f"cpudoctor {meta.tool_version}" if meta.tool_version else ""]
    if meta.root and meta.root != "/":
        sub.append(f"root {meta.root}")
    lines = [title, "═" * min(len(title), WIDTH)]
    sub_text = ", ".join(s for s in sub if s)
    if sub_text:
        lines.append(sub_text)
    env = environment_line(report)
    return lines + ([env] if env else [])


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
            out += wrap(row.explain, WIDTH, 6)
    width_text = cpu_sec.width_line(cpu)
    if width_text:
        out.append("")
        out += wrap("Vector width: " + width_text, WIDTH, 2)
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
            out += wrap(f"{cpu_sec.category_title(cat)}: {' '.join(names)}", WIDTH, 2, hang=4)
        else:
            others.append(f"{cat} {len(names)}")
    if others:
        out += wrap("Other flags by category: " + ", ".join(others) + " (all listed in the JSON/Markdown report)", WIDTH, 2, hang=4)
    return out


def topology_lines(report: Report) -> list[str]:
    from cpudoctor.render import topology

    return _heading("Topology") + ["  " + ln if ln else "" for ln in topology.text_lines(report.topology)]


def software_lines(report: Report) -> list[str]:
    from cpudoctor.render import software

    return _heading("Software") + ["  " + ln if ln else "" for ln in software.text_lines(report.software)]


def findings_lines(report: Report, shell: str | None = None) -> list[str]:
    """The findings, each laid out from its view, snippets in ``shell`` (None: the report machine's own)."""
    if not report.findings:
        return []
    out = _heading(f"Findings ({len(report.findings)})")
    choice = ShellChoice.for_report(report, shell)
    for f in sorted(report.findings, key=finding_order):
        v = finding_view(f, choice)
        out.append(f"  {v.bracketed()} {v.title}  ({v.code} {v.symbol})")
        if v.why:
            out += wrap(v.why, WIDTH, 6)
        if v.fix:
            out += wrap(f"{FIX}: {v.fix}", WIDTH, 6)
        if v.snippet:
            out += ["      " + ln for ln in v.snippet.text.splitlines()]
    out.append("")
    out.append("  " + counts_text(report.findings))
    return out


def benchmarks_lines(report: Report) -> list[str]:
    """Lab results in the same words as the Training page and the Markdown/HTML exports."""
    from cpudoctor.render.md_extra import kind_title, recommendation_text, settings_text
    from cpudoctor.render.svg_chart import metric_label

    if not report.benchmarks and report.recommendation is None:
        return []
    out = _heading("Benchmarks")
    if report.recommendation is not None:
        out += wrap("Recommended: " + recommendation_text(report.recommendation), WIDTH, 2)
    from cpudoctor.render.roofline import roof_lines

    for label, value in roof_lines(report.benchmarks):
        out += wrap(f"{label}: {value}", WIDTH, 2, hang=4)
    for run in report.benchmarks:
        status = "" if run.status == "ok" else f" [{run.status}]"
        out.append(f"  {kind_title(run.kind)}{status}" + (f"  started {run.started_at}" if run.started_at else ""))
        settings = settings_text(run.settings)
        if settings:
            out += wrap("settings: " + ", ".join(settings), WIDTH, 6)
        for k, v in run.metrics.items():
            if not isinstance(v, (list, dict)):
                out.append(f"      {metric_label(k)}: {metric(k, v)}")
        series = [(k, v) for k, v in run.metrics.items() if isinstance(v, list) and v]
        for k, v in series:
            out.append(f"      {plural(len(v), 'measurement')} ({metric_label(k)}): see --format md/html/json")
        if run.note:
            out += wrap(run.note, WIDTH, 6)
    return out


def notes_lines(report: Report) -> list[str]:
    notes = [("cpu", n) for n in report.cpu.notes] + [("report", n) for n in report.notes]
    if not notes:
        return []
    out = _heading("Notes")
    for _, note in notes:
        out += wrap(note, WIDTH, indent=4, prefix="  - ")
    return out


def render(report: Report, shell: str | None = None, exported_at: str | None = None) -> str:
    """The report for a terminal; fixes' commands for ``shell`` (None: the shell of the report's machine)."""
    lines = header_lines(report, exported_at)
    for part in (cpu_lines, isa_lines, flags_lines, topology_lines, software_lines):
        lines += part(report)
    lines += findings_lines(report, shell)
    for part in (benchmarks_lines, notes_lines):
        lines += part(report)
    return strip_controls("\n".join(line.rstrip() for line in lines)) + "\n"
