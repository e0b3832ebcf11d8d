"""Export speed for a big machine (2 sockets, 192 cores, 384 threads): median of N runs per format.

Run: QT_QPA_PLATFORM=offscreen python benchmarks/bench_export.py [N]
The GUI renders on the thread pool, so these are latencies, not UI stalls.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from cpudoctor.export import render_export  # noqa: E402
from export_samples import epyc_topology, sample_report  # noqa: E402


def main(n: int = 7) -> None:
    report = sample_report()
    report.topology = epyc_topology(packages=2, ccx_per_pkg=12, cores_per_ccx=8, smt=2)
    render_export(report, "pdf")                     # warm up Qt and fonts once
    for fmt in ("json", "md", "html", "pdf"):
        times, size = [], 0
        for _ in range(n):
            t0 = time.perf_counter()
            size = len(render_export(report, fmt))
            times.append(time.perf_counter() - t0)
        print(f"{fmt:5s} median {statistics.median(times) * 1000:7.1f} ms  "
              f"(min {min(times) * 1000:.1f}, max {max(times) * 1000:.1f})  {size / 1024:7.1f} KiB")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 7)
