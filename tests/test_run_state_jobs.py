"""``cpudoctor run`` on real jobs wrong in their own code or state (tests/jobs), and jobs beside two busy loops.

Each job here sets itself up wrong in one way in its own script (float64 by default, anomaly detection left on,
a thread count, OpenMP binding, too many DataLoader workers), at a line marked ``# the mistake``. ``run``'s probe
reads it from inside: the finding names that file and line, its fix is the change to that line (never an
environment variable the line would override), and the fix applied makes the finding go. A thread count set in
code and changed as printed changes the thread count the probe reads.

Then a machine busy with two loops of other programs: a job whose cause is in its own samples or state still gets
its warning there (the load stated), and the healthy job gets none. Runs are short (2 s of training) and shared
between assertions; this is the suite's one file of them (CI's time is counted). The mistakes are read from the
job's state, which no load hides: they run in make test's parallel pass (``alongside``), the busy loops alone.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from test_run_jobs import Run

pytestmark = pytest.mark.slow

JOBS = Path(__file__).resolve().parent / "jobs"
SECONDS = "2"
BUSY_SECONDS = "4"
_RUNS: dict[tuple, Run] = {}
# The machine's own warnings, not the job's: other programs on its CPUs (PROC013), other PyTorch jobs of the
# suite beside it (PROC014).
MACHINE = ("PROC013", "PROC014")


def run(tmp_path_factory, job: str, *args: str, busy: bool = False) -> Run:
    """One run of ``job`` (2 s of training; 4 s beside the busy loops, where it gets a third of the CPUs)."""
    key = (job, args, busy)
    if key not in _RUNS:
        out = tmp_path_factory.mktemp("run") / "run.json"
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OMP_", "MKL_", "ONEDNN_", "KMP_"))}
        proc = subprocess.run([sys.executable, "-m", "cpudoctor", "run", "--rate", "25", "--roof", "none", "--format", "json", "-o",
                               str(out), "--", sys.executable, str(JOBS / f"{job}.py"), "--seconds", BUSY_SECONDS if busy else SECONDS,
                               *args],
                              cwd=JOBS, env=env, capture_output=True, text=True, timeout=300)
        assert out.exists(), proc.stderr[-3000:]
        _RUNS[key] = Run(proc, json.loads(out.read_text()))
        r = _RUNS[key]
        print(f"{job} {' '.join(args)}{' (busy)' if busy else ''}: verdict {r.bd.get('verdict')}, others "
              f"{r.bd.get('others_cpus')}, findings {sorted((c, f['severity']) for c, f in r.findings.items())}")
    return _RUNS[key]


def own_warnings(r: Run) -> list[str]:
    return [c for c in r.warnings() if c not in MACHINE]


def mistake_lines(job: str) -> list[int]:
    """The lines of the job marked ``# the mistake``."""
    text = (JOBS / f"{job}.py").read_text(encoding="utf-8").splitlines()
    return [i for i, line in enumerate(text, 1) if "# the mistake" in line]


def seen_threads(r: Run) -> int | None:
    samples = [s for s in (r.data.get("state") or {}).get("samples", []) if not s["at_exit"]]
    return samples[-1]["threads"] if samples else None


# job, its finding, how the printed fix is applied: "--fixed", or an option that takes the number the snippet prints
CASES = [("float64", "EVID010", None), ("anomaly", "EVID011", None), ("threads_in_code", "EVID013", "--threads"),
         ("bind_in_code", "EVID004", None), ("workers_exceed", "EVID015", "--workers")]


# alongside (make test's parallel pass): each finding here is read from the job's own state, whatever else runs;
# the load-sensitive runs below (beside the busy loops) stay in the serial pass
@pytest.mark.hardware
@pytest.mark.alongside
@pytest.mark.parametrize("job, code, option", CASES, ids=[c[0] for c in CASES])
def test_a_mistake_in_the_script_is_named_at_its_line_and_the_printed_fix_removes_it(tmp_path_factory, job, code,
                                                                                     option):
    if job in ("bind_in_code", "threads_in_code", "workers_exceed") and len(os.sched_getaffinity(0)) < 2:
        pytest.skip("one CPU: nothing to bind away, and 4 threads per CPU is still a handful")
    before = run(tmp_path_factory, job)
    assert before.data["state"]["loaded"], before.data["state"]
    f = before.findings.get(code)
    if f is None and code == "EVID004":
        f = before.findings.get("EVID014")          # the workers not seen confined yet: the script's binding alone
    assert f is not None, before.findings
    for line in mistake_lines(job):
        assert f"line {line} of " in f["fix"] and f"{job}.py" in f["fix"], f["fix"]
    if job in ("threads_in_code", "bind_in_code"):
        for other in before.findings.values():       # no printed fix sets a variable the script's line would beat
            if other["code"] not in MACHINE:
                assert not re.search(r"(^|\s)(OMP_NUM_THREADS=\d|env -u OMP_PROC_BIND)", other["snippet"]), other
    if option:
        m = re.search(r"set_num_threads\((\d+)\)|num_workers=(\d+)", f["snippet"])
        printed = int(m.group(1) or m.group(2))
        after = run(tmp_path_factory, job, option, str(printed))
    else:
        after = run(tmp_path_factory, job, "--fixed")
    assert code not in after.findings and "EVID014" not in after.findings, after.findings
    if job == "threads_in_code":
        # applying the fix changes the thread count the job runs with, read inside it
        assert seen_threads(before) == 4 * len(os.sched_getaffinity(0)) and seen_threads(after) == printed


# --- beside two busy loops --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def two_busy_loops():
    loops = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    yield
    for p in loops:
        p.kill()
        p.wait()


# A job whose cause is in its own samples (data loading): its share is what load could hide. A cause in the job's
# state (float64, threads in code, ...) is read inside the job whatever the load; those jobs beside the loops, and
# the Python-loop job, are in benchmarks/job_state_table.py, which CI's time does not count.
BUSY = [("data_wait", "EVID002")]


@pytest.mark.parametrize("job, code", BUSY, ids=[b[0] for b in BUSY])
def test_a_cause_in_the_jobs_own_samples_or_state_survives_a_busy_machine(tmp_path_factory, two_busy_loops, job, code):
    r = run(tmp_path_factory, job, busy=True)
    if (r.bd.get("verdict") in ("thin", "idle") or r.bd.get("driver_samples", 0) < 30) and code != "EVID010":
        pytest.skip(f"the job hardly ran beside the loops ({r.bd.get('driver_samples')} samples of its driving "
                    f"thread, other programs used {r.bd.get('others_cpus')} CPUs)")
    f = r.findings.get(code)
    assert f is not None and f["severity"] == "warning", r.findings
    if r.bd.get("verdict") == "busy" and code != "EVID010":
        assert "CPUs meanwhile" in f["why"]             # the load is stated beside the job's own share


def test_the_healthy_job_gets_no_warning_of_its_own_beside_busy_loops(tmp_path_factory, two_busy_loops):
    r = run(tmp_path_factory, "healthy", busy=True)
    assert own_warnings(r) == [], r.findings
    likely = r.findings.get("EVID001")
    assert likely is None or (likely["severity"] == "info" and likely["title"].startswith("Likely: "))
