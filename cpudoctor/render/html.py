"""A report as one self-contained HTML file: inline CSS, inline SVG, no scripts, no fetches.

Meant to be attached to a bug report or mailed to a colleague, so it must open
anywhere, offline, and look calm in light and dark mode. Every value from the
report is escaped: CPU brand strings, package names and finding texts are data,
never markup.

``images="resources"`` is the variant for Qt's QTextDocument (PDF export): Qt's
rich-text engine knows no inline SVG, flexbox or media queries, so pictures
are referenced by name (``<img src="cpudoctor:topology">``) and the caller
supplies them rasterised; the layout uses plain tables.
"""

from __future__ import annotations

from cpudoctor.render.doctor import environment_line

import re
from typing import Literal


from cpudoctor.render import cpu as cpu_sec
from cpudoctor.render import software as sw_sec
from cpudoctor.kits.escape import html_escape as e
from cpudoctor.kits.format import cache_size, metric, or_unknown, size
from cpudoctor.render.finding_html import finding_html
from cpudoctor.render.finding_view import ShellChoice, finding_view
from cpudoctor.render.md_extra import (
    kind_title,
    made_words,
    measurements_title,
    recommendation_text,
    settings_text,
    when,
)
from cpudoctor.render.svg_chart import (
    drop_derived_columns,
    find_charts,
    measurement_tables,
    metric_label,
    render_chart,
    split_constant_columns,
)
from cpudoctor.render.svg_topology import render_svg
from cpudoctor.render.words import SEVERITY, bracketed, finding_order, plural, severity_counts
from cpudoctor.model import BenchRun, Report

Images = Literal["inline", "resources"]
PLATFORM_NAMES = {"linux": "Linux", "darwin": "macOS", "win32": "Windows", "cygwin": "Windows (Cygwin)"}

CSS = """
:root{--bg:#fbfbfc;--fg:#1f2933;--muted:#5f6b77;--card:#ffffff;--line:#e1e5ea;--code:#f3f5f7;
--ok:#2e7d4f;--info:#2f6fbf;--warning:#a86400;--error:#c0392b;--accent:#2f6fbf}
@media (prefers-color-scheme: dark){:root{--bg:#15181b;--fg:#e6e9ec;--muted:#9aa5b1;--card:#1c2024;
--line:#2d3339;--code:#23282d;--ok:#5cc38a;--info:#6aa5ef;--warning:#f0a545;--error:#f0776a;--accent:#6aa5ef}}
*{box-sizing:border-box}
body{margin:0;background:var(--bg);color:var(--fg);font:15px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,
"Helvetica Neue",Arial,sans-serif}
main{max-width:1280px;margin:0 auto;padding:24px 28px 48px}
header h1{font-size:26px;margin:0 0 2px}
header .chip{font-size:18px;color:var(--muted);margin:0 0 10px}
.meta{color:var(--muted);font-size:13px}
.badge{display:inline-block;padding:1px 8px;border-radius:10px;font-size:12px;font-weight:600;
border:1px solid currentColor;margin-left:6px}
section{background:var(--card);border:1px solid var(--line);border-radius:8px;padding:14px 18px;margin:16px 0}
h2{font-size:18px;margin:0 0 10px}
h3{font-size:15px;margin:14px 0 6px}
table{border-collapse:collapse;margin:4px 0 8px}
td,th{padding:3px 14px 3px 0;text-align:left;vertical-align:top;border-bottom:1px solid var(--line)}
th{color:var(--muted);font-weight:500;white-space:nowrap}
code,pre{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:13px}
pre{background:var(--code);padding:8px 10px;border-radius:6px;overflow:auto;margin:6px 0}
.yes{color:var(--ok);font-weight:600}.no{color:var(--muted)}
.sev-ok{color:var(--ok)}.sev-info{color:var(--info)}.sev-warning{color:var(--warning)}.sev-error{color:var(--error)}
.finding{border-left:4px solid var(--line);padding:4px 12px;margin:10px 0}
.finding.error{border-color:var(--error)}.finding.warning{border-color:var(--warning)}
.finding.info{border-color:var(--info)}.finding.ok{border-color:var(--ok)}
.finding .title{font-weight:600}.finding .code{color:var(--muted);font-size:13px;margin-left:6px}
.summary span{margin-right:16px}
.map{overflow-x:auto;padding:4px 0}.map svg{max-width:100%;height:auto}
.flags{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:12px;color:var(--muted);word-spacing:4px}
details summary{cursor:pointer;color:var(--accent)}
.note{color:var(--muted);font-size:13px}
ul.checks{list-style:none;padding-left:4px}ul.lines{margin:4px 0 8px;padding-left:20px}
.mark{font-family:ui-monospace,Menlo,Consolas,monospace;font-weight:600;white-space:nowrap}
footer{color:var(--muted);font-size:12px;text-align:center;margin-top:24px}
"""

# QTextDocument understands a small CSS subset; keep it to colours, fonts and borders.
PRINT_CSS = """
body{font-family:'DejaVu Sans',Arial,sans-serif;font-size:9pt;color:#1f2933}
h1{font-size:17pt;margin:0}h2{font-size:12.5pt;margin-top:14pt;color:#1f2933;border-bottom:1px solid #c9d0d8}
h3{font-size:10pt;margin-top:8pt}
.chip{font-size:12pt;color:#5f6b77}.meta,.note,.code{color:#5f6b77;font-size:8pt}
th{color:#5f6b77;font-weight:normal;text-align:left;padding:1px 14px 1px 0;white-space:nowrap}
td{padding:1px 14px 1px 0}
pre,code{font-family:'DejaVu Sans Mono',monospace;font-size:8pt;background-color:#f3f5f7}
pre{white-space:pre-wrap}.summary{font-weight:bold;margin-top:6pt}h4{font-size:9pt;margin:6pt 0 2pt 0}
.yes{color:#2e7d4f;font-weight:bold}.no{color:#5f6b77}
.sev-ok{color:#2e7d4f}.sev-info{color:#2f6fbf}.sev-warning{color:#a86400}.sev-error{color:#c0392b}
.title{font-weight:bold}.flags{font-family:'DejaVu Sans Mono',monospace;font-size:7.5pt;color:#5f6b77}
.mark{font-family:'DejaVu Sans Mono',monospace;font-weight:bold}
ul.checks{list-style:none}
.mt{font-size:7.5pt}
"""


def _rows(rows: list[tuple[str, str]]) -> str:
    """A two-column table; values must already be escaped/marked up."""
    return '<table cellspacing=0>' + "".join(f"<tr><th>{e(k)}</th><td>{v}</td></tr>" for k, v in rows) + "</table>"


def _cpulist(cpus: list[int] | None) -> str:
    from cpudoctor.kits.cpulist import format_cpulist

    return "unknown" if cpus is None else (format_cpulist(cpus) or "none")


def title_of(report: Report) -> str:
    return report.cpu.brand or report.cpu.microarchitecture or "Unknown CPU"


# --- sections -----------------------------------------------------------------

def _header(report: Report, exported_at: str | None = None) -> str:
    m = report.meta
    counts = severity_counts(report.findings)
    # a separator between the counts: without the page's CSS (the PDF, Qt's preview) they ran together
    summary = " · ".join(f'<span class="sev-{s}">{e(plural(n, *SEVERITY[s].noun))}</span>'
                         for s, n in counts.items() if n)
    privacy = ("identifying details replaced by placeholders" if m.redacted
               else "includes identifying details (host name, user, paths)")
    where = "" if m.root in ("/", "") else f" · analysed tree: <code>{e(m.root)}</code>"
    made = made_words(m.generated_at, exported_at)
    made = ((made[:1].upper() + made[1:] + " " if made else "Made ")
            + f"by CPU Doctor{' ' + m.tool_version if m.tool_version else ''}"
            + (f" on {PLATFORM_NAMES.get(m.platform, m.platform)}" if m.platform else ""))
    env = environment_line(report)
    return (f'<header><h1>CPU Doctor report</h1><p class="chip">{e(title_of(report))}</p>'
            f'<p class="meta">{e(made)}{where} · {e(privacy)}</p>'
            + (f'<p class="meta">{e(env)}</p>' if env else "")
            + (f'<p class="summary">{summary}</p>' if summary else "") + "</header>")


# The text/Markdown marks, coloured: the same verdicts in every format.
MARK_CLASS = {cpu_sec.OK: "sev-ok", cpu_sec.WARN: "sev-warning", cpu_sec.BAD: "sev-error", cpu_sec.INFO: "no"}


def _mark(mark: str) -> str:
    return f'<span class="mark {MARK_CLASS.get(mark, "no")}">{e(mark)}</span>'


def _chip(report: Report) -> str:
    """Identity rows shared with the text and Markdown reports (same labels, same wording)."""
    c = report.cpu
    rows = [(k, e(v)) for k, v in cpu_sec.identity_rows(c)]
    notes = "".join(f'<p class="note">{e(n)}</p>' for n in c.notes)
    return f'<section id="chip"><h2>Chip</h2>{_rows(rows)}{notes}</section>'


def _isa(report: Report) -> str:
    """ISA verdicts with a mark and the why, as in the Markdown report; every flag by category below."""
    c = report.cpu
    rows = "".join(f"<tr><td>{_mark(r.mark)}</td><th>{e(r.name)}</th><td>{e(r.detail)}"
                   + (f'<br><span class="note">{e(r.explain)}</span>' if r.explain else "") + "</td></tr>"
                   for r in cpu_sec.isa_rows(c))
    width = cpu_sec.width_line(c)
    parts = [f'<section id="isa"><h2>Instruction sets for deep learning</h2><table cellspacing=0>{rows}</table>']
    if width:
        parts.append(f"<p><b>Vector width:</b> {e(width)}</p>")
    if c.flags:
        groups = "".join(f"<tr><th>{e(cpu_sec.category_title(cat))}</th><td class=\"flags\">{e(' '.join(names))}</td></tr>"
                         for cat, names in cpu_sec.flag_groups(c.flags, c.arch, c.vendor).items())
        parts.append(f"<details><summary>All {len(c.flags)} CPU flags by category</summary>"
                     f"<table cellspacing=0>{groups}</table></details>")
    parts.append("</section>")
    return "".join(parts)


def _topology(report: Report, images: Images, pictures: dict[str, str]) -> str:
    t = report.topology
    smt = f"{t.smt_threads_per_core} per core" if t.smt_threads_per_core else "unknown"
    rows = [("Packages", e(or_unknown(t.packages))), ("Physical cores", e(or_unknown(t.cores))),
            ("Logical CPUs", e(or_unknown(t.logical_cpus))), ("Hardware threads", e(smt)),
            ("NUMA nodes", e(len(t.numa_nodes) if t.numa_nodes else "unknown")),
            ("L3 caches (CCX on AMD)", e(len(t.l3_domains) if t.l3_known or t.l3_domains else "unknown")),
            ("Online CPUs", e(_cpulist(t.online_cpus) if t.online_cpus else "unknown"))]
    if t.offline_cpus:
        rows.append(("Offline CPUs", e(_cpulist(t.offline_cpus))))
    a = t.affinity
    if a.allowed_cpus is not None:
        rows.append(("This process may use", e(f"{len(a.allowed_cpus)} CPUs ({_cpulist(a.allowed_cpus)})")))
    if a.cpu_quota is not None:
        rows.append(("cgroup CPU quota", e(f"{a.cpu_quota:g} CPUs")))
    svg = render_svg(t, title=f"Topology of {title_of(report)}", max_width=1240 if images == "inline" else 680,
                     min_width=400 if images == "inline" else 320)
    if images == "inline":
        pic = f'<div class="map">{svg}</div>'
    else:
        pictures["topology"] = svg
        pic = '<p><img src="cpudoctor:topology"></p>'
    l3 = ""
    if t.l3_domains:
        l3 = ("<details><summary>L3 domains</summary><table cellspacing=0><tr><th>#</th><th>CPUs</th><th>Size</th></tr>"
              + "".join(f"<tr><td>{i}</td><td>{e(_cpulist(d.cpus))}</td><td>{e(cache_size(d.size_bytes))}</td></tr>"
                        for i, d in enumerate(t.l3_domains)) + "</table></details>")
    numa = ""
    if t.numa_nodes:
        numa = ("<details><summary>NUMA nodes</summary><table cellspacing=0><tr><th>Node</th><th>CPUs</th><th>Memory</th>"
                "<th>Distances</th></tr>"
                + "".join(f"<tr><td>{n.id}</td><td>{e(_cpulist(n.cpus))}</td>"
                          f"<td>{e(size(t.numa_memory_bytes.get(str(n.id))))}</td>"
                          f"<td>{e(' '.join(map(str, n.distances)))}</td></tr>" for n in t.numa_nodes)
                + "</table></details>")
    from cpudoctor.render.topology import display_notes

    # The notes the text/Markdown reports show: not those the rows above already say (offline CPUs).
    notes = "".join(f'<p class="note">{e(n)}</p>' for n in display_notes(t))
    return f'<section id="topology"><h2>Topology</h2>{_rows(rows)}{pic}{l3}{numa}{notes}</section>'


# Sections whose lines are environment settings: shown as code.
_CODE_SECTIONS = ("Thread and allocator environment",)
_FOLD_ROWS = 8          # longer tables (packages) fold into <details>


def _software(report: Report) -> str:
    """The software stack from the sections the text and Markdown reports use, so all formats agree.

    That also keeps a captured tree honest: without the environment its capture
    carries (environment.json), its Python and packages are unknown, so those
    sections are absent rather than shown as "not installed".
    """
    sw = report.software
    if sw is None:
        return '<section id="software"><h2>Software stack</h2><p class="note">Not probed.</p></section>'
    parts = ['<section id="software"><h2>Software stack</h2>']
    if sw.os.hostname:
        parts.append(_rows([("Host name", e(sw.os.hostname))]))
    for sec in sw_sec.sections(sw):
        if sec.title == "Notes":
            parts += [f'<p class="note">{e(n)}</p>' for n in sec.lines]
            continue
        parts.append(f"<h3>{e(sec.title)}</h3>")
        if sec.lines:
            code = sec.title in _CODE_SECTIONS and bool(sw.thread_env)
            parts.append('<ul class="lines">' + "".join(
                f"<li>{f'<code>{e(line)}</code>' if code else e(line)}</li>" for line in sec.lines) + "</ul>")
        if sec.table:
            header, *rows = sec.table
            table = ("<table cellspacing=0><tr>" + "".join(f"<th>{e(h)}</th>" for h in header) + "</tr>"
                     + "".join("<tr>" + "".join(f"<td>{e(c)}</td>" for c in row) + "</tr>" for row in rows)
                     + "</table>")
            if len(rows) > _FOLD_ROWS:
                table = f"<details><summary>{len(rows)} {e(header[0])} rows</summary>{table}</details>"
            parts.append(table)
        if sec.bullets:
            parts.append('<ul class="checks">' + "".join(f"<li>{_marked(b)}</li>" for b in sec.bullets) + "</ul>")
    parts.append("</section>")
    return "".join(parts)


def _marked(line: str) -> str:
    """``[✓] text`` with the mark coloured."""
    for mark in MARK_CLASS:
        if line.startswith(mark):
            return f"{_mark(mark)} {e(line[len(mark):].lstrip())}"
    return e(line)


def _findings(report: Report, printable: bool = False, shell: str | None = None) -> str:
    if not report.findings:
        return ('<section id="findings"><h2>Findings</h2><p class="note">The advisor has not run on this report '
                "(or found nothing to say).</p></section>")
    from cpudoctor.render.md_extra import counts_line

    ordered = sorted(report.findings, key=finding_order)
    problems = [f for f in ordered if f.severity != "ok"]
    passed = [f for f in ordered if f.severity == "ok"]
    choice = ShellChoice.for_report(report, shell)
    style = "print" if printable else "page"
    items = [f'<p class="summary">{e(counts_line(report))}</p>'] + [finding_html(finding_view(f, choice), style)
                                                                     for f in problems]
    if passed:
        items.append(f'<details><summary>{e(plural(len(passed), *SEVERITY["ok"].noun))}</summary><ul class="checks">'
                     + "".join(f'<li>{_mark(bracketed("ok"))} {e(f.title)} '
                               f'<span class="code">{e(f.code)}</span></li>' for f in passed)
                     + "</ul></details>")
    return f'<section id="findings"><h2>Findings</h2>{"".join(items)}</section>'


def _cell(value: str) -> str:
    """A measurement cell; a single word ("torch-fp32", "0-7,64-71") is never broken at its hyphen or comma."""
    return f'<td style="white-space:nowrap">{e(value)}</td>' if " " not in value and len(value) <= 32 else f"<td>{e(value)}</td>"


def _head(label: str, images: Images) -> str:
    """A table heading; on paper each word on its own line (a heading never breaks inside a word there)."""
    return "<br>".join(e(w) for w in label.split()) if images == "resources" else e(label)


def _benchmarks(report: Report, images: Images, pictures: dict[str, str]) -> str:
    if not report.benchmarks and report.recommendation is None:
        return ""
    parts = ['<section id="benchmarks"><h2>Benchmarks</h2>']
    rec = report.recommendation
    if rec is not None:
        parts.append(f"<p><b>Recommended:</b> {e(recommendation_text(rec))}</p>")
    parts.append(_roofline(report, images, pictures))
    for i, run in enumerate(report.benchmarks):
        parts.append(_bench(run, i, images, pictures))
    parts.append("</section>")
    return "".join(parts)


def _roofline(report: Report, images: Images, pictures: dict[str, str]) -> str:
    """Measured roof vs nominal peak, then the roofline picture, when the report has a roofline run."""
    from cpudoctor.render.roofline import picture_from_runs, roof_lines
    from cpudoctor.render.svg_roofline import render_svg as roofline_svg

    rows = roof_lines(report.benchmarks)
    picture = picture_from_runs(report.benchmarks)
    if not rows or picture is None:
        return ""
    svg = roofline_svg(picture)
    if images == "inline":
        drawn = f'<div class="map">{svg}</div>'
    else:
        pictures["roofline"] = svg
        drawn = '<p><img src="cpudoctor:roofline"></p>'
    return '<h3 id="roofline">Roofline</h3>' + _rows([(k, e(v)) for k, v in rows]) + drawn


def _bench(run: BenchRun, index: int, images: Images, pictures: dict[str, str]) -> str:
    head = f"<h3>{e(kind_title(run.kind))}" + (f" · {e(when(run.started_at))}" if run.started_at else "") + (
        f' · <span class="sev-warning">{e(run.status)}</span>' if run.status != "ok" else "") + "</h3>"
    settings = ('<p class="note">Settings: ' + e(", ".join(settings_text(run.settings))) + "</p>") if run.settings else ""
    if run.kind == "infer":
        return head + settings + _infer(run, index, images, pictures)
    scalars = [(k, v) for k, v in run.metrics.items() if not isinstance(v, (list, dict)) and v is not None]
    table = _rows([(metric_label(k), e(metric(k, v))) for k, v in scalars]) if scalars else ""
    charts = []
    # The roofline run is drawn as the roofline picture above, not as generic charts.
    for j, chart in enumerate(find_charts(run.metrics, kind_title(run.kind)) if run.kind != "roofline" else []):
        svg = render_chart(chart)
        if images == "inline":
            charts.append(f'<div class="map">{svg}</div>')
        else:
            name = f"chart{index}_{j}"
            pictures[name] = svg
            charts.append(f'<p><img src="cpudoctor:{name}"></p>')
    for name, cols, rows in measurement_tables(run.metrics):
        cols, rows, same = split_constant_columns(cols, rows)
        cols, rows = drop_derived_columns(cols, rows)
        charts.append(f"<details><summary>{e(measurements_title(name, len(rows)))}</summary>"
                      + (f'<p class="note">Every row: {e(", ".join(same))}</p>' if same else "")
                      # <thead>: a table that runs onto the next page repeats its headings there
                      + '<table class="mt" cellspacing=0><thead><tr>'
                      + "".join(f"<th>{_head(c, images)}</th>" for c in cols) + "</tr></thead>"
                      + "".join("<tr>" + "".join(_cell(v) for v in row) + "</tr>" for row in rows)
                      + "</table></details>")
    note = f'<p class="note">{e(run.note)}</p>' if run.note else ""
    return head + settings + table + "".join(charts) + note


def _infer(run: BenchRun, index: int, images: Images, pictures: dict[str, str]) -> str:
    """An inference run: its verdicts and code, a box plot per batch size, the table (render/infer.py)."""
    from cpudoctor.render.infer import batches_of, box_plot_svg, html_block

    drawn = []
    for b in batches_of(run.metrics):
        svg = box_plot_svg(run.metrics, b)
        if not svg:
            continue
        if images == "inline":
            drawn.append(f'<div class="map">{svg}</div>')
        else:
            name = f"infer{index}_{b}"
            pictures[name] = svg
            drawn.append(f'<p><img src="cpudoctor:{name}"></p>')
    note = f'<p class="note">{e(run.note)}</p>' if run.note else ""
    return html_block(run.metrics) + "".join(drawn) + note


def _notes(report: Report) -> str:
    if not report.notes:
        return ""
    return ('<section id="notes"><h2>Notes</h2><ul>' + "".join(f"<li>{e(n)}</li>" for n in report.notes)
            + "</ul></section>")


def build_html(report: Report, images: Images = "inline", shell: str | None = None,
               exported_at: str | None = None) -> tuple[str, dict[str, str]]:
    """The page, and (for ``images="resources"``) the SVG pictures it references by name; fixes' commands for
    ``shell`` (None: the shell of the report's machine); ``exported_at``: when the file is written (said beside
    when the facts were collected)."""
    pictures: dict[str, str] = {}
    body = "".join([_header(report, exported_at), _chip(report), _isa(report), _topology(report, images, pictures),
                    _software(report), _findings(report, images == "resources", shell),
                    _benchmarks(report, images, pictures),
                    _notes(report)])
    css = CSS if images == "inline" else PRINT_CSS
    if images == "resources":       # Qt rich text has no <details>: show them open, summary as a label
        # a summary becomes a small heading, which the PDF keeps on the page of what follows it
        body = re.sub(r"<summary>(.*?)</summary>", r'<h4 class="summary">\1</h4>', body)
        body = re.sub(r"</?details>", "", body)
        # Qt drops margins after a table, so a heading would touch the table above it: a tiny spacer paragraph.
        body = body.replace("</table>", '</table><p style="margin:0;font-size:4pt">&nbsp;</p>')
    page = ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            '<meta name="color-scheme" content="light dark">'
            f"<title>CPU Doctor report — {e(title_of(report))}</title><style>{css}</style></head>"
            f"<body><main>{body}<footer>Made with CPU Doctor {e(report.meta.tool_version)} · "
            f"schema {e(report.schema_version)}</footer></main></body></html>\n")
    return page, pictures


def render_html(report: Report, shell: str | None = None, exported_at: str | None = None) -> str:
    """The self-contained HTML page (what ``render(report, "html")`` returns)."""
    return build_html(report, "inline", shell, exported_at)[0]
