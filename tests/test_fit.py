"""``cpudoctor fit``'s planner: the need from a measurement, a saved run or sizes; the budget; the strategies.

Measurements come from tests/fixtures/fit/ (recorded from lab/jobs/fit.py on this project's development
machine) or are built here; nothing runs a child (tests/test_memory_jobs.py does, for real).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from cpudoctor.advisor.fit import JobShape, StepLine, budget, plan_measured, plan_training
from cpudoctor.advisor.fit_strategies import rank
from cpudoctor.argtypes import byte_size, shape
from cpudoctor.fitrun import FitInputError, FitRequest, plan_from_run, run_fit
from cpudoctor.lab.fit import read_measurement
from cpudoctor.lab.runner import JobOutcome
from cpudoctor.model.fit import MemoryBudget, ModelMeasurement, StepPoint, Strategy
from cpudoctor.model.memory import CgroupMemory, JobMemory, ProcessMemory, SystemMemory, TrainingMemory
from cpudoctor.render.fit import render_json, render_md, render_text, strategy_title
from memory_fakes import GiB, MiB

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "fit"


def _recorded(name: str) -> ModelMeasurement:
    res = json.loads((FIXTURES / f"{name}.json").read_text())
    return read_measurement(JobOutcome(result=res), {"model": res["model"]})


def _budget(usable: int) -> MemoryBudget:
    return budget(SystemMemory(total_bytes=32 * GiB, available_bytes=usable), None)


# --- the step's line ------------------------------------------------------------------------------------


def test_step_line_measured_interpolated_and_extended_from_the_two_largest():
    line = StepLine([StepPoint(2, 80 * MiB), StepPoint(32, 230 * MiB), StepPoint(64, 390 * MiB)])
    assert line.delta(32) == 230 * MiB
    assert line.delta(48) == 310 * MiB                     # between 32 and 64
    assert line.delta(128) == 710 * MiB                    # 5 MiB per sample past 64
    assert line.largest(390 * MiB) == 64 and line.largest(391 * MiB) == 64
    assert line.largest(70 * MiB) == 0                     # not even one sample


def test_one_point_is_extended_by_its_saved_tensors_not_scaled():
    """A single measured batch cannot tell the step's fixed part from what scales: scaling it would multiply
    the gradients by the batch ratio (a 9 GiB 'need' for ResNet-18 at 256 once)."""
    line = StepLine([StepPoint(2, 80 * MiB)], per_sample=5 * MiB)
    assert line.delta(258) == 80 * MiB + 256 * 5 * MiB


# --- the plan from a measurement ---------------------------------------------------------------------------


def test_recorded_resnet18_plan_parts_add_up_and_batch_256_does_not_fit_in_1_gib():
    m = _recorded("resnet18-adam")
    plan = plan_measured(m, JobShape(batch=256), budget(None, None, given=GiB))
    assert sum(p.bytes for p in plan.parts) == plan.total_bytes
    parts = {p.part: p for p in plan.parts}
    assert parts["optimizer"].bytes == 2 * parts["gradients"].bytes == m.optimizer_state_bytes   # Adam: two copies
    assert parts["parameters"].how == "counted" and parts["workspace"].how == "measured"
    assert plan.fits is False and 0 < plan.largest_batch < 256
    first = plan.strategies[0]
    assert first.id == "accumulation" and first.fits
    assert first.detail["micro_batch"] * first.detail["steps"] >= 256 and first.detail["micro_batch"] <= plan.largest_batch
    assert plan.strategies[-1].id == "swap" or not plan.strategies[-1].applicable
    text = render_text(plan)
    assert "It does not fit" in text and "gradient accumulation" in text and "accum = " in text


def test_checkpointing_measured_at_two_batches_saves_and_costs_time():
    m = _recorded("resnet18-adam")
    plan = plan_measured(m, JobShape(batch=256), budget(None, None, given=4 * GiB))
    ck = next(s for s in plan.strategies if s.id == "checkpointing")
    assert ck.detail["block"] == "BasicBlock" and ck.detail["blocks"] == 8
    assert ck.measured and ck.saves_bytes > 0
    assert "BasicBlock" in ck.snippet and "use_reentrant=False" in ck.snippet


def test_a_model_without_repeated_blocks_says_checkpointing_does_not_apply():
    m = ModelMeasurement(model="simplecnn", base_bytes=330 * MiB, param_bytes=MiB, grad_bytes=MiB,
                         optimizer_state_bytes=2 * MiB, saved_bytes_per_sample=150 << 10,
                         points=[StepPoint(2, 20 * MiB), StepPoint(64, 40 * MiB)])
    plan = plan_measured(m, JobShape(batch=64), _budget(8 * GiB))
    ck = next(s for s in plan.strategies if s.id == "checkpointing")
    assert not ck.applicable and "no repeated blocks" in strategy_title(ck)
    assert plan.fits and "Not for this model" in render_text(plan)


def test_workers_and_dataset_are_added_and_named_as_given_or_typical():
    m = _recorded("resnet18-adam")
    plan = plan_measured(m, JobShape(batch=32, workers=4, dataset_bytes=2 * GiB, workers_copy_dataset=True),
                         _budget(64 * GiB))
    parts = {p.part: p for p in plan.parts}
    assert parts["dataset"].bytes == 2 * GiB and parts["dataset"].how == "given"
    assert parts["workers"].how == "assumed" and parts["workers"].bytes > 4 * 2 * GiB
    ids = [s.id for s in plan.strategies]
    assert "shared-dataset" in ids and "mmap-data" in ids


# --- from sizes and from a run ------------------------------------------------------------------------------


def test_params_and_optimizer_alone_compute_states_and_say_activations_are_unknown():
    t = TrainingMemory(source="given", parameters=100_000_000, param_bytes=400_000_000, optimizer="adamw")
    plan = plan_training(t, JobShape(batch=16), _budget(2 * GiB))
    parts = {p.part: p for p in plan.parts}
    assert parts["optimizer"].bytes == 800_000_000 and parts["optimizer"].how == "computed"
    assert parts["framework"].how == "assumed" and "activations" not in parts
    assert plan.fits is False and any("activations unknown" in n for n in plan.notes)
    assert any(s.id == "optimizer" for s in plan.strategies) or any(s.id == "offload" for s in plan.strategies)


def test_the_probe_hook_sizes_the_batch():
    """What the job's probe (issue 34's job state) will hand over: sizes and activations per sample."""
    t = TrainingMemory(source="probe", parameters=1_000_000, param_bytes=4 * MiB, grad_bytes=4 * MiB,
                       optimizer="adam", optimizer_state_bytes=8 * MiB, activation_bytes_per_sample=4 * MiB,
                       batch_size=512)
    plan = plan_training(t, JobShape(batch=512), budget(None, None, given=GiB), source="probe")
    assert plan.fits is False and 100 < plan.largest_batch < 200


def _killed_run() -> JobMemory:
    return JobMemory(rss_bytes=900 * MiB, peak_rss_bytes=int(1.9 * GiB), exit_code=137,
                     processes=[ProcessMemory(1, "job"), ProcessMemory(2, "worker", uss_bytes=300 * MiB)],
                     cgroup=CgroupMemory(path="/train", version=2, limit_bytes=2 * GiB, current_bytes=0,
                                         events_in_window={"oom_kill": 1}),
                     system=SystemMemory(total_bytes=16 * GiB, available_bytes=12 * GiB))


def test_a_run_killed_at_its_limit_does_not_fit_and_names_what_to_measure():
    mem = _killed_run()
    plan = plan_from_run(mem, FitRequest(batch=256), budget(mem.system, mem.cgroup))
    assert plan.fits is False and plan.budget.binding == "cgroup"
    assert any("killed" in n for n in plan.notes) and any("--model" in n for n in plan.notes)
    ids = [s.id for s in plan.strategies]
    assert ids[-1] == "swap" and "raise-limit" in ids and "shared-dataset" in ids


def test_from_run_file_round_trip(tmp_path):
    from cpudoctor.model.serde import to_data

    path = tmp_path / "run.json"
    path.write_text(json.dumps({"kind": "cpudoctor-run", "memory": to_data(_killed_run())}))
    out = run_fit(FitRequest(batch=256, from_run=str(path)), root=tmp_path)
    assert out.plan.source == "run" and out.plan.fits is False
    (tmp_path / "other.json").write_text(json.dumps({"kind": "cpudoctor-report"}))
    with pytest.raises(FitInputError, match="not a saved run"):
        run_fit(FitRequest(from_run=str(tmp_path / "other.json")), root=tmp_path)


# --- the budget --------------------------------------------------------------------------------------------------


def test_budget_takes_the_least_and_a_given_limit_replaces_this_machines():
    sysmem = SystemMemory(total_bytes=16 * GiB, available_bytes=10 * GiB)
    cg = CgroupMemory(limit_bytes=4 * GiB, current_bytes=2 * GiB, file_bytes=GiB)
    b = budget(sysmem, cg)
    assert (b.usable_bytes, b.binding) == (3 * GiB, "cgroup")          # limit less what it holds, page cache aside
    assert budget(sysmem, None).binding == "available"
    assert budget(SystemMemory(total_bytes=8 * GiB, available_bytes=7 * GiB, wsl=2), None).binding == "wsl2"
    assert (budget(sysmem, cg, given=32 * GiB).usable_bytes, budget(sysmem, cg, given=32 * GiB).binding) == (
        32 * GiB, "given")


def test_wsl2_cap_strategy_writes_wslconfig_and_no_cgroup_lines():
    t = TrainingMemory(source="given", parameters=500_000_000, param_bytes=2 * GiB, optimizer="adam")
    plan = plan_training(t, JobShape(batch=1), budget(SystemMemory(total_bytes=8 * GiB, available_bytes=7 * GiB,
                                                                   wsl=2), None))
    raise_ = next(s for s in plan.strategies if s.id == "raise-limit")
    assert "[wsl2]" in raise_.snippet and "memory=" in raise_.snippet and "MemoryMax" not in raise_.snippet


# --- ranking and words -------------------------------------------------------------------------------------------


def test_rank_puts_what_fits_cheapest_first_and_swap_last():
    found = [Strategy("swap", speed_cost=10.0, fits=None), Strategy("checkpointing", saves_bytes=5, fits=True,
                                                                     speed_cost=0.3),
             Strategy("accumulation", saves_bytes=4, fits=True, speed_cost=0.02),
             Strategy("optimizer", saves_bytes=9, fits=False, speed_cost=0.0),
             Strategy("checkpointing", applicable=False), Strategy("offload", saves_bytes=99, fits=True)]
    assert [s.id for s in rank(found)] == ["accumulation", "checkpointing", "optimizer", "offload", "swap",
                                           "checkpointing"]


def test_json_and_markdown_carry_the_words():
    plan = plan_measured(_recorded("resnet18-adam"), JobShape(batch=256), budget(None, None, given=GiB))
    data = json.loads(render_json(plan))["plan"]
    assert data["verdict"].startswith("It does not fit") and data["strategies"][0]["title"].startswith("Batch ")
    assert all("label" in p for p in data["parts"])
    md = render_md(plan)
    assert "| Part | Memory | How |" in md and "```python" in md


# --- the command line -------------------------------------------------------------------------------------------


def test_size_and_shape_arguments():
    assert byte_size()("16G") == 16 * GiB and byte_size()("1.5GiB") == int(1.5 * GiB) and byte_size()("800MB") == 8e8
    assert shape()("3x224x224") == [3, 224, 224] and shape()("512") == [512]
    import argparse

    for bad in ("16Q", "nan", "-1G", "1e400G"):
        with pytest.raises(argparse.ArgumentTypeError):
            byte_size()(bad)
    for bad in ("3x0", "axb", "", "1x" * 20):
        with pytest.raises(argparse.ArgumentTypeError):
            shape()(bad)


def test_cli_params_does_not_fit_exit_1_and_needs_a_source():
    run = lambda *a: subprocess.run([sys.executable, "-m", "cpudoctor", "fit", *a], capture_output=True,  # noqa: E731
                                    text=True, timeout=60)
    p = run("--params", "100000000", "--optimizer", "adam", "--batch", "8", "--memory", "1G")
    assert p.returncode == 1, p.stderr
    assert "It does not fit" in p.stdout and "optimizer state" in p.stdout and "762.9 MiB" in p.stdout
    p = run("--batch", "8")
    assert p.returncode == 2 and "say what to fit" in p.stderr
