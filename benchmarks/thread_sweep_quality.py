"""Quality bar of the thread sweep: does its recommendation hold up when measured again?

1. Run the sweep (``cpudoctor.lab.sweep``) as the app does.
2. Measure every swept variant again, in interleaved rounds (so background
   load hits all variants alike), ``--rounds`` times each; take medians.
3. Report ``quality = median(recommended) / max(median of every variant)``
   (bar: >= 0.95) and ``vs_defaults = median(recommended) / median(PyTorch defaults)``.

The sweep's own best point is one noisy sample (and the winner of a noisy
race is biased upward), so the bar is judged on the re-measured medians.

    python benchmarks/thread_sweep_quality.py [--seconds 4] [--rounds 3] [--model simplecnn] [--json]
Exit code 1 when the bar is missed.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

from cpudoctor.lab.runner import run_job
from cpudoctor.lab.settings import TrainSettings

BAR = 0.95


def train_once(train: dict, threads: int | None, cpus: list[int] | None, seconds: float) -> float | None:
    args = {**train, "threads": threads, "cpus": cpus, "seconds": seconds, "steps": None, "eval_samples": 0}
    out = run_job("train", TrainSettings.from_dict(args).to_dict(), timeout=seconds * 10 + 60)
    return (out.result or {}).get("samples_per_s") if out.status == "ok" else None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=4.0, help="seconds per training run")
    ap.add_argument("--rounds", type=int, default=3, help="re-measurements of every variant")
    ap.add_argument("--model", default="simplecnn")
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    train = {"model": a.model, "batch_size": a.batch_size}
    t0 = time.time()
    sweep = run_job("sweep", {"seconds": a.seconds, "train": train}, timeout=3600)
    if sweep.status != "ok" or not sweep.result or not sweep.result.get("recommendation"):
        print(f"sweep failed: {sweep.message}", file=sys.stderr)
        return 2
    points = sweep.result["points"]
    rec = sweep.result["recommendation"]
    samples: dict[str, list[float]] = {p["variant"]: [] for p in points}
    for r in range(a.rounds):
        order = points if r % 2 == 0 else list(reversed(points))    # alternate the order too
        for p in order:
            sps = train_once(train, p["threads"], p["cpus"], a.seconds)
            if sps:
                samples[p["variant"]].append(sps)
            print(f"round {r + 1}/{a.rounds}: {p['variant']}: {sps and round(sps)}", file=sys.stderr)
    med = {k: statistics.median(v) for k, v in samples.items() if v}
    best_variant = max(med, key=med.get)
    default_variant = next(p["variant"] for p in points if p["group"] == "default")
    rec_med = med.get(rec["variant"])
    quality = rec_med / med[best_variant] if rec_med else None
    vs_defaults = rec_med / med[default_variant] if rec_med and med.get(default_variant) else None
    report = {
        "model": a.model, "seconds_per_run": a.seconds, "rounds": a.rounds,
        "sweep": [{"variant": p["variant"], "threads": p.get("threads_used"), "sweep_samples_per_s": p.get("samples_per_s"),
                   "remeasured_median": med.get(p["variant"]), "remeasured": samples[p["variant"]]} for p in points],
        "recommended": rec["variant"], "recommended_threads": rec["threads"],
        "best_remeasured": best_variant,
        "quality": quality, "bar": BAR, "passed": quality is not None and quality >= BAR,
        "recommended_vs_defaults": vs_defaults,
        "elapsed_s": round(time.time() - t0, 1),
    }
    if a.json:
        print(json.dumps(report, indent=2))
    else:
        for row in report["sweep"]:
            m = row["remeasured_median"]
            print(f"{row['variant']:<40} sweep {row['sweep_samples_per_s'] or 0:>9,.0f}  re-measured median {m or 0:>9,.0f}")
        print(f"recommended: {rec['variant']} ({rec['threads']} threads); best re-measured: {best_variant}")
        print(f"quality (recommended / best) = {quality:.3f}  (bar {BAR})  -> {'PASS' if report['passed'] else 'FAIL'}")
        if vs_defaults:
            print(f"recommended vs PyTorch defaults = {vs_defaults:.3f}x")
    return 0 if report["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
