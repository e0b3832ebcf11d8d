"""A training job honours its time budget, start-up included, and never claims a comparison it did not make.

Issue 26: ``bench train --model resnet18 --dtype bf16 --seconds 15`` ran 162 s (warm-up and start-up were
not counted), measured no fp32, and still said bf16 "was measured against fp32 in this job".
"""

from __future__ import annotations

from cpudoctor.lab import runner
from cpudoctor.lab.native import native_support
from cpudoctor.lab.results import Context, read_outcome
from cpudoctor.lab.settings import TrainSettings
from cpudoctor.model import CpuInfo
from cpudoctor.render.lab import outcome_text


def test_the_budget_counts_start_up_and_warm_up():
    """2,000 warm-up steps asked for and 6 s given: the job ends by its budget, what the time went to is in the
    result, and it measured only what fit."""
    args = {**TrainSettings(seconds=6.0, batch_size=16, eval_samples=64, threads=1, warmup_steps=2000).to_dict()}
    out = runner.run_job("train", args, timeout=300)
    assert out.status == "ok", out.message
    r = out.result
    assert r["ended_by"] == "budget" and r["budget_s"] == 6.0
    assert r["steps"] < 2000                                   # the warm-up was cut to fit
    assert 0 < r["startup_s"] <= r["job_s"]                    # interpreter and torch import are counted
    result = read_outcome("train", out, args)
    line = next(ln for ln in outcome_text(result).splitlines() if ln.strip().startswith("time"))
    assert "of the 6 s budget" in line and "start-up" in line and "the budget ended it" in line


def test_a_bf16_run_that_measured_no_fp32_claims_no_comparison():
    """One step (a step limit, so the case is the same on any machine): bf16 was measured, fp32 never was."""
    args = TrainSettings(dtype="bf16", steps=1, seconds=None, batch_size=8, eval_samples=0, threads=1,
                         warmup_steps=0).to_dict()
    out = runner.run_job("train", args, timeout=300)
    assert out.status == "ok", out.message
    assert out.result["reference"]["samples_per_s"] is None
    assert out.result["reference"]["not_measured"] == "the step limit was reached before a fp32 step was measured"
    for flags in (["avx2", "fma"], ["avx2", "fma", "avx512f", "avx512_bf16"]):
        result = read_outcome("train", out, args, Context(native=native_support(CpuInfo(arch="x86_64", flags=flags))))
        assert not result.compared and result.ratio is None
        why = result.precision_why
        assert "measured against fp32" not in why and "ran" not in why
        assert why.startswith("fp32 was not measured in this job (the step limit was reached before a fp32 step "
                              "was measured), so there is no bf16/fp32 ratio; bf16 is ")
        text = outcome_text(result)
        assert "fp32        not measured: the step limit was reached" in text
        assert "in the same job, alternating windows" not in text
        assert result.bench_run().metrics["fp32_not_measured"].startswith("the step limit")
