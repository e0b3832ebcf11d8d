"""`cpudoctor bench`: argument checks (one line, exit 2), text output, a real short run."""

from __future__ import annotations

import argparse
import io
import json

import pytest

from cpudoctor.cli import _Parser
from cpudoctor.commands import CliError, bench
from cpudoctor.lab.runner import JobOutcome


def parse(*argv: str) -> argparse.Namespace:
    p = _Parser(prog="cpudoctor")
    sub = p.add_subparsers(dest="command", parser_class=_Parser)
    bench.register(sub)
    return p.parse_args(["bench", *argv])


def test_bad_settings_are_one_line_cli_errors():
    with pytest.raises(CliError, match="batch size must be between 1 and 65536, not 0"):
        bench.run(parse("train", "--batch-size", "0"))
    with pytest.raises(CliError, match="needs the folder"):
        bench.run(parse("train", "--data", "mnist"))
    with pytest.raises(CliError, match="size must be between"):
        bench.run(parse("gemm", "--size", "3"))
    with pytest.raises(SystemExit) as exc:
        parse("gemm", "--threads", "x")
    assert exc.value.code == 2


def test_job_args_shapes():
    a = bench.job_args(parse("train", "--threads", "2", "--cpus", "0-1", "--dtype", "bf16", "--steps", "7"))
    assert a["threads"] == 2 and a["cpus"] == [0, 1] and a["dtype"] == "bf16" and a["steps"] == 7
    s = bench.job_args(parse("sweep", "--seconds", "3", "--model", "lenet5"))
    assert s == {"seconds": 3.0, "train": {"model": "lenet5", "data": "synthetic", "mnist_dir": None, "batch_size": 64,
                                          "optimizer": "adam", "dtype": "fp32", "channels_last": False, "compile": False}}
    g = bench.job_args(parse("gemm", "--backend", "numpy-fp64", "--threads", "1,2"))
    assert g["backends"] == ["numpy-fp64"] and g["threads"] == [1, 2]
    assert bench.job_args(parse("quant", "--batches", "1,8"))["batches"] == [1, 8]


def test_text_output_of_each_job():
    sweep = JobOutcome(result={"points": [
        {"variant": "PyTorch defaults", "threads": None, "threads_used": 2, "samples_per_s": 500.0},
        {"variant": "1 thread", "threads": 1, "threads_used": 1, "samples_per_s": 1000.0}],
        "recommendation": {"variant": "1 thread", "threads": 1, "cpus": None, "samples_per_s": 1000.0,
                           "default_samples_per_s": 500.0}})
    text = bench.format_outcome("sweep", sweep)
    assert "torch.set_num_threads(1)" in text and "2.00x the PyTorch defaults" in text and " 50%" in text
    sweep.result["recommendation"]["cpus"] = [0, 1, 2, 3, 8]
    sweep.result["notes"] = ["busy machine"]
    text = bench.format_outcome("sweep", sweep)
    assert "pinned to CPUs 0-3,8" in text and "note: busy machine" in text   # the taskset form, not a Python list
    train = JobOutcome(result={"settings": {"model": "lenet5", "dtype": "fp32", "batch_size": 8, "cpus": [0, 1]},
                               "threads": 2, "samples_per_s": 10.0})
    assert "CPUs 0-1" in bench.format_outcome("train", train)
    gemm = JobOutcome(result={"size": 64, "points": [{"backend": "torch-fp32", "threads": 1, "gflops": 100.0,
                                                      "peak_gflops": 200.0, "utilisation": 0.5}],
                              "machine": {"microarchitecture": "zen4", "physical_cores": 8}, "peak_notes": ["n1"]})
    assert "50%" in bench.format_outcome("gemm", gemm) and "note: n1" in bench.format_outcome("gemm", gemm)
    cancelled = JobOutcome(status="cancelled", progress=[{"step": 3, "loss": 1.0}])
    assert bench.format_outcome("train", cancelled) == "Cancelled: partial results.\nLast progress: step 3, loss 1.0"


def test_progress_bar_plain_lines_when_not_a_terminal():
    buf = io.StringIO()
    bar = bench.ProgressBar("bench train", stream=buf)
    bar.update(0.5, "step 3")
    bar.update(0.6, "step 4")          # within 2 s: not repeated in a log file
    bar.close()
    assert buf.getvalue() == "bench train: 50% step 3\n"


def test_real_short_training_run_as_json(capsys):
    code = bench.run(parse("train", "--steps", "8", "--seconds", "60", "--threads", "1", "--json", "--quiet"))
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["status"] == "ok" and out["result"]["steps"] == 8


# `python -m cpudoctor ARGS` with SIGINT's default handler, whatever the disposition the suite inherited.
WITH_DEFAULT_SIGINT = ("import runpy, signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
                       "sys.argv[0] = 'cpudoctor'; runpy.run_module('cpudoctor', run_name='__main__', alter_sys=True)")


@pytest.mark.slow
def test_ctrl_c_prints_partial_results_and_exits_130():
    """Ctrl-C reaches the whole process group: the job ignores it, the CLI stops the job in stages."""
    import os
    import signal
    import subprocess
    import sys
    import time

    # Started with Ctrl-C at its default: a shell that runs the suite in the background (`make test &`,
    # nohup, CI runners) hands SIGINT down ignored, and an ignored SIGINT is rightly left ignored.
    p = subprocess.Popen([sys.executable, "-c", WITH_DEFAULT_SIGINT, "bench", "train", "--seconds", "60",
                          "--threads", "1"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        line = ""
        while "step" not in line and time.monotonic() < deadline:
            line = p.stderr.readline()
        os.killpg(p.pid, signal.SIGINT)
        out, _ = p.communicate(timeout=30)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    assert p.returncode == 130
    assert out.startswith("Cancelled: partial results.") and "samples/s" in out


@pytest.mark.hardware
def test_settings_the_child_could_only_fail_at_are_refused_up_front(tmp_path, capsys):
    """--cpus outside the affinity and a missing MNIST folder: one line, exit 2, before any child starts."""
    import os

    allowed = sorted(os.sched_getaffinity(0))
    with pytest.raises(CliError, match=r"--cpus .*are not usable here \(this process may run on"):
        bench.run(parse("train", "--cpus", str(max(allowed) + 64)))
    with pytest.raises(CliError, match="--mnist-dir .*no such folder"):
        bench.run(parse("train", "--data", "mnist", "--mnist-dir", str(tmp_path / "nope")))
    warnings = bench._check_machine_fit(parse("train", "--threads", str(len(allowed) + 7)))
    assert len(warnings) == 1 and f"more than the {len(allowed)} usable CPUs" in warnings[0]
    assert bench._check_machine_fit(parse("train", "--threads", "1")) == []
    gemm = bench._check_machine_fit(parse("gemm", "--threads", f"1,{len(allowed) + 5}"))
    assert len(gemm) == 1 and gemm[0].startswith(f"--threads {len(allowed) + 5} is more than")


def test_run_too_short_to_measure_says_so():
    out = JobOutcome(result={"settings": {"model": "simplecnn", "dtype": "fp32", "batch_size": 64, "warmup_steps": 3},
                             "threads": 2, "steps": 3, "samples_per_s": None, "elapsed": 0.1})
    text = bench.format_outcome("train", out)
    assert "not measured: all 3 steps were warm-up" in text and "- samples/s" not in text
