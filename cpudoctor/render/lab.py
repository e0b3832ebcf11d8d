"""Words for the training lab's results: verdicts, caveats, why a ratio is what it is.

The CLI (``cpudoctor bench``), the Training page and the exports say the same
thing about a measurement because they all take their sentences from here.
Figures arrive as typed results (:mod:`cpudoctor.lab.results`) or plain
numbers; nothing here measures or decides.
"""

from __future__ import annotations

import html
from typing import Any

from cpudoctor.kits.plural import plural
from cpudoctor.lab.results import separated
from cpudoctor.kits.format import percent
from cpudoctor.lab.verdicts import busy, cpu_list, factor, rounds_text, threads_words


# ----------------------------------------------------------------------------- one definition per metric

# (label, what it is): plot titles, table headers and their tooltips all read these.
METRICS = {
    "samples_per_s": ("Samples/s", "training samples of the measured steps (after warm-up) divided by their "
                                   "seconds, over the whole run so far"),
    "loss": ("Loss", "training loss, mean of the last {n} steps"),
    "accuracy": ("Accuracy", "training accuracy, mean of the last {n} steps"),
    "eval_accuracy": ("Held-out", "accuracy on held-out samples after training"),
    "reference_samples_per_s": ("fp32 in the same job", "fp32 samples/s measured in alternating windows of the "
                                                        "same bf16 job"),
}


def metric_label(key: str, smoothing_steps: int = 20) -> str:
    label, _ = METRICS[key]
    return f"{label} (last {smoothing_steps} steps)" if key in ("loss", "accuracy") else label


def metric_definition(key: str, smoothing_steps: int = 20) -> str:
    return METRICS[key][1].format(n=smoothing_steps)


# ----------------------------------------------------------------------------- text for the terminal


def _num(v: Any, fmt: str = ",.0f") -> str:
    return "-" if v is None else format(v, fmt)


def _spread(fig, fmt: str = ",.0f") -> str:
    return f"{format(fig.lo, fmt)}–{format(fig.hi, fmt)}" if fig is not None and fig.n > 1 else "-"


def training_settings_parts(s: dict[str, Any], model: Any, threads: Any) -> list[Any]:
    """A training run's settings in the order every page says them: model, dtype, batch, threads, CPUs, flags."""
    parts = [model, s.get("dtype"), f"batch {s['batch_size']}" if s.get("batch_size") else "", threads_words(threads)]
    if s.get("cpus"):
        parts.append(f"CPUs {cpu_list(s['cpus'])}")
    if s.get("channels_last"):
        parts.append("channels_last")
    if s.get("compile"):
        parts.append("compiled")
    return parts


def settings_line(result) -> str:
    """"simplecnn bf16, batch 64, 2 threads, CPUs 0-1, channels_last" for a training run."""
    s = result.settings
    return ", ".join(str(p) for p in training_settings_parts(s, s.get("model"), result.threads or s.get("threads")))


def outcome_text(result) -> str:
    """A lab result for the terminal (``cpudoctor bench``): the figures, their spread, the caveats."""
    lines: list[str] = []
    if result.status == "cancelled":
        lines.append("Cancelled: partial results.")
    elif result.status != "ok":
        lines.append(f"Stopped: {result.message}.")
    writer = {"train": _train_text, "sweep": _sweep_text, "gemm": _gemm_text, "quant": _quant_text,
              "roofline": _roofline_text}[result.kind]
    body = writer(result)
    if not body and result.status != "ok":
        return "\n".join(lines)
    lines += body
    lines += kernels_lines(result.kernels, result.kernel_check)
    if result.interference is not None and result.kind != "sweep":
        lines.append(f"other programs took {percent(result.interference.share, fraction=True)} of the CPUs measured"
                     + ("" if result.quiet else f" (more than {percent(result.quiet_limit, fraction=True)}: rerun on an idle machine)"))
    return "\n".join(lines)


def _train_text(r) -> list[str]:
    if r.samples_per_s is None and r.steps is None:
        return []
    lines = [settings_line(r)]
    if r.samples_per_s is None:
        warm = r.settings.get("warmup_steps")
        why = r.not_measured or (f"all {plural(r.steps or 0, 'step')} were warm-up"
                                 + (f" (the first {warm} are not timed)" if warm else ""))
        lines.append(f"  throughput  not measured: {why}; run more steps or seconds")
    else:
        spread = f", spread {_spread(r.spread)}" if r.spread is not None and r.spread.n > 1 else ""
        lines.append(f"  throughput  {_num(r.samples_per_s)} samples/s{spread} ({plural(r.steps or 0, 'step')} in "
                     f"{_num(r.elapsed, '.1f')} s)")
    if r.dtype != "fp32":
        if r.compared:
            lines.append(f"  fp32        {_num(r.reference_samples_per_s)} samples/s in the same job, alternating windows")
        else:
            lines.append(f"  fp32        not measured{': ' + r.reference_missing if r.reference_missing else ''}")
        lines.append(f"  why         {r.precision_why}")
    budget = budget_line(r)
    if budget:
        lines.append(f"  time        {budget}")
    if not r.steps:
        return lines
    lines.append(f"  loss        {_num(r.initial_loss, '.3f')} -> {_num(r.final_loss, '.3f')} "
                 f"(mean of the last {r.smoothing_steps} steps)")
    held = f", held-out {percent(r.eval_accuracy, '-', digits=1, fraction=True)}" if r.eval_accuracy is not None else ""
    if held and r.eval_samples_done and r.eval_samples_done < (r.settings.get("eval_samples") or 0):
        held += f" ({r.eval_samples_done} of {r.settings['eval_samples']} samples: the budget ended it)"
    lines.append(f"  accuracy    train {percent(r.train_accuracy, '-', digits=1, fraction=True)} (last {r.smoothing_steps} steps){held}")
    if r.compile_s is not None:
        lines.append(f"  compile     {r.compile_s} s")
    return lines


_ENDED_BY = {"budget": "the budget ended it", "steps": "the step limit ended it", "cancelled": "stopped"}


def budget_line(r) -> str:
    """"14.6 s of the 15 s budget: start-up 6.2 s, warm-up 3.1 s; the budget ended it" (start-up included)."""
    if r.job_s is None:
        return ""
    parts = [f"start-up {r.startup_s:.1f} s" if r.startup_s is not None else "",
             f"warm-up {r.warmup_s:.1f} s" if r.warmup_s is not None else ""]
    head = f"{r.job_s:.1f} s" + (f" of the {r.budget_s:g} s budget" if r.budget_s else "")
    detail = ", ".join(p for p in parts if p)
    ended = f"; {_ENDED_BY[r.ended_by]}" if r.ended_by in _ENDED_BY else ""
    if r.cut_off:
        ended += f", cutting off {r.cut_off}"
    return head + (f": {detail}" if detail else "") + ended


def _sweep_text(r) -> list[str]:
    width = max([len("variant"), *(len(p["variant"]) for p in r.points)])   # names are never cut
    lines = [f"{'variant':<{width}} {'threads':>7} {'samples/s':>10} {'spread':>15} {'segments':>8} {'others':>7}"]
    for p in r.points:
        threads = p.get("threads_used") or p.get("threads")
        head = f"{p['variant']:<{width}} {_num(threads, 'd'):>7}"
        if p.get("same_as"):
            # the very same setting as another variant: measured there, said in full (never "= PyTorch defau")
            lines.append(f"{head}  same setting as {p['same_as']}: measured there")
            continue
        spread = (f"{p['samples_per_s_lo']:,.0f}–{p['samples_per_s_hi']:,.0f}"
                  if p.get("samples_per_s_lo") is not None and (p.get("samples_per_s_n") or 0) > 1 else "-")
        sps = _num(p.get("samples_per_s")) if p.get("samples_per_s") else p.get("status", "")
        lines.append(f"{head} {sps:>10} {spread:>15} {p.get('segments', 0):>8} {percent(p.get('other_share'), '-', fraction=True):>7}")
    rec = r.recommendation()
    if rec is not None:
        lines.append(f"Recommended: {rec.variant} -> torch.set_num_threads({rec.threads})"
                     + (f", pinned to CPUs {cpu_list(rec.cpus)}" if rec.cpus else ""))
        if rec.default_samples_per_s:
            lines.append(f"  {rec.samples_per_s / rec.default_samples_per_s:.2f}× the PyTorch defaults")
        if r.reason:
            lines.append(f"  decided: {r.reason}")
    else:
        lines.append(f"No recommendation: {r.reason or 'inconclusive'}. The advisor keeps its own thread advice.")
    if r.interference is not None:
        lines.append(f"other programs took {percent(r.interference.share, fraction=True)} of the CPUs measured "
                     f"({rounds_text(r.rounds, r.measurements)}, budget {r.budget_s:g} s)")
    lines += [f"failed: {f}" for f in r.failures]
    return lines


def _gemm_text(r) -> list[str]:
    if not r.points:
        return []
    lines = [f"{'backend':<12} {'threads':>7} {'n':>6} {'GFLOP/s':>10} {'spread':>17} {'roof':>9} {'of roof':>8} "
             f"{'nominal':>9} {'of nom.':>8}"]
    for p in r.points:
        spread = f"{p['gflops_lo']:,.1f}–{p['gflops_hi']:,.1f}" if p.get("gflops_lo") is not None else "-"
        name = p["backend"] + (" *" if p.get("emulated") else "")
        lines.append(f"{name:<12} {p['threads']:>7} {p.get('size', '-'):>6} {p['gflops']:>10,.1f} {spread:>17} "
                     f"{_num(p.get('roof_gflops'), ',.1f'):>9} {percent(p.get('of_roof'), '-', fraction=True):>8} "
                     f"{_num(p.get('peak_gflops'), ',.1f'):>9} {percent(p.get('utilisation'), '-', fraction=True):>8}")
    lines.append("roof = the best in-cache multiply of that precision measured in this job (the measured roof); "
                 "nominal = cores × clock × FLOP/cycle (the nominal peak)")
    if r.emulated:
        lines.append("* emulated on this CPU, measured small")
    m = r.machine or {}
    if m:
        lines.append(f"micro-architecture {m.get('microarchitecture') or 'unknown'}, "
                     f"{plural(m.get('physical_cores') or 0, 'physical core')}")
    lines += [f"note: {n}" for n in r.notes]
    return lines


def _roofline_text(r) -> list[str]:
    skipped = [f"skipped (over the {r.settings.get('budget_s', 45):g} s budget): {', '.join(r.skipped)}; on a busy "
               "machine rerun with a larger --budget or when it is quieter"] if r.skipped else []
    if not r.compute and not r.memory:
        return skipped
    lines = [f"{'measured roof':<14} {'threads':>7} {'GFLOP/s':>10} {'median':>10} {'nominal peak':>13} "
             f"{'measured/nominal':>17} {'others':>7}"]
    for c in r.compute:
        if c.get("error"):
            lines.append(f"{c['dtype']:<14} {c['threads']:>7} not measured: {c['error']}")
            continue
        lines.append(f"{c['dtype']:<14} {c['threads']:>7} {c['gflops']:>10,.1f} {_num(c.get('median_gflops'), ',.1f'):>10} "
                     f"{_num(c.get('nominal_gflops'), ',.1f'):>13} {percent(c.get('of_nominal'), '-', fraction=True):>17} "
                     f"{percent(c.get('other_share'), '-', fraction=True):>7}")
    if r.nominal:
        n = r.nominal[0]
        lines.append(f"nominal peak = cores × clock × FLOP/cycle: clock {_num(n.get('clock_mhz'))} MHz, "
                     f"{n.get('clock_source')}; {_num(n.get('flops_per_cycle'), 'g')} FLOP/cycle/core from "
                     f"{n.get('flops_per_cycle_source')}")
    if r.memory:
        lines.append(f"{'memory':<14} {'kernel':>7} {'GB/s':>10} {'median':>10}  method")
        from cpudoctor.render.roofline import memory_places

        for node, m in memory_places(r.memory):
            lines.append(f"{node:<14} {m.get('kernel', ''):>7} {m['gbps']:>10,.1f} {_num(m.get('median_gbps'), ',.1f'):>10}"
                         f"  {m.get('method', '')}")
    if r.claim:
        from cpudoctor.render.roofline import claim_text

        lines.append(claim_text(r.claim, r.nominal))
    lines += [f"note: {n}" for n in r.notes]
    return lines + skipped


def roofline_progress(data: dict[str, Any]) -> str:
    """One line about the roofline job's latest measurement, for a status line or a progress bar."""
    if data.get("phase") == "memory":
        got = ", ".join(f"{k} {data[k]:,.1f}" for k in ("read", "copy") if isinstance(data.get(k), (int, float)))
        where = "all CPUs" if data.get("node") == "all" else f"node {data.get('node')}"
        return f"Roofline: memory, {where}: {got} GB/s"
    return (f"Roofline: {data.get('dtype')} on {threads_words(data.get('threads'))}: "
            f"{data.get('gflops') or 0:,.1f} GFLOP/s ({data.get('step')}/{data.get('total')})")


def kernels_lines(kernels: list[dict[str, Any]], check: dict[str, Any] | None) -> list[str]:
    """Which kernels ran, as the libraries said, and whether they ran below this CPU."""
    if not kernels:
        return []
    shown = [k for k in kernels if k.get("primitive") != "reorder"]
    lines = ["kernels (the libraries' own reports):"]
    for k in shown[:12]:
        share = f", {percent(k['share'], fraction=True)} of its time" if k.get("share") is not None else ""
        dtype = f" {k['dtype']}" if k.get("dtype") else ""
        isa = k.get("isa") or "instruction set not named"
        impl = k.get("impl")                    # the implementation's own name, when it says more than the kind
        named = f": {impl}" if impl and impl != k["primitive"] else ""
        lines.append(f"  {k['library']} {k['primitive']}{dtype}{named} ({isa}{share})")
    if check:
        for item in check.get("below") or []:
            why = f" ({item['cap']})" if item.get("cap") else ""
            lines.append(f"  below this CPU: {item['library']} {item['primitive']} ran {item['ran']}, the CPU runs "
                         f"{item['cpu']}{why}")
        for item in check.get("emulated") or []:
            lines.append(f"  emulated: {item['library']} {item['primitive']} {item.get('dtype')} ran {item['isa']} "
                         "(no dot-product instructions for its dtype)")
    return lines


def findings_text(findings: list[Any]) -> str:
    """The job rules' findings from a run's own evidence, for the terminal after its figures (none: nothing)."""
    from cpudoctor.render.job_findings import text_lines

    return "\n".join(text_lines(findings, heading="")) if findings else ""


def _ms_spread(p: dict, name: str) -> str:
    r = _ms_range(p, name)
    return f"{r[0]:.3f}–{r[1]:.3f}" if r is not None else "-"


def _speedup(p: dict) -> str:
    """The speed-up of one point, or why it is no figure: "within spread" when the spreads overlap."""
    s = p.get("speedup")
    if not s:
        return "-"
    return f"{factor(s)}×" + (" (within spread)" if separated(p) is False else "")


def quant_rows(r) -> list[list[str]]:
    """One row per batch size: medians with their p10–p90 spread, the speed-up, the share others took."""
    rows = []
    for p in r.points:
        share = _share_of(p)
        rows.append([str(p["batch"]), f"{p['fp32_ms']:.3f}", _ms_spread(p, "fp32"), f"{p['int8_ms']:.3f}",
                     _ms_spread(p, "int8"), _speedup(p), percent(share, "-", fraction=True)])
    return rows


QUANT_COLUMNS = ("batch", "fp32 ms", "fp32 p10–p90", "int8 ms", "int8 p10–p90", "speed-up", "others")


def _quant_text(r) -> list[str]:
    if not r.points:
        return []
    rows = [list(QUANT_COLUMNS), *quant_rows(r)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(QUANT_COLUMNS))]
    lines = ["  ".join(c.rjust(w) for c, w in zip(row, widths)) for row in rows]
    if r.verdict == "inconclusive":
        lines.append(f"verdict: {r.reason}")
    lines.append(f"why: {r.precision_why}")
    lines.append(f"quantisation API: {r.api_words}")
    lines.append(f"top-1 agreement with fp32 {percent(r.top1_agreement, '-', digits=1, fraction=True)}; engine {r.engine or 'unknown'}")
    return lines


# ----------------------------------------------------------------------------- the Training page

MODEL_LABELS = {"simplecnn": "SimpleCNN", "lenet5": "LeNet-5", "resnet18": "ResNet-18 (28x28)"}


def best_text(rec, caveat: str = "") -> str:
    """"Best: 2 threads, 1,234 samples/s — 1.14× the PyTorch defaults" (plain text; the page adds colour)."""
    head = rec.variant if _names_threads(rec) else f"{rec.variant} — {plural(rec.threads, 'thread')}"
    if rec.cpus and "CPUs" not in rec.variant:
        head += f", pinned to CPUs {cpu_list(rec.cpus)}"
    text = f"Best: {head}, {format(rec.samples_per_s or 0, ',.0f')} samples/s"
    if rec.default_samples_per_s:
        text += f" — {rec.samples_per_s / rec.default_samples_per_s:.2f}× the PyTorch defaults"
    return f"{caveat}. {text}" if caveat else text


def adopted_text(rec) -> str:
    """What "Use these settings" did, e.g. "The advisor now uses 1 thread (measured run)."."""
    extra = "" if _names_threads(rec) else f" ({rec.variant})"
    return f"The advisor now uses {plural(rec.threads, 'thread')}{extra}."


def _names_threads(rec) -> bool:
    """The variant's name already says the thread count ("2 threads", "2 threads (the PyTorch default here)")."""
    return (rec.variant or "").startswith(plural(rec.threads, "thread"))


def sweep_caveat(result) -> str:
    """Why a sweep's figure may not hold, in a few words; empty when it can be trusted."""
    parts = []
    if result.interference is not None and not result.quiet:
        parts.append(f"Measured while {busy(result.interference.share)}")
    if result.status != "ok":
        done = sum(1 for p in result.points if p.get("samples_per_s"))
        parts.append(f"from a partial sweep ({done} of {result.variants} variants)" if result.variants
                     else "from a partial sweep")
    text = ", ".join(parts)
    return text[:1].upper() + text[1:]


# ----------------------------------------------------------------------------- rich text for the Training page


def sweep_notes_html(result, caveat_colour: str = "#c98a1a") -> str:
    """The sweep's verdict, how quiet the machine was, failed variants: a few lines of Qt rich text."""
    e = html.escape
    if result.conclusive:
        head = f"<b>Recommended</b>: {e(result.reason)}"
    else:
        head = f"<b style='color:{caveat_colour}'>No recommendation</b> — {e(result.reason)}"
    items = []
    if result.interference is not None:
        items.append(f"Other programs took {percent(result.interference.share, fraction=True)} of the CPUs measured "
                     f"({e(rounds_text(result.rounds, result.measurements))}).")
    if result.failures:
        items.append(f"{e(plural(len(result.failures), 'variant'))} failed: "
                     + "; ".join(e(str(f)) for f in result.failures) + ".")
    return head + "".join(f"<br>{i}" for i in items)


def gemm_html(result) -> str:
    """GEMM points against the measured roof (the best in-cache multiply of the job) and the nominal peak."""
    e = html.escape
    rows = []
    for p in result.points:
        spread = f"{p['gflops_lo']:,.1f}–{p['gflops_hi']:,.1f}" if p.get("gflops_lo") is not None else "—"
        name = e(p["backend"]) + (" <i>(emulated)</i>" if p.get("emulated") else "")
        rows.append(f"<tr><td>{name}</td><td align='right'>{p['threads']}</td>"
                    f"<td align='right'>{p.get('size', '—')}</td><td align='right'>{p['gflops']:,.1f}</td>"
                    f"<td align='right'>{spread}</td><td align='right'>{_num(p.get('roof_gflops'), ',.1f').replace('-', '—')}</td>"
                    f"<td align='right'>{percent(p.get('of_roof'), '—', fraction=True)}</td>"
                    f"<td align='right'>{_num(p.get('peak_gflops')).replace('-', '—')}</td>"
                    f"<td align='right'>{percent(p.get('utilisation'), '—', fraction=True)}</td></tr>")
    m = result.machine or {}
    notes = ""
    if m:
        notes = (f"<p>Micro-architecture: {e(str(m.get('microarchitecture') or 'unknown'))}, "
                 f"{e(plural(m.get('physical_cores') or 0, 'physical core'))}. "
                 + " ".join(e(n.rstrip(".")) + "." for n in result.notes) + "</p>")
    return ("<b>GEMM</b><table cellspacing='6'><tr><th align='left'>backend</th><th>threads</th><th>n</th>"
            "<th>GFLOP/s (median)</th><th>spread</th><th>measured roof</th><th>of roof</th><th>nominal peak</th>"
            "<th>of nominal</th></tr>" + "".join(rows) + "</table>"
            "<p>Measured roof: the best in-cache multiply of the same precision in this job. Nominal peak: cores × "
            "clock × FLOP/cycle.</p>" + notes)


def _share_of(point: dict[str, Any]) -> float | None:
    """The CPU share other programs took while one point was measured (the job's record, or a report's)."""
    inter = point.get("interference")
    share = inter.get("other_share") if isinstance(inter, dict) else point.get("other_share")
    return float(share) if isinstance(share, (int, float)) else None


def _ms_range(point: dict[str, Any], name: str) -> tuple[float, float] | None:
    lo, hi = point.get(f"{name}_p10_ms"), point.get(f"{name}_p90_ms")
    return (float(lo), float(hi)) if isinstance(lo, (int, float)) and isinstance(hi, (int, float)) and lo > 0 else None


def speedup_range(point: dict[str, Any]) -> tuple[float, float] | None:
    """The int8 speed-up's spread at one batch: the job's own (``speedup_lo``/``_hi``) when it gives one,
    else the slowest and fastest pairing of the two latency spreads (p10–p90)."""
    lo, hi = point.get("speedup_lo"), point.get("speedup_hi")
    if isinstance(lo, (int, float)) and isinstance(hi, (int, float)):
        return float(lo), float(hi)
    fp32, int8 = _ms_range(point, "fp32"), _ms_range(point, "int8")
    if fp32 is None or int8 is None:
        return None
    return fp32[0] / int8[1], fp32[1] / int8[0]


def quant_verdict(result) -> tuple[str, str]:
    """("inconclusive" | "overlap" | "measured", the sentence): the lab's verdict (:class:`QuantResult`), in
    words; noise is never explained as a cause."""
    why = result.precision_why
    sentence = why + "."
    if result.verdict == "inconclusive":            # "inconclusive: 84 % of the CPU went to other programs, ..."
        return "inconclusive", why[:1].upper() + why[1:] + "."
    if result.tied():
        return "overlap", sentence
    return "measured", sentence


def quant_html(result) -> str:
    """int8 against fp32 per batch with each figure's spread (p10–p90), the share other programs took, and a
    verdict that says "inconclusive" when the machine was busy instead of explaining the ratio."""
    e = html.escape

    def spread(r: tuple[float, float] | None, fmt: str) -> str:
        return f"<br><small>{format(r[0], fmt)}–{format(r[1], fmt)}</small>" if r is not None else ""

    rows = []
    for p in result.points:
        share = _share_of(p)
        rows.append(f"<tr><td align='right'>{p['batch']}</td>"
                    f"<td align='right'>{p['fp32_ms']:.3f}{spread(_ms_range(p, 'fp32'), '.3f')}</td>"
                    f"<td align='right'>{p['int8_ms']:.3f}{spread(_ms_range(p, 'int8'), '.3f')}</td>"
                    f"<td align='right'>{_speedup(p).split(' ')[0]}{spread(speedup_range(p), '.2f')}</td>"
                    f"<td align='right'>{percent(share, '—', fraction=True)}</td></tr>")
    kind, verdict = quant_verdict(result)
    colour = " style='color:#c98a1a'" if kind == "inconclusive" else ""
    api = e(result.api_words)
    return ("<b>Dynamic int8 vs fp32 (MLP), measured in the same job</b><table cellspacing='6'><tr><th>batch</th>"
            "<th>fp32 ms</th><th>int8 ms</th><th>speed-up</th><th>CPU to others</th></tr>" + "".join(rows)
            + "</table><p><small>Each figure: the median; below it the spread of the repeats (p10–p90).</small></p>"
            f"<p{colour}>{e(verdict)}</p><p>Quantisation API: {api}. Top-1 agreement with "
            f"fp32: {percent(result.top1_agreement, '-', digits=1, fraction=True)}.</p>")
