"""A short real training run in a child process: loss falls, accuracy beats chance clearly."""

from __future__ import annotations

import pytest

from cpudoctor.lab import runner
from cpudoctor.lab.settings import SettingsError, TrainSettings


def test_short_training_run_learns():
    args = TrainSettings(steps=60, seconds=None, batch_size=32, eval_samples=300, threads=1).to_dict()
    out = runner.run_job("train", args, timeout=120)
    assert out.status == "ok", out.message
    r = out.result
    assert r["steps"] == 60 and r["threads"] == 1
    assert r["final_loss"] < 0.6 * r["initial_loss"]
    assert r["eval_accuracy"] > 0.3            # chance is 0.1
    assert r["samples_per_s"] > 0 and r["parameters"] == 32 * 9 + 32 + 32 * 13 * 13 * 10 + 10
    steps = [p["step"] for p in out.progress]
    assert steps == sorted(steps) and steps[-1] == 60
    assert all({"step", "loss", "accuracy", "samples_per_s", "elapsed"} <= set(p) for p in out.progress)
    # one definition: the last progress line carries the result's figures
    last = out.progress[-1]
    assert last["samples_per_s"] == r["samples_per_s"] and last["loss"] == r["final_loss"]
    assert r["smoothing_steps"] == 20 and r["window_rates"] and 0 <= r["interference"]["other_share"] <= 1


def test_bad_settings_are_an_error_result_not_a_traceback():
    out = runner.run_job("train", {"batch_size": 0})
    assert out.status == "error" and out.message == "batch size must be between 1 and 65536, not 0"
    out = runner.run_job("train", {"data": "mnist", "mnist_dir": "/nonexistent/mnist", "steps": 1})
    assert out.status == "error" and "/nonexistent/mnist is not a folder" in out.message


def test_training_on_mnist_idx_files_from_a_folder(tmp_path):
    import numpy as np

    from cpudoctor.lab.jobs import data

    rng = np.random.default_rng(0)
    data.write_idx(tmp_path / "train-images-idx3-ubyte.gz", rng.integers(0, 256, (128, 28, 28), dtype=np.uint8))
    data.write_idx(tmp_path / "train-labels-idx1-ubyte.gz", rng.integers(0, 10, 128).astype(np.uint8))
    out = runner.run_job("train", {"data": "mnist", "mnist_dir": str(tmp_path), "steps": 3, "seconds": None,
                                   "batch_size": 16, "threads": 1, "warmup_steps": 1})
    assert out.status == "ok", out.message
    assert out.result["steps"] == 3 and out.result["eval_accuracy"] is None     # no t10k files: no held-out score


def test_settings_validation_messages():
    with pytest.raises(SettingsError, match="model must be one of"):
        TrainSettings(model="vgg").validate()
    with pytest.raises(SettingsError, match="give steps or seconds"):
        TrainSettings(steps=None, seconds=None).validate()
    with pytest.raises(SettingsError, match="unknown training setting"):
        TrainSettings.from_dict({"epochs": 3})
    assert TrainSettings(cpus=[3, 1, 1]).validate().cpus == [1, 3]


@pytest.mark.slow
@pytest.mark.alongside
@pytest.mark.parametrize("extra", [{"dtype": "bf16"}, {"channels_last": True}, {"model": "lenet5"},
                                   {"optimizer": "sgd", "cpus": "first"}])
@pytest.mark.hardware
def test_variants_run(extra):
    import os

    if extra.get("cpus") == "first":
        extra = {**extra, "cpus": [min(os.sched_getaffinity(0))]}
    args = {**TrainSettings(steps=15, seconds=None, batch_size=32, eval_samples=0).to_dict(), **extra}
    out = runner.run_job("train", args, timeout=120)
    assert out.status == "ok", out.message
    assert out.result["final_loss"] < out.result["initial_loss"]
    if "cpus" in extra:
        assert out.result["cpus"] == extra["cpus"]
    if extra.get("dtype") == "bf16":           # a bf16 run measures fp32 in the same job
        ref = out.result["reference"]
        assert ref["dtype"] == "fp32" and ref["samples_per_s"] > 0 and out.result["samples_per_s"] > 0




@pytest.mark.hardware
@pytest.mark.slow
def test_run_pinned_to_one_cpu_this_process_may_use():
    """Pinned to the last CPU of this process's affinity: CPU 0 may be outside it (`taskset -c 1`, a
    container's cpuset)."""
    import os

    cpu = max(os.sched_getaffinity(0))
    args = {**TrainSettings(steps=15, seconds=None, batch_size=32, eval_samples=0).to_dict(), "cpus": [cpu]}
    out = runner.run_job("train", args, timeout=120)
    assert out.status == "ok", out.message
    assert out.result["cpus"] == [cpu] and out.result["final_loss"] < out.result["initial_loss"]


@pytest.mark.slow
@pytest.mark.alongside
def test_resnet18_has_eleven_million_parameters():
    out = runner.run_job("train", {"model": "resnet18", "steps": 2, "seconds": None, "batch_size": 4,
                                   "warmup_steps": 0, "eval_samples": 0}, timeout=120)
    assert out.status == "ok", out.message
    assert 11_000_000 < out.result["parameters"] < 11_400_000


@pytest.mark.slow
@pytest.mark.alongside
def test_torch_compile_runs_or_fails_calmly():
    out = runner.run_job("train", {"steps": 6, "seconds": None, "batch_size": 16, "compile": True, "threads": 1,
                                   "eval_samples": 0, "warmup_steps": 2}, timeout=300)
    if out.status == "ok":
        assert out.result["compile_s"] is not None and out.result["steps"] == 6
    else:                                       # no C compiler, unsupported Python, ...: one clear line
        assert out.status == "error" and out.error["kind"] == "compile", out.message
        assert out.message.startswith("torch.compile")


@pytest.mark.hardware
@pytest.mark.slow
def test_a_competing_busy_loop_is_reported_as_interference():
    """A real busy loop pinned to the one CPU the job is pinned to: the job reports what it took (not a speed)."""
    import os
    import subprocess
    import sys

    from cpudoctor.lab.results import QUIET_LIMIT, read_outcome

    cpu = max(os.sched_getaffinity(0))
    hog = subprocess.Popen([sys.executable, "-c", f"import os; os.sched_setaffinity(0, [{cpu}]); print('spinning', "
                            "flush=True)\nwhile True: pass"], stdout=subprocess.PIPE, text=True)
    try:
        assert hog.stdout.readline().strip() == "spinning"          # on the job's CPU before the job starts
        # A step limit, not seconds (the budget counts start-up, which a hog on the CPU stretches), and enough
        # steps for a window of seconds: over a quarter of a second the scheduler's turns decide the share.
        out = runner.run_job("train", {"steps": 300, "seconds": None, "cpus": [cpu], "batch_size": 16,
                                       "eval_samples": 0}, timeout=300)
    finally:
        hog.kill()
        hog.wait()
    assert out.status == "ok", out.message
    inter = out.result["interference"]
    assert inter["cpus"] == [cpu]
    # The scheduler shares the CPU between the two and anything else: about half on a quiet machine, less when
    # other programs' scheduling groups take their turns too (0.23 beside two busy loops). Either way the
    # others' share is far above what the lab calls quiet.
    assert inter["other_cpu_s"] > 0 and inter["other_share"] + inter["steal_share"] > QUIET_LIMIT, inter

    result = read_outcome("train", out)
    assert result.quiet is False and "went to other programs" in result.caveats()[0]
    assert result.recommendation() is None          # a busy run's setting is never handed to the advisor
