"""What does the job-state probe cost a job? Steps per second with and without it, interleaved pairs, median.

``cpudoctor run`` loads its probe into a Python job as the job's sitecustomize (probes/process/jobprobe.py). Here
the job runs exactly as ``run`` would start it, with the probe's environment (ProbeChannel.open), and plain,
without the rest of ``run`` (no stack sampler, no oneDNN verbose output), so the difference is the probe's alone.
Pairs run back to back in alternating order (plain first, then probed first) so a change of the machine's load
hits both sides alike; for each pair the ratio probed / plain; printed: the median slowdown, its spread, and how
many CPUs other programs used meanwhile (/proc/stat less the job's own CPU time).

The job is tests/jobs/healthy.py (an MLP training loop: optimizer steps, a forward per step) or, with ``--job``,
any job of tests/jobs that prints ``steps_per_s=`` (tiny_threads: 20 forward calls of a tiny model per step, the
probe's worst case per step).

Also the job's own CPU time per step (tests/jobs/_loop.py prints it), which other programs' load moves less.
For a figure on a shared machine run it in its own autogroup at a higher priority, both sides alike:

    setsid bash -c 'echo -15 > /proc/$$/autogroup; exec python benchmarks/probe_overhead.py --pairs 5'

Run: python benchmarks/probe_overhead.py --pairs 3 --seconds 60 [--job tiny_threads] [--nice -15]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
JOBS = REPO / "tests" / "jobs"


def machine_busy() -> tuple[int, int]:
    with open("/proc/stat", encoding="ascii") as fh:
        vals = [int(v) for v in fh.readline().split()[1:9]]
    idle = vals[3] + vals[4]
    return sum(vals) - idle, sum(vals)


def figure(text: str, name: str) -> float | None:
    """``steps_per_s`` or ``cpu_ms_per_step`` as the job printed it (tests/jobs/_loop.py)."""
    for line in text.splitlines():
        if line.startswith(f"{name}="):
            return float(line.split("=", 1)[1])
    if name == "steps_per_s":
        raise RuntimeError(f"the job printed no steps_per_s line:\n{text[-2000:]}")
    return None


def one(job: str, seconds: float, probed: bool) -> tuple[float, float | None, float, int]:
    """(steps per second, the job's CPU ms per step, CPUs other programs used meanwhile, lines the probe wrote)."""
    from cpudoctor.probes.process.jobprobe import ProbeChannel

    argv = [sys.executable, str(JOBS / f"{job}.py"), "--seconds", str(seconds)]
    env = {k: v for k, v in os.environ.items() if not k.startswith("CPUDOCTOR_")}
    channel = None
    if probed:
        env, channel, why = ProbeChannel.open(argv, env)
        assert channel is not None, why
    b0, t0 = machine_busy()
    c0 = os.times()
    w0 = time.monotonic()
    out = subprocess.run(argv, cwd=JOBS, env=env, capture_output=True, text=True, check=True).stdout
    wall = time.monotonic() - w0
    c1 = os.times()
    b1, t1 = machine_busy()
    lines = 0
    if channel is not None:
        lines = channel.out.read_bytes().count(b"\n") if channel.out.exists() else 0
        state = channel.read(None)
        assert state.loaded, state.why_not
    busy = (b1 - b0) / max(1, t1 - t0) * (os.cpu_count() or 1)
    mine = (c1.children_user + c1.children_system - c0.children_user - c0.children_system) / wall
    return figure(out, "steps_per_s"), figure(out, "cpu_ms_per_step"), max(0.0, busy - mine), lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--job", default="healthy")
    ap.add_argument("--nice", type=int, default=0, help="run everything at this niceness (both sides alike)")
    a = ap.parse_args()
    if a.nice:
        os.nice(a.nice)
    ratios, cpu_ratios, others, lines = [], [], [], []
    print(f"{a.pairs} pairs of {a.job}.py for {a.seconds:g} s, plain vs with the job-state probe, order alternating")
    for i in range(a.pairs):
        got, cpu = {}, {}
        for probed in ((False, True) if i % 2 == 0 else (True, False)):
            steps, cpu_ms, other, written = one(a.job, a.seconds, probed)
            got[probed], cpu[probed] = steps, cpu_ms
            others.append(other)
            if probed:
                lines.append(written)
            print(f"  pair {i + 1}: {'probed' if probed else 'plain '} {steps:9.2f} steps/s, "
                  f"{cpu_ms if cpu_ms is not None else float('nan'):8.3f} CPU ms a step  "
                  f"(other programs: {other:.2f} CPUs)", flush=True)
        ratios.append(got[True] / got[False])
        if cpu[True] and cpu[False]:
            cpu_ratios.append(cpu[True] / cpu[False])
    slow = [(1 - r) * 100 for r in ratios]
    print(f"slowdown (steps/s): median {statistics.median(slow):.1f} %  (min {min(slow):.1f} %, max {max(slow):.1f} %; "
          f"over {len(slow)} pairs)")
    if cpu_ratios:
        more = [(r - 1) * 100 for r in cpu_ratios]
        print(f"the job's CPU time a step: median {statistics.median(more):+.1f} %  (min {min(more):+.1f} %, max "
              f"{max(more):+.1f} %): what the job spent itself, whatever others did")
    print(f"other programs used {statistics.median(others):.2f} CPUs (median; max {max(others):.2f}) of "
          f"{os.cpu_count()}; the probe wrote {statistics.median(lines):.0f} lines per run (median)")


if __name__ == "__main__":
    main()
