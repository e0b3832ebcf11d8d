"""How long the CPU probe and its optional checks take (medians, not a test).

    .venv/bin/python benchmarks/cpu_probe_speed.py

probe_cpu reads /proc/cpuinfo and a few sysfs files; it must stay far below
the ~1.3 s py-cpuinfo needs, because the GUI calls it at start-up. The CPUID
cross-check is a child Python and only runs for ``cpudoctor report`` without
``--fast``.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO.parent / "shared" / "corpus" / "machines"


def median_ms(fn, n: int) -> float:
    times = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1000


def main() -> None:
    from cpudoctor.probes import probe_cpu
    from cpudoctor.probes.cpu.cpuid_check import run_child

    probe_cpu(Path("/"))  # warm the JSON resource cache, as a running app would be
    print(f"probe_cpu(/)                         {median_ms(lambda: probe_cpu(Path('/')), 50):8.2f} ms")
    big = CORPUS / "hwloc-128arm-2pa2n8cluster4co"
    if big.is_dir():
        print(f"probe_cpu(128-CPU Kunpeng tree)      {median_ms(lambda: probe_cpu(big), 20):8.2f} ms")
    hybrid = CORPUS / "hwloc-20em64t-hybrid-1p6c2t+2ca4co1t"
    if hybrid.is_dir():
        print(f"probe_cpu(20-CPU tree with cpufreq)  {median_ms(lambda: probe_cpu(hybrid), 20):8.2f} ms")
    print(f"CPUID/XGETBV child (run_child)       {median_ms(run_child, 5):8.2f} ms")
    cmd = [sys.executable, "-m", "cpudoctor", "report", "--fast", "--format", "json"]
    print(f"cpudoctor report --fast (process)    {median_ms(lambda: subprocess.run(cmd, capture_output=True), 3):8.2f} ms")
    pycpuinfo = [sys.executable, "-c", "import cpuinfo; cpuinfo.get_cpu_info()"]
    print(f"py-cpuinfo get_cpu_info (process)    {median_ms(lambda: subprocess.run(pycpuinfo, capture_output=True), 3):8.2f} ms")


if __name__ == "__main__":
    main()
