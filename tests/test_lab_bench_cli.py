"""`cpudoctor bench`: argument and path checks before any run (one line, exit 2), text output read through the
typed results, Ctrl-C, and --into a saved report that doctor and compare then read."""

from __future__ import annotations

import argparse
import io
import json
from pathlib import Path

import pytest

from cpudoctor.report_file import load_report
from cpudoctor.cli import _Parser
from cpudoctor.commands import CliError, bench
from cpudoctor.lab import session
from cpudoctor.lab.results import Context, read_outcome
from cpudoctor.lab.runner import JobOutcome
from cpudoctor.model import Report
from conftest import run_cli


def parse(*argv: str) -> argparse.Namespace:
    p = _Parser(prog="cpudoctor")
    sub = p.add_subparsers(dest="command", parser_class=_Parser)
    bench.register(sub)
    return p.parse_args(["bench", *argv])


@pytest.fixture
def no_job(monkeypatch):
    """Any attempt to start a job fails the test: these checks must come first."""
    def refuse(*a, **kw):
        raise AssertionError("a job was started although the arguments were bad")

    monkeypatch.setattr(session, "run", refuse)


def test_bad_settings_are_one_line_cli_errors(no_job):
    with pytest.raises(CliError, match="needs the folder"):
        bench.run(parse("train", "--data", "mnist"))
    with pytest.raises(CliError, match="budget .* must hold at least two segments"):
        bench.run(parse("sweep", "--budget", "5", "--segment", "3"))
    # Numbers are checked by argparse itself (finite, in range): one line, exit code 2 (issue 19).
    for args in (("train", "--batch-size", "0"), ("gemm", "--size", "3"), ("gemm", "--threads", "x"),
                 ("train", "--seconds", "nan"), ("train", "--seconds", "inf"), ("gemm", "--min-seconds", "nan"),
                 ("gemm", "--clock-mhz", "inf"), ("quant", "--min-seconds", "-1"),
                 ("train", "--cpus", "0-100000000000"), ("gemm", "--threads", "0-100000000000"),
                 ("quant", "--batches", "0-100000000000"), ("train", "--threads", "9" * 5000),
                 ("sweep", "--budget", "nan"), ("sweep", "--segment", "inf")):
        with pytest.raises(SystemExit) as exc:
            parse(*args)
        assert exc.value.code == 2, args


def test_settings_refuse_non_finite_numbers():
    """The window's jobs go through the same settings: nan seconds would run forever."""
    from cpudoctor.lab.settings import GemmSettings, QuantSettings, SettingsError, TrainSettings

    for bad in (float("nan"), float("inf"), -1.0, 1e9):
        with pytest.raises(SettingsError, match="seconds must be more than 0"):
            TrainSettings(seconds=bad).validate()
        with pytest.raises(SettingsError, match="min_seconds"):
            GemmSettings(min_seconds=bad).validate()
        with pytest.raises(SettingsError, match="min_seconds"):
            QuantSettings(min_seconds=bad).validate()
    with pytest.raises(SettingsError, match="clock"):
        GemmSettings(clock_mhz=float("nan")).validate()


def test_output_paths_are_checked_before_the_run(tmp_path, no_job):
    with pytest.raises(CliError, match=r"-o .*the folder .*nope does not exist"):
        bench.run(parse("train", "-o", str(tmp_path / "nope" / "out.txt")))
    with pytest.raises(CliError, match="that is a folder"):
        bench.run(parse("gemm", "-o", str(tmp_path)))
    with pytest.raises(CliError, match=r"--into .*no such report; save one first with: cpudoctor report -o"):
        bench.run(parse("quant", "--into", str(tmp_path / "r.json")))
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(CliError, match=r"^--into .*bad\.json: "):
        bench.run(parse("quant", "--into", str(bad)))
    other = tmp_path / "other.json"
    other.write_text(Report(cpu=_cpu("Imaginary CPU 9000")).to_json())
    with pytest.raises(CliError, match=r"describes another machine \(Imaginary CPU 9000\)"):
        bench.run(parse("quant", "--into", str(other)))


def test_job_args_shapes():
    a = bench.job_args(parse("train", "--threads", "2", "--cpus", "0-1", "--dtype", "bf16", "--steps", "7"))
    assert a["threads"] == 2 and a["cpus"] == [0, 1] and a["dtype"] == "bf16" and a["steps"] == 7
    s = bench.job_args(parse("sweep", "--budget", "30", "--model", "lenet5"))
    assert s["budget_s"] == 30.0 and s["segment_s"] == 1.0
    assert s["train"] == {"model": "lenet5", "data": "synthetic", "mnist_dir": None, "batch_size": 64,
                          "optimizer": "adam", "dtype": "fp32", "channels_last": False, "compile": False}
    g = bench.job_args(parse("gemm", "--backend", "numpy-fp64", "--threads", "1,2"))
    assert g["backends"] == ["numpy-fp64"] and g["threads"] == [1, 2] and g["size"] is None
    q = bench.job_args(parse("quant", "--batches", "1,8", "--api", "torch.ao"))
    assert q["batches"] == [1, 8] and q["api"] == "torch.ao"


def _sweep_outcome(verdict: str = "recommended") -> JobOutcome:
    points = [{"variant": "PyTorch defaults", "group": "default", "threads": None, "threads_used": 2,
               "samples_per_s": 500.0, "samples_per_s_lo": 490.0, "samples_per_s_hi": 510.0, "samples_per_s_n": 3,
               "segments": 3, "other_share": 0.02},
              {"variant": "1 thread", "group": "threads", "threads": 1, "threads_used": 1, "samples_per_s": 1000.0,
               "samples_per_s_lo": 990.0, "samples_per_s_hi": 1010.0, "samples_per_s_n": 3, "segments": 3,
               "other_share": 0.02}]
    rec = {"variant": "1 thread", "threads": 1, "cpus": [0, 1, 2, 3, 8], "samples_per_s": 1000.0,
           "default_samples_per_s": 500.0, "model": "simplecnn"}
    busy = verdict != "recommended"
    return JobOutcome(result={"status": "ok", "points": points, "verdict": verdict, "rounds": 3, "budget_s": 45,
                              "reason": "inconclusive: 48 % of the CPU went to other programs" if busy
                              else "'1 thread' vs 'PyTorch defaults': faster beyond both spreads",
                              "recommendation": None if busy else rec,
                              "interference": {"share": 0.48 if busy else 0.02, "other_share": 0.48 if busy else 0.02,
                                               "steal_share": 0.0},
                              "failures": ["2 threads: out of memory"]})


def test_text_output_of_each_job():
    text = bench.format_outcome("sweep", _sweep_outcome())
    assert "Recommended: 1 thread -> torch.set_num_threads(1), pinned to CPUs 0-3,8" in text
    assert "2.00× the PyTorch defaults" in text and "990–1,010" in text and "failed: 2 threads: out of memory" in text
    text = bench.format_outcome("sweep", _sweep_outcome("inconclusive"))
    assert "No recommendation: inconclusive: 48 % of the CPU went to other programs." in text
    assert "torch.set_num_threads" not in text
    train = JobOutcome(result={"settings": {"model": "lenet5", "dtype": "fp32", "batch_size": 8, "cpus": [0, 1]},
                               "threads": 2, "samples_per_s": 10.0, "steps": 5, "window_rates": [9.0, 11.0]})
    text = bench.format_outcome("train", train)
    assert "CPUs 0-1" in text and "10 samples/s, spread 9–11" in text
    gemm = JobOutcome(result={"size": 64, "points": [{"backend": "torch-fp32", "precision": "fp32", "threads": 1,
                                                      "size": 64, "gflops": 100.0, "gflops_lo": 90.0,
                                                      "gflops_hi": 101.0}]})
    peak = read_outcome("gemm", gemm, {}, Context(peak=_zen5()))
    from cpudoctor.render.lab import outcome_text

    text = outcome_text(peak)
    assert "62 %" in text and "90.0–101.0" in text and "micro-architecture zen5, 2 physical cores" in text
    cancelled = JobOutcome(status="cancelled", progress=[{"step": 3, "loss": 1.0, "samples_per_s": 50.0}])
    text = bench.format_outcome("train", cancelled)
    assert text.startswith("Cancelled: partial results.") and "50 samples/s" in text


def test_run_too_short_to_measure_says_so():
    out = JobOutcome(result={"settings": {"model": "simplecnn", "dtype": "fp32", "batch_size": 64, "warmup_steps": 3},
                             "threads": 2, "steps": 3, "samples_per_s": None, "elapsed": 0.1})
    text = bench.format_outcome("train", out)
    assert "not measured: all 3 steps were warm-up" in text and "- samples/s" not in text


def test_progress_bar_plain_lines_when_not_a_terminal():
    buf = io.StringIO()
    bar = bench.ProgressBar("bench train", stream=buf)
    bar.update(0.5, "step 3")
    bar.update(0.6, "step 4")          # within 2 s: not repeated in a log file
    bar.close()
    assert buf.getvalue() == "bench train: 50 % step 3\n"


def test_real_short_training_run_as_json(capsys):
    code = bench.run(parse("train", "--steps", "8", "--seconds", "60", "--threads", "1", "--json", "--quiet"))
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["status"] == "ok" and out["result"]["steps"] == 8
    assert out["bench_run"]["kind"] == "train" and out["bench_run"]["metrics"]["steps"] == 8


# `python -m cpudoctor ARGS` with SIGINT's default handler, whatever the disposition the suite inherited.
WITH_DEFAULT_SIGINT = ("import runpy, signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
                       "sys.argv[0] = 'cpudoctor'; runpy.run_module('cpudoctor', run_name='__main__', alter_sys=True)")


@pytest.mark.slow
@pytest.mark.alongside
def test_ctrl_c_twice_prints_partial_results_and_exits_130():
    """Ctrl-C reaches the whole process group: the job ignores it, the CLI stops it in stages; a second press
    while it stops changes nothing."""
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
        deadline = time.monotonic() + 90
        line = ""
        while "step" not in line and time.monotonic() < deadline:
            line = p.stderr.readline()
        os.killpg(p.pid, signal.SIGINT)
        time.sleep(0.05)
        os.killpg(p.pid, signal.SIGINT)
        out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    assert p.returncode == 130, err
    assert out.startswith("Cancelled: partial results.") and "samples/s" in out
    assert "still stopping" in err and "Traceback" not in err


def _cpu(brand: str):
    from cpudoctor.model import CpuInfo

    return CpuInfo(brand=brand)


def _zen5():
    from cpudoctor.lab.peak import MachinePeak

    return MachinePeak(microarchitecture="zen5", brand="AMD Ryzen 9 9950X", max_mhz=2500.0, physical_cores=2)


def _this_machine_report(path: Path) -> Path:
    from cpudoctor.probes import probe_cpu

    report = Report(cpu=probe_cpu(Path("/")))
    report.meta.generated_at = "2026-12-01T08:00:00+00:00"
    path.write_text(report.to_json())
    return path


def _fake_run(outcome: JobOutcome, job: str):
    def fake(job_name, settings, *, context=None, stop=None, **kw):
        assert job_name == job
        return outcome, read_outcome(job, outcome, settings, context)
    return fake


def test_into_adds_a_conclusive_sweep_and_its_recommendation(tmp_path, capsys, monkeypatch):
    path = _this_machine_report(tmp_path / "r.json")
    before = path.read_text()
    monkeypatch.setattr(session, "run", _fake_run(_sweep_outcome(), "sweep"))
    code, out, err = run_cli(capsys, "bench", "sweep", "--into", str(path), "--quiet")
    assert code == 0 and "added the sweep run and its recommendation" in err
    report = load_report(path)
    assert [r.kind for r in report.benchmarks] == ["sweep"]
    assert report.recommendation.threads == 1 and report.recommendation.cpus == [0, 1, 2, 3, 8]
    assert report.benchmarks[0].metrics["verdict"] == "recommended"
    # compare shows what the benchmark added
    code, out, err = run_cli(capsys, "compare", str(_write(tmp_path / "a.json", before)), str(path), "--format", "json")
    changes = {(c["section"], c["item"]): c for c in json.loads(out)["changes"]}
    assert changes[("benchmarks", "sweep")]["note"] == "only in B"
    assert changes[("benchmarks", "recommended threads")]["b"] == 1


def test_into_never_adopts_an_inconclusive_sweep(tmp_path, capsys, monkeypatch):
    path = _this_machine_report(tmp_path / "r.json")
    monkeypatch.setattr(session, "run", _fake_run(_sweep_outcome("inconclusive"), "sweep"))
    code, out, err = run_cli(capsys, "bench", "sweep", "--into", str(path), "--quiet")
    assert code == 0 and "inconclusive, so the report's recommendation is unchanged" in err
    report = load_report(path)
    assert report.recommendation is None and report.benchmarks[0].metrics["verdict"] == "inconclusive"
    assert "48 % of the CPU" in report.benchmarks[0].note


def test_into_a_bf16_run_reaches_the_precision_finding(tmp_path, capsys, monkeypatch):
    """doctor --from-report defers to the measured bf16/fp32 ratio of a run added with --into."""
    from cpudoctor.model import CpuInfo, IsaVerdict

    report = Report(cpu=_this_cpu_with_flags(CpuInfo, IsaVerdict))
    path = tmp_path / "r.json"
    path.write_text(report.to_json())
    outcome = JobOutcome(result={"status": "ok", "dtype": "bf16", "samples_per_s": 300.0, "steps": 50,
                                 "reference": {"dtype": "fp32", "samples_per_s": 900.0},
                                 "interference": {"other_share": 0.01, "steal_share": 0.0},
                                 "settings": {"model": "simplecnn", "dtype": "bf16", "batch_size": 64}})
    monkeypatch.setattr(session, "run", _fake_run(outcome, "train"))
    code, out, err = run_cli(capsys, "bench", "train", "--dtype", "bf16", "--into", str(path), "--quiet")
    assert code == 0
    code, out, err = run_cli(capsys, "doctor", "--from-report", str(path), "--format", "json", "--only", "PREC001")
    finding = json.loads(out)["findings"][0]
    assert finding["title"] == "bf16 training measured 3.0x slower than fp32 here"
    assert "in the same job" in finding["why"]


def _this_cpu_with_flags(CpuInfo, IsaVerdict):
    """This machine's brand (so --into accepts the report) with Zen 3-like flags: no native bf16."""
    from cpudoctor.probes import probe_cpu

    here = probe_cpu(Path("/"))
    return CpuInfo(brand=here.brand, arch="x86_64", vendor="AMD", microarchitecture="zen3",
                   flags=["avx2", "fma", "sse4_2"], isa=IsaVerdict(avx2=True, fma=True))


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


@pytest.mark.hardware
def test_settings_the_child_could_only_fail_at_are_refused_up_front(tmp_path, no_job):
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
