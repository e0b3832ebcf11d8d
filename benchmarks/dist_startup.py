"""Start-up time of the standalone app (``make dist``): the CLI and the window's first paint.

    python benchmarks/dist_startup.py [--app dist/cpudoctor/cpudoctor] [--runs 7]

Three figures, each the median of ``--runs`` cold-ish starts (the page cache is
warm after the first; nothing else is cached between runs):

* ``report --fast``: from starting the process to its exit with the JSON written;
* window, offscreen: from start until ``--screenshot`` (delay 0) has written the
  first painted frame of the window (``QT_QPA_PLATFORM=offscreen``);
* window, Xvfb: from start until the window is mapped on a virtual X display
  (``xdotool search --sync --onlyvisible``), when Xvfb and xdotool are installed.

The load average and the CPUs this process may use are printed too: on a
shared 2-core machine other work inflates every wall-clock figure, so the CPU
time the app itself used (user + system, all its processes) is printed beside
each: that part does not depend on what else runs. No assertion: speed is
measured here, never in tests.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _wait_for_file(path: Path, proc: subprocess.Popen, timeout: float = 60.0) -> float | None:
    start = time.perf_counter()
    while time.perf_counter() - start < timeout:
        if path.exists() and path.stat().st_size > 0:
            return time.perf_counter()
        if proc.poll() is not None and not path.exists():
            return None
        time.sleep(0.005)
    return None


def time_report(app: list[str], tmp: Path) -> float:
    out = tmp / "r.json"
    start = time.perf_counter()
    subprocess.run([*app, "report", "--fast", "-o", str(out)], check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def time_offscreen(app: list[str], tmp: Path, i: int) -> float | None:
    shot = tmp / f"shot-{i}.png"
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen"}
    start = time.perf_counter()
    proc = subprocess.Popen([*app, "--screenshot", str(shot), "--screenshot-delay", "0", "--no-children"],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    done = _wait_for_file(shot, proc)
    proc.wait(timeout=60)
    return None if done is None else done - start


def time_xvfb(app: list[str], display: str) -> float | None:
    env = {**os.environ, "DISPLAY": display}
    env.pop("QT_QPA_PLATFORM", None)
    env.pop("WAYLAND_DISPLAY", None)
    start = time.perf_counter()
    proc = subprocess.Popen([*app, "--no-children"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        found = subprocess.run(["xdotool", "search", "--sync", "--onlyvisible", "--name", "CPU Doctor"], env=env,
                               capture_output=True, timeout=60)
        mapped = time.perf_counter() if found.returncode == 0 else None
    except subprocess.TimeoutExpired:
        mapped = None
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    return None if mapped is None else mapped - start


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _measure(run, runs: int) -> str:
    """Median wall time of ``run()`` and the median CPU time its (reaped) processes used."""
    walls, cpus = [], []
    for i in range(runs):
        before = _cpu_seconds()
        walls.append(run(i))
        cpus.append(_cpu_seconds() - before)
    ok = [v for v in walls if v is not None]
    if not ok:
        return "n/a"
    return (f"{statistics.median(ok):.2f} s (min {min(ok):.2f}, max {max(ok):.2f}, {len(ok)} runs); "
            f"CPU {statistics.median(cpus):.2f} s")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--app", default=str(REPO / "dist" / "cpudoctor" / "cpudoctor"), help="the program to time")
    p.add_argument("--runs", type=int, default=7)
    p.add_argument("--no-xvfb", action="store_true")
    args = p.parse_args()
    app = [args.app]
    if not Path(args.app).exists() and shutil.which(args.app) is None:
        print(f"{args.app} does not exist: run `make dist` first", file=sys.stderr)
        return 2
    print(f"app: {args.app}")
    print(f"CPUs usable: {len(os.sched_getaffinity(0))}, load average before: {os.getloadavg()}")
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        time_report(app, tmp)                                   # warm the page cache once
        print("report --fast       :", _measure(lambda i: time_report(app, tmp), args.runs))
        print("window, offscreen   :", _measure(lambda i: time_offscreen(app, tmp, i), args.runs))
        if not args.no_xvfb and shutil.which("Xvfb") and shutil.which("xdotool"):
            display = ":97"
            xvfb = subprocess.Popen(["Xvfb", display, "-screen", "0", "1280x900x24", "-nolisten", "tcp"],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            try:
                time.sleep(1.0)
                print("window, Xvfb (mapped):", _measure(lambda i: time_xvfb(app, display), args.runs))
            finally:
                xvfb.terminate()
                xvfb.wait(timeout=10)
        else:
            print("window, Xvfb        : skipped (needs Xvfb and xdotool)")
    print(f"load average after: {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
