"""The slow jobs of the test suite, quiet and beside two busy loops: the cause named, the fix applied, the problem gone.

For every job of tests/jobs set up wrong in one way (and the healthy one), ``cpudoctor run`` runs it three
times: as it is on the machine as it is ("quiet": no load added), with the fix its finding prints applied, and
as it is beside two busy loops of other programs. One row per job: whether the finding of its cause came (and
at what severity), whether it went with the fix, the job's own steps per second before and after, whether it
came beside the loops, the job's other warnings, and the CPUs other programs used in each run (a figure
without it says little on a shared machine). The healthy job's row counts its own warnings (the machine's,
PROC013/PROC014, apart).

Run: python benchmarks/job_state_table.py [--seconds 4] [--only JOB,...]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
JOBS = REPO / "tests" / "jobs"
MACHINE = ("PROC013", "PROC014")


@dataclass
class Case:
    job: str
    codes: tuple[str, ...]                 # the finding of its cause (any of them); () for the healthy job
    env: dict[str, str] = field(default_factory=dict)
    fixed_args: tuple[str, ...] = ("--fixed",)
    fixed_env: dict[str, str] | None = None     # the environment with the fix (None: the same as ``env``)
    note: str = ""


def cases() -> list[Case]:
    ncpu = str(len(os.sched_getaffinity(0)))
    with open("/proc/cpuinfo", encoding="utf-8") as fh:
        flags = next((line.split(":", 1)[1].split() for line in fh if line.startswith("flags")), [])
    cap = "AVX2" if "avx512f" in flags else "SSE41"
    return [
        Case("healthy", ()),
        Case("tiny_threads", ("EVID001",), fixed_args=(), fixed_env={"OMP_NUM_THREADS": "1"}),
        Case("data_wait", ("EVID002",), fixed_args=("--fixed", "--workers", "2")),
        Case("recompile", ("EVID003",)),
        Case("confined", ("EVID004",), env={"OMP_PROC_BIND": "true"}, fixed_args=(), fixed_env={}),
        Case("pool_threads", ("EVID005",)),
        Case("python_loop", ("EVID006",)),
        Case("conv", ("EVID007",), env={"ONEDNN_MAX_CPU_ISA": cap}, fixed_args=(), fixed_env={},
             note=f"oneDNN capped to {cap}"),
        Case("float64", ("EVID010",)),
        Case("anomaly", ("EVID011",)),
        Case("threads_in_code", ("EVID013",), fixed_args=("--threads", ncpu)),
        Case("bind_in_code", ("EVID004", "EVID014")),
        Case("workers_exceed", ("EVID015",), fixed_args=("--workers", ncpu)),
        # serving loops (requests of one sample; steps/s are requests per second)
        Case("serve_grad", ("EVID016",)),
        Case("serve_threads", ("EVID025",), fixed_args=("--threads", "1")),
        Case("serve_reload", ("EVID026",)),
        Case("serve_compile", ("EVID027",)),
    ]


def run(job: str, args: tuple[str, ...], env: dict[str, str], seconds: float) -> dict:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("OMP_", "MKL_", "ONEDNN_", "KMP_"))}
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "run.json"
        proc = subprocess.run([sys.executable, "-m", "cpudoctor", "run", "--rate", "25", "--format", "json", "-o",
                               str(out), "--", sys.executable, str(JOBS / f"{job}.py"), "--seconds", str(seconds),
                               *args], cwd=JOBS, env={**clean, **env}, capture_output=True, text=True, timeout=600)
        data = json.loads(out.read_text())
    steps = next((float(line.split("=", 1)[1]) for line in proc.stdout.splitlines() if line.startswith("steps_per_s=")),
                 None)
    return {"findings": {f["code"]: f["severity"] for f in data["findings"]}, "steps": steps,
            "others": (data.get("breakdown") or {}).get("others_cpus"),
            "verdict": (data.get("breakdown") or {}).get("verdict")}


def mark(r: dict, codes: tuple[str, ...]) -> str:
    hit = [f"{c} {r['findings'][c]}" for c in codes if c in r["findings"]]
    return hit[0] if hit else "-"


def own(r: dict, codes: tuple[str, ...]) -> list[str]:
    return sorted(c for c, s in r["findings"].items() if s in ("warning", "error") and c not in MACHINE + codes)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=4.0)
    ap.add_argument("--only", default="", help="comma-separated job names")
    a = ap.parse_args()
    chosen = [c for c in cases() if not a.only or c.job in a.only.split(",")]
    rows = []
    for c in chosen:
        before = run(c.job, (), c.env, a.seconds)
        after = run(c.job, c.fixed_args, c.env if c.fixed_env is None else c.fixed_env, a.seconds)
        loops = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
        try:
            busy = run(c.job, (), c.env, a.seconds)
        finally:
            for p in loops:
                p.kill()
                p.wait()
        rows.append((c, before, after, busy))
        print(f"{c.job}: quiet {before['findings']}, fixed {after['findings']}, busy {busy['findings']}", flush=True)
    print()
    print(f"{'job':<16} {'cause':<8} {'quiet':<18} {'fixed':<7} {'steps/s before -> after':<24} "
          f"{'busy (2 loops)':<18} {'own other warnings (quiet / busy)':<34} others CPUs q/f/b")
    for c, before, after, busy in rows:
        gone = "-" if not c.codes else ("gone" if not any(x in after["findings"] for x in c.codes) else "STAYS")
        steps = (f"{before['steps'] or 0:.1f} -> {after['steps'] or 0:.1f}" if c.codes
                 else f"{before['steps'] or 0:.1f}")
        others = "/".join(f"{r['others']:.1f}" if r["others"] is not None else "?" for r in (before, after, busy))
        warnings = f"{','.join(own(before, c.codes)) or 'none'} / {','.join(own(busy, c.codes)) or 'none'}"
        print(f"{c.job:<16} {'/'.join(c.codes) or '(none)':<8} {mark(before, c.codes) if c.codes else '-':<18} "
              f"{gone:<7} {steps:<24} {mark(busy, c.codes) if c.codes else '-':<18} {warnings:<34} {others}")


if __name__ == "__main__":
    main()
