"""Issue 36's first check: a GEMM of known size, its achieved GFLOP/s from the verbose lines against the same GEMM
timed directly, in the same job through `cpudoctor run`'s own pipeline (its filter and parsers).

tests/jobs/known_gemm.py alternates calls one by one between the verbose lines off (timed by perf_counter) and on
(timed by oneMKL for fp32, oneDNN for bf16), so both halves see the same load; this prints, per setting and round,
the two medians, their ratio, and the load average beside them (a shared machine changes the rates, not the ratio).

Run: python benchmarks/gemm_agreement.py [ROUNDS]
"""

from __future__ import annotations

import io
import os
import re
import statistics
import sys
from pathlib import Path

from cpudoctor.probes.process.observe import JobRun

JOB = Path(__file__).resolve().parents[1] / "tests" / "jobs" / "known_gemm.py"
SETTINGS = (("fp32", 512), ("fp32", 1024), ("bf16", 1024))


def verbose_rates(obs, dtype: str, n: int) -> list[float]:
    """GFLOP/s of each n x n x n call as its library's verbose line timed it."""
    if dtype == "fp32":
        return [c.flop / c.time_ms / 1e6 for c in obs.mkl.calls if c.dims == (n, n, n) and c.time_ms > 0]
    shape = f"{n}x{n}:{n}x{n}"
    return [p.flop / p.time_ms / 1e6 for p in obs.onednn.primitives
            if p.kind == "matmul" and p.problem == shape and p.time_ms]


def measure(dtype: str, n: int, seconds: float = 2.0) -> tuple[float, float, int, int]:
    out = io.BytesIO()
    job = JobRun([sys.executable, str(JOB), "--seconds", str(seconds), "--dtype", dtype, "--n", str(n)],
                 stdout=out, stderr=io.BytesIO(), sample=False, cwd=str(JOB.parent))
    job.start()
    obs = job.wait()
    m = re.search(r"calls=(\d+) median_gflops=([\d.]+)", out.getvalue().decode())
    rates = verbose_rates(obs, dtype, n)
    if m is None or not rates:
        raise SystemExit(f"{dtype} n={n}: the job printed no figure or no verbose line ({obs.exit_code})")
    return float(m.group(2)), statistics.median(rates), int(m.group(1)), len(rates)


def main(rounds: int = 3) -> None:
    print(f"{'dtype':5} {'n':>5} {'direct':>10} {'verbose':>10} {'ratio':>6} {'calls':>9}  load avg")
    ratios = []
    for r in range(rounds):
        for dtype, n in SETTINGS:
            direct, verbose, nd, nv = measure(dtype, n)
            ratios.append(verbose / direct)
            load = os.getloadavg()[0]
            print(f"{dtype:5} {n:>5} {direct:>10.1f} {verbose:>10.1f} {verbose / direct:>6.3f} {nd:>4}/{nv:<4}  "
                  f"{load:.1f} (round {r + 1})")
    print(f"ratio verbose/direct: median {statistics.median(ratios):.3f}, range {min(ratios):.3f}..{max(ratios):.3f}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 3)
