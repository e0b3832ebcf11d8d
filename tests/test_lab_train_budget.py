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


def test_the_hard_stop_ends_a_job_stuck_in_one_long_call(tmp_path):
    """A job whose main thread sits in one long library call (here a 10-minute sleep, which releases the GIL like
    a torch op): at its deadline the job sends what it measured and ends, instead of running the call out."""
    import json
    import subprocess
    import sys

    from cpudoctor.lab import jobs

    script = tmp_path / "stuck.py"
    script.write_text(
        "import sys, time\n"
        f"sys.path.insert(0, {str(jobs.script_path('train').parent)!r})\n"
        "import _jobkit\n"
        "measured = {'steps': 3}\n"
        "hard = _jobkit.Deadline(time.perf_counter() + 0.5, lambda: {'status': 'ok', 'ended_by': 'budget', **measured})\n"
        "time.sleep(600)\n"
        "print('the long call ran out')\n")
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    lines = [json.loads(ln) for ln in out.stdout.splitlines()]
    assert lines == [{"type": "result", "status": "ok", "ended_by": "budget", "steps": 3, "python": sys.executable,
                      "python_version": "%d.%d.%d" % sys.version_info[:3]}]


def test_a_result_that_cannot_be_made_at_the_deadline_is_named_a_bug(tmp_path):
    """The hard stop still ends the job when its result cannot be made, with one error line that says this is
    CPU Doctor's bug (not the user's setup) and carries the exception for the report."""
    import json
    import subprocess
    import sys

    from cpudoctor.lab import jobs

    script = tmp_path / "broken.py"
    script.write_text(
        "import sys, time\n"
        f"sys.path.insert(0, {str(jobs.script_path('train').parent)!r})\n"
        "import _jobkit\n"
        "hard = _jobkit.Deadline(time.perf_counter() + 0.2, lambda: {}['steps'])\n"
        "time.sleep(600)\n")
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    (line,) = [json.loads(ln) for ln in out.stdout.splitlines()]
    assert line["type"] == "error" and "a bug, not your setup" in line["message"]
    assert "KeyError: 'steps'" in line["message"] and line["message"].startswith("the time budget ran out")


def test_a_run_cut_off_during_start_up_says_so():
    """The hard stop's result when torch's import (or the data) outlasted the budget: nothing measured, and why."""
    import importlib.util

    from cpudoctor.lab import jobs

    spec = importlib.util.spec_from_file_location("train_job", jobs.script_path("train"))
    train_job = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(train_job)
    s = train_job.TrainSettings(dtype="bf16", seconds=15.0).validate()
    res = train_job.TrainingRun(s, train_job.Budget(15.0, age=16.0), None).cut_off()
    assert res["ended_by"] == "budget" and res["steps"] == 0 and res["samples_per_s"] is None
    assert res["cut_off"].startswith("start-up") and res["job_s"] >= 16.0
    assert res["reference"]["not_measured"].startswith("the 15 s budget (start-up included) ended during start-up")
    result = read_outcome("train", runner.JobOutcome(status="ok", result=res), s.to_dict())
    assert "cutting off start-up" in outcome_text(result) and not result.compared


class _FakeTrainer:
    """What TrainingRun touches of a Trainer: every step takes no time, so only the budget decides."""

    def __init__(self) -> None:
        self.steps, self.test, self.compile_s, self.torch = 0, None, None, None

    def step(self, dtype: str, counted: bool = True):
        self.steps += 1 if counted else 0
        return 1.0, 4, 8

    def evaluate(self, dtype: str, deadline=None):
        return None, 0

    def facts(self, cpus):
        return {"threads": 1}


def test_the_kernel_census_runs_inside_the_budget_or_not_at_all(monkeypatch):
    """The census (a verbose step per dtype, two profiled) is part of the job's time: it runs after warm-up
    when it still fits, its reports go into the result, and a budget already spent skips it."""
    from cpudoctor.lab.jobs import _jobkit, train as T
    from cpudoctor.lab.jobs._settings import TrainSettings as JobSettings

    calls = []
    monkeypatch.setattr(T, "census", lambda tr, dtypes, stop, operators: calls.append((list(dtypes), operators))
                        or {"library_reports": {"onednn": ["x"]}, "operators": []})
    s = JobSettings(steps=3, seconds=None, warmup_steps=1, eval_samples=0, progress_interval=3600.0)
    res = T.TrainingRun(s, T.Budget(None), None).run(_FakeTrainer(), _jobkit.StopFlag())
    assert calls == [(["fp32"], True)] and res["library_reports"] == {"onednn": ["x"]} and res["steps"] == 3
    calls.clear()
    spent = T.Budget(5.0, age=60.0)                  # a job 60 s old with a 5 s budget: nothing more fits
    res = T.TrainingRun(JobSettings(seconds=5.0, warmup_steps=1, eval_samples=0), spent, None).run(
        _FakeTrainer(), _jobkit.StopFlag())
    assert calls == [] and "library_reports" not in res and res["ended_by"] == "budget"
