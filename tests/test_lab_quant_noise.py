"""int8 vs fp32 on a busy machine: the same "inconclusive" as the sweep, a spread per point, no noise as a cause.

Issue 26: ``bench quant`` at batch 1 printed "0.00x" (72.5 ms vs 0.17 ms) and blamed quantisation
overhead while 84 % of the CPU went to other programs.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from cpudoctor.lab import runner
from cpudoctor.lab.native import native_support
from cpudoctor.lab.results import Context, read_outcome
from cpudoctor.lab.runner import JobOutcome
from cpudoctor.model import CpuInfo, IsaVerdict, Report
from cpudoctor.render.lab import outcome_text
from cpudoctor.render.training import run_cells

CAUSES = ("quantising activations", "multiply-accumulate", "instruction")


def _vnni() -> Context:
    cpu = CpuInfo(arch="x86_64", flags=["avx2", "fma", "avx512f", "avx512_vnni"], isa=IsaVerdict(avx512_vnni=True))
    return Context(native=native_support(cpu))


def _point(batch: int, fp32: tuple[float, float, float], int8: tuple[float, float, float], share: float) -> dict:
    return {"batch": batch, "fp32_ms": fp32[1], "fp32_p10_ms": fp32[0], "fp32_p90_ms": fp32[2],
            "int8_ms": int8[1], "int8_p10_ms": int8[0], "int8_p90_ms": int8[2],
            "speedup": round(fp32[1] / int8[1], 4),
            "interference": {"other_share": share, "steal_share": 0.0, "cpus": [0]}}


@pytest.mark.skipif(shutil.which("taskset") is None or not hasattr(os, "sched_getaffinity"),
                    reason="needs taskset (util-linux) and CPU affinity")
@pytest.mark.hardware
def test_a_busy_loop_on_the_jobs_cpu_makes_bench_quant_inconclusive():
    """A real busy loop pinned to the one CPU the job runs on: the result is "inconclusive" with the share the
    others took, each point shows both spreads, and nothing explains the ratios by quantisation."""
    cpu = max(os.sched_getaffinity(0))
    hog = subprocess.Popen([sys.executable, "-c", f"import os; os.sched_setaffinity(0, [{cpu}])\nwhile True: pass"])
    try:
        settings = {"batches": [1, 8], "min_seconds": 0.3, "hidden": 64, "threads": 1, "api": "torch.ao"}
        argv = ["taskset", "-c", str(cpu), *runner.job_command("quant", settings)]
        out = runner.run_job("quant", settings, argv=argv, timeout=300)
    finally:
        hog.kill()
        hog.wait()
    assert out.status == "ok", out.message
    shares = [p["interference"]["other_share"] for p in out.result["points"]]
    assert all(p["interference"]["cpus"] == [cpu] for p in out.result["points"])
    assert max(shares) > 0.1, shares                      # the hog took its part of the CPU
    result = read_outcome("quant", out, settings, _vnni())
    assert result.verdict == "inconclusive"
    assert result.reason.startswith("inconclusive: ") and "went to other programs" in result.reason
    assert not any(c in result.precision_why for c in CAUSES), result.precision_why
    assert result.decided() == {}
    text = outcome_text(result)
    assert "verdict: inconclusive" in text and "fp32 p10–p90" in text and "int8 p10–p90" in text
    rows = [ln.split() for ln in text.splitlines() if ln.split() and ln.split()[0] in ("1", "8")]
    assert len(rows) == 2 and all("–" in r[2] and "–" in r[4] for r in rows)      # a spread per point
    run = result.bench_run()
    assert run.metrics["verdict"] == "inconclusive" and run.metrics["quiet"] is False
    # the advisor never takes a busy run's ratios as evidence
    from cpudoctor.advisor.rules.precision import _quant_speedups
    from cpudoctor.advisor.engine import Facts

    assert _quant_speedups(Report(benchmarks=[run]), Facts(Report(benchmarks=[run]))) == {}


def test_the_issues_busy_batch_1_is_inconclusive_not_quantisation_overhead():
    """The figures of the issue: 72.5 ms int8 against 0.17 ms fp32 while 84 % went to other programs."""
    out = JobOutcome(status="ok", result={"points": [_point(1, (0.15, 0.17, 0.9), (0.2, 72.5, 80.0), 0.84),
                                                     _point(64, (2.0, 2.4, 9.0), (1.0, 1.2, 30.0), 0.84)],
                                          "hidden": 1024, "api": "torch.ao", "api_name": "x"})
    result = read_outcome("quant", out, {}, _vnni())
    assert result.verdict == "inconclusive" and result.reason == "inconclusive: 84 % of the CPU went to other programs"
    text = outcome_text(result)
    assert "0.00×" not in text and "0.0023×" in text
    assert not any(c in result.precision_why for c in CAUSES)
    cells = dict(zip(("When", "Job", "Status", "Settings", "Samples/s", "Held-out", "Result", "Note"),
                     (c[0] for c in run_cells(result.bench_run()))))
    assert cells["Result"] == "inconclusive" and cells["Note"] == "busy machine (84 % to others): rerun"


def test_a_quiet_point_within_spread_is_said_as_such_never_explained():
    """Quiet machine: batch 1's latencies overlap (no difference measured), batch 64's lie apart. Only batch 64
    has a speed-up; batch 1 is "within each other's spread", not "the time goes to quantising activations"."""
    out = JobOutcome(status="ok", result={"points": [_point(1, (0.15, 0.17, 0.30), (0.16, 0.25, 0.40), 0.02),
                                                     _point(64, (2.0, 2.4, 2.6), (0.4, 0.5, 0.6), 0.02)],
                                          "hidden": 1024, "api": "torch.ao"})
    result = read_outcome("quant", out, {}, _vnni())
    assert result.verdict == "measured" and result.reason == ""
    assert result.decided() == {64: pytest.approx(4.8)}
    why = result.precision_why
    assert why.startswith("int8 ran 4.80× at batch 64 fp32's speed (int8 and fp32 measured within each other's "
                          "spread at batch 1)")
    assert "quantising activations" not in why
    assert "0.68× (within spread)" in outcome_text(result)
    # both apart, batch 1 slower: then the batch-1 clause holds
    out.result["points"][0] = _point(1, (0.15, 0.17, 0.18), (0.30, 0.34, 0.36), 0.02)
    assert "quantising activations" in read_outcome("quant", out, {}, _vnni()).precision_why
