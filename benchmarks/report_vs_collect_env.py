"""How long the software probe takes next to PyTorch's own ``collect_env``.

Runs, interleaved so machine load hits both alike:
  * ``python -m torch.utils.collect_env`` (a fresh process, as users run it);
  * the full software probe in a fresh process, cache off (``python -c ...``);
  * the full software probe in this process, cache off (what the GUI pays the first time);
  * the full software probe in this process with a warm cache (every later time);
  * the quick part (``children=False``) in this process.
Prints medians and the ratios probe / collect_env. Usage:

    .venv/bin/python benchmarks/report_vs_collect_env.py [--reps 5]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from cpudoctor.probes import probe_software

PROBE_CODE = "from cpudoctor.probes.software.stack import probe_software; probe_software(cache=False)"


def timed_subprocess(argv: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - start


def timed_call(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args()
    try:
        import importlib.metadata as md

        md.version("torch")
    except Exception:  # noqa: BLE001
        print("torch is not installed here, so there is no collect_env to compare with", file=sys.stderr)
        return 2

    runs: dict[str, list[float]] = {"collect_env (process)": [], "probe, full (process)": [],
                                    "probe, full (in-process)": [], "probe, warm cache": [],
                                    "probe, quick (in-process)": []}
    cache = Path(tempfile.mkdtemp(prefix="cpudoctor-bench-"))
    # One warm-up of each, so the page cache is equally warm for both (and the probe cache is filled).
    timed_subprocess([sys.executable, "-m", "torch.utils.collect_env"])
    probe_software(cache=cache)
    for _ in range(args.reps):
        runs["collect_env (process)"].append(timed_subprocess([sys.executable, "-m", "torch.utils.collect_env"]))
        runs["probe, full (process)"].append(timed_subprocess([sys.executable, "-c", PROBE_CODE]))
        runs["probe, full (in-process)"].append(timed_call(lambda: probe_software(cache=False)))
        runs["probe, warm cache"].append(timed_call(lambda: probe_software(cache=cache)))
        runs["probe, quick (in-process)"].append(timed_call(lambda: probe_software(children=False)))

    base = statistics.median(runs["collect_env (process)"])
    print(f"{'run':28} {'median s':>9} {'min s':>7} {'max s':>7} {'ratio':>7}")
    for name, times in runs.items():
        med = statistics.median(times)
        print(f"{name:28} {med:9.3f} {min(times):7.3f} {max(times):7.3f} {med / base:7.2f}")
    print(f"({args.reps} repetitions each, interleaved; ratio = median / collect_env median)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
