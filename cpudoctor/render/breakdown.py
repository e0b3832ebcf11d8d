"""The time breakdown in words: a bar and a table per job, process and thread (text, Markdown, HTML).

The bar is the job's counted thread time split by category, widest first; the
table under it gives each category's share, seconds and samples (compute split
by library), then one line per process and per busy thread. Colours and labels
come from resources/sample_rules.json (:func:`label`, :func:`colour`), so every
surface (the Inspector's bar, these tables) names a category the same way; the
breakdown itself holds only ids. Whether it may be judged is the advisor's
(:mod:`cpudoctor.advisor.job_verdict`: the verdict and the one sentence EVID009 says,
repeated in the caption); why its stacks are missing and what to do is worded here
(:func:`stacks_line`).
"""

from __future__ import annotations

from functools import lru_cache

from cpudoctor.advisor.job_verdict import BreakdownVerdict, judge_breakdown, reason
from cpudoctor.kits.escape import html_escape as esc, md_escape
from cpudoctor.kits.format import percent
from cpudoctor.kits.plural import plural
from cpudoctor.model.breakdown import Share, StackAccess, TimeBreakdown

BAR_WIDTH = 50
MAX_THREAD_ROWS = 12
# One letter per category for the text bar (the legend under it spells them out).
LETTERS = {"compute": "K", "openmp_wait": "W", "python": "P", "data": "D", "compile": "C", "memory": "M",
           "io_sleep": "S", "gil": "G", "other": "."}


@lru_cache(maxsize=1)
def _names() -> tuple[dict[str, tuple[str, str]], dict[str, str]]:
    """(category id -> (label, colour), library id -> label) from resources/sample_rules.json."""
    from cpudoctor.knowledge.files import SAMPLE_RULES

    data = SAMPLE_RULES.data
    return ({c["id"]: (c["label"], c["colour"]) for c in data["categories"]},
            {lib["id"]: lib["label"] for lib in data["libraries"]})


def label(category: str) -> str:
    """A category's name: ``Compute kernels``, ``OpenMP waiting`` (its id when the data file lacks it)."""
    return _names()[0].get(category, (category, ""))[0]


def colour(category: str) -> str:
    """A category's colour, the same on the window's bar and in HTML exports."""
    return _names()[0].get(category, ("", "#b8b8b8"))[1]


def library_label(library: str) -> str:
    return _names()[1].get(library, library)


def share_text(s: Share) -> str:
    """``Compute kernels 62 % (MKL 50 %, oneDNN 12 %)``."""
    text = f"{label(s.category)} {percent(s.share, fraction=True)}"
    if s.libraries and s.seconds > 0:
        libs = ", ".join(f"{library_label(lib)} {percent(s.share * sec / s.seconds, fraction=True)}"
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


def verdict_text(bd: TimeBreakdown, verdict: BreakdownVerdict | None = None) -> str:
    """Why ``bd`` may not be judged, with its numbers ("" when it may): the advisor's reason, EVID009's why."""
    return reason(bd, verdict or judge_breakdown(bd))


def verdict_line(bd: TimeBreakdown, ended: str = "") -> str:
    """The caption under the breakdown: ``Inconclusive: ...`` (too few samples, an idle job), or what a busy machine
    leaves judged; ``ended`` (a run that crashed: what happened) replaces the breakdown's own reason, which would
    call a job that died at once idle."""
    if ended:
        return f"Not judged: {ended}."
    verdict = judge_breakdown(bd)
    text = verdict_text(bd, verdict)
    if not text:
        return ""
    if verdict.verdict == "busy":
        return (f"Busy machine: {text}. The shares of the job's own samples are judged as usual; OpenMP waiting and "
                "thread counts only as \"likely\" (confirm on a quiet machine).")
    return f"Inconclusive: {text}."


DRIVER_ROWS = 4


def driver_lines(bd: TimeBreakdown) -> list[str]:
    """The driving thread's own time: its categories, then its top native frames and Python lines with shares."""
    driver = bd.driver_thread()
    if driver is None:
        return []
    out = [f"Driving thread {bd.driver} ({driver.samples} samples, the step's critical path): "
           f"{summary_line_of(driver.shares)}"]
    for name, frames in (("native frames", bd.driver_native), ("Python lines", bd.driver_python)):
        for i, f in enumerate(frames[:DRIVER_ROWS]):
            head = f"{name}:" if i == 0 else ""
            out.append(f"  {head:<15}{percent(f.share, fraction=True):>5}  {f.frame[:100]}")
    return out


def notes(bd: TimeBreakdown) -> list[str]:
    """What the reader of the breakdown must know about how it was made."""
    out = []
    if not bd.stacks_sampled:
        out.append("no stacks were sampled: the breakdown tells running from waiting only"
                   + (f" ({stacks_line(bd)})" if bd.stacks_error_kind else ""))
    line = instrumentation_line(bd)
    if line:
        out.append(line)
    return out


def instrumentation_line(bd: TimeBreakdown) -> str:
    """The cost of watching, said apart: samples in the libraries' verbose printing are no share of the job."""
    n = getattr(bd, "instrumentation_samples", 0)
    if not n:
        return ""
    of = n / (bd.samples + n) if bd.samples + n else 0.0
    return (f"the verbose lines CPU Doctor switched on (oneDNN's, oneMKL's: timing and writing each call's line) took "
            f"{plural(n, 'sample')}, {percent(of, fraction=True)} of the job's: left out of the shares, not counted as "
            "its compute")


def render_text(bd: TimeBreakdown, ended: str = "") -> list[str]:
    """The breakdown as plain-text lines (the CLI's ``Time`` section); ``ended``: see :func:`verdict_line`."""
    out = [f"Time         where the job's threads spent {bd.window_s:g} s ({bd.samples} samples counted, "
           f"{bd.idle_samples} idle, {bd.startup_samples} start-up; {bd.sampler})"]
    shares = sorted(bd.shares, key=lambda s: -s.share)
    out.append(f"  {text_bar(shares)}")
    out.append("  " + "  ".join(f"{LETTERS.get(s.category, '?')}={label(s.category)}" for s in shares))
    out.append(f"  {'CATEGORY':<34} {'SHARE':>6} {'SECONDS':>8} {'SAMPLES':>8}")
    for s in shares:
        out.append(f"  {label(s.category):<34} {percent(s.share, fraction=True):>6} {s.seconds:>8.2f} {s.samples:>8}")
        for lib, sec in s.libraries.items():
            if sec > 0 and s.seconds > 0:
                out.append(f"    {library_label(lib):<32} {percent(s.share * sec / s.seconds, fraction=True):>6} {sec:>8.2f}")
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
            out.append(f"    {percent(t.share, fraction=True):>4}  {label(t.category):<22} {t.frame[:110]}")
    out.extend(f"  {line}" for line in driver_lines(bd))
    verdict = verdict_line(bd, ended)
    if verdict:
        out.append(f"  {verdict}")
    if bd.stacks_error_kind:
        out.append(f"  Stacks: {stacks_line(bd)}")
    out.extend(f"  Note: {n}" for n in notes(bd))
    return out


def stacks_line(bd: TimeBreakdown) -> str:
    """Why stacks were not sampled, and what to do ("" when they were)."""
    if not bd.stacks_error_kind:
        return ""
    again = (f"cpudoctor inspect {bd.pid}" if bd.observer == "inspect" else "cpudoctor run -- COMMAND")
    return refusal_text(bd.pid, bd.stacks_error_kind, bd.stacks_error or "", bd.stack_access, again)


def refusal_text(pid: int, kind: str, detail: str, access: StackAccess | None, again: str) -> str:
    """One line: why the stacks of ``pid`` could not be sampled, and what to do.

    ``kind`` is the sampler's own verdict (denied, not_python, gone, missing,
    failed); ``access`` the facts behind a refusal; ``again`` the command to repeat with sudo.
    """
    if kind == "not_python":
        return (f"process {pid} runs no Python interpreter py-spy recognises, so its stacks were not sampled "
                "(its threads' states still were)")
    if kind == "gone":
        return f"process {pid} exited before its stacks could be sampled"
    if kind == "missing":
        return ((detail or "py-spy is missing, so only thread states were sampled")
                + "; reinstall CPU Doctor (its requirements pin py-spy) to sample stacks")
    if kind != "denied":
        return f"the stack sampler failed ({detail or 'no samples'}); thread states were still sampled"
    a = access or StackAccess(pid)
    if a.own_uid is not None and a.uid is not None and a.uid != a.own_uid and a.own_uid != 0:
        return (f"the stack sampler may not attach: process {pid} belongs to another user (uid {a.uid}); "
                f"run `sudo {again}`, or start the job with `cpudoctor run -- COMMAND`")
    if a.own_uid == 0 and a.cap_sys_ptrace is False:
        return ("the stack sampler may not attach: this container has no CAP_SYS_PTRACE; start it with "
                "`docker run --cap-add SYS_PTRACE` (or `securityContext.capabilities.add: [SYS_PTRACE]`), "
                "or start the job with `cpudoctor run -- COMMAND` inside it")
    if a.ptrace_scope == 3:
        return ("the stack sampler may not attach: kernel.yama.ptrace_scope is 3 (no tracing at all until reboot); "
                "only a reboot with a lower setting allows sampling stacks")
    if a.ptrace_scope == 2:
        return (f"the stack sampler may not attach: kernel.yama.ptrace_scope is 2 (only administrators may "
                f"trace); run `sudo {again}`")
    if a.ptrace_scope == 1:
        return (f"the stack sampler may not attach: kernel.yama.ptrace_scope is 1 (only a parent may trace its "
                f"children); start the job with `cpudoctor run -- COMMAND`, run `sudo {again}`, or allow it "
                "with `sudo sysctl kernel.yama.ptrace_scope=0`")
    return (f"the stack sampler may not attach to process {pid} ({detail or 'permission denied'}): it may be "
            f"non-dumpable or in another container; run `sudo {again}` or start it with `cpudoctor run -- COMMAND`")


def summary_line_of(shares: list[Share]) -> str:
    tops = sorted(shares, key=lambda s: -s.share)[:3]
    return ", ".join(f"{label(s.category)} {percent(s.share, fraction=True)}" for s in tops) or "-"


def render_md(bd: TimeBreakdown, ended: str = "") -> list[str]:
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
    driver = driver_lines(bd)
    if driver:
        out += ["", md_escape(driver[0]), "", *[f"    {line.strip()}" for line in driver[1:]]]
    verdict = verdict_line(bd, ended)
    if verdict:
        out += ["", f"**{md_escape(verdict)}**"]
    if bd.stacks_error_kind:
        out += ["", f"Stacks: {md_escape(stacks_line(bd))}"]
    if instrumentation_line(bd):
        out += ["", f"Note: {md_escape(instrumentation_line(bd))}."]
    return out


def render_html(bd: TimeBreakdown, ended: str = "") -> str:
    """A coloured bar (one div per category, widths in %) and the table under it."""
    shares = sorted(bd.shares, key=lambda s: -s.share)
    segs = "".join(f'<div title="{esc(share_text(s))}" style="width:{s.share * 100:.2f}%;background:{colour(s.category)};'
                   f'height:18px;display:inline-block"></div>' for s in shares)
    rows = "".join(f"<tr><td><span style=\"color:{colour(s.category)}\">&#9632;</span> {esc(share_text(s))}</td>"
                   f"<td align=right>{percent(s.share, fraction=True)}</td><td align=right>{s.seconds:.2f}</td>"
                   f"<td align=right>{s.samples}</td></tr>" for s in shares)
    driver = driver_lines(bd)
    frames = (f"<p>{esc(driver[0])}</p><pre>{esc(chr(10).join(line.strip() for line in driver[1:]))}</pre>"
              if driver else "")
    verdict = verdict_line(bd, ended)
    note = f"{frames}<p><b>{esc(verdict)}</b></p>" if verdict else frames
    stacks = f"<p>Stacks: {esc(stacks_line(bd))}</p>" if bd.stacks_error_kind else ""
    return (f"<h2>Where the time went</h2><p>{bd.window_s:g} s sampled, {bd.samples} samples counted "
            f"({esc(bd.sampler)})</p><div style=\"width:100%;white-space:nowrap\">{segs}</div>"
            f"<table><tr><th>Category</th><th>Share</th><th>Seconds</th><th>Samples</th></tr>{rows}</table>"
            f"{note}{stacks}")
