"""Inference: what the inference lab (``cpudoctor bench infer``) measured for the user's model on this CPU."""

from __future__ import annotations

from typing import Any

from cpudoctor.advisor.engine import Facts, rule
from cpudoctor.kits.format import percent
from cpudoctor.model import BenchRun, Finding, Report

# A recommendation this much faster than the plain fp32 call is worth saying as a warning-free suggestion;
# below it the plain call is already about as fast as this CPU gets (the finding says so, as ok).
WORTH = 1.10


def latest_infer(report: Report) -> BenchRun | None:
    """The newest inference run in the report that measured anything."""
    for run in reversed(report.benchmarks):
        if run.kind == "infer" and isinstance(run.metrics, dict) and run.metrics.get("decisions"):
            return run
    return None


def _num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0


def _code(decision: dict[str, Any]) -> str:
    code = decision.get("code") if isinstance(decision.get("code"), dict) else {}
    parts = []
    if code.get("command"):
        parts.append(f"# start the serving script as: {code['command']}")
    if code.get("snippet"):
        parts.append(str(code["snippet"]))
    return "\n".join(parts)


@rule("INFER001", "inference-variant", category="inference", severity="info",
      title="The fastest accurate way to run this model's inference, as measured here")
def inference_variant(report: Report) -> list[Finding]:
    """What it checks:
        The latest ``cpudoctor bench infer`` run saved in the report (``bench infer --into``, or the
        Training page's Inference tab): per batch size, the variant the lab recommends (the fastest
        whose outputs stay within the accuracy limit against fp32, faster than the runner-up beyond
        both spreads in interleaved rounds) or why it recommends none, any faster variant that
        was marked as beyond the accuracy limit, and the pick's latency measured again in new
        processes holding it alone (the figure a serving script that applies it should see).

    Why it matters:
        Inference latency on a CPU depends on settings no rule of thumb predicts for a given model and
        machine: ``torch.inference_mode``, the thread count (on a busy or small machine one thread
        often beats all of them), channels_last for convolutions, bf16 where the CPU has it, int8,
        ``torch.compile``, ONNX Runtime, the allocator and the OpenMP wait policy. A measurement of
        the user's own model settles it; a fast variant with wrong outputs must never be the answer.

    Fix:
        Apply the recommended variant's code (and start command) in the serving script; when the run
        was inconclusive, measure again on an idle machine with a longer ``--budget``.
    """
    f = Facts(report)
    run = latest_infer(report)
    if run is None:
        return []
    decisions = [d for d in run.metrics.get("decisions") or [] if isinstance(d, dict)]
    f.record("benchmarks[infer].decisions", [{k: d.get(k) for k in ("batch", "verdict", "variant", "latency_ms",
                                                                      "vs_eager_fp32")} for d in decisions])
    model = str(run.metrics.get("model") or "the model")
    recommended = [d for d in decisions if d.get("verdict") == "recommended" and isinstance(d.get("variant"), str)]
    wrong = sorted({n for d in decisions if isinstance(d.get("faster_beyond_accuracy"), list)
                    for n in d["faster_beyond_accuracy"] if isinstance(n, str)})
    marked = (f" Faster but beyond the accuracy limit against fp32, so never recommended: "
              + ", ".join(f"'{n}'" for n in wrong) + ".") if wrong else ""
    if not recommended:
        d = decisions[0] if decisions else {}
        best = (f" The fastest measured was '{d['best_measured']}' ({d.get('latency_ms')} ms median), not told apart "
                "from the rest." if d.get("best_measured") and _num(d.get("latency_ms")) else "")
        return [f.finding(
            "info", f"Inference of {model}: no setting could be recommended",
            why=f"{str(d.get('reason') or 'inconclusive')}.{best}{marked}",
            fix="Measure again on an idle machine, with a longer budget.",
            snippet=_rerun(run))]
    out = []
    for d in recommended:
        gain = d.get("vs_eager_fp32")
        spread = (f" (spread {d.get('latency_ms_lo')}–{d.get('latency_ms_hi')} ms over interleaved rounds)"
                  if _num(d.get("latency_ms_lo")) else "")
        measured = f"'{d['variant']}' ran {d.get('latency_ms')} ms per call at batch {d.get('batch')}{spread}"
        if _num(gain):
            measured += f", {gain:.2f}× the plain fp32 call"
        measured += _fresh(d)
        if _num(gain) and gain < WORTH:
            out.append(f.finding("ok", f"Inference of {model}: the plain fp32 call is about as fast as it gets here",
                                 why=f"{measured}; decided: {d.get('reason')}.{marked}"))
            continue
        out.append(f.finding(
            "info", f"Inference of {model} at batch {d.get('batch')}: use '{d['variant']}'"
            + (f" ({gain:.1f}× faster)" if _num(gain) else ""),
            why=f"{measured}; decided: {d.get('reason')}.{marked}",
            fix="Apply this in the serving script (the code the lab measured).",
            snippet=_code(d), snippet_lang="python"))
    return out


def _fresh(d: dict[str, Any]) -> str:
    """The pick measured again in new processes holding it alone, as a serving script runs it (the figure to
    expect after applying the fix), or why it was not."""
    fresh = d.get("fresh") if isinstance(d.get("fresh"), dict) else {}
    if _num(fresh.get("latency_ms")):
        spread = (f" ({fresh['latency_ms_lo']}–{fresh['latency_ms_hi']} ms)"
                  if _num(fresh.get("latency_ms_lo")) and _num(fresh.get("latency_ms_hi")) else "")
        n = f"{fresh['measured_processes']} " if _num(fresh.get("measured_processes")) else ""
        text = f"; in {n}new processes holding it alone, as a serving script runs it: {fresh['latency_ms']} ms{spread}"
        if fresh.get("offset") in ("slower", "faster") and _num(fresh.get("vs_lab")):
            text += (f", {percent(abs(fresh['vs_lab'] - 1), fraction=True)} {fresh['offset']} than beside the other "
                     "variants (expect this figure)")
        return text
    if isinstance(d.get("fresh_skipped"), str) and d["fresh_skipped"]:
        return f"; not measured again in new processes: {d['fresh_skipped']}"
    return ""


def _rerun(run: BenchRun) -> str:
    s = run.settings if isinstance(run.settings, dict) else {}
    source = {"module": "--module", "torchscript": "--torchscript", "onnx": "--onnx"}.get(str(s.get("source")))
    what = f"{source} {s.get('target')}" if source and s.get("target") else f"--model {s.get('model') or 'resnet18'}"
    budget = max(120, int(float(s.get("budget_s") or 60) * 2))
    return f"cpudoctor bench infer {what} --budget {budget}"
