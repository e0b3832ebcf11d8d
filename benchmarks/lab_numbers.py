"""The lab's headline numbers on this machine, measured in interleaved rounds (medians).

* training samples/s: fp32 vs bf16 autocast (and channels_last), SimpleCNN, at 1 thread and
  at PyTorch's default thread count;
* GEMM GFLOP/s and % of the theoretical peak (see resources/peak_flops.json);
* dynamic int8 vs fp32 MLP latency at batch 1 and 64.

    python benchmarks/lab_numbers.py [--seconds 4] [--rounds 3] [--gemm-size 4096] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys

from cpudoctor.lab.runner import run_job


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=4.0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--gemm-size", type=int, default=4096)
    ap.add_argument("--model", default="simplecnn")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    variants = {
        f"{dt}{' channels_last' if cl else ''}, {'default' if t is None else t} thr": dict(dtype=dt, channels_last=cl, threads=t)
        for t in (1, None) for dt in ("fp32", "bf16") for cl in (False, True) if not (cl and dt == "bf16")
    }
    samples: dict[str, list[float]] = {k: [] for k in variants}
    for r in range(a.rounds):
        keys = list(variants) if r % 2 == 0 else list(reversed(variants))
        for k in keys:
            out = run_job("train", {"model": a.model, "seconds": a.seconds, "eval_samples": 0, **variants[k]},
                          timeout=a.seconds * 10 + 60)
            sps = (out.result or {}).get("samples_per_s")
            if sps:
                samples[k].append(sps)
            print(f"round {r + 1}: {k}: {sps and round(sps)} ({out.status})", file=sys.stderr)
    train = {k: {"median": statistics.median(v), "runs": v} for k, v in samples.items() if v}
    gemm = run_job("gemm", {"size": a.gemm_size, "min_seconds": 2.0}, timeout=1800)
    quant = run_job("quant", {"min_seconds": 2.0}, timeout=600)
    report = {"train_samples_per_s": train, "gemm": (gemm.result or {}).get("points"),
              "gemm_notes": (gemm.result or {}).get("peak_notes"), "gemm_machine": (gemm.result or {}).get("machine"),
              "quant": (quant.result or {}).get("points"), "vnni_note": (quant.result or {}).get("vnni_note")}
    if a.json:
        print(json.dumps(report, indent=2))
    else:
        for k, v in train.items():
            print(f"train {k:<28} {v['median']:>9,.0f} samples/s (median of {len(v['runs'])})")
        for p in report["gemm"] or []:
            util = f"{p['utilisation']:.0%}" if p.get("utilisation") is not None else "-"
            print(f"gemm  {p['backend']:<12} x{p['threads']:<3} {p['gflops']:>9,.1f} GFLOP/s  {util} of peak")
        for n in report["gemm_notes"] or []:
            print(f"      note: {n}")
        for p in report["quant"] or []:
            print(f"quant batch {p['batch']:<3} fp32 {p['fp32_ms']:.3f} ms  int8 {p['int8_ms']:.3f} ms  x{p['speedup']}")
        print(f"      {report['vnni_note']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
