"""What does watching a job cost it? Steps per second of a real training job, watched and not, interleaved.

Two measurements, each as pairs run back to back in alternating order (plain first, then watched first),
so that a change of the machine's load hits both sides of a pair alike:

- ``sample``: the job alone, then the job while ``TimeSampler`` samples it at the default rates (py-spy
  ``record --native`` at 50 Hz + /proc thread states at 10 Hz), as ``cpudoctor inspect PID`` does.
- ``run``: ``python job.py`` against ``cpudoctor run -- python job.py`` (everything ``run`` switches on:
  the sampler, ONEDNN_VERBOSE=profile_exec, TORCH_LOGS=+recompiles, the output filters).

The job is tests/jobs/healthy.py (an MLP training loop on MKL) or, with ``--job conv``, tests/jobs/conv.py
(convolutions: oneDNN prints a verbose line per primitive). It reports its own steps per second after a
warm-up step. For each pair: the ratio watched / plain; printed: the median slowdown, its spread (min and
max over pairs) and how many CPUs other programs used meanwhile (/proc/stat less the job), because a
measurement on a shared machine without its interference figure says little.

Run: python benchmarks/sampling_overhead.py --mode sample --pairs 6 --seconds 10 [--rate HZ] [--nice -15]
     python benchmarks/sampling_overhead.py --mode run --pairs 3 --seconds 60 [--nice -15]
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


def children_cpu() -> float:
    t = os.times()
    return t.children_user + t.children_system


def steps_of(text: str) -> float:
    for line in text.splitlines():
        if line.startswith("steps_per_s="):
            return float(line.split("=", 1)[1])
    raise RuntimeError(f"the job printed no steps_per_s line:\n{text[-2000:]}")


RATE = 50
WATCH_STOPS = False   # --stops: also poll the job's thread states (it costs CPU on the watched side only)
MECHANISM: list[tuple[float, float]] = []    # (share of the job's thread samples stopped by the sampler, sampler CPUs)


def _ticks(pid: int | None) -> int:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12])
    except (OSError, ValueError, IndexError, TypeError):
        return 0


class StopWatcher:
    """How often the job's running threads are found stopped by the sampler (state t), every 7 ms.

    This is the pause py-spy imposes to unwind native stacks: a share of the job's time that does not
    depend on what other programs do (they delay both sides alike).
    """

    def __init__(self, pid: int):
        import threading

        self.pid, self.stopped, self.seen = pid, 0, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(0.007):
            try:
                tids = os.listdir(f"/proc/{self.pid}/task")
            except OSError:
                return
            for tid in tids:
                try:
                    with open(f"/proc/{self.pid}/task/{tid}/stat", encoding="ascii") as fh:
                        state = fh.read().rsplit(")", 1)[1].split()[0]
                except (OSError, IndexError):
                    continue
                if state in ("R", "t"):
                    self.seen += 1
                    self.stopped += state == "t"

    def stopped_share(self) -> float:
        return self.stopped / self.seen if self.seen else 0.0


def one(job: str, seconds: float, watched: str | None) -> tuple[float, float]:
    """(steps per second, CPUs used by other programs meanwhile) of one run."""
    cmd = [sys.executable, str(JOBS / f"{job}.py"), "--seconds", str(seconds)]
    b0, t0 = machine_busy()
    c0 = children_cpu()
    w0 = time.monotonic()
    if watched == "run":
        out = subprocess.run([sys.executable, "-m", "cpudoctor", "run", "--rate", str(RATE), "-o", os.devnull, "--",
                              *cmd], cwd=JOBS,
                             capture_output=True, text=True, check=True).stdout
    elif watched == "sample":
        from cpudoctor.probes.process.timing import TimeSampler

        proc = subprocess.Popen(cmd, cwd=JOBS, stdout=subprocess.PIPE, text=True)
        sampler = TimeSampler(proc.pid, rate=RATE)
        sampler.start()
        stops = StopWatcher(proc.pid) if WATCH_STOPS else None
        if stops is not None:
            stops.start()
        pyspy = sampler.stacks.sampler_pid if sampler.stacks is not None else None
        spy_ticks = _ticks(pyspy)
        out = proc.communicate()[0]
        spy_ticks = _ticks(pyspy) - spy_ticks if pyspy else 0
        if stops is not None:
            stops.stop()
        sampler.stop()
        MECHANISM.append((stops.stopped_share() if stops is not None else float("nan"), spy_ticks / os.sysconf("SC_CLK_TCK") / max(1e-9, time.monotonic() - w0)))
    else:
        out = subprocess.run(cmd, cwd=JOBS, capture_output=True, text=True, check=True).stdout
    wall = time.monotonic() - w0
    b1, t1 = machine_busy()
    ncpu = os.cpu_count() or 1
    busy_cpus = (b1 - b0) / max(1, t1 - t0) * ncpu
    mine = (children_cpu() - c0) / wall
    return steps_of(out), max(0.0, busy_cpus - mine)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mode", choices=("sample", "run"), default="sample")
    ap.add_argument("--pairs", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--job", choices=("healthy", "conv"), default="healthy")
    ap.add_argument("--rate", type=int, default=None, help="stack samples a second (default: CPU Doctor's)")
    ap.add_argument("--nice", type=int, default=0,
                    help="run everything at this niceness (-15 as root keeps other programs on a shared machine "
                         "from drowning the difference; both sides of a pair alike)")
    ap.add_argument("--stops", action="store_true",
                    help="also report how often the job's threads are found stopped by the sampler (polls /proc "
                         "every 7 ms, which itself loads the watched side; off by default)")
    a = ap.parse_args()
    global RATE, WATCH_STOPS
    WATCH_STOPS = a.stops
    from cpudoctor.probes.process.stacks import DEFAULT_RATE, RUN_RATE

    RATE = a.rate or (RUN_RATE if a.mode == "run" else DEFAULT_RATE)
    if a.nice:
        os.nice(a.nice)
    ratios, others = [], []
    print(f"{a.mode}: {a.pairs} pairs of {a.job}.py for {a.seconds:g} s, plain vs watched at {RATE} Hz, "
          f"order alternating, nice {os.nice(0)}")
    for i in range(a.pairs):
        order = (None, a.mode) if i % 2 == 0 else (a.mode, None)
        got = {}
        for watched in order:
            steps, other = one(a.job, a.seconds, watched)
            got[watched] = steps
            others.append(other)
            print(f"  pair {i + 1}: {'watched' if watched else 'plain  '} {steps:8.2f} steps/s  "
                  f"(other programs: {other:.2f} CPUs)", flush=True)
        ratios.append(got[a.mode] / got[None])
    slow = [(1 - r) * 100 for r in ratios]
    print(f"slowdown: median {statistics.median(slow):.1f} %  (min {min(slow):.1f} %, max {max(slow):.1f} %; "
          f"over {len(slow)} pairs)")
    print(f"other programs used {statistics.median(others):.2f} CPUs (median; max {max(others):.2f}) "
          f"of {os.cpu_count()} during the runs")
    if MECHANISM:
        spy = statistics.median(m[1] for m in MECHANISM)
        ncpu = len(os.sched_getaffinity(0))
        print(f"the sampler (py-spy) used {spy:.3f} CPUs = {spy / ncpu * 100:.1f} % of the {ncpu} CPUs (median)")
        if WATCH_STOPS:
            stopped = statistics.median(m[0] for m in MECHANISM) * 100
            print(f"the job's runnable threads were found stopped by the sampler {stopped:.1f} % of the time "
                  "(median; an upper bound: a sleeping worker stopped with the others counts too)")


if __name__ == "__main__":
    main()
