"""The Training page's words: its hints, its status lines, the runs table's cells, why nothing can be used yet.

The page (:mod:`cpudoctor.gui.training_page`) only lays these out. What a
measurement means (the lab's verdicts, the bf16 and int8 explanations) comes
from :mod:`cpudoctor.lab.verdicts` and :mod:`cpudoctor.render.lab`, the same
sentences ``cpudoctor bench`` prints. The runs table is made from
:class:`~cpudoctor.model.BenchRun` records, so a run measured now, one kept
from an earlier session and one in a saved report read alike.
"""

from __future__ import annotations

import datetime as _dt
from typing import Any

from cpudoctor.kits.plural import plural
from cpudoctor.kits.format import percent
from cpudoctor.lab.verdicts import busy, busy_caveat, factor, threads_words
from cpudoctor.model import BenchRun, CpuInfo
from cpudoctor.render.lab import MODEL_LABELS, kernels_lines, metric_definition, training_settings_parts

RUN_COLUMNS = ("When", "Job", "Status", "Settings", "Samples/s", "Held-out", "Result", "Note")
JOB_NAMES = {"train": "training run", "sweep": "thread sweep", "gemm": "GEMM benchmark",
             "quant": "int8 vs fp32 benchmark", "roofline": "roofline job"}
QUIET_LIMIT = 0.10          # as the lab's (lab/results.py): more CPU to others than this is a busy machine

READY = "Ready. Jobs run in a separate process; the window stays responsive."
SAVED_REPORT = ("This is a saved report: the lab measures this machine, so its jobs are off while a saved report "
                "is shown. The runs below are the ones saved in the report.")
ALREADY_RUNNING = "A job is already running; cancel it first."
STOPPING = "Stopping …"
OFF_SAVED = "A saved report is shown: the lab measures this machine. Choose Back to this machine first."
OFF_NO_TORCH = "The chosen Python environment has no PyTorch: install it (the command above) or choose another."
RUNS_HEADING = "<b>Runs</b> — compare settings"
RUNS_TIP = "Every run measured here, newest last; cancelled and crashed runs keep their partial figures"
SAVED_RUNS_HEADING = "<b>Runs in this saved report</b> — measured on the machine it describes"
CLEAR_TIP = "Forget the runs kept for this machine and environment (the report's lab results stay until Refresh)"
NO_RUNS = "No measured setting yet: run a thread sweep, or a training run on a quiet machine."


def job_name(job: str) -> str:
    return JOB_NAMES.get(job, f"{job} job")


# ----------------------------------------------------------------------------- the form


def bf16_hint(cpu: CpuInfo | None) -> str:
    """Whether bf16 can pay off on the CPU shown: native bf16 math (AVX512_BF16 or AMX) or not."""
    from cpudoctor.lab.native import native_support

    if cpu is None or not cpu.flags:
        return ""
    native = native_support(cpu)
    if native.bf16:
        return (f"This CPU has {' and '.join(native.bf16_via)}: bf16 can pay off for conv-heavy models; a bf16 "
                "run measures fp32 beside it.")
    return ("This CPU has no native bf16 math (no AVX512_BF16/AMX): bf16 autocast is emulated and usually "
            "slower than fp32; a bf16 run measures both.")


def settings_problem(error: str) -> str:
    return f"Check the settings: {error}"


def jobs_off_reason(read_only: bool, torch_missing: bool) -> str:
    """Why the job buttons are off (empty: they are not)."""
    if read_only:
        return OFF_SAVED
    if torch_missing:
        return OFF_NO_TORCH
    return ""


# ----------------------------------------------------------------------------- status lines


def running_text(job: str) -> str:
    return f"Running the {job_name(job)} … (Cancel stops it within a second)"


def _left(budget_s: float | None, elapsed_s: float) -> str:
    """", 6 s of the 10 s left" (the budget counts from the job's start, start-up included)."""
    if not budget_s:
        return ""
    return f", {max(0.0, budget_s - elapsed_s):.0f} s of the {budget_s:g} s left"


def starting_text(elapsed_s: float, budget_s: float | None) -> str:
    """The training run before its first step: what the seconds go to, and what is left of the budget."""
    return (f"Training: starting (Python, importing PyTorch, the data, warm-up steps): {elapsed_s:.0f} s so far, "
            f"no step timed yet{_left(budget_s, elapsed_s)} … (Cancel stops it within a second)")


def short_run_text(steps: int | None, startup_s: float | None, budget_s: float | None) -> str:
    """"only 1 step ran: start-up took 9.2 of the 10 s" when start-up took most of a run's budget (else "")."""
    if not budget_s or startup_s is None or startup_s < 0.5 * budget_s:
        return ""
    ran = "no step ran" if not steps else f"only {plural(steps, 'step')} ran"
    return f"{ran}: start-up took {startup_s:.1f} of the {budget_s:g} s"


def _fmt(value: Any, spec: str = ",.0f", unknown: str = "—") -> str:
    return unknown if not isinstance(value, (int, float)) else format(value, spec)


def progress_text(job: str, changed: str, data: dict[str, Any], budget_s: float | None = None,
                  elapsed_s: float | None = None) -> str | None:
    """The status line for one progress line of ``job`` (None: nothing worth saying); a training run with a
    budget in seconds says what is left of it."""
    if changed == "train":
        left = _left(budget_s, elapsed_s) if elapsed_s is not None else ""
        return (f"Training: step {data.get('step')}, loss {_fmt(data.get('loss'), '.3f')}, accuracy "
                f"{_fmt(data.get('accuracy'), '.0%')}, {_fmt(data.get('samples_per_s'))} samples/s{left}")
    if changed == "sweep":
        return (f"Sweep round {data.get('round')}: {data.get('variant')} "
                f"{_fmt(data.get('segment_samples_per_s'))} samples/s")
    if job == "sweep" and data.get("phase") == "plan":
        return f"Sweep: warming up {len(data.get('variants') or [])} training workers …"
    if job == "gemm" and data.get("phase") == "partial":
        done = ", ".join(f"{b} {g:,.0f}" for b, g in (data.get("gflops_so_far") or {}).items())
        return f"GEMM at {threads_words(data.get('threads'))}: {done} GFLOP/s so far"
    if job == "gemm":
        return (f"GEMM {data.get('step')}/{data.get('total')}: {data.get('backend')} at "
                f"{threads_words(data.get('threads'))}, {_fmt(data.get('gflops'), ',.1f')} GFLOP/s")
    if job == "quant":
        return f"int8 vs fp32: batch {data.get('batch')} done"
    if job == "roofline":
        from cpudoctor.render.lab import roofline_progress

        return roofline_progress(data)
    return None


def measured_anything(run: BenchRun) -> bool:
    """True when a run carries a figure (a cancel before the first one leaves only dashes)."""
    m = run.metrics
    return bool(m.get("samples_per_s") or m.get("points") or m.get("final_loss") is not None or m.get("compute")
                or m.get("memory"))


def finished_text(job: str, result, message: str, had_progress: bool) -> tuple[str, str]:
    """(plain text, severity) when a job ends: ok, quiet or not, cancelled or stopped."""
    name = job_name(job)
    measured = measured_anything(result.bench_run())
    short = short_run_text(result.steps, result.startup_s, result.budget_s) if job == "train" else ""
    if result.status == "ok" and short:
        timed = ("its samples/s come from too few steps to compare" if result.samples_per_s
                 else "too few to time, so there is no samples/s")
        return (f"The training run finished, but {short}: {timed}. Run it for longer"
                + (" on an idle machine" if result.quiet is False else "") + ".", "warning")
    if result.status == "ok" and job == "sweep" and not result.conclusive:
        return (f"The thread sweep finished without a recommendation ({result.reason}); the advisor keeps its own "
                "thread advice.", "info")
    if result.status == "ok" and result.quiet is False:
        return f"The {name} finished, {busy_caveat(result.interference.share)}.", "info"
    if result.status == "ok":
        return f"The {name} finished.", "ok"
    if result.status == "cancelled":
        if measured:
            return f"The {name} was cancelled; what it measured so far is kept below.", "info"
        return f"The {name} was cancelled before it measured anything.", "info"
    kept = " Partial results are kept below." if had_progress and measured else ""
    return (f"The {name} stopped: {message}.{kept} The app is fine; change the settings and try again.",
            "warning")


def no_best_text(runs: list[BenchRun]) -> str:
    """Why "Use these settings" is off: what was measured, and what would give a setting to use."""
    sweeps = [r for r in runs if r.kind == "sweep"]
    inconclusive = [r for r in sweeps if r.metrics.get("verdict") != "recommended"]
    if sweeps and len(inconclusive) == len(sweeps):
        what = "the thread sweep was" if len(sweeps) == 1 else f"all {len(sweeps)} thread sweeps were"
        reason = str(inconclusive[-1].metrics.get("reason") or "inconclusive")
        return (f"Nothing to use yet: {what} inconclusive ({reason.removeprefix('inconclusive: ')}). "
                "Rerun on an idle machine, or with a longer budget.")
    trains = [r for r in runs if r.kind == "train" and r.status == "ok"]
    if trains and all(r.metrics.get("quiet") is False for r in trains):
        return ("Nothing to use yet: the training runs were measured on a busy machine. "
                "Rerun on an idle machine.")
    return NO_RUNS


# ----------------------------------------------------------------------------- the runs table


def when_text(started_at: str | None, now: _dt.datetime | None = None) -> tuple[str, str]:
    """("14:02", full local time) for today's run; ("1 Dec", ...) for an older one; dashes when unknown."""
    if not started_at:
        return "—", ""
    try:
        t = _dt.datetime.fromisoformat(started_at.replace("Z", "+00:00")).astimezone()
    except ValueError:
        return "—", started_at
    now = now or _dt.datetime.now().astimezone()
    short = t.strftime("%H:%M") if t.date() == now.date() else f"{t.day} {t.strftime('%b')}"
    return short, t.strftime("%Y-%m-%d %H:%M")


def settings_text(run: BenchRun) -> str:
    """The settings of a run in a few words."""
    s, m = run.settings, run.metrics
    if run.kind == "train":
        parts = training_settings_parts(s, MODEL_LABELS.get(s.get("model"), s.get("model")),
                                        m.get("threads") or s.get("threads"))
        return ", ".join(str(p) for p in parts if p)
    if run.kind == "sweep":
        model = (s.get("train") or {}).get("model", "simplecnn")
        return f"{MODEL_LABELS.get(model, model)}, budget {s.get('budget_s', 45):g} s"
    if run.kind == "gemm":
        return f"n = {m['size']}" if m.get("size") else "GEMM"
    if run.kind == "roofline":
        dtypes = list(dict.fromkeys(c.get("dtype") for c in m.get("compute") or [] if isinstance(c, dict)))
        return f"roofs: {', '.join(d for d in dtypes if d) or 'none'}" + (", memory" if m.get("memory") else "")
    return f"MLP, batch {', '.join(str(b) for b in s.get('batches') or [1, 64])}"


def _other_share(run: BenchRun) -> float | None:
    share = run.metrics.get("other_share")
    return float(share) if isinstance(share, (int, float)) else None


def _train_cells(run: BenchRun) -> tuple[str, str, str, str, str, str]:
    m = run.metrics
    sps, sps_tip = "—", ""
    if isinstance(m.get("samples_per_s"), (int, float)):
        sps = format(m["samples_per_s"], ",.0f")
        sps_tip = metric_definition("samples_per_s")
        if m.get("samples_per_s_lo") is not None and m.get("samples_per_s_hi") is not None:
            sps_tip += f"; half-second windows spread {m['samples_per_s_lo']:,.0f}–{m['samples_per_s_hi']:,.0f}"
    steps = int(m.get("smoothing_steps") or 20)
    held = percent(m.get("eval_accuracy"), '-', digits=1, fraction=True) if m.get("eval_accuracy") is not None else "—"
    held_tip = metric_definition("eval_accuracy")
    if m.get("train_accuracy") is not None:
        held_tip += f"; training accuracy (last {steps} steps): {percent(m['train_accuracy'], '-', digits=1, fraction=True)}"
    bits = []
    if m.get("final_loss") is not None:
        bits.append(f"loss {m['final_loss']:.3f}")
    dtype = str(run.settings.get("dtype") or "fp32")
    ratio = m.get(f"{dtype}_vs_fp32")
    if isinstance(ratio, (int, float)):
        bits.append(f"{dtype} {ratio:.2f}× fp32")
    res_tip = "; ".join(x for x in (metric_definition("loss", steps), str(m.get("precision_note") or "")) if x)
    return sps, sps_tip, held, held_tip, " · ".join(bits) or "—", res_tip


def _result_cells(run: BenchRun) -> tuple[str, str, str, str, str, str]:
    """(samples/s, tip, held-out, tip, result, tip) for any kind of run."""
    if run.kind == "train":
        return _train_cells(run)
    m = run.metrics
    sps, sps_tip, res, res_tip = "—", "", "—", ""
    if run.kind == "sweep":
        rec = m.get("recommendation") if isinstance(m.get("recommendation"), dict) else None
        measured = [p for p in m.get("points") or [] if isinstance(p, dict)
                    and isinstance(p.get("samples_per_s"), (int, float)) and p["samples_per_s"] > 0]
        if rec:
            sps = format(rec.get("samples_per_s") or 0, ",.0f")
            res = f"best: {rec.get('variant')}"
        elif measured:
            # what was measured is shown (the fastest setting), marked as no recommendation
            fastest = max(measured, key=lambda p: p["samples_per_s"])
            sps = format(fastest["samples_per_s"], ",.0f")
            sps_tip = (f"the fastest setting measured, {fastest.get('variant')}; not a recommendation: the sweep "
                       "was inconclusive")
            res = f"inconclusive (fastest: {fastest.get('variant')})"
        elif m.get("points"):
            res = "inconclusive"
        res_tip = str(m.get("reason") or "")
    elif run.kind == "gemm":
        best = max((p for p in m.get("points") or [] if isinstance(p, dict) and p.get("gflops")),
                   key=lambda p: p["gflops"], default=None)
        if best:
            res = f"{best['gflops']:,.1f} GFLOP/s ({best.get('backend')})"
    elif run.kind == "quant":
        if m.get("verdict") == "inconclusive":       # a busy machine: the lab's verdict, as the sweep's
            res = "inconclusive"
        else:
            res = "; ".join(f"b{p['batch']}: ×{factor(p['speedup'])}"
                            + (" (within spread)" if p.get("separated") is False else "")
                            for p in m.get("points") or [] if isinstance(p, dict) and p.get("speedup")) or "—"
        res_tip = str(m.get("vnni_note") or "")
    elif run.kind == "roofline":
        res, res_tip = _roofline_cells(m)
    return sps, sps_tip, "—", "", res, res_tip or res


def _roofline_cells(m: dict[str, Any]) -> tuple[str, str]:
    """"fp32 roof 288 GFLOP/s · copy 33.0 GB/s", with the claim sentence as the tooltip."""
    from cpudoctor.render.roofline import claim_text

    from cpudoctor.lab.roofline import headline_roof

    roof = headline_roof([c for c in m.get("compute") or [] if isinstance(c, dict) and c.get("dtype") == "fp32"])
    copy = next((x for x in m.get("memory") or [] if isinstance(x, dict) and x.get("node") == "all"
                 and x.get("kernel") == "copy"), None)
    bits = ([f"fp32 roof {roof['gflops']:,.0f} GFLOP/s"] if roof else []) + (
        [f"copy {copy['gbps']:,.1f} GB/s"] if copy else [])
    return " · ".join(bits) or "—", claim_text(m.get("claim") or {}, m.get("nominal") or [])


def _note_cells(run: BenchRun) -> tuple[str, str]:
    below = (run.metrics.get("kernel_check") or {}).get("below") or []
    m = run.metrics
    short = short_run_text(m.get("steps"), m.get("startup_s"), m.get("budget_s")) if run.kind == "train" else ""
    note = "; ".join(x for x in [short, run.note] + [f"{b['library']} ran {b['ran']} kernels, this CPU runs {b['cpu']}"
                                              for b in below[:1] if isinstance(b, dict)] if x)
    share = _other_share(run)
    if not measured_anything(run) and run.status == "cancelled":
        return "cancelled before its first measurement", note
    if run.kind in ("sweep", "quant") and run.metrics.get("verdict") not in ("recommended", "measured") \
            and share is not None and share > QUIET_LIMIT:
        return f"busy machine ({percent(share, fraction=True)} to others): rerun", note or f"measured while {busy(share)}"
    return note, note


def run_cells(run: BenchRun, now: _dt.datetime | None = None) -> list[tuple[str, str]]:
    """(text, tooltip) per :data:`RUN_COLUMNS`: one line per run, the whole story in the tooltips."""
    when, when_tip = when_text(run.started_at, now)
    sps, sps_tip, held, held_tip, res, res_tip = _result_cells(run)
    kernels = kernels_lines(run.metrics.get("kernels") or [], run.metrics.get("kernel_check"))
    if kernels:                                   # which kernels ran: in the result's tooltip
        res_tip = "\n".join([res_tip or res, *kernels])
    note, note_tip = _note_cells(run)
    status_tip = run.note if run.status != "ok" else ""
    settings = settings_text(run)
    return [(when, when_tip), (run.kind, job_name(run.kind)), (run.status, status_tip), (settings, settings),
            (sps, sps_tip), (held, held_tip if held != "—" else ""), (res, res_tip or res), (note, note_tip)]


def restored_text(count: int) -> str:
    return f"{plural(count, 'earlier run')} on this machine and environment"
