"""What watching costs (issue 36 item 5): a job's steps per second bare, under `cpudoctor run` with its verbose lines
off (the sampler's cost alone), on all along (today's default), and on for windows only (the job's probe switching
them: benchmarks/_windowed.py installs the hook as the probe will), in interleaved rounds (the order reversed each
round), medians; and the share of the job's samples the libraries' printing took (counted apart as
instrumentation). Jobs: tests/jobs/small_ops.py (dozens of tiny oneDNN calls a step) and tests/jobs/mlp_batch8.py
(tiny oneMKL GEMMs), on one thread, so the job's CPU time per step (what it spent itself, whatever other programs
did) measures the cost; steps per second beside it.

Run: python benchmarks/verbose_cost.py [ROUNDS] [SECONDS]
"""

from __future__ import annotations

import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
JOBS = ROOT / "tests" / "jobs"
WINDOWS = "on=1,every=3,first=1"


def variants(job: Path, seconds: str) -> dict[str, tuple[list[str], dict[str, str]]]:
    run = [sys.executable, "-m", "cpudoctor", "run", "--roof", "none", "--format", "json", "-o", "{out}"]
    py = [sys.executable, str(job), "--seconds", seconds]
    return {
        "bare": (py, {}),
        "run, lines off": (run + ["--", *py], {"ONEDNN_VERBOSE": "0", "MKL_VERBOSE": "0"}),
        "run, lines on": (run + ["--", *py], {}),
        f"run, windows {WINDOWS}": (run + ["--verbose-windows", WINDOWS, "--", sys.executable,
                                           str(ROOT / "benchmarks" / "_windowed.py"), str(job), "--seconds", seconds],
                                    {}),
    }


def once(argv: list[str], extra: dict[str, str]) -> tuple[float | None, float | None, float | None, int]:
    """(steps/s, the job's CPU ms per step, instrumentation share of the job's samples, verbose lines kept)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ONEDNN_", "MKL_VERBOSE", "OMP_"))}
    env.update(extra, OMP_NUM_THREADS="1")      # one thread: CPU time per step is the job's own work
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "run.json"
        argv = [a.replace("{out}", str(out)) for a in argv]
        proc = subprocess.run(argv, cwd=JOBS, env=env, capture_output=True, text=True, timeout=300)
        m = re.search(r"steps_per_s=([\d.]+)", proc.stdout)
        cpu = re.search(r"cpu_ms_per_step=([\d.]+)", proc.stdout)
        share, lines = None, 0
        if out.exists():
            data = json.loads(out.read_text())
            bd = data.get("breakdown") or {}
            n = bd.get("instrumentation_samples") or 0
            share = n / ((bd.get("samples") or 0) + n) if (bd.get("samples") or 0) + n else None
            k = data.get("kernels") or {}
            lines = sum(g.get("count", 0) for g in (k.get("onednn") or {}).get("groups", [])) + \
                ((k.get("mkl") or {}).get("calls") or 0)
        return (float(m.group(1)) if m else None), (float(cpu.group(1)) if cpu else None), share, lines


def main(rounds: int = 3, seconds: str = "4") -> None:
    for name in ("small_ops.py", "mlp_batch8.py"):
        table = variants(JOBS / name, seconds)
        rates: dict[str, list[float]] = {k: [] for k in table}
        cpus: dict[str, list[float]] = {k: [] for k in table}
        shares: dict[str, list[float]] = {k: [] for k in table}
        lines: dict[str, list[int]] = {k: [] for k in table}
        order = list(table)
        loads = []
        for r in range(rounds):
            for key in order if r % 2 == 0 else list(reversed(order)):
                rate, cpu, share, n = once(*table[key])
                if rate is not None:
                    rates[key].append(rate)
                if cpu is not None:
                    cpus[key].append(cpu)
                if share is not None:
                    shares[key].append(share)
                lines[key].append(n)
                loads.append(os.getloadavg()[0])
        bare = statistics.median(cpus["bare"]) if cpus["bare"] else None
        print(f"{name}: 1 thread, {rounds} interleaved rounds of {seconds} s, load average "
              f"{min(loads):.1f}..{max(loads):.1f} on {os.cpu_count()} CPUs")
        print(f"  {'variant':<30} {'steps/s':>8} {'CPU ms/step':>12} {'x bare':>7} {'instrumentation':>16} {'lines':>7}")
        for key in order:
            rate = statistics.median(rates[key]) if rates[key] else 0.0
            cpu = statistics.median(cpus[key]) if cpus[key] else None
            of = f"{cpu / bare:.2f}" if cpu and bare else "?"
            sh = f"{statistics.median(shares[key]) * 100:.1f} %" if shares[key] else "-"
            print(f"  {key:<30} {rate:>8.1f} {cpu or 0:>12.3f} {of:>7} {sh:>16} {int(statistics.median(lines[key])):>7}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 3, sys.argv[2] if len(sys.argv) > 2 else "4")
