"""The time breakdown in words: a bar and a table per job, process and thread (text, Markdown, HTML).

The bar is the job's counted thread time split by category, widest first; the
table under it gives each category's share, seconds and samples (compute split
by library), then one line per process and per busy thread. Colours and labels
come from resources/sample_rules.json, so every surface (the Inspector's bar,
these tables) names a category the same way.
"""

from __future__ import annotations

from cpudoctor.probes.process.breakdown import Share, TimeBreakdown
from cpudoctor.probes.process.classify import rules
from cpudoctor.kits.escape import html_escape as esc, md_escape
from cpudoctor.kits.format import percent

BAR_WIDTH = 50
MAX_THREAD_ROWS = 12
# One letter per category for the text bar (the legend under it spells them out).
LETTERS = {"compute": "K", "openmp_wait": "W", "python": "P", "data": "D", "compile": "C", "memory": "M",
           "io_sleep": "S", "gil": "G", "other": "."}


def share_text(s: Share) -> str:
    """``Compute kernels 62% (MKL 50%, oneDNN 12%)``."""
    text = f"{s.label} {percent(s.share, fraction=True)}"
    if s.libraries and s.seconds > 0:
        libs = ", ".join(f"{rules().library_label(lib)} {percent(s.share * sec / s.seconds, fraction=True)}"
                         for lib, sec in s.libraries.items() if sec > 0)
        text += f" ({libs})"
    return text


def text_bar(shares: list[Share], width: int = BAR_WIDTH) -> str:
    """A fixed-width bar of category letters, by largest remainder so it is exactly ``width`` wide."""
    if not shares:
        return "[" + " " * width + "]"
    raw = [(s, s.share * width) for s in shares]
    cells = {s.category: int(v) for s, v in raw}
    left = width - sum(cells.values())
    for s, v in sorted(raw, key=lambda sv: -(sv[1] - int(sv[1])))[:max(0, left)]:
        cells[s.category] += 1
    return "[" + "".join(LETTERS.get(s.category, "?") * cells[s.category] for s in shares) + "]"


def summary_line(bd: TimeBreakdown) -> str:
    tops = sorted(bd.shares, key=lambda s: -s.share)[:3]
    return ", ".join(share_text(s) for s in tops) or "nothing sampled"


def verdict_line(bd: TimeBreakdown) -> str:
    if bd.conclusive:
        return ""
    return f"Inconclusive: {bd.verdict_reason}."


def render_text(bd: TimeBreakdown) -> list[str]:
    """The breakdown as plain-text lines (the CLI's ``Time`` section)."""
    out = [f"Time         where the job's threads spent {bd.window_s:g} s ({bd.samples} samples counted, "
           f"{bd.idle_samples} idle, {bd.startup_samples} start-up; {bd.sampler})"]
    shares = sorted(bd.shares, key=lambda s: -s.share)
    out.append(f"  {text_bar(shares)}")
    out.append("  " + "  ".join(f"{LETTERS.get(s.category, '?')}={s.label}" for s in shares))
    out.append(f"  {'CATEGORY':<34} {'SHARE':>6} {'SECONDS':>8} {'SAMPLES':>8}")
    for s in shares:
        out.append(f"  {s.label:<34} {percent(s.share, fraction=True):>6} {s.seconds:>8.2f} {s.samples:>8}")
        for lib, sec in s.libraries.items():
            if sec > 0 and s.seconds > 0:
                out.append(f"    {rules().library_label(lib):<32} {percent(s.share * sec / s.seconds, fraction=True):>6} {sec:>8.2f}")
    for p in bd.processes:
        if not p.samples and not p.idle_samples:
            continue
        cpu = f"{percent(p.cpu_percent)} CPU" if p.cpu_percent is not None else "CPU ?"
        out.append(f"  process {p.pid} {p.name} [{p.role.replace('_', ' ')}] {cpu}, {p.samples} samples: "
                   f"{summary_line_of(p.shares)}")
        rows = [t for t in p.threads if t.samples]
        for t in rows[:MAX_THREAD_ROWS]:
            out.append(f"    thread {t.tid} {t.name[:20]} ({t.role}, {t.samples} samples): {summary_line_of(t.shares)}")
        if len(rows) > MAX_THREAD_ROWS:
            out.append(f"    ... {len(rows) - MAX_THREAD_ROWS} more threads")
    if bd.minor_faults and bd.fault_cost_us:
        out.append(f"  Page faults: {bd.minor_faults} minor faults x {bd.fault_cost_us:g} us (measured here) are "
                   "counted as memory, taken from the code that touched the pages")
    if bd.top:
        out.append("  Top leaf frames:")
        for t in bd.top[:6]:
            out.append(f"    {percent(t.share, fraction=True):>4}  {rules().label(t.category):<22} {t.frame[:110]}")
    if not bd.conclusive:
        out.append(f"  {verdict_line(bd)}")
    if bd.stacks_error:
        out.append(f"  Stacks: {stacks_line(bd)}")
    out.extend(f"  Note: {n}" for n in bd.notes)
    return out


def stacks_line(bd: TimeBreakdown) -> str:
    """Why stacks were not sampled, and what to do when the remedy is CPU Doctor's own ("" when they were)."""
    if not bd.stacks_error:
        return ""
    text = bd.stacks_error
    if bd.stacks_error_kind == "missing":
        text += "; reinstall CPU Doctor (its requirements pin py-spy) to sample stacks"
    return text


def summary_line_of(shares: list[Share]) -> str:
    tops = sorted(shares, key=lambda s: -s.share)[:3]
    return ", ".join(f"{s.label} {percent(s.share, fraction=True)}" for s in tops) or "-"


def render_md(bd: TimeBreakdown) -> list[str]:
    shares = sorted(bd.shares, key=lambda s: -s.share)
    out = ["## Where the time went", "",
           f"{bd.window_s:g} s sampled, {bd.samples} samples counted ({bd.idle_samples} idle, "
           f"{bd.startup_samples} start-up), {md_escape(bd.sampler)}.", "",
           f"`{text_bar(shares)}`", "",
           "| Category | Share | Seconds | Samples |", "|---|---:|---:|---:|"]
    for s in shares:
        out.append(f"| {md_escape(share_text(s))} | {percent(s.share, fraction=True)} | {s.seconds:.2f} | {s.samples} |")
    out += ["", "| Process | Role | CPU | Samples | Top categories |", "|---|---|---:|---:|---|"]
    for p in bd.processes:
        if p.samples:
            cpu = percent(p.cpu_percent, "?")
            out.append(f"| {p.pid} {md_escape(p.name)} | {p.role.replace('_', ' ')} | {cpu} | {p.samples} | "
                       f"{md_escape(summary_line_of(p.shares))} |")
    if not bd.conclusive:
        out += ["", f"**{md_escape(verdict_line(bd))}**"]
    if bd.stacks_error:
        out += ["", f"Stacks: {md_escape(stacks_line(bd))}"]
    return out


def render_html(bd: TimeBreakdown) -> str:
    """A coloured bar (one div per category, widths in %) and the table under it."""
    r = rules()
    shares = sorted(bd.shares, key=lambda s: -s.share)
    segs = "".join(f'<div title="{esc(share_text(s))}" style="width:{s.share * 100:.2f}%;background:{r.colour(s.category)};'
                   f'height:18px;display:inline-block"></div>' for s in shares)
    rows = "".join(f"<tr><td><span style=\"color:{r.colour(s.category)}\">&#9632;</span> {esc(share_text(s))}</td>"
                   f"<td align=right>{percent(s.share, fraction=True)}</td><td align=right>{s.seconds:.2f}</td>"
                   f"<td align=right>{s.samples}</td></tr>" for s in shares)
    note = f"<p><b>{esc(verdict_line(bd))}</b></p>" if not bd.conclusive else ""
    stacks = f"<p>Stacks: {esc(stacks_line(bd))}</p>" if bd.stacks_error else ""
    return (f"<h2>Where the time went</h2><p>{bd.window_s:g} s sampled, {bd.samples} samples counted "
            f"({esc(bd.sampler)})</p><div style=\"width:100%;white-space:nowrap\">{segs}</div>"
            f"<table><tr><th>Category</th><th>Share</th><th>Seconds</th><th>Samples</th></tr>{rows}</table>"
            f"{note}{stacks}")
