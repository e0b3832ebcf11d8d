"""The lab's headline numbers on this machine: default durations, same-job ratios, GEMM utilisation.

Each benchmark runs exactly as a user types it (``cpudoctor bench JOB --json``,
defaults unless ``--quick``), timed from the outside (start-up included, the
bar is 60 s on 2 cores). Reported with each: the share of the CPUs other
programs took while it measured, since on a shared machine that is half the
story.

* train: fp32 default run, and a bf16 run with its fp32 comparison from the same job;
* sweep: the verdict and its reason;
* gemm: GFLOP/s and % of the theoretical peak per backend and thread count, emulated paths marked;
* quant: int8 vs fp32 speed-up per batch size, the quantisation API used.

    python benchmarks/lab_numbers.py [--quick] [--json]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

LIMIT_S = 60.0


def bench(*argv: str) -> tuple[float, dict]:
    started = time.monotonic()
    out = subprocess.run([sys.executable, "-m", "cpudoctor", "bench", *argv, "--json", "--quiet"],
                         capture_output=True, text=True, timeout=600)
    wall = time.monotonic() - started
    try:
        return wall, json.loads(out.stdout)
    except json.JSONDecodeError:
        return wall, {"status": "error", "message": out.stderr.strip().splitlines()[-1:] or ["no output"]}


def share(metrics: dict) -> float | None:
    return metrics.get("other_share")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="short runs instead of the defaults")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    quick = ["--seconds", "4"] if a.quick else []
    runs = {
        "train fp32": ["train", *quick],
        "train bf16": ["train", "--dtype", "bf16", *quick],
        "sweep": ["sweep", *(["--budget", "20"] if a.quick else [])],
        "gemm": ["gemm"],
        "quant": ["quant"],
    }
    report: dict[str, dict] = {}
    for name, argv_ in runs.items():
        print(f"{name} ...", file=sys.stderr)
        wall, out = bench(*argv_)
        m = (out.get("bench_run") or {}).get("metrics") or {}
        row = {"wall_s": round(wall, 1), "within_limit": wall <= LIMIT_S, "status": out.get("status"),
               "other_share": share(m)}
        if name.startswith("train"):
            row.update(samples_per_s=m.get("samples_per_s"), spread=[m.get("samples_per_s_lo"), m.get("samples_per_s_hi")],
                       fp32_same_job=m.get("fp32_samples_per_s"), ratio=m.get("bf16_vs_fp32"),
                       why=m.get("precision_note"))
        elif name == "sweep":
            row.update(verdict=m.get("verdict"), reason=m.get("reason"), rounds=m.get("rounds"),
                       recommendation=(out.get("recommendation") or {}).get("variant"))
        elif name == "gemm":
            row.update(points=[{k: p.get(k) for k in ("backend", "threads", "size", "gflops", "gflops_lo", "gflops_hi",
                                                      "utilisation", "emulated", "other_share")}
                               for p in m.get("points") or []], notes=m.get("peak_notes"))
        else:
            row.update(speedups={p["batch"]: p.get("speedup") for p in m.get("points") or []}, api=m.get("api"),
                       why=m.get("vnni_note"), hidden=m.get("hidden"))
        report[name] = row
    if a.json:
        print(json.dumps(report, indent=2))
    else:
        for name, row in report.items():
            others = "?" if row["other_share"] is None else f"{row['other_share'] * 100:.0f} %"
            print(f"{name:<11} {row['wall_s']:>6.1f} s ({'within' if row['within_limit'] else 'OVER'} {LIMIT_S:.0f} s), "
                  f"others took {others}")
            for k in ("samples_per_s", "fp32_same_job", "ratio", "why", "verdict", "reason", "speedups", "api"):
                if row.get(k) is not None:
                    print(f"    {k}: {row[k]}")
            for p in row.get("points") or []:
                util = "-" if p["utilisation"] is None else f"{p['utilisation'] * 100:.0f} %"
                print(f"    {p['backend']:<11} x{p['threads']} n={p['size']}: {p['gflops']:,.1f} GFLOP/s "
                      f"({p['gflops_lo']}–{p['gflops_hi']}), {util} of peak{' (emulated)' if p['emulated'] else ''}")
    return 0 if all(r["within_limit"] for r in report.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
