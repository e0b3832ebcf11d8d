"""Words and pictures for the inference lab (``bench infer``): the table, the verdict, the code, the box plot.

Everything here reads the run's metrics as a report keeps them (``BenchRun.metrics`` of kind ``infer``,
:meth:`cpudoctor.lab.results.InferResult.metrics`), so the terminal, the Training page's Inference tab and
the HTML/PDF/Markdown exports say the same thing about the same run. Nothing here measures or decides: the
verdicts and the code come from the lab (:mod:`cpudoctor.lab.infer`, :mod:`cpudoctor.lab.infer_code`).
"""

from __future__ import annotations

import math
from typing import Any

from cpudoctor.kits.escape import html_escape as esc
from cpudoctor.kits.format import percent
from cpudoctor.lab.verdicts import quant_api

STATUS_WORDS = {"skipped": "does not apply", "error": "failed", "unprepared": "not prepared", "same": "same setting"}
COLUMNS = ("variant", "p50 ms", "spread", "p90 ms", "p99 ms", "samples/s", "max error", "others")
FRESH_COLOUR = "#2e8b57"
FONT = "system-ui,-apple-system,'Segoe UI',Roboto,sans-serif"


def _num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _latency(v: Any) -> bool:
    """A latency that can be drawn: more than nothing, less than a day (a report may hold anything)."""
    return _num(v) and 0 < v < 86_400_000


def ms(v: Any) -> str:
    """Milliseconds with three significant figures or more: 0.0412, 4.76, 22.3, 1,234."""
    if not _num(v):
        return "-"
    if v >= 100:
        return f"{v:,.0f}"
    if v >= 10:
        return f"{v:.1f}"
    if v >= 1:
        return f"{v:.2f}"
    return f"{v:.3g}"


def variants_of(metrics: dict[str, Any]) -> list[dict[str, Any]]:
    return [v for v in metrics.get("variants") or [] if isinstance(v, dict) and isinstance(v.get("name"), str)]


def batches_of(metrics: dict[str, Any]) -> list[int]:
    seen: list[int] = []
    for v in variants_of(metrics):
        for p in v.get("points") or []:
            if isinstance(p, dict) and isinstance(p.get("batch"), int) and p["batch"] not in seen:
                seen.append(p["batch"])
    return sorted(seen)


def point_of(variant: dict[str, Any], batch: int) -> dict[str, Any] | None:
    return next((p for p in variant.get("points") or [] if isinstance(p, dict) and p.get("batch") == batch), None)


def error_text(variant: dict[str, Any], limit: Any = None) -> str:
    """"0.4 %" of fp32's largest output; "beyond 5 %" marks a variant outside the accuracy limit."""
    acc = variant.get("accuracy")
    if not isinstance(acc, dict) or not acc.get("checked"):
        return "not checked"
    if acc.get("nonfinite"):
        return "NaN/inf (wrong)"
    if acc.get("shape_differs"):
        return "other shape (wrong)"
    rel = acc.get("max_rel")
    if not _num(rel):
        return "-"
    if rel >= 1e-4:
        text = percent(rel, digits=_decimals(f"{rel * 100:.2g}"), fraction=True)
    else:
        text = "0" if rel == 0 else f"< {percent(1e-4, digits=2, fraction=True)}"
    if variant.get("accurate") is False:
        shown = percent(limit, digits=_decimals(f"{limit * 100:g}"), fraction=True) if _num(limit) else "the limit"
        text += f" (beyond {shown})"
    return text


def _decimals(figure: str) -> int:
    """The decimals a ``:g`` figure shows ("0.4" -> 1, "90" -> 0), so a small error keeps its figures in
    :func:`cpudoctor.kits.format.percent`."""
    return 0 if "e" in figure else len(figure.partition(".")[2])


def row(variant: dict[str, Any], batch: int, limit: Any = None) -> list[str]:
    p = point_of(variant, batch) or {}
    segments = p.get("segments") if _num(p.get("segments")) else 0
    spread = (f"{ms(p.get('latency_ms_lo'))}–{ms(p.get('latency_ms_hi'))}"
              if _num(p.get("latency_ms_lo")) and segments > 1 else "-")
    p50 = p.get("p50_ms") if _num(p.get("p50_ms")) else p.get("latency_ms")
    sps = p.get("samples_per_s")
    p99 = ms(p.get("p99_ms")) + ("*" if _few_calls(p) else "")
    return [variant["name"], ms(p50), spread, ms(p.get("p90_ms")), p99,
            f"{sps:,.1f}" if _num(sps) else "-", error_text(variant, limit),
            percent(p.get("other_share"), "-", fraction=True)]


FRESH_NOTE = ("new processes of its own: the pick prepared again in processes holding it alone, as a serving script "
              "does, timed in alternating segments; their spread is the whole range of those segments' medians, and "
              "the range to expect widens it by how far the pick's latency drifted over the interleaved rounds")
FEW_CALLS = 100
FEW_CALLS_NOTE = f"* fewer than {FEW_CALLS} calls: the p99 is about the slowest call"


def _few_calls(p: dict[str, Any]) -> bool:
    return _num(p.get("p99_ms")) and _num(p.get("calls")) and p["calls"] < FEW_CALLS


def any_few_calls(metrics: dict[str, Any]) -> bool:
    return any(_few_calls(p) for v in variants_of(metrics) for p in v.get("points") or [] if isinstance(p, dict))


def decision_of(metrics: dict[str, Any], batch: int) -> dict[str, Any] | None:
    return next((d for d in metrics.get("decisions") or [] if isinstance(d, dict) and d.get("batch") == batch), None)


def verdict_line(d: dict[str, Any]) -> str:
    """"batch 1: 'OMP_WAIT_POLICY=PASSIVE', 4.62 ms (spread 4.5–4.8), 1.9× the plain call" or why not."""
    head = f"batch {d.get('batch')}"
    if d.get("verdict") == "recommended" and d.get("variant"):
        spread = (f" (spread {ms(d.get('latency_ms_lo'))}–{ms(d.get('latency_ms_hi'))})"
                  if _num(d.get("latency_ms_lo")) else "")
        gain = ""
        if _num(d.get("vs_eager_fp32")):
            gain = f", {d['vs_eager_fp32']:.2f}× the plain fp32 call"
        text = f"{head}: use '{d['variant']}', {ms(d.get('latency_ms'))} ms median{spread}{gain}{fresh_text(d)}"
        if d.get("faster_beyond_accuracy"):
            text += ("; faster but beyond the accuracy limit: " + ", ".join(f"'{n}'" for n in d["faster_beyond_accuracy"]))
        return text
    best = f"; fastest measured: '{d['best_measured']}', {ms(d.get('latency_ms'))} ms" if d.get("best_measured") else ""
    return f"{head}: no recommendation ({d.get('reason') or 'inconclusive'}){best}{fresh_text(d) if best else ''}"


def fresh_text(d: dict[str, Any]) -> str:
    """"; in 2 new processes of its own: 15.3 ms (15.0–15.7)": the pick as a serving script runs it (the lab
    measured it again in processes holding it alone), with the range to expect when the run saw its latency
    drift further, or why it was not measured again; "" for a run without that check."""
    fresh = d.get("fresh")
    if isinstance(fresh, dict) and _latency(fresh.get("latency_ms")):
        n = fresh.get("measured_processes") if _num(fresh.get("measured_processes")) else fresh.get("processes")
        where = f"in {int(n)} new processes of its own" if _num(n) and n > 1 else "in a new process of its own"
        lo, hi = fresh.get("latency_ms_lo"), fresh.get("latency_ms_hi")
        mlo, mhi = fresh.get("measured_ms_lo"), fresh.get("measured_ms_hi")
        text = f"; {where}: {ms(fresh['latency_ms'])} ms"
        if all(_latency(v) for v in (lo, hi, mlo, mhi)) and (lo < mlo or hi > mhi):
            text += f" ({ms(mlo)}–{ms(mhi)}); expect {ms(lo)}–{ms(hi)} ms"
            down, up = fresh.get("drift_lo"), fresh.get("drift_hi")
            if _num(down) and _num(up):
                text += (f", as its latency drifted {percent(max(0.0, 1 - down), fraction=True)} down and "
                         f"{percent(max(0.0, up - 1), fraction=True)} up over the interleaved rounds")
        elif _latency(lo) and _latency(hi):
            text += f" ({ms(lo)}–{ms(hi)})"
        ratio = fresh.get("vs_lab")
        if fresh.get("offset") in ("slower", "faster") and _num(ratio):
            text += (f", {percent(abs(ratio - 1), fraction=True)} {fresh['offset']} than beside the other variants "
                     "(expect this figure in a script)")
        if _num(fresh.get("other_share")) and fresh["other_share"] >= FRESH_BUSY:
            text += f", while other programs took {percent(fresh['other_share'], fraction=True)} of the CPUs"
        elif _drift(fresh) >= FRESH_DRIFT:
            text += (f", a {percent(_drift(fresh), fraction=True)} range with no other program on these CPUs (clock "
                     "or shared-cache changes this machine cannot see)")
        return text
    if isinstance(d.get("fresh_skipped"), str) and d["fresh_skipped"]:
        return f"; not measured again in new processes of its own: {d['fresh_skipped']}"
    return ""


def fresh_rows(metrics: dict[str, Any], batch: int) -> list[tuple[str, dict[str, Any]]]:
    """(row label, fresh figure) for the drawings: the pick at ``batch`` measured in new processes of its own."""
    d = decision_of(metrics, batch)
    fresh = d.get("fresh") if isinstance(d, dict) else None
    name = (d or {}).get("variant") or (d or {}).get("best_measured")
    if not isinstance(fresh, dict) or not isinstance(name, str) or not _latency(fresh.get("latency_ms")):
        return []
    return [(f"{name} · new processes", fresh)]


FRESH_LEGEND = "green: the pick in new processes of its own (line: range of segment medians)"
FRESH_BUSY = 0.10        # the lab's default quiet limit: above it, the fresh figure says how busy the CPUs were
FRESH_DRIFT = 0.10       # a spread this wide on otherwise idle CPUs is said: the latency drifts here


def _drift(fresh: dict[str, Any]) -> float:
    """(hi - lo) / median of the fresh figure; 0 when a figure is missing."""
    lo, hi, med = fresh.get("latency_ms_lo"), fresh.get("latency_ms_hi"), fresh.get("latency_ms")
    return (hi - lo) / med if all(_latency(v) for v in (lo, hi, med)) and hi >= lo else 0.0


def code_block(code: dict[str, Any] | None) -> str:
    """The recommendation's code: its command (when the process start matters) and the Python lines."""
    if not isinstance(code, dict):
        return ""
    parts = []
    if code.get("command"):
        parts.append(f"# start the serving script as:\n# {code['command']}")
    if code.get("snippet"):
        parts.append(str(code["snippet"]))
    return "\n".join(parts)


def skipped(metrics: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(variants, how they ended, why) of every variant without figures: each says why, never a bare error;
    variants that ended for the same reason (a worker that could not start) are named together."""
    grouped: dict[tuple[str, str], list[str]] = {}
    for v in variants_of(metrics):
        if v.get("points") or v.get("status") == "ok":
            continue
        key = (STATUS_WORDS.get(str(v.get("status")), str(v.get("status"))), str(v.get("reason") or ""))
        grouped.setdefault(key, []).append(v["name"])
    return [("; ".join(names), how, why) for (how, why), names in grouped.items()]


def notes(metrics: dict[str, Any]) -> list[str]:
    """What a measured variant cost apart from its latency, and which API it used: torch.compile's compile
    time, the ONNX export, the int8 API (the deprecated one named as such)."""
    out = []
    for v in variants_of(metrics):
        if _num(v.get("compile_s")):
            out.append(f"{v['name']}: the first call compiled for {v['compile_s']:.1f} s (not in its latency)")
        if _num(v.get("export_s")):
            out.append(f"{v['name']}: exporting the model to ONNX took {v['export_s']:.1f} s")
        if v.get("int8_api"):
            out.append(f"{v['name']}: {quant_api(v['int8_api'], metrics.get('torchao_installed'), metrics.get('torch'))}")
    return out


def header(metrics: dict[str, Any]) -> str:
    bits = [str(metrics.get("model") or "model")]
    if _num(metrics.get("parameters")):
        bits.append(f"{metrics['parameters'] / 1e6:.1f}M parameters")
    if metrics.get("torch"):
        bits.append(f"torch {metrics['torch']}")
    if metrics.get("threads"):
        bits.append(f"default {metrics['threads']} threads")
    if metrics.get("openmp"):
        bits.append(f"{metrics['openmp']} OpenMP")
    rounds = metrics.get("rounds")
    if rounds:
        bits.append(f"{rounds} interleaved rounds of {metrics.get('segment_s')} s segments")
    return ", ".join(bits)


# ----------------------------------------------------------------------------- terminal


def progress_line(data: dict[str, Any]) -> str:
    """One line about the inference run's latest step, for the progress bar and the window's status line."""
    phase = data.get("phase")
    if phase == "plan":
        return f"preparing {len(data.get('variants') or [])} variants"
    if phase == "prepared":
        status = data.get("status")
        return f"prepared '{data.get('variant')}'" + ("" if status == "ok" else f": {STATUS_WORDS.get(status, status)}")
    if phase == "segment":
        return (f"round {data.get('round')}: '{data.get('variant')}' batch {data.get('batch')}: "
                f"{ms(data.get('segment_median_ms'))} ms")
    if phase == "fresh" and isinstance(data.get("variants"), list):
        return "measuring " + ", ".join(f"'{v}'" for v in data["variants"]) + " again in new processes of its own"
    if phase == "fresh":
        return (f"new process {data.get('process')}: '{data.get('variant')}' batch {data.get('batch')}: "
                f"{ms(data.get('segment_median_ms'))} ms")
    return ""


def text_lines(metrics: dict[str, Any]) -> list[str]:
    """The run for the terminal: a table per batch size, what did not apply and why, the verdicts, the code."""
    lines = [header(metrics)]
    limit = metrics.get("max_error")
    variants = variants_of(metrics)
    for b in batches_of(metrics):
        rows = [list(COLUMNS)] + [row(v, b, limit) for v in variants if point_of(v, b)]
        widths = [max(len(r[i]) for r in rows) for i in range(len(COLUMNS))]
        lines.append(f"batch {b}:")
        lines += ["  " + "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths)))
                  for r in rows]
    lines.append("spread: the middle half of the segments' medians (interleaved rounds); max error: against fp32 on "
                 "the same inputs, of fp32's largest output")
    if any(isinstance(d, dict) and isinstance(d.get("fresh"), dict) for d in metrics.get("decisions") or []):
        lines.append(FRESH_NOTE)
    if any_few_calls(metrics):
        lines.append(FEW_CALLS_NOTE)
    lines += [f"  {n}" for n in notes(metrics)]
    for name, how, why in skipped(metrics):
        lines.append(f"  {name}: {how}: {why}")
    for d in metrics.get("decisions") or []:
        if isinstance(d, dict):
            lines.append(verdict_line(d))
    rec = metrics.get("recommendation")
    if isinstance(rec, dict):
        block = code_block(rec.get("code"))
        if block:
            lines.append("the code:")
            lines += ["    " + ln for ln in block.splitlines()]
    return lines


# ----------------------------------------------------------------------------- Markdown


def markdown_lines(metrics: dict[str, Any], md_escape, md_fence) -> list[str]:
    """The run as Markdown (the caller's escaping and code fences, so a snippet's backticks stay code)."""
    out: list[str] = [md_escape(header(metrics)), ""]
    for d in metrics.get("decisions") or []:
        if isinstance(d, dict):
            out += [f"- **{md_escape(verdict_line(d))}**"]
    out.append("")
    rec = metrics.get("recommendation")
    if isinstance(rec, dict) and code_block(rec.get("code")):
        out += [*md_fence(code_block(rec.get("code")), "python"), ""]
    limit = metrics.get("max_error")
    for b in batches_of(metrics):
        out += [f"Batch {b}:", "", "| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
        out += ["| " + " | ".join(md_escape(c) for c in row(v, b, limit)) + " |"
                for v in variants_of(metrics) if point_of(v, b)]
        out.append("")
    if any_few_calls(metrics):
        out += [md_escape(FEW_CALLS_NOTE), ""]
    out += [f"- {md_escape(n)}" for n in notes(metrics)]
    out += [f"- {md_escape(name)}: {md_escape(how)}: {md_escape(why)}" for name, how, why in skipped(metrics)]
    return out + [""]


# ----------------------------------------------------------------------------- HTML (exports and the window)


def html_block(metrics: dict[str, Any], caveat_colour: str = "#c98a1a") -> str:
    """Verdicts, the recommended code, the table per batch and what did not apply: HTML for the exports and
    Qt rich text (no <details>, no CSS classes the page may lack)."""
    parts = [f"<p>{esc(header(metrics))}</p>"]
    for d in metrics.get("decisions") or []:
        if not isinstance(d, dict):
            continue
        good = d.get("verdict") == "recommended"
        style = "" if good else f" style='color:{caveat_colour}'"
        parts.append(f"<p{style}><b>{esc(verdict_line(d))}</b></p>")
    rec = metrics.get("recommendation")
    if isinstance(rec, dict) and code_block(rec.get("code")):
        # pre-wrap: a long line (ONNX Runtime's session, torchao's import) wraps in a narrow window
        parts.append(f"<pre style='white-space:pre-wrap'>{esc(code_block(rec.get('code')))}</pre>")
    limit = metrics.get("max_error")
    for b in batches_of(metrics):
        head = "".join(f"<th>{esc(c)}</th>" for c in COLUMNS)
        body = []
        for v in variants_of(metrics):
            if not point_of(v, b):
                continue
            cells = row(v, b, limit)
            wrong = v.get("accurate") is False
            body.append("<tr>" + "".join(
                f"<td{'' if i == 0 else ' align=right'}{' style=color:#c0392b' if wrong and i == 6 else ''}>"
                f"{esc(c)}</td>" for i, c in enumerate(cells)) + "</tr>")
        parts.append(f"<p><b>Batch {b}</b></p><table cellspacing='4'><tr>{head}</tr>{''.join(body)}</table>")
    if any_few_calls(metrics):
        parts.append(f"<p><small>{esc(FEW_CALLS_NOTE)}</small></p>")
    if notes(metrics):
        parts.append("<ul>" + "".join(f"<li>{esc(n)}</li>" for n in notes(metrics)) + "</ul>")
    missing = skipped(metrics)
    if missing:
        parts.append("<p>Not measured:</p><ul>" + "".join(f"<li>{esc(n)} — {esc(h)}: {esc(w)}</li>"
                                                          for n, h, w in missing) + "</ul>")
    return "".join(parts)


def box_plot_svg(metrics: dict[str, Any], batch: int, width: int = 640) -> str:
    """Latency per variant at one batch size: a box (p25–p75) with the median, whiskers p10–p90, the p99 as a
    tick and the sampled calls as dots; a variant beyond the accuracy limit drawn red. Log scale when the
    latencies span more than 10×."""
    rows = [(v, point_of(v, batch)) for v in variants_of(metrics)]
    rows = [(v, p) for v, p in rows if p and _latency(p.get("latency_ms"))]
    if not rows:
        return ""
    fresh = fresh_rows(metrics, batch)
    values = [x for _, p in rows for x in (p.get("p10_ms"), p.get("p90_ms"), p.get("p99_ms"), p.get("latency_ms"),
                                           p.get("min_ms")) if _latency(x)]
    values += [x for _, f in fresh for x in (f.get("latency_ms_lo"), f.get("latency_ms_hi"), f.get("latency_ms"))
               if _latency(x)]
    lo, hi = min(values), max(values)
    log = hi / lo > 10 if lo > 0 else False
    label_w = min(300, 7 * max(len(v["name"]) for v, _ in rows) + 12)
    row_h, top, bottom = 22, 30, 34
    label_w = max(label_w, min(300, 7 * max((len(label) for label, _ in fresh), default=0) + 12))
    height = top + row_h * (len(rows) + len(fresh)) + bottom + (14 if fresh else 0)
    span = width - label_w - 20

    def sx(v: float) -> float:
        if log:
            a, b = math.log10(lo * 0.9), math.log10(hi * 1.1)
            return label_w + (math.log10(max(v, 1e-12)) - a) / ((b - a) or 1) * span
        a, b = 0.0, hi * 1.05
        return label_w + (v - a) / ((b - a) or 1) * span

    title = f"Latency per call at batch {batch} (ms{', log scale' if log else ''})"
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" role="img" aria-label="{esc(title)}" viewBox="0 0 {width} '
           f'{height}" width="{width}" height="{height}" class="chart" font-family="{FONT}" font-size="11">',
           f'<text x="4" y="16" font-weight="600" font-size="12">{esc(title)}</text>']
    for i, (v, p) in enumerate(rows):
        y = top + i * row_h + row_h / 2
        colour = "#c0392b" if v.get("accurate") is False else "#2f6fbf"
        out.append(f'<text x="{label_w - 6}" y="{y + 4:.1f}" text-anchor="end">{esc(v["name"])}</text>')
        samples = p.get("sample_ms") if isinstance(p.get("sample_ms"), list) else []
        for s in samples[:240]:
            if _latency(s):
                out.append(f'<circle cx="{sx(s):.1f}" cy="{y:.1f}" r="1.3" fill="{colour}" fill-opacity="0.25"/>')
        p10, p25, p50, p75, p90 = (p.get(k) for k in ("p10_ms", "p25_ms", "p50_ms", "p75_ms", "p90_ms"))
        if all(_latency(x) for x in (p10, p25, p50, p75, p90)):
            out.append(f'<line x1="{sx(p10):.1f}" x2="{sx(p90):.1f}" y1="{y:.1f}" y2="{y:.1f}" stroke="{colour}"/>')
            out.append(f'<rect x="{sx(p25):.1f}" y="{y - 7:.1f}" width="{max(1.0, sx(p75) - sx(p25)):.1f}" height="14" '
                       f'fill="{colour}" fill-opacity="0.3" stroke="{colour}"/>')
            out.append(f'<line x1="{sx(p50):.1f}" x2="{sx(p50):.1f}" y1="{y - 7:.1f}" y2="{y + 7:.1f}" '
                       f'stroke="{colour}" stroke-width="2"><title>{esc(v["name"])}: p50 {ms(p50)} ms</title></line>')
        else:
            out.append(f'<circle cx="{sx(p["latency_ms"]):.1f}" cy="{y:.1f}" r="3" fill="{colour}"/>')
        if _latency(p.get("p99_ms")):
            out.append(f'<line x1="{sx(p["p99_ms"]):.1f}" x2="{sx(p["p99_ms"]):.1f}" y1="{y - 4:.1f}" y2="{y + 4:.1f}" '
                       f'stroke="{colour}" stroke-dasharray="2 1"/>')
    for j, (label, f) in enumerate(fresh):
        y = top + (len(rows) + j) * row_h + row_h / 2
        out.append(f'<text x="{label_w - 6}" y="{y + 4:.1f}" text-anchor="end">{esc(label)}</text>')
        for s in (f.get("segment_ms") if isinstance(f.get("segment_ms"), list) else [])[:240]:
            if _latency(s) and lo * 0.9 <= s <= hi * 1.1:
                out.append(f'<circle cx="{sx(s):.1f}" cy="{y:.1f}" r="1.6" fill="{FRESH_COLOUR}" fill-opacity="0.4"/>')
        lo_, hi_ = f.get("latency_ms_lo"), f.get("latency_ms_hi")
        if _latency(lo_) and _latency(hi_):
            out.append(f'<line x1="{sx(lo_):.1f}" x2="{sx(hi_):.1f}" y1="{y:.1f}" y2="{y:.1f}" stroke="{FRESH_COLOUR}" '
                       'stroke-width="2"/>')
        out.append(f'<line x1="{sx(f["latency_ms"]):.1f}" x2="{sx(f["latency_ms"]):.1f}" y1="{y - 7:.1f}" '
                   f'y2="{y + 7:.1f}" stroke="{FRESH_COLOUR}" stroke-width="2"><title>{esc(label)}: '
                   f'{ms(f["latency_ms"])} ms</title></line>')
    axis_y = top + row_h * (len(rows) + len(fresh)) + 4
    out.append(f'<line x1="{label_w}" x2="{label_w + span}" y1="{axis_y}" y2="{axis_y}" stroke="#888"/>')
    ticks = log_ticks(lo, hi) if log else [hi * 1.05 * k / 4 for k in range(5)]
    for t in ticks:
        out.append(f'<text x="{sx(t):.1f}" y="{axis_y + 14}" text-anchor="middle" fill="#666">{ms(t)}</text>')
    out.append(f'<text x="4" y="{height - 4}" fill="#666">box p25–p75 · line p50 · whiskers p10–p90 · dashed p99 · '
               'dots: sampled calls · red: beyond the accuracy limit</text>')
    if fresh:
        out.append(f'<text x="4" y="{height - 20}" fill="#666">{esc(FRESH_LEGEND)}</text>')
    out.append("</svg>")
    return "".join(out)


def log_ticks(lo: float, hi: float) -> list[float]:
    """1-2-5 ticks covering lo..hi, for a log-scale latency axis."""
    out = []
    e = math.floor(math.log10(lo))
    while 10 ** e <= hi * 1.1:
        for m in (1, 2, 5):
            v = m * 10 ** e
            if lo * 0.9 <= v <= hi * 1.1:
                out.append(v)
        e += 1
    return out or [lo, hi]
