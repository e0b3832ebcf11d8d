"""Does ``bench infer``'s recommendation hold outside the lab? Runs it on both built-in models, then applies
each recommendation in a separate plain script and times that.

For each built-in model (resnet18, transformer): a default ``cpudoctor bench infer --model M`` (60 s budget),
timed from outside; then the recommended variant's own code (``setup`` and ``call`` from the result, started
the way its ``command`` says: environment variables, LD_PRELOAD, taskset) pasted into a plain script that
builds the same model and times ``call`` at batch 1 for a few seconds, three times. The bar: each plain
script's median latency lies within the recommendation's spread. That is the figure the lab measured in new
processes holding the pick alone (``fresh``: the whole range of their segments' medians, widened by the drift
the interleaved rounds saw of the pick); the interleaved
rounds' spread (the middle half of the segments' medians in the long-lived workers) is shown beside it, and
was the bar before the lab measured in new processes. When the run was inconclusive (a busy machine), its
fastest measured variant is checked the same way and labelled so. Every row says how busy the machine was
(the lab's own interference share and the load average), because this machine is shared.

    python benchmarks/infer_reproduce.py [--python PY] [--models resnet18,transformer] [--seconds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
JOBS = ROOT / "lab" / "jobs"

PLAIN = """
import json, statistics, sys, time
sys.path.insert(0, {jobs!r})
import torch
import infer_models
model, make = infer_models.build({model!r})
x = make(1)
{setup}

def request(x):
{call}
    return y

for _ in range(3):
    request(x)
times = []
end = time.perf_counter() + {seconds}
while time.perf_counter() < end or len(times) < 5:
    t0 = time.perf_counter()
    request(x)
    times.append(time.perf_counter() - t0)
print(json.dumps({{"p50_ms": statistics.median(times) * 1000, "calls": len(times)}}))
"""


def load() -> float:
    return os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")


def bench(model: str, python: str | None, out: Path) -> tuple[dict, float]:
    argv = [sys.executable, "-m", "cpudoctor", "bench", "infer", "--model", model, "--json", "-o", str(out), "--quiet",
            "--python", python or sys.executable]
    began = time.monotonic()
    subprocess.run(argv, cwd=ROOT, check=False, timeout=600)
    return json.loads(out.read_text()), time.monotonic() - began


def plain_run(model: str, variant: dict, python: str, seconds: float, folder: Path) -> dict:
    code = variant.get("code") or {}
    script = folder / "serve.py"
    script.write_text(PLAIN.format(jobs=str(JOBS), model=model, setup=code.get("setup") or "",
                                   call=textwrap.indent(code.get("call") or "y = model(x)", "    "), seconds=seconds))
    env = dict(os.environ)
    env.update(variant.get("env") or {})
    if variant.get("preload_path"):
        env["LD_PRELOAD"] = variant["preload_path"]
    argv = [python, str(script)]
    if variant.get("cpus"):
        argv = ["taskset", "-c", ",".join(map(str, variant["cpus"]))] + argv
    done = subprocess.run(argv, cwd=folder, env=env, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        return {"error": (done.stderr.strip().splitlines() or ["failed"])[-1]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--python", help="the environment to measure in (default: this Python)")
    ap.add_argument("--models", default="resnet18,transformer")
    ap.add_argument("--seconds", type=float, default=3.0, help="per plain run (three runs per variant)")
    args = ap.parse_args()
    python = args.python or sys.executable
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for model in args.models.split(","):
            before = load()
            data, wall = bench(model, args.python, folder / f"{model}.json")
            metrics = data["bench_run"]["metrics"]
            from cpudoctor.render.infer import text_lines

            print("\n".join(text_lines(metrics)), flush=True)       # the lab's own table, for the record
            decision = next((d for d in metrics.get("decisions") or [] if d.get("batch") == 1), {})
            name = decision.get("variant") or decision.get("best_measured")
            variant = next((v for v in metrics.get("variants") or [] if v["name"] == name), None)
            point = next((p for p in (variant or {}).get("points") or [] if p["batch"] == 1), {})
            plain = [plain_run(model, variant, python, args.seconds, folder) for _ in range(3)] if variant else []
            p50s = [r["p50_ms"] for r in plain if "p50_ms" in r]
            med = statistics.median(p50s) if p50s else None
            lo, hi = point.get("latency_ms_lo"), point.get("latency_ms_hi")
            fresh = decision.get("fresh") or {}
            flo, fhi = fresh.get("latency_ms_lo"), fresh.get("latency_ms_hi")
            rows.append({
                "model": model, "wall_s": round(wall, 1), "budget_s": metrics.get("budget_s"),
                "verdict": decision.get("verdict"), "reason": decision.get("reason"), "variant": name,
                "lab_ms": point.get("latency_ms"), "lab_lo": lo, "lab_hi": hi,
                "fresh_ms": fresh.get("latency_ms"), "fresh_lo": flo, "fresh_hi": fhi,
                "fresh_processes": fresh.get("process_ms"), "fresh_skipped": decision.get("fresh_skipped"),
                "fresh_measured": [fresh.get("measured_ms_lo"), fresh.get("measured_ms_hi")],
                "drift": [fresh.get("drift_lo"), fresh.get("drift_hi")],
                "plain_ms": [round(x, 2) for x in p50s], "plain_median": round(med, 2) if med else None,
                "plain_within": sum(1 for x in p50s if flo is not None and flo <= x <= fhi),
                "within": (flo is not None and bool(p50s) and all(flo <= x <= fhi for x in p50s)),
                "within_lab": (lo is not None and med is not None and lo <= med <= hi),
                "others": (metrics.get("other_share") if "other_share" in metrics
                           else data["bench_run"]["metrics"].get("other_share")),
                "load_before": round(before, 2), "load_after": round(load(), 2),
                "errors": [r["error"] for r in plain if "error" in r],
                "measured": sum(1 for v in metrics.get("variants") or [] if v.get("points")),
            })
    print(f"{'model':<12} {'wall':>6} {'verdict':<13} {'variant':<18} {'new processes ms [spread]':<27} "
          f"{'plain ms (3 runs)':<20} {'within':<8} {'lab ms [spread]':<22} {'others':>7} {'load':>10}")
    for r in rows:
        lab = f"{r['lab_ms']} [{r['lab_lo']}–{r['lab_hi']}]" if r["lab_ms"] else "-"
        fresh = f"{r['fresh_ms']} [{r['fresh_lo']}–{r['fresh_hi']}]" if r["fresh_ms"] else "-"
        others = f"{r['others'] * 100:.0f} %" if isinstance(r["others"], (int, float)) else "-"
        print(f"{r['model']:<12} {r['wall_s']:>5.1f}s {str(r['verdict']):<13} {str(r['variant']):<18} {fresh:<27} "
              f"{', '.join(map(str, r['plain_ms'])):<20} {r['plain_within']}/{len(r['plain_ms']):<6} {lab:<22} "
              f"{others:>7} {r['load_before']:>4}->{r['load_after']:<4}")
        if r["fresh_ms"]:
            print(f"{'':<12} new processes alone: {r['fresh_measured'][0]}–{r['fresh_measured'][1]} ms; drift over the "
                  f"rounds ×{r['drift'][0]}–×{r['drift'][1]}")
        if r["fresh_skipped"]:
            print(f"{'':<12} not measured in new processes: {r['fresh_skipped']}")
        print(f"{'':<12} {r['measured']} variants measured; {r['reason'] or 'recommended'}"
              + (f"; plain script failed: {r['errors']}" if r["errors"] else ""))
    print(json.dumps(rows, indent=1), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
