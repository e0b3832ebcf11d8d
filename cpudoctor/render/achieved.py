"""The words for how much of the CPU a job's kernels used: per layer kind against the roof, and the whole job.

Reads a :class:`~cpudoctor.model.achieved.Utilisation` (the arithmetic is the model's) and says it: "convolution
fp32: 61 % of this CPU's fp32 roof on 2 threads (38.1 of 62.5 GFLOP/s), intensity 11.3 FLOP/byte"; "linear fp32:
4 % of the roof: memory-bound at intensity 0.9 FLOP/byte"; where the roof came from (a saved ``bench roofline``, a
quick measurement in a child), what was not counted and why, and a dtype with no measured roof said as such. Text,
Markdown, HTML and JSON for ``cpudoctor run``; the bars for the window and the SVG.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cpudoctor.kits.escape import html_escape as esc, md_escape
from cpudoctor.model.achieved import COMPUTE_KINDS, KindUse, Utilisation
from cpudoctor.kits.format import percent

NOT_COUNTED = {
    "rnn": "recurrent cells (their gates' GEMMs are not in the line's shape)",
    "shape": "lines whose shape could not be read",
    "mkl_batch": "oneMKL's batched GEMMs (they print pointers instead of sizes)",
}
MAX_KINDS = 8
MAX_PICTURE_POINTS = 24      # the job's longest-running kernels drawn on the roofline (the JSON keeps 40)


def _gf(x: float | None) -> str:
    if x is None:
        return "?"
    return f"{x:,.1f}" if x >= 1 else f"{x:.2f}"


def _of(x: float | None) -> str:
    """A share of a roof: one decimal under 10 % (0.5 %, not 0 %)."""
    return percent(x, "?", digits=1 if x is not None and x < 0.095 else 0, fraction=True)


def _threads(n: int | None) -> str:
    return f" on {n} thread{'s' if n != 1 else ''}" if n else ""


def _unit(dtype: str) -> str:
    return "GOP/s" if dtype.startswith("int") else "GFLOP/s"


def roof_source(u: Utilisation) -> str:
    """Where the roof came from, in one sentence."""
    r = u.roofs
    when = f", measured {r.measured_at}" if r.measured_at else ""
    busy = max((f.other_share or 0.0 for f in r.compute), default=0.0)
    if busy > 0.10:
        when += f" while other programs took {percent(busy, fraction=True)} of the CPUs (a low roof flatters the job's share)"
    if r.source == "saved":
        return f"Roof: the saved bench roofline ({r.where}{when})."
    if r.source == "quick":
        return (f"Roof: {r.where}{when}; `cpudoctor bench roofline --into REPORT`, then `run --roof REPORT`, "
                "holds the job against a full measurement.")
    why = f" ({r.where})" if r.where else ""
    return f"Roof: none measured{why}; the rates stand alone (`cpudoctor bench roofline`, then `run --roof REPORT`)."


def kind_sentence(k: KindUse) -> str:
    """One layer kind: its rate against its roof and the roofline's bound at its intensity."""
    name = f"{k.kind} {k.dtype}"
    calls = f"{k.calls:,} call{'s' if k.calls != 1 else ''}, {k.time_ms / 1e3:,.2f} s"
    if not k.counted:
        rate = f"{k.gbps:,.1f} GB/s" if k.gbps is not None else "not timed in bytes"
        mem = f", {percent(k.of_memory, fraction=True)} of the memory roof" if k.of_memory is not None else ""
        return f"{name}: bytes only (no FLOPs counted), {rate}{mem} ({calls})"
    unit = _unit(k.dtype)
    intensity = f"intensity {k.intensity:,.1f} FLOP/byte" if k.intensity is not None else "intensity unknown"
    if k.roof_gflops is None:
        return f"{name}: {_gf(k.gflops)} {unit}, {intensity}; no measured {k.dtype} roof to hold it against ({calls})"
    where = _threads(k.roof_threads)
    if k.roof_threads and k.threads and k.roof_threads != k.threads:
        where += f" (the job ran {k.threads}; fewer threads measured higher, the best floor of its roof)"
    head = (f"{name}: {_of(k.of_roof)} of this CPU's {k.dtype} roof{where} "
            f"({_gf(k.gflops)} of {_gf(k.roof_gflops)} {unit}), {intensity}")
    if k.memory_bound:
        head += (f": memory-bound (the memory roof allows {_gf(k.attainable_gflops)} {unit} at this intensity; "
                 f"it reached {_of(k.of_attainable)} of that)")
    elif k.memory_bound is False:
        head += ": compute-bound"
    if k.of_roof is not None and k.of_roof > 1.05:
        head += ("; above the measured roof, so that roof is low: measured while the machine was busy, or "
                 "this kernel is faster than the in-cache matrix multiply that measured it")
    return f"{head} ({calls})"


def whole_job(u: Utilisation) -> str:
    """The whole job: share of wall time in counted kernels x their efficiency = the CPU's compute used."""
    if not u.wall_s:
        return ""
    kernel = sum(k.counted_ms for k in u.kinds if k.counted) / 1e3
    in_kernels = percent(kernel / u.wall_s, fraction=True) if u.wall_s else "?"
    cpu = u.cpu_share()
    eff = u.kernel_efficiency()
    if cpu is None:
        dtypes = ", ".join(sorted(u.no_roof)) or "its dtypes"
        return (f"Whole job: {in_kernels} of {u.wall_s:,.1f} s of wall time in counted kernels; the CPU's compute it "
                f"used is not stated: no measured roof for {dtypes}.")
    return (f"Whole job: {in_kernels} of {u.wall_s:,.1f} s of wall time in counted kernels x {percent(eff, fraction=True)} of their "
            f"roofs = {percent(cpu, digits=1 if cpu < 0.1 else 0, fraction=True)} of this CPU's compute{_threads(u.threads)}.")


def per_step(u: Utilisation) -> str:
    """Per step, when the job's step count is known (the probe's optimizer steps): its counted work and kernels."""
    if not u.steps:
        return ""
    kinds = "; ".join(f"{k.kind} {k.dtype} {k.flop / u.steps / 1e9:,.3f} GFLOP in {k.time_ms / u.steps:,.1f} ms"
                      for k in u.kinds[:4] if k.counted)
    return (f"Per step ({u.steps:,} steps observed): {u.flop / u.steps / 1e9:,.3f} GFLOP counted, "
            f"{u.kernel_ms / u.steps:,.1f} ms in timed kernels" + (f" ({kinds})." if kinds else "."))


def no_roof_lines(u: Utilisation) -> list[str]:
    out = []
    for dtype, why in sorted(u.no_roof.items()):
        because = f": {why}" if why else ""
        out.append(f"{dtype} has no measured roof{because}; its rate is not held against a guess.")
    return out


def not_counted_line(u: Utilisation) -> str:
    parts = [f"{kind} {ms / 1e3:,.2f} s (bytes only)" for kind, ms in sorted(u.uncounted_kinds.items(),
                                                                           key=lambda kv: -kv[1])]
    parts += [f"{NOT_COUNTED.get(why, why)} {ms / 1e3:,.2f} s" for why, ms in u.not_counted.items()]
    return "Not counted in FLOPs: " + "; ".join(parts) + "." if parts else ""


def claim_line(u: Utilisation) -> str:
    """The guides' "about 90 % of theoretical compute", checked on this job's best-used compute kind."""
    best = max((k for k in u.kinds if k.kind in COMPUTE_KINDS and k.of_roof is not None and k.time_ms > 0),
               key=lambda k: k.time_ms, default=None)
    if best is None:
        return ""
    text = (f"Guides say CPU training reaches about 90 % of the theoretical compute: this job's {best.kind} "
            f"{best.dtype} (its longest compute kernels) reached {percent(best.of_roof, fraction=True)} of the measured roof")
    if best.nominal_gflops and best.gflops is not None:
        text += f", {percent(best.gflops / best.nominal_gflops, fraction=True)} of the nominal peak ({_gf(best.nominal_gflops)} {_unit(best.dtype)})"
    return text + "."


def lines(u: Utilisation) -> list[str]:
    """Every sentence, in order: per kind, the whole job, the claim, no roof, not counted, the roof's source."""
    out = [kind_sentence(k) for k in u.kinds[:MAX_KINDS]]
    if len(u.kinds) > MAX_KINDS:
        out.append(f"(+{len(u.kinds) - MAX_KINDS} more kinds, {sum(k.time_ms for k in u.kinds[MAX_KINDS:]) / 1e3:,.2f} s)")
    for text in (whole_job(u), per_step(u), claim_line(u), *no_roof_lines(u), not_counted_line(u), roof_source(u)):
        if text:
            out.append(text)
    return out


def render_text(u: Utilisation | None) -> list[str]:
    if u is None or not u.kinds:
        return []
    body = lines(u)
    return [f"Achieved     {body[0]}", *(f"             {t}" for t in body[1:])]


def render_md(u: Utilisation | None) -> list[str]:
    if u is None or not u.kinds:
        return []
    out = ["## Achieved against the roof", "", "| Kind | Type | Calls | Time | Rate | Roof | Of roof | Intensity | Bound |",
           "|---|---|---:|---:|---:|---:|---:|---:|---|"]
    for k in u.kinds[:MAX_KINDS]:
        bound = "memory" if k.memory_bound else ("compute" if k.memory_bound is False else "")
        out.append(f"| {k.kind} | {k.dtype} | {k.calls} | {k.time_ms / 1e3:.2f} s | "
                   f"{_gf(k.gflops) + ' ' + _unit(k.dtype) if k.counted else (_gf(k.gbps) + ' GB/s' if k.gbps else '')} | "
                   f"{_gf(k.roof_gflops) if k.roof_gflops else ''} | {percent(k.of_roof, fraction=True) if k.of_roof is not None else ''} | "
                   f"{_gf(k.intensity) if k.intensity is not None else ''} | {bound} |")
    out.append("")
    out += [md_escape(t) for t in lines(u)[min(len(u.kinds), MAX_KINDS):]] + [""]
    return out


def render_html(u: Utilisation | None, pictures: dict[str, str] | None = None) -> str:
    """The section of a run's HTML page: the bars and the roofline with the job's points inline (SVG), the
    sentences under them. With ``pictures`` (a dict to fill: the PDF's), the drawings are ``<img>`` references
    to it instead, which the PDF draws as vectors."""
    if u is None or not u.kinds:
        return ""
    from cpudoctor.render.svg_roofline import render_bars, render_svg

    drawings = {"achieved-bars": render_bars(bars(u)),
                "achieved-roofline": render_svg(picture(u)) if u.points else ""}
    shown = ""
    for name, svg in drawings.items():
        if not svg:
            continue
        if pictures is None:
            shown += f"<div>{svg}</div>"
        else:
            pictures[name] = svg
            shown += f'<p><img src="cpudoctor:{name}"></p>'
    items = "".join(f"<li>{esc(t)}</li>" for t in lines(u))
    return f"<h2>Achieved against the roof</h2>{shown}<ul>{items}</ul>"


def data(u: Utilisation | None) -> dict[str, Any] | None:
    """The JSON of ``run --format json``: the facts and each sentence beside them."""
    if u is None:
        return None
    return {
        "threads": u.threads, "wall_s": u.wall_s, "steps": u.steps, "kernel_ms": round(u.kernel_ms, 3),
        "counted_ms": round(u.counted_ms, 3), "gflop": round(u.flop / 1e9, 4),
        "cpu_share": _r(u.cpu_share()), "kernel_efficiency": _r(u.kernel_efficiency()),
        "roof": {"source": u.roofs.source, "where": u.roofs.where, "measured_at": u.roofs.measured_at,
                 "compute": [{"dtype": r.dtype, "threads": r.threads, "gflops": r.gflops} for r in u.roofs.compute],
                 "memory_gbps": u.roofs.memory_gbps, "missing": u.roofs.missing},
        "kinds": [{"kind": k.kind, "dtype": k.dtype, "libraries": k.libraries, "calls": k.calls,
                   "time_ms": round(k.time_ms, 3), "gflop": round(k.flop / 1e9, 4), "bytes": round(k.bytes),
                   "gflops": _r(k.gflops), "gbps": _r(k.gbps), "intensity": _r(k.intensity),
                   "roof_gflops": k.roof_gflops, "of_roof": _r(k.of_roof), "memory_bound": k.memory_bound,
                   "attainable_gflops": _r(k.attainable_gflops), "of_attainable": _r(k.of_attainable),
                   "directions": {d: round(ms, 3) for d, ms in k.directions.items()}, "largest": k.largest,
                   "text": kind_sentence(k)} for k in u.kinds],
        "points": [{"kind": p.kind, "dtype": p.dtype, "shape": p.shape, "direction": p.direction,
                    "library": p.library, "calls": p.calls, "time_ms": round(p.time_ms, 3),
                    "gflops": _r(p.gflops), "intensity": _r(p.intensity)} for p in u.points],
        "not_counted": {k: round(v, 3) for k, v in {**u.uncounted_kinds, **u.not_counted}.items()},
        "no_roof": u.no_roof,
        "text": lines(u),
    }


def _r(x: float | None, digits: int = 4) -> float | None:
    return round(x, digits) if x is not None else None


@dataclass
class Bar:
    """One layer kind's bar: what it reached against the roof and the roofline's bound at its intensity."""

    label: str
    dtype: str
    achieved: float              # GFLOP/s
    roof: float | None           # the compute roof of its dtype
    attainable: float | None     # min(roof, memory x intensity)
    text: str                    # the sentence (a tooltip)


def bars(u: Utilisation | None) -> list[Bar]:
    """Per counted layer kind: achieved rate, its roof and the attainable bound (the window's and the SVG's)."""
    if u is None:
        return []
    return [Bar(f"{k.kind} {k.dtype}", k.dtype, k.gflops or 0.0, k.roof_gflops, k.attainable_gflops,
                kind_sentence(k)) for k in u.kinds if k.counted][:MAX_KINDS]


def picture(u: Utilisation, runs: list[Any] | None = None):
    """The roofline picture of a run: the job's kernels as points (one per shape and direction, the longest
    first) on the roofs it was held against, beside the lab's points of ``runs`` (a saved report's) when given."""
    from cpudoctor.render.roofline import Picture, Point, Roof, _choose_labels, picture_from_runs

    pic = picture_from_runs(runs or []) if runs else None
    if pic is None:
        pic = Picture()
        most = max((r.threads or 0 for r in u.roofs.compute), default=0)
        for r in sorted(u.roofs.compute, key=lambda r: (r.dtype, -(r.threads or 0))):
            every = (r.threads or 0) == most
            pic.compute.append(Roof(r.dtype, r.gflops, r.threads, f"{r.dtype} roof{_threads(r.threads)}: "
                                    f"{r.gflops:,.0f} {_unit(r.dtype)}", True, every))
        if u.roofs.memory_gbps:
            pic.memory_gbps = u.roofs.memory_gbps
            pic.memory_label = f"memory {u.roofs.memory_gbps:,.1f} GB/s (copy)"
    for p in u.points[:MAX_PICTURE_POINTS]:
        if p.gflops <= 0 or p.intensity <= 0:
            continue
        label = f"{p.kind} {p.dtype}" + ("" if p.direction in ("forward", "any") else f" {p.direction.replace('_', ' ')}")
        pic.points.append(Point(label, p.intensity, p.gflops, "job", p.dtype,
                                f"this job: {p.kind} {p.shape} {p.direction} ({p.library}, {p.dtype}): "
                                f"{p.gflops:,.2f} {_unit(p.dtype)} at {p.intensity:,.1f} FLOP/byte, {p.calls} calls, "
                                f"{p.time_ms:,.1f} ms"))
    _choose_labels(pic.points)
    pic.claim = " ".join(t for t in (whole_job(u), claim_line(u)) if t)
    pic.notes = [roof_source(u)]
    return pic
