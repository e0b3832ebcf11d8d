"""``cpudoctor run``'s diagnosed report of one run: text, Markdown, HTML and JSON.

JSON carries ``findings`` in the shape of ``doctor --format json`` (code,
severity, title, why, fix, snippet, ...), the time breakdown and the kernels
oneDNN ran, so a script can read the same facts the text shows.
"""

from __future__ import annotations

from typing import Any

from cpudoctor.model.evidence import PASSED_ON_DIAGNOSTICS, RunObservation
from cpudoctor.render import achieved as ach
from cpudoctor.render import breakdown as bdr
from cpudoctor.render import job_findings, job_state
from cpudoctor.kits.escape import html_escape as esc, md_escape
from cpudoctor.kits.format import percent
from cpudoctor.render.finding_view import finding_data
from cpudoctor.model import Finding

MAX_KERNEL_ROWS = 10
NONE = "No problem found in this run."


def ended_text(obs: RunObservation, *, window: bool = False) -> str:
    """How the job ended, in words: whether it exited, crashed, or CPU Doctor stopped it (and why), with its exit
    code. ``window``: the Inspector's "Run a script…" (its own time limit and Stop, not --seconds and Ctrl-C)."""
    code = f"exit code {obs.exit_code}"
    crash = obs.crash
    if obs.ended_by == "exit" and crash is not None:
        said = f"{crash.signal} ({crash.description})" if crash.description else crash.signal
        if crash.via_shell:
            return f"exited with code {obs.exit_code}: its command died of {said}"
        return f"died of {said}, {code}"
    limit = "its time was up" if window else "--seconds ran out"
    return {"exit": f"exited with code {obs.exit_code}",
            "interrupt": f"stopped with Ctrl-C: CPU Doctor stopped the job ({code})",
            "seconds": f"still running when {limit}: CPU Doctor stopped it ({code})",
            "stopped": f"stopped from the window: CPU Doctor stopped it ({code})",
            "terminated": f"stopped because CPU Doctor was sent {obs.stop_signal or 'a signal to end'} ({code})",
            "failed": f"could not start: {obs.error}"}.get(obs.ended_by, obs.ended_by)


def crashed_caption(obs: RunObservation) -> str:
    """The breakdown's caption for a job that crashed ("" otherwise): its shares are what it did before."""
    crash = obs.crash
    if crash is None or obs.ended_by != "exit":
        return ""
    return (f"the job died of {crash.signal} after {crash.after_s:g} s; these shares are what it did before it "
            "crashed (EVID023 says why it died)")


def diagnostics_line(obs: RunObservation) -> str:
    """What CPU Doctor switched on for the job, and which lines it kept out of the job's output."""
    held = {k: v for k, v in obs.diagnostics.items() if k not in PASSED_ON_DIAGNOSTICS}
    shown = {k: v for k, v in obs.diagnostics.items() if k in PASSED_ON_DIAGNOSTICS}
    parts = []
    if held:
        parts.append(" ".join(f"{k}={v}" for k, v in held.items()) + " (their lines were kept out of the job's output)")
    if shown:
        parts.append(" ".join(f"{k}={v}" for k, v in shown.items()) + " (a crash prints the Python stack)")
    return "diagnostics on: " + "; ".join(parts) if parts else ""


def kernel_rows(obs: RunObservation) -> list[dict[str, Any]]:
    log = obs.onednn
    total = log.total_ms or 0.0
    return [{"kind": g.kind, "impl": g.impl, "isa": g.isa, "data_type": g.data_type, "count": g.count,
             "time_ms": round(g.time_ms, 3), "share": round(g.time_ms / total, 4) if total else None,
             "reference": g.reference} for g in log.summary()]


def render_text(obs: RunObservation, findings: list[Finding]) -> str:
    out = [f"cpudoctor run: {obs.command}", f"  {ended_text(obs)} after {obs.duration_s:g} s"]
    if obs.diagnostics:
        out.append(f"  {diagnostics_line(obs)}")
    if obs.breakdown is not None:
        out.extend(bdr.render_text(obs.breakdown, ended=crashed_caption(obs)))
    rows = kernel_rows(obs)
    if rows:
        log = obs.onednn
        out.append(f"Kernels      oneDNN {log.version or '?'} ({log.runtime or '?'}, {log.threads or '?'} threads, "
                   f"ISA {log.max_isa or '?'}): {sum(r['count'] for r in rows)} executions, {log.total_ms:.0f} ms")
        for r in rows[:MAX_KERNEL_ROWS]:
            share = percent(r["share"], "?", fraction=True)
            out.append(f"  {share:>5}  {r['kind']:<14} {r['impl']:<28} {r['data_type']:<5} x{r['count']}")
    elif "ONEDNN_VERBOSE" in obs.diagnostics:
        out.append("Kernels      oneDNN ran no primitive (linear layers' GEMMs run in MKL, whatever their dtype; "
                   "convolutions and bf16 run in oneDNN)")
    if obs.mkl.calls:
        out.append(f"             oneMKL: {len(obs.mkl.calls):,} calls, {obs.mkl.total_ms:,.0f} ms "
                   f"({', '.join(sorted({c.name for c in obs.mkl.calls})[:4])})")
    out.extend(ach.render_text(obs.achieved))
    if obs.process is not None and obs.process.memory is not None:
        from cpudoctor.render.job_memory import memory_lines

        out.extend(memory_lines(obs.process.memory))
    if obs.recompiles.recompiles:
        out.append(f"Recompiles   {len(obs.recompiles.recompiles)}"
                   + (" (Dynamo hit its recompile limit)" if obs.recompiles.limit_hit else ""))
    out.extend(job_state.text_lines(obs.state))
    out.append("")
    out += job_findings.text_lines(findings, none=NONE)
    out.extend(f"Note: {n}" for n in run_notes(obs))
    return "\n".join(out) + "\n"


def run_notes(obs: RunObservation) -> list[str]:
    notes = []
    if obs.dropped_kernel_lines:
        notes.append("the job printed more oneDNN lines than CPU Doctor keeps: the oldest were dropped")
    if obs.dropped_recompile_lines:
        notes.append("the job logged more recompilations than CPU Doctor keeps: the oldest were dropped")
    if obs.process_error:
        notes.append(f"the job's process could not be sampled ({obs.process_error}): the process rules did not "
                     "judge it")
    return notes


def breakdown_data(bd, ended: str = "") -> dict[str, Any]:
    """The breakdown as JSON data, with each category's name and the verdict in words beside the facts (``ended``:
    a crashed run's caption, :func:`crashed_caption`)."""
    from cpudoctor.advisor.job_verdict import judge_breakdown
    from cpudoctor.model.serde import to_data

    data = to_data(bd)
    for share in [data.get("shares", []), *[p.get("shares", []) for p in data.get("processes", [])],
                  *[t.get("shares", []) for p in data.get("processes", []) for t in p.get("threads", [])]]:
        for s in share:
            s["label"] = bdr.label(s["category"])
    verdict = judge_breakdown(bd)
    data["verdict"], data["verdict_cause"], data["verdict_reason"] = verdict.verdict, verdict.cause, \
        ended or bdr.verdict_text(bd)
    data["stacks_error"] = bdr.stacks_line(bd) or None
    data["notes"] = bdr.notes(bd)
    return data


def render_md(obs: RunObservation, findings: list[Finding]) -> str:
    out = [f"# cpudoctor run: `{md_escape(obs.command)}`", "", f"{md_escape(ended_text(obs))} after {obs.duration_s:g} s.", ""]
    if obs.breakdown is not None:
        out += bdr.render_md(obs.breakdown, crashed_caption(obs)) + [""]
    rows = kernel_rows(obs)
    if rows:
        out += ["## Kernels (oneDNN)", "", "| Kind | Implementation | Type | Runs | Time |", "|---|---|---|---:|---:|"]
        out += [f"| {r['kind']} | `{md_escape(r['impl'])}` | {r['data_type']} | {r['count']} | {r['time_ms']:.1f} ms |"
                for r in rows[:MAX_KERNEL_ROWS]] + [""]
    out += job_state.md_lines(obs.state)
    out += ach.render_md(obs.achieved)
    if obs.process is not None and obs.process.memory is not None:
        from cpudoctor.render.job_memory import memory_rows

        out += ["## Memory", "", "| | |", "|---|---|"]
        out += [f"| {name} | {md_escape(text)} |" for name, text in memory_rows(obs.process.memory)] + [""]
    out += ["## Findings", "", *job_findings.md_lines(findings, none=NONE)]
    return "\n".join(out) + "\n"


def _memory_html(obs: RunObservation) -> str:
    if obs.process is None or obs.process.memory is None:
        return ""
    from cpudoctor.render.job_memory import memory_html

    return memory_html(obs.process.memory)


def render_html(obs: RunObservation, findings: list[Finding]) -> str:
    items = job_findings.html(findings, none=NONE)
    bd = bdr.render_html(obs.breakdown, crashed_caption(obs)) if obs.breakdown is not None else ""
    roof = ach.render_html(obs.achieved)
    return (f"<html><body><h1>cpudoctor run: <code>{esc(obs.command)}</code></h1><p>{esc(ended_text(obs))} after "
            f"{obs.duration_s:g} s</p>{bd}{roof}{job_state.html(obs.state)}{_memory_html(obs)}<h2>Findings</h2>"
            f"{items}</body></html>\n")


def render_pdf(obs: RunObservation, findings: list[Finding]) -> bytes:
    """The run as a PDF (A4): the HTML page's sections, its drawings as vectors (through Qt, render.pdf)."""
    from cpudoctor.render.pdf import pdf_from_html

    pictures: dict[str, str] = {}
    bd = bdr.render_html(obs.breakdown, crashed_caption(obs)) if obs.breakdown is not None else ""
    roof = ach.render_html(obs.achieved, pictures)
    page = (f"<html><body><h1>cpudoctor run: <code>{esc(obs.command)}</code></h1><p>{esc(ended_text(obs))} after "
            f"{obs.duration_s:g} s</p>{bd}{roof}{job_state.html(obs.state)}{_memory_html(obs)}<h2>Findings</h2>"
            f"{job_findings.html(findings, none=NONE)}</body></html>")
    return pdf_from_html(page, pictures, title=f"cpudoctor run: {obs.command}"[:120])


def render_json(obs: RunObservation, findings: list[Finding]) -> str:
    """Strict JSON like every other CPU Doctor writes (:func:`cpudoctor.model.report.json_text`): a command
    line's bidi override or C1 control is a ``\\u`` escape, kept, not raw nor stripped by the sink."""
    from cpudoctor.model.report import json_text
    from cpudoctor.model.serde import to_data

    data = {
        "kind": "cpudoctor-run",
        "command": obs.command,
        "exit_code": obs.exit_code,
        "ended_by": obs.ended_by,
        "duration_s": obs.duration_s,
        "diagnostics": obs.diagnostics,
        "findings": [finding_data(f) for f in findings],
        "ended": ended_text(obs),
        "crash": to_data(obs.crash) if obs.crash is not None else None,
        "breakdown": breakdown_data(obs.breakdown, crashed_caption(obs)) if obs.breakdown is not None else None,
        "kernels": {"onednn": {"version": obs.onednn.version, "runtime": obs.onednn.runtime,
                               "threads": obs.onednn.threads, "max_isa": obs.onednn.max_isa,
                               "total_ms": round(obs.onednn.total_ms, 3), "groups": kernel_rows(obs)},
                    "mkl": {"version": obs.mkl.version, "calls": len(obs.mkl.calls),
                            "total_ms": round(obs.mkl.total_ms, 3)}},
        "achieved": ach.data(obs.achieved),
        "recompiles": to_data(obs.recompiles),
        "memory": to_data(obs.process.memory) if obs.process is not None and obs.process.memory is not None else None,
        "state": to_data(obs.state) if obs.state is not None else None,
        "notes": run_notes(obs),
    }
    return json_text(data) + "\n"


RENDERERS = {"text": render_text, "md": render_md, "html": render_html, "json": render_json, "pdf": render_pdf}
