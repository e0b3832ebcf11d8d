"""``cpudoctor run`` on real serving loops (tests/jobs/serve_*.py), each wrong in one way, then fixed as printed.

A small model served one sample per request: with autograd on (EVID016), at batch 1 on every CPU (EVID025), built
and loaded again per request (EVID026), traced again per request (EVID027). The probe reads each from inside the
job: the finding quotes the job's own latency and counts and names the lines marked ``# the mistake``; the fix
applied (``--fixed``, or the thread count the snippet prints) makes it go. One parametrised test, runs of a second
or two (the thread count's first run four: its verdict needs the driving thread's samples); the suite's one file
of them (CI's time is counted).
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


def run(tmp_path: Path, job: str, *args: str) -> Run:
    out = tmp_path / f"{job}{len(args)}.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMP_", "MKL_", "ONEDNN_", "KMP_"))}
    proc = subprocess.run([sys.executable, "-m", "cpudoctor", "run", "--rate", "25", "--roof", "none", "--format",
                           "json", "-o", str(out), "--", sys.executable, str(JOBS / f"{job}.py"), *args],
                          cwd=JOBS, env=env, capture_output=True, text=True, timeout=300)
    assert out.exists(), proc.stderr[-3000:]
    r = Run(proc, json.loads(out.read_text()))
    print(f"{job} {' '.join(args)}: verdict {r.bd.get('verdict')}, others {r.bd.get('others_cpus')}, "
          f"findings {sorted((c, f['severity']) for c, f in r.findings.items())}")
    return r


def mistake_lines(job: str) -> list[int]:
    text = (JOBS / f"{job}.py").read_text(encoding="utf-8").splitlines()
    return [i for i, line in enumerate(text, 1) if "# the mistake" in line]


# job, its finding, the seconds it serves before the fix, how the printed fix is applied
# serve_threads' verdict needs the driving thread's own samples on a quiet machine: it runs alone (make test's serial
# pass); the others are read from the job's state and counts, whatever else runs (the parallel pass, `alongside`)
_STATE = pytest.mark.alongside
CASES = [pytest.param("serve_grad", "EVID016", "1", None, marks=_STATE, id="serve_grad"),
         pytest.param("serve_threads", "EVID025", "4", "--threads", id="serve_threads"),
         pytest.param("serve_reload", "EVID026", "1", None, marks=_STATE, id="serve_reload"),
         pytest.param("serve_compile", "EVID027", "1", None, marks=_STATE, id="serve_compile")]


@pytest.mark.hardware
@pytest.mark.parametrize("job, code, seconds, option", CASES)
def test_a_serving_loops_mistake_is_named_with_its_numbers_and_the_printed_fix_removes_it(tmp_path, job, code,
                                                                                       seconds, option):
    if job == "serve_threads" and len(os.sched_getaffinity(0)) < 2:
        pytest.skip("one CPU: every thread is already one thread")
    before = run(tmp_path, job, "--seconds", seconds)
    assert before.proc.returncode == 0 and before.steps(), before.proc.stderr[-2000:]
    f = before.findings.get(code)
    if f is None and code == "EVID025" and before.bd.get("verdict") in ("thin", "idle"):
        pytest.skip(f"the breakdown could not be judged: {before.bd.get('verdict_reason')}")
    assert f is not None, before.findings
    assert "ms (p50; p99 " in f["why"], f["why"]            # the job's own per-request latency
    where = f["why"] + f["fix"] + f["snippet"]
    for line in mistake_lines(job):
        assert f"line {line} of " in where and f"{job}.py" in where, (line, where)
    if option:
        printed = int(re.search(r"set_num_threads\((\d+)\)", f["snippet"]).group(1))
        after = run(tmp_path, job, "--seconds", "0.5", option, str(printed))
        assert after.data["state"]["samples"][-1]["threads"] == printed
    else:
        after = run(tmp_path, job, "--seconds", "0.5", "--fixed")
    assert after.proc.returncode == 0 and code not in after.findings, after.findings
