"""Real jobs for the memory rules and ``fit``, run by ``cpudoctor run`` (tests/jobs/mem_*.py). Two slow tests.

1. A job over its cgroup's memory limit (a real memory cgroup, tests/memory_cgroup.py: skipped, saying why,
   where none can be made) is killed and gets EVID030 with the limit; ``cpudoctor fit`` measures its model
   against the limit the run recorded and ranks gradient accumulation first; the job run again with the
   printed accumulation finishes in the same cgroup without the finding.
2. A job whose DataLoader workers copy a dataset of Python objects gets EVID032, a job that keeps its losses'
   graphs gets EVID033, and a healthy job neither (memory findings do not depend on other programs' load).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from memory_cgroup import limited

pytestmark = pytest.mark.slow

JOBS = Path(__file__).resolve().parent / "jobs"
MiB = 1 << 20
# mem_limited.py at batch 1024: 870 MiB resident at its peak, 770 MiB charged to its cgroup (the libraries' pages
# are not); as 4 steps of 256, 420 MiB charged
LIMIT = 600 * MiB
BATCH = 1024


def cpudoctor(*args: str, timeout: float = 240) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cpudoctor", *args], capture_output=True, text=True, timeout=timeout)


def run_job(out: Path, *argv: str, timeout: float = 240) -> tuple[subprocess.CompletedProcess, dict]:
    p = cpudoctor("run", "--roof", "none", "--format", "json", "-o", str(out), "--", *argv, timeout=timeout)
    return p, json.loads(out.read_text())


def memory_codes(data: dict) -> dict[str, str]:
    return {f["code"]: f["severity"] for f in data["findings"] if f["category"] == "memory" or
            f["code"].startswith("EVID02")}


def test_a_job_over_its_cgroup_limit_gets_the_finding_and_fits_strategy_lets_it_finish(tmp_path):
    with limited(LIMIT) as prefix:
        job = [*prefix, sys.executable, str(JOBS / "mem_limited.py"), "--batch", str(BATCH)]
        first, run1 = run_job(tmp_path / "run1.json", *job)
        assert first.returncode == 137, first.stderr[-2000:]
        limit = next(f for f in run1["findings"] if f["code"] == "EVID030")
        assert limit["severity"] == "error" and "600 MiB" in limit["title"] and "exit code 137" in limit["why"]
        assert "cpudoctor fit" in limit["snippet"]

        fit = cpudoctor("fit", "--model", "mem_limited:build", "--path", str(JOBS), "--batch", str(BATCH),
                        "--from-run", str(tmp_path / "run1.json"), "--no-checkpoint", "--no-bf16", "--seconds", "90",
                        "--format", "json")
        assert fit.returncode == 1, fit.stderr[-2000:]                       # it does not fit as it is
        plan = json.loads(fit.stdout)["plan"]
        assert plan["budget"]["binding"] == "cgroup" and plan["budget"]["cgroup_limit_bytes"] == LIMIT
        best = plan["strategies"][0]
        assert best["id"] == "accumulation" and best["fits"], plan["strategies"]
        steps = best["detail"]["steps"]

        second, run2 = run_job(tmp_path / "run2.json", *job, "--accum", str(steps))
        assert second.returncode == 0, second.stderr[-2000:]
        assert f"trained 1 steps of batch {BATCH}" in second.stdout
        assert "EVID030" not in memory_codes(run2) or memory_codes(run2)["EVID030"] != "error"


def test_workers_copying_the_data_and_a_growing_job_get_their_findings_a_healthy_job_none(tmp_path):
    _, workers = run_job(tmp_path / "workers.json", sys.executable, str(JOBS / "mem_workers.py"), "--seconds", "8")
    assert memory_codes(workers).get("EVID032") == "warning", workers["memory"]["processes"]
    _, leak = run_job(tmp_path / "leak.json", sys.executable, str(JOBS / "mem_leak.py"), "--seconds", "8")
    assert memory_codes(leak).get("EVID033") == "warning", leak["memory"]["samples"][-10:]
    _, healthy = run_job(tmp_path / "healthy.json", sys.executable, str(JOBS / "mem_healthy.py"), "--seconds", "8")
    assert memory_codes(healthy) == {}, healthy["findings"]
