"""``run --verify`` on the suite's real slow jobs, one after another, each within the budget (issue 35's bar).

The jobs of tests/jobs set up wrong in a way a fix from outside the script can change, and the healthy one:

* ``tiny_threads``: a tiny model on every CPU's thread (fix: one thread);
* ``confined``: DataLoader workers forked onto the main thread's one CPU (started with ``OMP_PROC_BIND=true``;
  fix: unset the binding, choose CPUs with taskset);
* ``conv-capped``: convolutions with oneDNN capped below the CPU (``ONEDNN_MAX_CPU_ISA=AVX2``; fix: lift the cap);
* ``pinned``: a job whose main process narrows itself to its first CPU before it starts its workers
  (``pinned_children.py --who parent``: one CCX of two on a bigger machine); the fix is the script's line;
* ``pinned-launch``: the healthy job started by a launch line that pins it (``taskset -c 0 python healthy.py``):
  the user's own choice of CPUs, which CPU Doctor respects (no finding);
* ``healthy``: a mid-sized MLP; its report must say that no fix helps.

Printed per job: the wall time of the whole ``run --verify`` (diagnosis and verification), the verdict line, and
per checked finding its verdict, ratio and range, windows and the CPUs other programs took meanwhile.

    python benchmarks/verify_jobs.py [--budget 180] [--jobs tiny_threads,confined,...]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
JOBS = REPO / "tests" / "jobs"

# name -> (script, its arguments, variables it starts with, CPUs its launch line pins it to)
CASES: dict[str, tuple[str, list[str], dict[str, str], str | None]] = {
    "tiny_threads": ("tiny_threads.py", [], {}, None),
    "confined": ("confined.py", [], {"OMP_PROC_BIND": "true"}, None),
    "conv-capped": ("conv.py", [], {"ONEDNN_MAX_CPU_ISA": "AVX2"}, None),
    "pinned": ("pinned_children.py", ["--who", "parent"], {}, None),
    "pinned-launch": ("healthy.py", [], {}, "0"),
    "healthy": ("healthy.py", [], {}, None),
}


def run_verify(name: str, budget: float) -> tuple[dict, float]:
    script, extra, env_add, cpus = CASES[name]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMP_", "MKL_", "ONEDNN_", "KMP_", "GOMP_"))}
    env.update(env_add)
    pinned = ["taskset", "-c", cpus] if cpus else []             # the job's own launch line, CPU Doctor unpinned
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "run.json"
        argv = [sys.executable, "-m", "cpudoctor", "run", "--roof", "none", "--seconds", "10", "--verify",
                         "--yes", "--budget", str(budget), "--format", "json", "-o", str(out), "--",
                         *pinned, sys.executable, str(JOBS / script), "--seconds", "600", *extra]
        began = time.monotonic()
        proc = subprocess.run(argv, cwd=JOBS, env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL,
                              timeout=budget + 300)
        took = time.monotonic() - began
        if not out.exists():
            raise RuntimeError(f"{name}: run --verify wrote no report:\n{proc.stderr[-2000:]}")
        return json.loads(out.read_text()), took


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--budget", type=float, default=180.0)
    ap.add_argument("--jobs", default=",".join(CASES))
    args = ap.parse_args()
    print(f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}, budget {args.budget:g} s\n", flush=True)
    for name in args.jobs.split(","):
        data, took = run_verify(name, args.budget)
        ver = data.get("verification") or {}
        warned = [f["code"] for f in data["findings"] if f["severity"] in ("warning", "error")]
        print(f"{name}: {took:.0f} s in all; findings {', '.join(warned) or 'none'}; verify: {ver.get('headline')}")
        print(f"  metric {ver.get('metric')}, {ver.get('rounds')} rounds of {ver.get('window_s')} s windows")
        for c in ver.get("checks", []):
            ratio = c.get("ratio") or {}
            shown = (f"x{ratio['median']:.2f} (x{ratio['lo']:.2f}-x{ratio['hi']:.2f})"
                     if ratio.get("median") is not None else "")
            others = [w.get("other_share") for w in ver.get("windows", []) if w.get("variant") == c["code"]
                      and w.get("other_share") is not None]
            load = f", others took {min(others):.0%}-{max(others):.0%} of the CPUs" if others else ""
            print(f"  {c['code']:<8} {c['status']:<12} {shown:<22} {c.get('reason', '')[:110]}{load}")
        print(flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
