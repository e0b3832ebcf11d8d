"""A window's worth of realistic data: a 2-socket report, live samples, an inspection, a selection.

Used by the layout test (tests/test_gui_layout.py) and by docs/screenshots.py, so the pictures in the
README show what the test checks. The report is a scenario fixture built from a real corpus tree
(2 x Xeon Gold 6230, 4 NUMA nodes), diagnosed by the current rules.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

from cpudoctor.jobrun import Machine
from cpudoctor.report_file import load_report
from cpudoctor.advisor import diagnose
from cpudoctor.advisor.process_rules import run_process_rules
from cpudoctor.probes.live.sample import Sample
from cpudoctor.model.inspection import ChildProcess, Inspection, NativeLib, ProcessEntry, ThreadInfo
from cpudoctor.probes.process.inspect import place_threads
from cpudoctor.probes.software.envs import PythonEnv
from cpudoctor.model import Report

SCENARIO = Path(__file__).parent / "fixtures" / "scenarios" / "cascadelake-2s-numa-pinned.json"


RESNET_PYTHON = "/home/ann/projects/resnet/.venv/bin/python"


def realistic_report() -> Report:
    report = load_report(SCENARIO)
    # the environment it describes, as a report made now names it (the scenario predates names)
    report.software.python = dataclasses.replace(report.software.python, env_name="resnet",
                                                 executable=RESNET_PYTHON, prefix=str(Path(RESNET_PYTHON).parents[1]),
                                                 chosen_by="likely")
    # a roofline run, a GEMM run and a training run with operators: the Roofline tab and the Overview's
    # measured-roof row are laid out with data
    from tests import roofline_samples

    report.benchmarks = [*report.benchmarks, *roofline_samples.runs()]
    report.findings = diagnose(report)
    return report


def environments(report: Report) -> list[PythonEnv]:
    """What the toolbar's picker lists on that machine: the report's environment (with its torch), a
    conda env without torch, a system Python and CPU Doctor's own."""
    py, torch = report.software.python, report.software.torch
    return [
        PythonEnv(python=py.executable, prefix=py.prefix, kind=py.env_kind, name=py.env_name, version=py.version,
                  torch=torch.version if torch else None, torch_build="cpu", in_cwd=True),
        PythonEnv(python="/home/ann/miniforge3/envs/data/bin/python", prefix="/home/ann/miniforge3/envs/data",
                  kind="conda", name="data", version="3.12.7", numpy="2.1.3"),
        PythonEnv(python="/usr/bin/python3", prefix="/usr", kind="system", name="python3.12", version="3.12.3"),
        PythonEnv(python="/opt/cpudoctor/.venv/bin/python", prefix="/opt/cpudoctor/.venv", kind="venv",
                  name=".venv", version="3.11.9", torch="2.13.0+cpu", torch_build="cpu", own=True),
    ]


def choose_environment(window, report: Report) -> None:
    """The picker as a user sees it once the environments are listed: the report's one chosen."""
    chooser = window.model.environments
    found = environments(report)
    chooser._started = True                  # nothing is looked up on this machine
    chooser.envs, chooser.listed_once = list(found), True
    chooser.listed.emit(list(found))
    chooser._set(found[0], "likely")


def samples(report: Report, n: int = 30, t0: float = 1000.0):
    """``n`` samples at 2 Hz for the report's CPUs: a busy first socket, a quieter second one, slow waves."""
    cpus = report.topology.online_cpus
    half = len(cpus) // 2
    for i in range(n):
        load = [max(0.0, min(100.0, (72.0 if k < half else 18.0) + 20.0 * math.sin(i / 11.0 + c * 0.7)
                              + 8.0 * math.sin(i / 3.0 + c * 1.3))) for k, c in enumerate(cpus)]
        yield Sample(t=t0 + i / 2, cpu_ids=cpus, cpu_percent=load,
                     freq_mhz=[2600.0 + 500.0 * math.sin(i / 17.0 + c) for c in cpus],
                     temps_c={"coretemp Package id 0": 64.0 + 4.0 * math.sin(i / 15.0),
                              "coretemp Package id 1": 52.0 + 2.0 * math.sin(i / 21.0)},
                     mem_total_bytes=64 << 30, mem_used_bytes=int((21.0 + 2.0 * math.sin(i / 40.0)) * (1 << 30)),
                     swap_total_bytes=8 << 30, swap_used_bytes=1 << 30)


def inspection(report: Report) -> Inspection:
    cpus = report.topology.online_cpus
    threads = [ThreadInfo(4200 + i, "python" if i == 0 else f"pt_thread_{i}", "R" if i % 3 else "S",
                          cpu_percent=90.0 - i * 4, last_cpu=cpus[(i * 5) % len(cpus)],
                          cpus_seen=[cpus[(i * 5) % len(cpus)], cpus[(i * 5 + 1) % len(cpus)]], migrations=i % 4,
                          wait_percent=3.0 * (i % 3)) for i in range(20)]
    insp = Inspection(
        pid=4200, name="python", cmdline="python ~/projects/resnet/train.py --epochs 90 --batch-size 256 --workers 8",
        is_python=True, window_s=3.0, samples=31, num_threads=20, threads=threads, cpu_percent=1240.0,
        runnable_mean=14.2, runnable_max=19, wait_percent=37.0, migrations=128, affinity=list(cpus),
        usable_cpus=len(cpus), nice=0, env={"OMP_NUM_THREADS": "40", "MKL_NUM_THREADS": "40"}, env_readable=True,
        libraries_readable=True,
        libraries=[NativeLib("libgomp.so.1", "openmp", "libgomp", "gomp", "torch"),
                   NativeLib("libmkl_rt.so.2", "blas", "mkl", "mkl", "numpy")],
        children=[ChildProcess(4300 + k, "python", "python -c from multiprocessing.spawn import spawn_main", 3,
                               40.0, 900 << 20) for k in range(4)],
        children_threads=12, children_cpu_percent=160.0, rss_bytes=12 << 30, swap_bytes=0, major_faults=0,
        major_faults_per_s=0.0, notes=["Sampled 31 times over 3.0 s", "Another note the user should read"])
    place_threads(insp, report.topology)
    return insp


def processes() -> list[ProcessEntry]:
    return [ProcessEntry(4200, "python", "python ~/projects/resnet/train.py --epochs 90 --batch-size 256 --workers 8",
                         True, 20, 1240.0, 12 << 30),
            *(ProcessEntry(4300 + k, "python", "python -c from multiprocessing.spawn import spawn_main", True, 3,
                           40.0, 900 << 20) for k in range(4)),
            ProcessEntry(1312, "jupyter-lab", "python -m jupyter lab --no-browser", True, 6, 0.7, 310 << 20),
            ProcessEntry(880, "postgres", "postgres -D /var/lib/postgresql/16/main", False, 1, 0.1, 60 << 20,
                         own=False)]


def _train_lines(steps: int = 60) -> list[dict]:
    """A training run's progress lines as lab/jobs/train.py writes them: loss falling, accuracy rising."""
    lines = []
    for s in range(1, steps + 1):
        lines.append({"step": s, "loss": 2.3 * math.exp(-s / 40) + 0.2, "accuracy": min(0.95, 0.1 + s / 80),
                      "samples_per_s": None if s < 3 else 1150.0 + 40.0 * math.sin(s / 5), "elapsed": s * 0.3})
    return lines


def fill_training(window) -> None:
    """The Training page after a thread sweep on a busy machine, an inference benchmark and a training run, run
    through the page's own code (its session reads the outcomes the lab's jobs would give; no child process runs)."""
    from lab_samples import infer_run

    from cpudoctor.lab.runner import JobOutcome

    page = window.pages["Training"]
    report = window.model.report
    busy = {"other_share": 0.48, "steal_share": 0.0, "share": 0.48, "seconds": 30.0}
    page.session.begin("sweep", {"train": {"model": "simplecnn", "batch_size": 64}, "budget_s": 45.0}, report)
    points = []
    for threads, sps in ((1, 610.0), (2, 1010.0), (4, 1480.0), (8, 1690.0), (16, 1620.0)):
        point = {"variant": f"{threads} threads" if threads > 1 else "1 thread", "group": "threads",
                 "threads": threads, "threads_used": threads, "samples_per_s": sps, "samples_per_s_lo": sps * 0.8,
                 "samples_per_s_hi": sps * 1.15, "samples_per_s_n": 4, "segments": 4, "phase": "segment"}
        points.append(point)
        page._on_progress(dict(point, round=1))
    default = {"variant": "PyTorch defaults", "group": "default", "threads": None, "threads_used": 40,
               "samples_per_s": 1540.0, "samples_per_s_lo": 1300.0, "samples_per_s_hi": 1700.0, "samples_per_s_n": 4,
               "segments": 4, "phase": "segment"}
    page._on_progress(dict(default, round=1))
    page._on_finished(JobOutcome(status="ok", result={
        "status": "ok", "points": [*points, default], "verdict": "inconclusive", "recommendation": None,
        "reason": "inconclusive: 48 % of the CPU went to other programs", "rounds": 4, "variants": 6,
        "budget_s": 45.0, "segment_s": 1.0, "interference": busy}))
    infer = infer_run()                          # the Inference tab: its box plots, verdict, code and table
    page.session.begin("infer", dict(infer.settings), report)
    page.infer.reset()
    for v in infer.metrics["variants"]:
        for p in v.get("points") or []:
            page._on_progress({"phase": "segment", "round": 1, "variant": v["name"], "batch": p["batch"],
                               "segment_median_ms": p["latency_ms"], "elapsed": 20.0, "budget_s": 60.0})
    page._on_finished(JobOutcome(status="ok", result={
        **infer.metrics, "status": "ok",
        "interference": {"other_share": 0.01, "steal_share": 0.0, "cpus": [0, 1], "wall_s": 30.0}}))
    settings = page.train_settings().to_dict()
    page.session.begin("train", settings, report)
    page.live.reset(page.session.live)
    lines = _train_lines()
    for line in lines:
        page._on_progress(line)
    page._on_finished(JobOutcome(status="ok", progress=lines, result={
        "status": "ok", "steps": 60, "samples_per_s": 1183.4, "window_rates": [1120.0, 1183.0, 1230.0],
        "initial_loss": 2.302, "final_loss": 1.626, "train_accuracy": 0.412, "eval_accuracy": 0.6328,
        "smoothing_steps": 20, "threads": 40, "elapsed": 20.1,
        "interference": {"other_share": 0.02, "steal_share": 0.0, "cpus": [0, 1], "wall_s": 20.0}}))
    page.tabs.setCurrentIndex(0)


def fill_window(window, report: Report, read_only: bool = False, label: str = "") -> None:
    """Put ``report`` and live-looking data into every page of a MainWindow (its sampler paused)."""
    window.sampler.pause()
    if read_only and not report.benchmarks:
        from lab_samples import lab_runs

        report = dataclasses.replace(report, benchmarks=lab_runs())     # a saved report's lab runs are shown
    if not read_only:
        choose_environment(window, report)
    if read_only:
        window.model.set_report(report, read_only=True, label=label or "Report colleague.json")
    else:
        window.model.set_report(report)
    for s in samples(report, 240):
        window.model.sample.emit(s)
    inspector = window.pages["Inspector"]
    inspector.inspections.list_fn = processes
    inspector.inspections._listed(processes())
    insp = inspection(report)
    inspector.set_machine(Machine.of_report(report))
    inspector.select_pid(insp.pid)
    inspector.show_inspection(insp, run_process_rules(insp, report.topology))
    inspector.status_label.setText(f"Inspected process {insp.pid} over {insp.window_s:.1f} s.")
    topo_page = window.pages["Topology"]
    topo_page.map.set_selection(report.topology.l3_domains[0].cpus)
    if not read_only:
        fill_training(window)
    fill_fit(window)


def fit_plan():
    """fit's plan for ResNet-18 at batch 256 in a 1 GiB limit, from a recorded measurement (tests/fixtures/fit)."""
    import json

    from cpudoctor.advisor.fit import JobShape, budget, plan_measured
    from cpudoctor.lab.fit import read_measurement
    from cpudoctor.lab.runner import JobOutcome

    res = json.loads((Path(__file__).parent / "fixtures" / "fit" / "resnet18-adam.json").read_text())
    m = read_measurement(JobOutcome(result=res), {"model": "resnet18"})
    return plan_measured(m, JobShape(batch=256, workers=4, dataset_bytes=1 << 30), budget(None, None, given=2 << 30))


def fill_fit(window) -> None:
    page = window.pages["Memory fit"]
    page.model_edit.setText("resnet18")
    page.batch_spin.setValue(256)
    page.show_plan(fit_plan())
