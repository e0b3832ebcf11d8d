"""Issue 36 on real jobs: the verbose lines' GFLOP/s against the same GEMM timed directly, and a ResNet-style job
beside an MLP at batch 8 under `cpudoctor run`, held against one measured roof.

The GEMM test is quick-ish (two 1.5-second jobs: fp32 through oneMKL, bf16 through oneDNN); the two training jobs
are the one slow test (about 40 s on 2 CPUs, the roof measured once). benchmarks/gemm_agreement.py and
benchmarks/roof_jobs.py print the full tables.
"""

from __future__ import annotations

import io
import json
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from cpudoctor.probes.process.observe import JobRun

JOBS = Path(__file__).resolve().parent / "jobs"


def _agreement(dtype: str, n: int) -> tuple[float, float]:
    """(direct best GFLOP/s, verbose-line best GFLOP/s) of calls interleaved one by one in one job.

    The best call of each half, not the median: a call the scheduler interrupts is slower in either half, so
    under load the medians drift with whichever half the bursts hit (bf16 1.104 at a load average of 9), while
    the fastest call of each is the GEMM itself (benchmarks/gemm_agreement.py prints both)."""
    out = io.BytesIO()
    job = JobRun([sys.executable, str(JOBS / "known_gemm.py"), "--seconds", "1.5", "--dtype", dtype, "--n", str(n)],
                 stdout=out, stderr=io.BytesIO(), sample=False, cwd=str(JOBS))
    assert job.start()
    obs = job.wait()
    m = re.search(r"best_gflops=([\d.]+)", out.getvalue().decode())
    assert m, out.getvalue().decode()[-2000:]
    if dtype == "fp32":
        rates = [c.flop / c.time_ms / 1e6 for c in obs.mkl.calls if c.dims == (n, n, n) and c.time_ms > 0]
    else:
        rates = [p.flop / p.time_ms / 1e6 for p in obs.onednn.primitives
                 if p.kind == "matmul" and p.problem == f"{n}x{n}:{n}x{n}" and p.time_ms]
    assert rates, f"no {dtype} verbose line of the {n}^3 GEMM was kept"
    return float(m.group(1)), max(rates)


@pytest.mark.slow
@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
def test_verbose_gflops_agree_with_the_same_gemm_timed_directly(dtype):
    """Measured here: fp32 n=1024 0.995-1.014, bf16 n=1024 1.034-1.049 (oneDNN's time leaves out torch's call
    overhead) under a load average of 4 on 2 CPUs. A burst of load can hit one half harder: the better of two
    rounds counts. A timing comparison, so it runs in the serial slow pass (beside the quick pass's other worker
    it read 0.66-0.90); on a machine other programs keep busy a disagreement is theirs as much as the GEMM's and
    the test says so instead of failing."""
    ratios = []
    for _ in range(2):
        direct, verbose = _agreement(dtype, 1024)
        ratios.append(verbose / direct)
        if abs(ratios[-1] - 1) <= 0.10:
            break
    agree = min(abs(r - 1) for r in ratios) <= 0.10
    load = os.getloadavg()[0]
    if not agree and load >= 0.75 * (os.cpu_count() or 1):
        pytest.skip(f"{dtype}: verbose/direct {[round(r, 3) for r in ratios]} under a load average of {load:.1f} on "
                    f"{os.cpu_count()} CPUs: the two timings met different loads")
    assert agree, f"{dtype}: verbose/direct {ratios} (load average {load:.1f} on {os.cpu_count()} CPUs)"


def _run(job: str, env: dict[str, str], tmp: Path) -> dict:
    out = tmp / f"{job}.json"
    subprocess.run([sys.executable, "-m", "cpudoctor", "run", "--format", "json", "-o", str(out), "--",
                    sys.executable, str(JOBS / f"{job}.py"), "--seconds", "4"],
                   cwd=JOBS, env=env, capture_output=True, text=True, timeout=120)
    return json.loads(out.read_text())


@pytest.mark.slow
def test_resnet_and_mlp_at_batch_8_get_utilisation_and_findings_their_shapes_explain(tmp_path):
    """One roof, measured once (the quick measurement `run` makes when nothing is saved), kept where the window
    keeps its lab runs; then both jobs are held against it."""
    from cpudoctor.lab import job_roofs
    from cpudoctor.model import BenchRun
    from cpudoctor.model.serde import to_data

    roofs = job_roofs.quick(["fp32"], 2)
    if not roofs.compute or not roofs.memory_gbps:
        pytest.skip(f"no roof could be measured here: {roofs.where}")
    metrics = {"compute": [{"dtype": r.dtype, "threads": r.threads, "gflops": r.gflops} for r in roofs.compute],
               "memory": [{"node": "all", "kernel": "copy", "gbps": roofs.memory_gbps}]}
    kept = tmp_path / "CPU Doctor" / "lab-runs.json"
    kept.parent.mkdir()
    kept.write_text(json.dumps({"version": 1, "runs": {f"{socket.gethostname()} | test | py": [
        to_data(BenchRun(kind="roofline", metrics=metrics, started_at="2026-12-04T00:00:00+00:00"))]}}))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMP_", "ONEDNN_", "MKL_"))}
    env.update(XDG_CONFIG_HOME=str(tmp_path), OMP_NUM_THREADS="2")
    mlp, resnet = _run("mlp_batch8", env, tmp_path), _run("resnet_small", env, tmp_path)
    lin = next(k for k in mlp["achieved"]["kinds"] if k["kind"] == "linear")
    conv = next(k for k in resnet["achieved"]["kinds"] if k["kind"] == "convolution")
    print(f"roof {metrics}; MLP linear {lin['text']}; ResNet conv {conv['text']}; "
          f"load average {os.getloadavg()[0]:.1f}")
    assert mlp["achieved"]["roof"]["source"] == resnet["achieved"]["roof"]["source"] == "saved"
    # the shapes: a batch-8 GEMM reads its weights for 8 rows of work; a convolution reuses each weight everywhere
    assert lin["memory_bound"] is True and conv["memory_bound"] is False
    assert conv["intensity"] > 5 * lin["intensity"]
    assert conv["of_roof"] > lin["of_roof"]
    assert mlp["achieved"]["cpu_share"] is not None and resnet["achieved"]["cpu_share"] is not None
    codes = {f["code"] for f in mlp["findings"]}, {f["code"] for f in resnet["findings"]}
    assert "EVID020" in codes[0] and "EVID020" not in codes[1]
    assert "EVID022" in codes[1] and "EVID022" not in codes[0]
