"""The whole report as GitHub-flavoured Markdown, short enough to paste into an issue.

Tables for identity and ISA verdicts, long lists (every flag, evidence,
benchmark series) folded into ``<details>``. Report data is escaped so a
brand string or a note can never turn into markup.
"""

from __future__ import annotations

from cpudoctor.render.doctor import environment_line

from cpudoctor.render import cpu as cpu_sec
from cpudoctor.kits.escape import md_code, md_escape
from cpudoctor.render.md_extra import (
    benchmarks_lines,
    details,
    findings_lines,
    made_words,
)
from cpudoctor.model import Report

_cell = md_escape        # a table cell: the same escaping (pipes included)


def header_lines(report: Report, exported_at: str | None = None) -> list[str]:
    cpu = report.cpu
    meta = report.meta
    out = [f"# CPU Doctor report: {md_escape(cpu.brand or 'unknown CPU')}", ""]
    sub = []
    made = made_words(meta.generated_at, exported_at)
    if made:
        sub.append(md_escape(made))
    if meta.tool_version:
        sub.append(f"cpudoctor {md_escape(meta.tool_version)}")
    if meta.root and meta.root != "/":
        sub.append(f"root {md_code(meta.root)}")
    sub.append(f"schema version {report.schema_version}")
    out += ["_" + ", ".join(sub) + "_", ""]
    env = environment_line(report)
    return out + ([md_escape(env), ""] if env else [])


def cpu_lines(report: Report) -> list[str]:
    out = ["## CPU", "", "| Property | Value |", "|---|---|"]
    out += [f"| {_cell(label)} | {_cell(value)} |" for label, value in cpu_sec.identity_rows(report.cpu)]
    return out + [""]


def isa_lines(report: Report) -> list[str]:
    cpu = report.cpu
    out = ["## Instruction sets for deep learning", "", "| | Feature | Verdict | Why it matters |", "|---|---|---|---|"]
    for row in cpu_sec.isa_rows(cpu):
        out.append(f"| {row.mark} | {_cell(row.name)} | {_cell(row.detail)} | {_cell(row.explain)} |")
    out.append("")
    width = cpu_sec.width_line(cpu)
    if width:
        out += [f"**Vector width:** {md_escape(width)}", ""]
    return out


def flags_lines(report: Report) -> list[str]:
    flags = report.cpu.flags
    out = [f"## CPU flags ({len(flags)})", ""]
    if not flags:
        return out + ["_No flags reported._", ""]
    arch, vendor = report.cpu.arch, report.cpu.vendor
    groups = cpu_sec.flag_groups(flags, arch, vendor)
    rows = []
    for name in flags:
        cat, meaning = cpu_sec.describe_flag(name, arch, vendor)
        if cat in cpu_sec.KEY_CATEGORIES or name in cpu_sec.KEY_FLAGS:
            rows.append(f"| {md_code(name, table=True)} | {_cell(cpu_sec.category_title(cat))} | {_cell(meaning)} |")
    if rows:
        out += ["Flags that matter for deep learning:", "", "| Flag | Category | What uses it |", "|---|---|---|", *rows, ""]
    body = []
    for cat, names in groups.items():
        body.append(f"- **{md_escape(cpu_sec.category_title(cat))}**: " + " ".join(md_code(n) for n in names))
    out += details(f"All {len(flags)} flags by category", body)
    return out


def topology_lines(report: Report) -> list[str]:
    from cpudoctor.render import topology

    return ["## Topology", "", *topology.markdown_lines(report.topology), ""]


def software_lines(report: Report) -> list[str]:
    from cpudoctor.render import software

    return ["## Software", "", *software.markdown_lines(report.software), ""]


def notes_lines(report: Report) -> list[str]:
    notes = list(report.cpu.notes) + list(report.notes)
    if not notes:
        return []
    return ["## Notes", "", *(f"- {md_escape(n)}" for n in notes), ""]


def render(report: Report, shell: str | None = None, exported_at: str | None = None) -> str:
    """The report for a GitHub issue; fixes' commands for ``shell`` (None: the shell of the report's machine)."""
    lines = header_lines(report, exported_at) + cpu_lines(report) + isa_lines(report) + flags_lines(report)
    lines += topology_lines(report) + software_lines(report)
    if report.findings:
        lines += findings_lines(report, shell)
    lines += benchmarks_lines(report)
    lines += notes_lines(report)
    text = "\n".join(lines).rstrip("\n") + "\n"
    while "\n\n\n" in text:
        text = text.replace("\n\n\n", "\n\n")
    return text
