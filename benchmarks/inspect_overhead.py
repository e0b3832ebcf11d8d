"""How much does inspecting cost? Per-sample /proc reads, live-marker polls and the picker list.

Starts a child with N idle threads (python threading), then times, with
medians over repeats: one sample of every thread's stat (what the sampler does
each interval), one ThreadTracker.poll (the topology map's live markers), and
one /proc scan for the process list. Run: python benchmarks/inspect_overhead.py
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time

from cpudoctor.probes.process import procfs
from cpudoctor.probes.process.inspect import ThreadTracker, _snapshot

CHILD = """
import threading, time, sys
n = int(sys.argv[1])
ev = threading.Event()
for _ in range(n - 1):
    threading.Thread(target=ev.wait, daemon=True).start()
print('ready', flush=True)
time.sleep(120)
"""


def median_ms(fn, repeats: int = 50) -> float:
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1000)
    return statistics.median(times)


def main() -> None:
    from pathlib import Path

    root = Path("/")
    print(f"{'threads':>8} {'sample ms':>10} {'poll ms':>8}")
    for n in (1, 16, 64, 256):
        proc = subprocess.Popen([sys.executable, "-c", CHILD, str(n)], stdout=subprocess.PIPE, text=True)
        proc.stdout.readline()
        try:
            tracker = ThreadTracker(proc.pid)
            sample = median_ms(lambda: procfs.read_task_stats(root, proc.pid))
            poll = median_ms(tracker.poll)
            print(f"{n:>8} {sample:>10.2f} {poll:>8.2f}")
        finally:
            proc.kill()
            proc.wait()
    npids = len(procfs.list_pids(root))
    print(f"process-list /proc scan ({npids} processes): {median_ms(lambda: _snapshot(root), 20):.2f} ms")


if __name__ == "__main__":
    main()
