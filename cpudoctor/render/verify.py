"""``run --verify``'s measurements in words: the table of fixes measured on the job, on every surface.

One row per finding whose fix was considered, best first (measured speed-ups by
ratio, then no effect, inconclusive, slower, not taking effect, not measured,
changes to the script with the exact change). Each measured row says the rate
before and after (the median of its windows and their range), the ratio round
by round, the windows and the share of the CPUs other programs took. A saved
report keeps the same data as a lab run of kind ``verify``
(:func:`saved_verifications` reads it back for ``doctor --from-report``).
"""

from __future__ import annotations

from typing import Any

from cpudoctor.kits.escape import html_escape as esc, md_escape
from cpudoctor.kits.format import percent
from cpudoctor.lab.job_rate import UNITS
from cpudoctor.model.verification import VERIFY_KIND, FixCheck, Verification

VERDICTS = {"faster": "faster", "slower": "slower", "no_effect": "no measurable effect",
            "inconclusive": "inconclusive", "not_applied": "does not take effect", "no_rate": "no rate measured",
            "code_change": "not verified: a change to the script", "not_verified": "not verified"}


def metric_words(ver: Verification) -> str:
    """Which rate the windows were measured by: ``optimizer steps/s (counted by the job's probe)``."""
    if not ver.metric:
        return "no rate"
    if ver.metric == "output":
        return f"the rate the job prints (--metric {ver.metric_regex!r})"
    return f"{UNITS[ver.metric]} (counted by the job's probe)"


def _rate(fig) -> str:
    if fig is None:
        return "?"
    return f"{fig.median:,.3g}" + (f" ({fig.lo:,.3g}-{fig.hi:,.3g})" if fig.n > 1 else "")


def _ratio(c: FixCheck) -> str:
    if c.ratio is None:
        return ""
    r = c.ratio
    return f"x{r.median:.2f}" + (f" (x{r.lo:.2f}-x{r.hi:.2f})" if r.n > 1 else "")


def headline(ver: Verification) -> str:
    """One line: what the verification found."""
    if ver.skipped:
        return ver.skipped
    faster = [c for c in ver.checks if c.status == "faster"]
    measured = [c for c in ver.checks if c.status in ("faster", "slower", "no_effect", "inconclusive",
                                                       "not_applied")]
    if faster:
        best = max(faster, key=lambda c: c.ratio.median if c.ratio else 0)
        return (f"{len(faster)} of {len(measured)} measured fix{'es' if len(measured) != 1 else ''} made the job "
                f"faster; the best: {best.code} {_ratio(best)}")
    if measured and all(c.status == "not_applied" for c in measured):
        return "no fix applied from outside the script takes effect: the script sets what they change (see below)"
    if measured and all(c.status in ("no_effect", "slower", "not_applied") for c in measured):
        return "no fix helps: none of the measured fixes made the job measurably faster"
    if measured:
        return "no fix was measured faster: see each one's reason"
    return "nothing was measured"


def row(c: FixCheck) -> dict[str, Any]:
    return {"code": c.code, "title": c.title, "verdict": VERDICTS.get(c.status, c.status), "status": c.status,
            "change": c.change, "before": _rate(c.before) if c.before else "",
            "after": _rate(c.after) if c.after else "",
            "ratio": _ratio(c), "windows": f"{c.before.n}+{c.after.n}" if c.before and c.after else "",
            "others": percent(c.other_share, "", fraction=True) if c.other_share is not None else "",
            "reason": c.reason, "target": c.target}


def _how(ver: Verification) -> str:
    if not ver.windows:
        return ""
    loads = sorted(w.other_share for w in ver.windows if w.other_share is not None)
    spread = percent(loads[0], fraction=True) if loads and percent(loads[0], fraction=True) == percent(
        loads[-1], fraction=True) else f"{percent(loads[0], fraction=True)}-{percent(loads[-1], fraction=True)}" \
        if loads else ""
    load = f"; other programs took {spread} of the CPUs in the windows" if loads else ""
    stopped = "; stopped before the end (what was measured is shown)" if ver.cancelled else ""
    return (f"{ver.rounds} interleaved round{'s' if ver.rounds != 1 else ''} of {ver.window_s:g} s windows, each a "
            f"fresh run of the job, in {ver.elapsed_s:g} s; rate: {metric_words(ver)}{load}{stopped}")


def text_lines(ver: Verification | None) -> list[str]:
    if ver is None:
        return []
    out = ["", f"Verified     {headline(ver)}"]
    how = _how(ver)
    if how:
        out.append(f"  {how}")
    for c in ver.ranked():
        r = row(c)
        ratio = f" {r['ratio']}" if r["ratio"] and c.status != "not_applied" else ""
        out.append(f"  {c.code:<8} {r['verdict']}{ratio}"
                   + (f": {r['change']}" if r["change"] and c.status not in ("code_change", "not_verified")
                      or c.status == "not_verified" and c.line else ""))
        if c.before and c.after:
            out.append(f"           rate {r['before']} -> {r['after']} over {r['windows']} windows"
                       + (f", others took {r['others']} of the CPUs" if r["others"] else ""))
        if c.reason and not c.reason.startswith(("x", r["verdict"])):
            out.append(f"           {c.reason}")
        elif c.reason.startswith(r["verdict"]) and ":" in c.reason:
            out.append(f"           {c.reason.split(':', 1)[1].strip()}")
        if c.status == "code_change" and c.change:
            out += [f"           | {line}" for line in c.change.splitlines()[:8]]
        if c.stands_for:
            out.append("           measured from outside in place of the script change:")
            out += [f"           | {line}" for line in c.stands_for.splitlines()[:8]]
    if ver.writes and not ver.skipped:
        out.append(f"  the job held open for writing in its folder: {', '.join(ver.writes[:5])} (written again by "
                   "each window)")
    return out


def md_lines(ver: Verification | None) -> list[str]:
    if ver is None:
        return []
    out = ["## Verified on the job", "", md_escape(headline(ver)), ""]
    how = _how(ver)
    if how:
        out += [f"_{md_escape(how)}_", ""]
    checks = ver.ranked()
    if checks:
        out += ["| Finding | Verdict | Ratio | Rate before | Rate after | Windows | Others | Change / reason |",
                "|---|---|---:|---:|---:|---:|---:|---|"]
        for c in checks:
            r = row(c)
            note = md_escape(c.change.replace("\n", " ")[:200]) if c.status == "code_change" else \
                "; ".join(md_escape(x) for x in (r["change"], c.reason) if x)
            out.append(f"| {c.code} | {r['verdict']} | {r['ratio']} | {r['before']} | {r['after']} | {r['windows']} | "
                       f"{r['others']} | {note} |")
        out.append("")
    return out


def html(ver: Verification | None) -> str:
    if ver is None:
        return ""
    how = _how(ver)
    rows = "".join(
        f"<tr><td>{esc(c.code)}</td><td>{esc(r['verdict'])}</td><td>{esc(r['ratio'])}</td><td>{esc(r['before'])}</td>"
        f"<td>{esc(r['after'])}</td><td>{esc(r['windows'])}</td><td>{esc(r['others'])}</td><td>{_html_note(c, r)}</td>"
        "</tr>" for c in ver.ranked() for r in [row(c)])
    table = ("<table><tr><th>Finding</th><th>Verdict</th><th>Ratio</th><th>Rate before</th><th>Rate after</th>"
             f"<th>Windows</th><th>Others</th><th>Change / reason</th></tr>{rows}</table>") if rows else ""
    return (f"<h2>Verified on the job</h2><p>{esc(headline(ver))}</p>" + (f"<p><em>{esc(how)}</em></p>" if how else "")
            + table)


def _html_note(c: FixCheck, r: dict[str, Any]) -> str:
    if c.status == "code_change":
        return f"<pre>{esc(c.change)}</pre>"
    return esc("; ".join(x for x in (r["change"], c.reason) if x))


def data(ver: Verification | None) -> dict[str, Any] | None:
    """The verification as JSON data, each check with its verdict in words beside the facts, ranked."""
    if ver is None:
        return None
    from cpudoctor.model.serde import to_data

    out = to_data(ver)
    out["checks"] = [dict(to_data(c), verdict=VERDICTS.get(c.status, c.status)) for c in ver.ranked()]
    out["headline"] = headline(ver)
    out["metric_words"] = metric_words(ver)
    return out


def saved_verifications(report) -> list[Verification]:
    """The verifications a saved report keeps (``run --verify --into``), the latest last."""
    from cpudoctor.model.serde import SchemaError, from_data

    found = []
    for run in getattr(report, "benchmarks", []):
        if run.kind != VERIFY_KIND or not isinstance(run.metrics.get("verification"), dict):
            continue
        try:
            found.append(from_data(Verification, run.metrics["verification"]))
        except (SchemaError, TypeError, ValueError):
            continue
    return found


def saved_text_lines(report) -> list[str]:
    """``doctor --from-report``: the latest verification the report keeps, as its own section."""
    saved = saved_verifications(report)
    if not saved:
        return []
    ver = saved[-1]
    return [f"Verified on a job: {ver.command}"] + [line for line in text_lines(ver)[1:]]
