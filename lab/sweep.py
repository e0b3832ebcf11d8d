"""Thread sweep: the training job at 1..N threads and in pinning variants, measured until they can be told apart.

The orchestrator runs in the parent (CPU Doctor's own interpreter, no torch):
the CLI calls :func:`run_sweep` directly, the GUI starts it as
``python -m cpudoctor.lab.sweep`` through its job runner. The variants come
from the Topology (:mod:`cpudoctor.lab.variants`).

Each variant gets one training worker (:mod:`cpudoctor.lab.workers`), started
once and warmed up; then the workers measure one short segment each in turn, the order
reversed every round (ABC CBA ABC ...), so a burst of load elsewhere hits
every variant alike. Each segment records the share of its CPUs that other
programs and the hypervisor took. After ``min_rounds`` the sweep stops as
soon as the fastest setting (fewest threads among those within 3 %) is
distinguishable from every other one, or when the time budget ends.

A recommendation is made only when the ranking is settled and the machine
was quiet enough; otherwise the result says "inconclusive: N % of the CPU
went to other programs" (or that the settings stayed within each other's
spread), and no recommendation reaches the advisor.
"""

from __future__ import annotations

import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from cpudoctor.lab.settings import SweepSettings
from cpudoctor.lab.stats import Figure, summarize, tied
from cpudoctor.lab.jobs._cpumeter import CpuMeter
from cpudoctor.lab.variants import Variant, derive_variants, usable_cpus
from cpudoctor.lab.workers import NOT_READY, Stop, WorkerPool, max_workers_alive
from cpudoctor.model import Topology
from cpudoctor.lab import verdicts as words

TIE_TOLERANCE = 0.03    # within 3 % of the best, fewer threads win: same speed, cores left free
PRECISE = 0.10          # ... but only when both spreads are within 10 % of their medians
SETTLE_S = 0.05         # pause between segments: the last worker's OpenMP threads stop spinning


def hard_stop(budget_s: float) -> float:
    """Seconds after the start past which no segment is waited for: the budget plus a little slack for the
    segment's last step (as a training job's hard stop, :meth:`cpudoctor.lab.jobs.train.Budget.hard_deadline`)."""
    return budget_s + max(1.0, 0.05 * budget_s)
BUSY_STOP = 2.0         # after min_rounds, stop early when others took twice the quiet limit


@dataclass
class Measured:
    """What one variant measured so far: its worker's facts and one rate per segment."""

    variant: Variant
    threads_used: int | None = None
    interop_threads: int | None = None
    rates: list[float] = field(default_factory=list)
    interference: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None
    same_as: str | None = None        # another variant ran the very same setting; measured there
    library_reports: dict[str, Any] | None = None    # which kernels its worker ran (its census after warm-up)

    @property
    def setting(self) -> tuple:
        """What the worker really ran: threads in use and the CPU set (None: not pinned)."""
        return (self.threads_used, tuple(self.variant.cpus) if self.variant.cpus is not None else None)

    @property
    def figure(self) -> Figure | None:
        return summarize(self.rates)

    def point(self) -> dict[str, Any]:
        v = self.variant
        out: dict[str, Any] = {"variant": v.name, "group": v.group, "threads": v.threads, "cpus": v.cpus,
                               "threads_used": self.threads_used, "interop_threads": self.interop_threads,
                               "samples_per_s": None, "segments": len(self.rates), "rates": [round(r, 1) for r in self.rates],
                               "other_share": _median_share(self.interference),
                               "status": "error" if self.error else "ok"}
        fig = self.figure
        if fig is not None:
            out.update(fig.to_fields("samples_per_s"))
        if self.error:
            out["error"] = self.error
        if self.same_as:
            out["same_as"] = self.same_as
        return out


def _median_share(records: list[dict[str, Any]]) -> float | None:
    shares = sorted(float(r.get("other_share") or 0) + float(r.get("steal_share") or 0) for r in records if r)
    return round(shares[len(shares) // 2], 4) if shares else None


def interference_share(records: list[dict[str, Any] | None]) -> dict[str, float] | None:
    """Time-weighted share of the CPUs that other programs (and the hypervisor) took over all segments."""
    capacity = other = steal = 0.0
    for r in records:
        if not r:
            continue
        cap = float(r.get("wall_s") or 0) * len(r.get("cpus") or [])
        capacity += cap
        other += float(r.get("other_share") or 0) * cap
        steal += float(r.get("steal_share") or 0) * cap
    if capacity <= 0:
        return None
    return {"other_share": round(other / capacity, 4), "steal_share": round(steal / capacity, 4),
            "share": round((other + steal) / capacity, 4), "seconds": round(capacity, 2)}


@dataclass
class Decision:
    """The ranking of the settings measured so far."""

    settled: bool
    pick: list[Measured] | None = None          # the chosen setting (the variants that ran it)
    runner_up: list[Measured] | None = None
    reason: str = ""


def _by_setting(measured: list[Measured]) -> dict[tuple, list[Measured]]:
    groups: dict[tuple, list[Measured]] = {}
    for m in measured:
        if m.rates and not m.error:
            groups.setdefault(m.setting, []).append(m)
    return groups


def _group_figure(group: list[Measured]) -> Figure:
    fig = summarize([r for m in group for r in m.rates])
    assert fig is not None
    return fig


def decide(measured: list[Measured], tolerance: float = TIE_TOLERANCE, precise: float = PRECISE) -> Decision:
    """Settled when the pick is above every other setting beyond both spreads, or tied with it precisely.

    The pick is the fewest-threads setting within ``tolerance`` of the fastest
    median: the same speed with cores left free for data loading.
    """
    groups = _by_setting(measured)
    if not groups:
        return Decision(False, reason="nothing was measured")
    figs = {k: _group_figure(g) for k, g in groups.items()}
    best = max(f.median for f in figs.values())
    close = [k for k, f in figs.items() if f.median >= best * (1 - tolerance)]
    pick = min(close, key=lambda k: (k[0] or 1 << 30, -figs[k].median))
    others = sorted((k for k in figs if k != pick), key=lambda k: -figs[k].median)
    runner = groups[others[0]] if others else None
    for k in others:
        if figs[pick].above(figs[k]) or tied(figs[pick], figs[k], tolerance, precise):
            continue
        return Decision(False, groups[pick], groups[k],
                        words.within_spread(_names(groups[pick]), _names(groups[k])))
    return Decision(True, groups[pick], runner)


def _names(group: list[Measured]) -> str:
    return " = ".join(f"'{m.variant.name}'" for m in group)


# --------------------------------------------------------------------------- the sweep


def run_sweep(settings: SweepSettings, topology: Topology, allowed: list[int] | None = None,
              on_progress: Callable[[dict[str, Any]], None] | None = None, stop: Stop | None = None,
              on_result: Callable[[dict[str, Any]], None] | None = None,
              started: float | None = None) -> dict[str, Any]:
    """Measure every variant in interleaved segments; the result says what it can honestly recommend.

    ``on_result`` receives the result before the workers are reaped, so a
    cancelled sweep in a child process hands back its figures at once.
    ``started``: when the budget began (monotonic; the sweep's process start, so start-up counts), else now.
    """
    stop = stop or threading.Event()
    emit = on_progress or (lambda data: None)
    variants = derive_variants(topology, allowed)
    if settings.max_variants:
        variants = variants[: settings.max_variants]
    train = dict(settings.train)
    measured = {v.name: Measured(v) for v in variants}
    pool = WorkerPool(variants, train, settings.python,
                      max_workers_alive(len(variants), str(train.get("model", "simplecnn"))))
    start = time.monotonic() if started is None else min(started, time.monotonic())
    # The whole sweep, start-up included, on every CPU it may use: the load is known even when no segment ran.
    meter = CpuMeter(usable_cpus(topology, allowed))
    whole = meter.start()
    state = {"status": "ok", "rounds": 0, "decision": Decision(False, reason="not measured")}
    try:
        _measure(settings, variants, measured, pool, stop, emit, start, state)
    finally:
        pool.request_stop_all()
    state["whole"] = meter.since(whole)
    result = _result(settings, variants, measured, topology, state, time.monotonic() - start)
    if on_result is not None:
        on_result(result)
    pool.reap_all()
    return result


def _measure(settings: SweepSettings, variants: list[Variant], measured: dict[str, Measured], pool: WorkerPool,
             stop: Stop, emit: Callable[[dict[str, Any]], None], start: float, state: dict[str, Any]) -> None:
    names = [v.name for v in variants]
    emit({"phase": "plan", "variants": [v.name for v in variants], "budget_s": settings.budget_s,
          "elapsed": 0.0, "step": 0, "total": len(variants) * settings.min_rounds})
    deadline = start + settings.budget_s
    for name, why in pool.start_all(names, stop, deadline).items():
        measured[name].error = why
    if stop.is_set():
        state["status"] = "cancelled"
        return
    steps = 0
    while True:
        active = [n for n in names if not measured[n].error and not measured[n].same_as]
        if not active:
            break
        order = active if state["rounds"] % 2 == 0 else list(reversed(active))
        for name in order:
            if stop.is_set():
                state["status"] = "cancelled"
                return
            if time.monotonic() - start + settings.segment_s + SETTLE_S > settings.budget_s:
                return
            worker = pool.ensure(name, stop, deadline)
            m = measured[name]
            if worker is None:
                if stop.is_set():
                    state["status"] = "cancelled"
                    return
                m.error = pool.workers[name].failure() or NOT_READY
                continue
            if m.threads_used is None and worker.ready:
                m.threads_used = worker.ready.get("threads")
                m.interop_threads = worker.ready.get("interop_threads")
                m.library_reports = worker.ready.get("library_reports")
            seg = worker.measure(settings.segment_s, stop, until=start + hard_stop(settings.budget_s))
            if seg is None:
                if stop.is_set():
                    state["status"] = "cancelled"
                    return
                if time.monotonic() - start >= hard_stop(settings.budget_s) and worker.failure() is None:
                    state["cut_off"] = words.budget_cut(settings.budget_s, name)
                    return                              # one step outlasted the budget: end with what was measured
                m.error = worker.failure() or "the worker stopped answering"
                continue
            if seg.get("samples_per_s"):
                m.rates.append(float(seg["samples_per_s"]))
            m.interference.append(seg.get("interference") or {})
            steps += 1
            point = m.point()
            emit({"phase": "segment", "round": state["rounds"] + 1, "step": steps,
                  "elapsed": round(time.monotonic() - start, 3), "budget_s": settings.budget_s,
                  "segment_samples_per_s": seg.get("samples_per_s"),
                  "segment_other_share": (seg.get("interference") or {}).get("other_share"), **point})
            stop.wait(SETTLE_S)
        state["rounds"] += 1
        if state["rounds"] == 1:
            for n in _merge_same_settings(measured, names):
                pool.workers[n].request_stop()          # its setting is measured under the other name
        if state["rounds"] >= settings.min_rounds:
            state["decision"] = decide(list(measured.values()))
            if state["decision"].settled:
                return
            noise = interference_share([r for m in measured.values() for r in m.interference])
            if noise and noise["share"] > BUSY_STOP * settings.quiet_limit:
                return          # clearly busy: more rounds would only cost time before "inconclusive"


def _merge_same_settings(measured: dict[str, Measured], names: list[str]) -> list[str]:
    """Variants that ran the very same setting (on 2 CPUs "PyTorch defaults" and "2 threads") are measured under
    the first one's name from the second round on; returns the names no longer measured."""
    seen: dict[tuple, str] = {}
    merged = []
    for n in names:
        m = measured[n]
        if m.error or m.threads_used is None:
            continue
        if m.setting in seen:
            m.same_as = seen[m.setting]
            merged.append(n)
        else:
            seen[m.setting] = n
    return merged


def _result(settings: SweepSettings, variants: list[Variant], measured: dict[str, Measured], topology: Topology,
            state: dict[str, Any], elapsed: float) -> dict[str, Any]:
    all_measured = list(measured.values())
    if state["status"] == "ok" and state["rounds"] >= 1:
        state["decision"] = decide(all_measured)
    decision: Decision = state["decision"]
    noise = interference_share([r for m in all_measured for r in m.interference])
    if noise is None:                      # no segment was measured: the load over the whole sweep says why
        noise = interference_share([state.get("whole")])
    verdict, reason = _verdict(settings, state, decision, noise, all_measured)
    if state.get("cut_off"):
        reason = f"{reason}; {state['cut_off']}"
    failures = [f"{m.variant.name}: {m.error}" for m in all_measured if m.error]
    rec = _recommendation(decision, all_measured, settings.train.get("model", "simplecnn")) \
        if verdict == "recommended" else None
    best = _best(decision)
    return {
        "status": state["status"],
        "points": [m.point() for m in all_measured],
        "variants": len(variants),
        "rounds": state["rounds"],
        "verdict": verdict,
        "reason": reason,
        "interference": noise,
        "recommendation": rec,
        "best_measured": best,
        "failures": failures,
        "budget_s": settings.budget_s,
        "segment_s": settings.segment_s,
        "quiet_limit": settings.quiet_limit,
        "topology_notes": list(topology.notes),
        "library_reports": next((m.library_reports for m in all_measured if m.library_reports), None),
        "elapsed": round(elapsed, 3),
        "settings": {k: v for k, v in settings.to_dict().items() if k != "python"},
    }


def _verdict(settings: SweepSettings, state: dict[str, Any], decision: Decision, noise: dict[str, float] | None,
             measured: list[Measured]) -> tuple[str, str]:
    """("recommended", how it was decided) or ("inconclusive", why not) — the words people read."""
    share = noise["share"] if noise else None
    segments = sum(len(m.rates) for m in measured)
    if state["status"] == "cancelled":
        return "inconclusive", words.inconclusive("cancelled", rounds=state["rounds"], measurements=segments)
    if share is not None and share > settings.quiet_limit:
        return "inconclusive", words.inconclusive("busy", share=share)
    if not any(m.rates for m in measured):
        return "inconclusive", words.inconclusive("nothing")
    if not decision.settled:
        # before one full round nothing was compared: the budget ended first (start-up took it on a busy machine)
        why = decision.reason if state["rounds"] else "the budget ended before every setting was measured once"
        return "inconclusive", words.inconclusive("unsettled", why=why, rounds=state["rounds"],
                                                  measurements=segments, budget_s=settings.budget_s)
    assert decision.pick is not None
    if decision.runner_up is None:
        return "recommended", words.only_setting(decision.pick[0].variant.name)
    fig_p, fig_r = _group_figure(decision.pick), _group_figure(decision.runner_up)
    return "recommended", words.decided(_names(decision.pick), _names(decision.runner_up), fig_p.above(fig_r),
                                        TIE_TOLERANCE)


def _recommendation(decision: Decision, measured: list[Measured], model: str) -> dict[str, Any] | None:
    """The pick in ThreadRecommendation's fields (lab.results turns it into one)."""
    if decision.pick is None:
        return None
    group = decision.pick
    named = next((m for m in group if m.variant.group != "default"), group[0])
    fig = _group_figure(group)
    groups = _by_setting(measured)
    default = next((m for m in measured if m.variant.group == "default" and m.setting in groups), None)
    default_rate = _group_figure(groups[default.setting]).median if default is not None else None
    name = named.variant.name
    if any(m.variant.group == "default" for m in group) and named.variant.group != "default":
        name += " (the PyTorch default here)"
    return {"threads": int(named.threads_used or named.variant.threads or 1), "interop_threads": None,
            "cpus": named.variant.cpus, "variant": name, "samples_per_s": round(fig.median, 1),
            "default_samples_per_s": round(default_rate, 1) if default_rate else None, "model": model}


def _best(decision: Decision) -> dict[str, Any] | None:
    if decision.pick is None:
        return None
    fig = _group_figure(decision.pick)
    m = decision.pick[0]
    return {"variant": m.variant.name, "threads": m.threads_used, "cpus": m.variant.cpus, **fig.to_fields("samples_per_s")}


# --------------------------------------------------------------------------- as a child process


def main(argv: list[str] | None = None) -> int:
    """``python -m cpudoctor.lab.sweep --json-args '{...}' --control stdin``: the GUI's way to run a sweep."""
    from cpudoctor.lab.orchestrator import orchestrator_main

    return orchestrator_main(argv, SweepSettings, run_sweep)


if __name__ == "__main__":
    sys.exit(main())
