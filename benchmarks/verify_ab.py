"""Does ``run --verify`` measure what a plain A/B measures? Both on the same job, the table side by side.

For each job of tests/jobs named (default: tiny_threads), first ``cpudoctor run --verify --format json`` runs it
(its diagnosis, then each fix that can be applied from outside measured in interleaved windows, rate from the
job's probe). Then, separately and without CPU Doctor, a plain A/B of the same job: the job unchanged and with
each fix --verify measured (its variables set and cleared, its CPUs bound, as the finding's snippet says:
advisor.fix_plans), run in alternating order (A B B A ...) for ``--seconds`` each, the rate being the steps per
second the job prints itself (tests/jobs/_loop.py: ``steps_per_s=``), so neither the probe nor the windows'
start-up are in it. Printed per fix: --verify's ratio (median, range over its rounds) and verdict, the plain
A/B's ratio (median, range over its pairs), and whether the two agree (the ranges overlap), with the load:
the CPUs other programs used meanwhile (/proc/stat less the job's own CPU time).

Run: python benchmarks/verify_ab.py [--jobs tiny_threads,conv] [--budget 180] [--pairs 3] [--seconds 15]
      [--env ONEDNN_MAX_CPU_ISA=AVX2 ...]   (variables the job starts with, e.g. conv's cap)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
JOBS = REPO / "tests" / "jobs"


def busy_ticks() -> tuple[int, int]:
    with open("/proc/stat", encoding="ascii") as fh:
        vals = [int(v) for v in fh.readline().split()[1:9]]
    return sum(vals) - vals[3] - vals[4], sum(vals)


def verify(job: str, env: dict[str, str], budget: float, seconds: float) -> dict:
    """``cpudoctor run --verify`` on the job: its JSON report."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "run.json"
        proc = subprocess.run([sys.executable, "-m", "cpudoctor", "run", "--roof", "none", "--seconds", "10",
                               "--verify", "--yes", "--budget", str(budget), "--format", "json", "-o", str(out), "--",
                               sys.executable, str(JOBS / f"{job}.py"), "--seconds", str(max(seconds, 60))],
                              cwd=JOBS, env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL,
                              timeout=budget + 300)
        if not out.exists():
            raise RuntimeError(f"run --verify wrote no report:\n{proc.stderr[-2000:]}")
        return json.loads(out.read_text())


def plans(report: dict) -> dict:
    """Each measured check's plan (its variables, cleared variables, CPUs), from the finding it verified."""
    from cpudoctor.advisor.fix_plans import plan_fix
    from cpudoctor.model import Finding

    findings = {f["code"]: f for f in report["findings"]}
    out = {}
    for check in report["verification"]["checks"]:
        f = findings.get(check["code"])
        if f is None or check["status"] in ("code_change", "not_verified"):
            continue
        finding = Finding(code=f["code"], symbol=f.get("symbol", ""), category=f.get("category", ""),
                          severity=f["severity"], title=f["title"], snippet=f.get("snippet", ""),
                          snippet_lang=f.get("snippet_lang", "bash"), evidence=f.get("evidence", {}))
        out[check["code"]] = plan_fix(finding)
    return out


def one(job: str, env: dict[str, str], seconds: float, plan=None) -> tuple[float, float]:
    """(steps per second the job printed, CPUs other programs used meanwhile)."""
    run_env = dict(env)
    cpus = None
    if plan is not None:
        for name in plan.unset:
            run_env.pop(name, None)
        run_env.update(plan.env)
        cpus = set(plan.cpus) if plan.cpus else None
    b0, t0 = busy_ticks()
    start = time.monotonic()
    proc = subprocess.run([sys.executable, str(JOBS / f"{job}.py"), "--seconds", str(seconds)], cwd=JOBS, env=run_env,
                          capture_output=True, text=True, timeout=seconds + 300,
                          preexec_fn=(lambda: os.sched_setaffinity(0, cpus)) if cpus else None)
    wall = time.monotonic() - start
    b1, t1 = busy_ticks()
    rate = next((float(line.split("=", 1)[1]) for line in proc.stdout.splitlines() if line.startswith("steps_per_s=")),
                None)
    if rate is None:
        raise RuntimeError(f"{job} printed no steps_per_s:\n{proc.stdout[-1000:]}{proc.stderr[-1000:]}")
    ncpu = len(os.sched_getaffinity(0))
    busy_cpus = (b1 - b0) / max(t1 - t0, 1) * ncpu          # everything, the job included
    job_cpu = float(next((line.split("=", 1)[1] for line in proc.stdout.splitlines()
                          if line.startswith("cpu_ms_per_step=")), 0)) * rate * seconds / 1e3 / max(wall, 1e-9)
    return rate, max(0.0, busy_cpus - job_cpu)


def ab(job: str, env: dict[str, str], plan, pairs: int, seconds: float) -> tuple[list[float], list[float]]:
    """Plain A/B: (ratio fixed / unchanged of each pair, other programs' CPUs of each run); order A B, B A, ..."""
    ratios, loads = [], []
    for i in range(pairs):
        order = [None, plan] if i % 2 == 0 else [plan, None]
        got = {}
        for p in order:
            rate, load = one(job, env, seconds, p)
            got[p is None] = rate
            loads.append(load)
        ratios.append(got[False] / got[True])
    return ratios, loads


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", default="tiny_threads")
    parser.add_argument("--budget", type=float, default=180)
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=15)
    parser.add_argument("--env", action="append", default=[], help="NAME=VALUE the job starts with")
    args = parser.parse_args()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMP_", "MKL_", "ONEDNN_", "CPUDOCTOR_"))}
    env.update(dict(item.split("=", 1) for item in args.env))
    rows = []
    for job in args.jobs.split(","):
        report = verify(job, env, args.budget, args.seconds)
        ver = report["verification"]
        print(f"{job}: --verify: {ver['headline']} ({ver['rounds']} rounds of {ver['window_s']} s, "
              f"{ver['elapsed_s']} s)", flush=True)
        for code, plan in plans(report).items():
            check = next(c for c in ver["checks"] if c["code"] == code)
            ratios, loads = ab(job, env, plan, args.pairs, args.seconds)
            r = check.get("ratio") or {}
            lo, hi = min(ratios), max(ratios)
            agree = bool(r) and not (hi < r["lo"] or lo > r["hi"])
            rows.append((job, code, check["verdict"], r, statistics.median(ratios), lo, hi, agree,
                         check.get("other_share"), statistics.median(loads)))
    print()
    print(f"{'job':<14} {'fix':<8} {'--verify':<22} {'ratio (range)':<22} {'plain A/B (range)':<22} "
          f"{'agree':<6} load verify/AB")
    for job, code, verdict, r, med, lo, hi, agree, share, load in rows:
        vr = f"x{r['median']:.2f} (x{r['lo']:.2f}-x{r['hi']:.2f})" if r else "-"
        share_text = f"{share * 100:.0f} %" if share is not None else "?"
        print(f"{job:<14} {code:<8} {verdict:<22} {vr:<22} {f'x{med:.2f} (x{lo:.2f}-x{hi:.2f})':<22} "
              f"{'yes' if agree else 'no':<6} {share_text} / {load:.2f} CPUs")
    print(f"\n--verify: interleaved windows, rate from the job's probe; plain A/B: {args.pairs} pairs of "
          f"{args.seconds:g} s runs, the job's own printed steps/s; load: other programs' share of the CPUs "
          f"(--verify) and CPUs other programs used (A/B, /proc/stat less the job's CPU time)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
