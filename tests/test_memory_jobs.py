"""Real jobs for the memory rules and ``fit``, run by ``cpudoctor run`` (tests/jobs/mem_*.py). Two slow tests.

1. A job over its cgroup's memory limit (a real memory cgroup, tests/memory_cgroup.py: skipped, saying why,
   where none can be made) is killed and gets EVID030 with the limit; ``cpudoctor fit`` measures its model
   against the limit the run recorded and ranks gradient accumulation first; the job run again with the
   printed accumulation finishes in the same cgroup without the finding. One step of its micro batch run
   outside the cgroup (the cgroup's entering interpreter execs the job, and the probe, by design, stays out
   of what a job's process starts): what the job's probe counted (parameters, gradients, activations per
   sample) agrees with fit's measurement of the model, and fit's plan from those figures (``--from-run``)
   with the run's measured peak, within 15 %.
2. A job whose DataLoader workers copy a dataset of Python objects gets EVID032, a job that keeps its losses'
   graphs gets EVID033, and a healthy job neither; the healthy job's probe counts its training's bytes exactly.
   The workers' copies grow with how far they read (so with the CPU they get): that job runs alone.
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
    """The memory findings (EVID030-035, PROC007's swapping): EVID020-024 are the kernels' and the crash's."""
    return {f["code"]: f["severity"] for f in data["findings"] if f["category"] == "memory"}


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

    # the job's probe against fit's measurement of the same model, and fit's plan from the probe's figures against
    # the peak the run reached, at the micro batch (the batch a step holds)
    micro = -(-BATCH // steps)
    _, run3 = run_job(tmp_path / "run3.json", sys.executable, str(JOBS / "mem_limited.py"), "--batch", str(micro))
    counted, measured = run3["memory"]["training"], plan["measurement"]
    assert counted["source"] == "probe" and counted["batch_size"] == micro, run3["state"]
    assert counted["param_bytes"] == measured["param_bytes"] and counted["grad_bytes"] == measured["grad_bytes"]
    per_sample = measured["saved_bytes_per_sample"] + measured["saved_fixed_bytes"] / counted["batch_size"]
    assert abs(counted["activation_bytes_per_sample"] / per_sample - 1) < 0.15, (counted, measured)
    again = cpudoctor("fit", "--from-run", str(tmp_path / "run3.json"), "--format", "json")
    probe_plan = json.loads(again.stdout)["plan"]
    assert probe_plan["source"] == "probe", again.stderr[-2000:]
    peak = run3["memory"]["peak_rss_bytes"]
    assert abs(probe_plan["total_bytes"] / peak - 1) < 0.15, (probe_plan["parts"], peak)


def test_workers_copying_the_data_and_a_growing_job_get_their_findings_a_healthy_job_none(tmp_path):
    # The workers' copies grow with how far they read, so that job runs alone. The leak paces itself (20 steps a
    # second, little CPU) and runs beside the healthy job, which still gets no finding with a growing job beside it.
    # (All three at once, beside make test's parallel pass, left the workers too little CPU to copy 128 MiB each.)
    from concurrent.futures import ThreadPoolExecutor

    def job(name: str) -> dict:
        return run_job(tmp_path / f"{name}.json", sys.executable, str(JOBS / f"{name}.py"), "--seconds", "8")[1]

    workers = job("mem_workers")
    assert memory_codes(workers).get("EVID032") == "warning", workers["memory"]["processes"]
    with ThreadPoolExecutor(2) as pool:
        leak, healthy = pool.map(job, ("mem_leak", "mem_healthy"))
    assert memory_codes(leak).get("EVID033") == "warning", leak["memory"]["samples"][-10:]
    assert memory_codes(healthy) == {}, healthy["findings"]
    # its probe's count: 256-512-10 fp32 parameters, their gradients, Adam's two moments (and a step scalar per
    # tensor); a forward pass at batch 64 saves its input (256 floats a sample) and the ReLU's output (512)
    t = healthy["memory"]["training"]
    params = (256 * 512 + 512 + 512 * 10 + 10) * 4
    assert (t["source"], t["param_bytes"], t["grad_bytes"], t["optimizer"]) == ("probe", params, params, "adam")
    assert t["optimizer_state_bytes"] == 2 * params + 4 * 4 and t["batch_size"] == 64 and t["workers"] == 2
    assert t["activation_bytes_per_sample"] == (256 + 512) * 4
