"""What the thread sweep measured, as the advisor follows it: a measurement beats every rule of thumb.

A conclusive sweep puts its pick in ``report.recommendation``. A sweep whose
verdict was "inconclusive" (other programs took part of the CPU, or the budget
ended first) still measured: when one thread count is faster than every other
beyond both spreads (its slowest segment above their fastest), the order is
settled whatever the noise was. On a tiny model 1 thread ran 18-23x faster
than 2 on a busy 2-CPU VM: telling that user "set it to 2" because the verdict
was inconclusive contradicts the numbers on the same screen.

:func:`sweep_choice` is the one answer every rule and snippet uses
(:func:`cpudoctor.advisor.machine.recommended_threads`, the thread plan, THR001,
THR003, TOPO002, TOPO003); :func:`default_point` is what PyTorch's own default
measured, so THR001 can say "PyTorch already picks the best" or quote the gain.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cpudoctor.advisor.engine import Facts
from cpudoctor.kits.plural import plural
from cpudoctor.model import BenchRun, Report, ThreadRecommendation


@dataclass(frozen=True)
class Point:
    """One measured sweep variant."""

    variant: str
    group: str
    threads: int
    cpus: list[int] | None
    median: float
    lo: float
    hi: float

    @classmethod
    def read(cls, p: Any) -> Point | None:
        if not isinstance(p, dict) or p.get("same_as") or p.get("status", "ok") != "ok":
            return None
        rate, lo, hi = p.get("samples_per_s"), p.get("samples_per_s_lo"), p.get("samples_per_s_hi")
        threads = p.get("threads_used") or p.get("threads")
        if not all(isinstance(x, (int, float)) and not isinstance(x, bool) and x > 0 for x in (rate, threads)):
            return None
        lo = lo if isinstance(lo, (int, float)) and lo > 0 else rate
        hi = hi if isinstance(hi, (int, float)) and hi > 0 else rate
        cpus = p.get("cpus") if isinstance(p.get("cpus"), list) else None
        return cls(str(p.get("variant") or ""), str(p.get("group") or ""), int(threads), cpus, float(rate),
                   float(lo), float(hi))


def named_variant(rec: ThreadRecommendation) -> str:
    """The recommendation's variant when it says more than its thread count ("one CCX"), else ""."""
    variant = (rec.variant or "").strip()
    return "" if variant in (f"{rec.threads} thread", f"{rec.threads} threads") else variant


def latest_sweep(report: Report) -> BenchRun | None:
    """The newest sweep in the report that measured anything (a cancelled one counts for what it measured)."""
    for run in reversed(report.benchmarks):
        if run.kind == "sweep" and run.status in ("ok", "cancelled") and sweep_points(run):
            return run
    return None


def sweep_points(run: BenchRun) -> list[Point]:
    points = run.metrics.get("points") if isinstance(run.metrics, dict) else None
    return [pt for pt in (Point.read(p) for p in points or []) if pt is not None]


def separated_best(points: list[Point]) -> Point | None:
    """The fastest point when it beats every other thread count beyond both spreads; None when not settled."""
    if len(points) < 2:
        return None
    best = max(points, key=lambda p: p.median)
    others = [p for p in points if p.threads != best.threads]
    if not others or not all(best.lo > p.hi for p in others):
        return None
    return best


def default_point(report: Report) -> Point | None:
    """What PyTorch's own thread count (the sweep's "default" variant) measured, in the newest sweep; without a
    sweep, the training run at PyTorch's own count (or at the count PyTorch takes)."""
    run = latest_sweep(report)
    if run is not None:
        return next((p for p in sweep_points(run) if p.group == "default"), None)
    points = train_points(report)
    own = report.software.torch.intra_op_threads if report.software and report.software.torch else None
    return (next((p for p in points if p.group == "default"), None)
            or next((p for p in points if own and p.threads == own and not p.cpus), None))


def _train_choice(report: Report, f: Facts | None) -> ThreadRecommendation | None:
    points = train_points(report)
    best = separated_best(points)
    if best is None:
        return None
    default = default_point(report)
    if f is not None:
        f.record("benchmarks[train]", {"best": best.variant, "threads": best.threads,
                                       "samples_per_s": [round(best.lo, 1), round(best.median, 1), round(best.hi, 1)],
                                       "thread_counts": sorted({p.threads for p in points})})
    return ThreadRecommendation(threads=best.threads, cpus=best.cpus, variant=best.variant,
                                samples_per_s=round(best.median, 1),
                                default_samples_per_s=round(default.median, 1) if default is not None else None,
                                model=str(report.benchmarks[-1].settings.get("model") or "") or None)


TRAIN_SAME = ("model", "data", "batch_size", "optimizer", "dtype", "channels_last", "compile")


def train_points(report: Report) -> list[Point]:
    """What the lab's training runs measured at each thread count (``bench train --threads N``): the runs of the
    newest run's model and settings, the newest run per thread count and CPU set. A run at PyTorch's own
    count (no ``--threads``) is the "default" point."""
    runs = [r for r in report.benchmarks if r.kind == "train" and r.status == "ok" and isinstance(r.metrics, dict)
            and isinstance(r.settings, dict)]
    if not runs:
        return []
    same = {k: runs[-1].settings.get(k) for k in TRAIN_SAME}
    points: dict[tuple, Point] = {}
    for run in runs:
        if any(run.settings.get(k) != v for k, v in same.items()):
            continue
        asked = run.settings.get("threads")
        cpus = run.settings.get("cpus")
        used = run.metrics.get("threads")
        point = Point.read({"variant": plural(used, "thread") if isinstance(used, int) else "",
                            "group": "threads" if asked else "default",
                            "threads_used": run.metrics.get("threads"), "cpus": cpus if isinstance(cpus, list) else None,
                            "samples_per_s": run.metrics.get("samples_per_s"),
                            "samples_per_s_lo": run.metrics.get("samples_per_s_lo"),
                            "samples_per_s_hi": run.metrics.get("samples_per_s_hi")})
        if point is not None:
            points[(point.threads, str(cpus))] = point
    return list(points.values())


def measured_by(report: Report) -> str:
    """Which of the lab's measurements the thread advice follows, in words ("" when none)."""
    if latest_sweep(report) is not None:
        return "the thread sweep"
    return "the lab's training runs" if len({p.threads for p in train_points(report)}) >= 2 else ""


def sweep_choice(report: Report, f: Facts | None = None) -> ThreadRecommendation | None:
    """The lab's choice: the sweep's recommendation when conclusive, else a measured pick beyond every spread (the
    sweep's points, else the training runs' at different thread counts: ``bench train --threads 1`` beside 2)."""
    rec = f.get("recommendation") if f is not None else report.recommendation
    if rec is not None and rec.threads:
        return rec
    run = latest_sweep(report)
    if run is None:
        return _train_choice(report, f)
    best = separated_best(sweep_points(run)) if run else None
    if best is None:
        return None
    default = default_point(report)
    verdict = str(run.metrics.get("verdict") or "inconclusive")
    choice = ThreadRecommendation(
        threads=best.threads, cpus=best.cpus,
        variant=best.variant,
        samples_per_s=round(best.median, 1),
        default_samples_per_s=round(default.median, 1) if default is not None else None,
        model=str((run.settings.get("train") or {}).get("model") or "") or None)
    if f is not None:
        f.record("benchmarks[sweep]", {"best": best.variant, "threads": best.threads,
                                       "samples_per_s": [round(best.lo, 1), round(best.median, 1), round(best.hi, 1)],
                                       "verdict": verdict})
    return choice
