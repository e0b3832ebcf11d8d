"""THR001 follows what the thread sweep measured, and findings are ranked by measured effect (issue 26).

Seen before: with a tiny model where 1 thread measured 18-23x faster than 2, the sweep's verdict was
"inconclusive" (another program took the CPU), so the advisor ignored the numbers and said "set it to 2";
and THR001 stayed on top of the list even when PyTorch's default was the measured best.
The real situation: `cpudoctor bench sweep --into REPORT` beside a busy loop, then the advice from that report.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import probe_tree
from real_situations import clean_environ, need_cpus, need_module

from cpudoctor import advisor
from cpudoctor.advisor import measured
from cpudoctor.advisor.ranking import finding_order
from cpudoctor.model import BenchRun, Finding
from cpudoctor.report_file import load_report

REPO = Path(__file__).resolve().parents[1]
SCENARIOS = REPO / "tests" / "fixtures" / "scenarios"

# What `cpudoctor bench sweep --model simplecnn --batch-size 8` measured on a 2-vCPU Zen 4 KVM guest while a busy
# loop held one CPU (the numbers of the situation): verdict inconclusive, 91 % of the CPU to others.
BUSY_SWEEP = {
    "verdict": "inconclusive", "reason": "inconclusive: 91 % of the CPU went to other programs", "quiet": False,
    "points": [
        {"variant": "PyTorch defaults", "group": "default", "threads": None, "cpus": None, "threads_used": 2,
         "samples_per_s": 27.401, "samples_per_s_lo": 20.028, "samples_per_s_hi": 38.501, "status": "ok"},
        {"variant": "1 thread", "group": "threads", "threads": 1, "cpus": None, "threads_used": 1,
         "samples_per_s": 418.788, "samples_per_s_lo": 225.155, "samples_per_s_hi": 517.018, "status": "ok"},
        {"variant": "2 threads", "group": "threads", "threads": 2, "cpus": None, "threads_used": 2,
         "samples_per_s": 11.331, "samples_per_s_lo": 11.331, "samples_per_s_hi": 11.331, "status": "ok",
         "same_as": "PyTorch defaults"},
    ]}


def _report_with(metrics: dict):
    report = load_report(SCENARIOS / "zen3-healthy.json")
    report.software.thread_env.pop("OMP_NUM_THREADS", None)
    report.recommendation = None
    report.benchmarks = [BenchRun("sweep", {"train": {"model": "simplecnn"}}, copy.deepcopy(metrics))]
    return report


def _thr001(report) -> Finding:
    [f] = [f for f in advisor.diagnose(report) if f.code == "THR001"]
    return f


def test_an_inconclusive_sweep_that_separated_is_followed():
    f = _thr001(_report_with(BUSY_SWEEP))
    assert f.severity == "warning" and "1 thread measured 15.3x as fast as PyTorch's default 2" in f.title
    assert "419 samples/s (225-517) with 1 thread against 27 (20-39)" in f.why and "inconclusive" in f.why
    assert "export OMP_NUM_THREADS=1" in f.snippet and "to 1" in f.fix
    assert "OMP_NUM_THREADS=2" not in f.snippet


def test_a_sweep_whose_spreads_overlap_is_not_followed():
    metrics = copy.deepcopy(BUSY_SWEEP)
    metrics["points"][1]["samples_per_s_lo"] = 30.0          # 1 thread's slowest segment below the default's fastest
    report = _report_with(metrics)
    assert measured.sweep_choice(report) is None
    f = _thr001(report)
    assert f.severity == "ok" and "measured no count clearly faster" in f.title and "to 2" not in f.fix


def test_pytorch_default_already_the_measured_best_is_no_finding():
    metrics = copy.deepcopy(BUSY_SWEEP)
    metrics["points"][0].update(samples_per_s=900.0, samples_per_s_lo=850.0, samples_per_s_hi=950.0)
    f = _thr001(_report_with(metrics))
    assert f.severity == "ok" and "PyTorch's default (2 threads) is what the thread sweep measured fastest" in f.title


def test_findings_are_ranked_by_measured_effect():
    report = _report_with(BUSY_SWEEP)
    warnings = sorted((f for f in advisor.diagnose(report) if f.severity == "warning"), key=finding_order)
    assert warnings[0].code == "THR001", [f.code for f in warnings]
    # The measured figure is the evidence the order rests on.
    assert warnings[0].evidence["measured_effect"] == pytest.approx(15.28, abs=0.01)


@pytest.mark.hardware
@pytest.mark.slow
def test_a_real_sweep_beside_a_busy_loop_and_the_advice_from_its_report(tmp_path):
    """`bench sweep --into` on this machine with a busy loop on one CPU, then THR001 from that report."""
    need_module("torch")
    cpus = need_cpus(2)[:2]
    report = probe_tree(software=True)
    report.software.thread_env = {k: v for k, v in report.software.thread_env.items()
                                  if not k.startswith(("OMP_", "MKL_", "OPENBLAS_"))}
    path = tmp_path / "report.json"
    path.write_text(report.to_json(), encoding="utf-8")
    hog = subprocess.Popen([sys.executable, "-c", f"import os; os.sched_setaffinity(0, [{cpus[-1]}])\nwhile True: pass"])
    try:
        out = subprocess.run([sys.executable, "-m", "cpudoctor", "bench", "sweep", "--model", "simplecnn",
                              "--batch-size", "8", "--budget", "60", "--segment", "0.2", "--into", str(path),
                              "--quiet", "--json"], capture_output=True, text=True, timeout=300, env=clean_environ(),
                             preexec_fn=lambda: os.sched_setaffinity(0, cpus))
    finally:
        hog.kill()
        hog.wait()
    assert out.returncode == 0, out.stderr[-2000:]
    saved = load_report(path)
    assert [r.kind for r in saved.benchmarks] == ["sweep"], json.loads(out.stdout)["result"].get("reason")
    run = measured.latest_sweep(saved)                       # None: no worker measured within the budget
    points = measured.sweep_points(run) if run else []
    best = measured.separated_best(points)
    default = measured.default_point(saved)
    f = _thr001(saved)
    if best is None or default is None:
        assert "measured" not in f.title                     # nothing settled: no claim from the sweep
    elif best.threads == default.threads:
        assert f.severity == "ok"
    else:
        # Whatever this machine measured fastest beyond the spreads is what the advice says, with its figures.
        assert f"{best.threads} thread" in f.title and f"export OMP_NUM_THREADS={best.threads}" in f.snippet
        assert f"{best.median:,.0f} samples/s" in f.why and f"{default.median:,.0f}" in f.why
        ranked = sorted((g for g in advisor.diagnose(saved) if g.severity == f.severity), key=finding_order)
        assert ranked[0].code == "THR001" or ranked[0].evidence.get("measured_effect", 0) >= f.evidence["measured_effect"]


# What `cpudoctor bench train --model simplecnn --batch-size 8 --threads 1` then `--threads 2` measured here, one
# after the other into one report, with other programs taking 57 % and 73 % of the CPUs (issue 41 item 6): no
# sweep, and THR001 said "set the thread count explicitly to 2".
TRAIN_SETTINGS = {"model": "simplecnn", "data": "synthetic", "batch_size": 8, "optimizer": "adam", "dtype": "fp32",
                  "channels_last": False, "compile": False, "cpus": None}
TRAIN_RUNS = [(1, {"samples_per_s": 3129.07, "samples_per_s_lo": 2294.1, "samples_per_s_hi": 3639.1, "threads": 1,
                   "other_share": 0.5699}),
              (2, {"samples_per_s": 75.70, "samples_per_s_lo": 21.2, "samples_per_s_hi": 298.2, "threads": 2,
                   "other_share": 0.7293})]


def _report_with_training_runs(runs=TRAIN_RUNS):
    report = load_report(SCENARIOS / "zen3-healthy.json")
    report.software.thread_env.pop("OMP_NUM_THREADS", None)
    report.recommendation = None
    report.software.torch.intra_op_threads = 2
    report.benchmarks = [BenchRun("train", dict(TRAIN_SETTINGS, threads=t), dict(m)) for t, m in runs]
    return report


def test_training_runs_at_two_thread_counts_are_followed():
    """Issue 41 item 6: the lab measured 1 thread far faster than 2 (training runs, no sweep); the advice follows."""
    f = _thr001(_report_with_training_runs())
    assert f.severity == "warning" and "1 thread measured 41.3x as fast as PyTorch's default 2" in f.title
    assert "lab's training runs measured 3,129 samples/s (2,294-3,639) with 1 thread against 76 (21-298)" in f.why
    assert "export OMP_NUM_THREADS=1" in f.snippet and "OMP_NUM_THREADS=2" not in f.snippet and "to 1" in f.fix


def test_without_a_measurement_the_count_depends_on_the_model_and_is_not_ranked_first():
    """Issue 41 item 6 and issue 40 item 9: nothing measured and PyTorch already takes the cores' count: no
    suggestion ranked above the others ("set it to 2" beside "PyTorch chose 2"), but a passed check that says the
    best count depends on the model; where PyTorch's count differs, the suggestion says so too. The evidence is
    shown in words."""
    from cpudoctor.advisor.snippets import thread_plan
    from cpudoctor.render.finding_view import finding_view

    report = _report_with_training_runs([])
    cores = thread_plan(report).threads
    report.software.torch.intra_op_threads = cores
    f = _thr001(report)
    assert f.severity == "ok" and "depends on the model" in f.title and f"{cores} thread" in f.title
    report.software.torch.intra_op_threads = cores * 2          # e.g. every SMT sibling
    g = _thr001(report)
    assert g.severity == "info" and "depends on the model" in g.title and "depends on the model's size" in g.why
    words = [line.label for line in finding_view(g).evidence]
    assert "OMP_NUM_THREADS (environment)" in words and not [w for w in words if w.startswith("software.")], words
