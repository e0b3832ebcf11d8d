"""The Training page offscreen, driven with fake jobs: tiny python children speaking the protocol."""

from __future__ import annotations

import sys
import textwrap

import pytest
from PySide6.QtCore import QThread, QThreadPool, QTimer
from PySide6.QtWidgets import QApplication

from cpudoctor.gui.model import AppModel
from cpudoctor.gui.training_page import TrainingPage
from cpudoctor.probes.topology import Affinity, Core, L3Domain, NumaNode, Topology
from cpudoctor.report import BenchRun, Report, ThreadRecommendation

TORCH_BEFORE = "torch" in sys.modules
TABLE_NOTE = 6                                          # the runs table's "Note" column

FAKE = textwrap.dedent("""
    import os, signal, sys, time
    from cpudoctor.lab import protocol
    job, mode = sys.argv[1], sys.argv[2]
    stop = protocol.StopFlag()
    stop.watch_stdin()
    if job == "train":
        step = 0
        while not stop.is_set():
            step += 1
            protocol.progress(step=step, loss=2.3 / step, accuracy=min(0.1 * step, 0.95),
                              samples_per_s=1000.0 + step, elapsed=step * 0.01)
            if mode == "sigill" and step == 3:
                os.kill(os.getpid(), signal.SIGILL)
            if mode == "ok" and step == 5:
                break
            time.sleep(0.02)
        protocol.result(status="cancelled" if stop.is_set() else "ok", steps=step, samples_per_s=1234.5,
                        initial_loss=2.3, final_loss=0.46, train_accuracy=0.5, eval_accuracy=0.45, threads=2,
                        interop_threads=2, elapsed=0.05)
    elif job == "sweep":
        pts = [dict(variant="PyTorch defaults", group="default", threads=None, cpus=None, threads_used=2, samples_per_s=900.0),
               dict(variant="1 thread", group="threads", threads=1, cpus=None, threads_used=1, samples_per_s=700.0),
               dict(variant="2 threads", group="threads", threads=2, cpus=None, threads_used=2, samples_per_s=1000.0),
               dict(variant="all cores, no SMT (CPUs 0-1)", group="pinning", threads=2, cpus=[0, 1], threads_used=2,
                    samples_per_s=1100.0)]
        for i, p in enumerate(pts):
            protocol.progress(step=i + 1, total=len(pts), elapsed=i * 0.01, **p)
        rec = dict(threads=2, interop_threads=2, cpus=[0, 1], variant=pts[-1]["variant"], samples_per_s=1100.0,
                   default_samples_per_s=900.0, model="simplecnn")
        extra = {}
        if mode == "busy":     # lab/sweep.py's noise note: one setting measured far apart from itself
            extra = dict(busy=True, failures=["1 thread: out of memory"],
                         notes=["'PyTorch defaults' and '2 threads' ran the same setting (2 threads) but measured "
                                "900 vs 1,000 samples/s (1.1x apart): other programs used the CPUs during the "
                                "sweep, so rerun it on an idle machine before trusting the ranking"])
        protocol.result(status="ok", points=pts, recommendation=rec, variants=len(pts), **extra)
    elif job == "gemm":
        p = dict(backend="torch-fp32", library="torch", precision="fp32", threads=1, cores=1, size=64, gflops=100.0,
                 best_gflops=101.0, reps=3, peak_gflops=160.0, utilisation=0.625, peak_basis="native")
        protocol.progress(step=1, total=1, elapsed=0.01, **p)
        protocol.result(status="ok", points=[p], machine=dict(microarchitecture="zen5", physical_cores=2),
                        peak_notes=["clock 2500 MHz = base clock"])
    elif job == "quant":
        p = dict(batch=1, fp32_ms=0.2, int8_ms=0.1, speedup=2.0)
        protocol.progress(step=1, total=1, elapsed=0.01, **p)
        protocol.result(status="ok", points=[p], vnni=True, vnni_note="this CPU has VNNI", top1_agreement=0.97)
""")


@pytest.fixture(autouse=True)
def no_qt_leaks(qapp):
    yield
    assert QThreadPool.globalInstance().waitForDone(30_000)
    QApplication.processEvents()
    timers = [t for w in QApplication.topLevelWidgets() for t in w.findChildren(QTimer)
              if t.isActive() and t.objectName().startswith("job")]
    assert not timers, f"the job runner left timers running: {[t.objectName() for t in timers]}"
    assert not [t for t in qapp.findChildren(QThread) if t.isRunning()]


def two_ccx_smt() -> Topology:
    cores = [Core(0, i, [i, i + 8]) for i in range(8)]
    return Topology(packages=1, cores=8, logical_cpus=16,
                    l3_domains=[L3Domain([0, 1, 2, 3, 8, 9, 10, 11]), L3Domain([4, 5, 6, 7, 12, 13, 14, 15])],
                    numa_nodes=[NumaNode(0, list(range(16)))], online_cpus=list(range(16)),
                    smt_threads_per_core=2, core_list=cores, affinity=Affinity(allowed_cpus=list(range(16))),
                    vendor="AuthenticAMD", cpu_family=0x17)     # Zen: an L3 domain is a CCX (Topology.l3_is_ccx)


@pytest.fixture
def page(qtbot):
    model = AppModel()
    model.set_report(Report(topology=two_ccx_smt()))
    p = TrainingPage(model)
    qtbot.addWidget(p)
    p.modes = {}
    p.job_argv = lambda job, args: [sys.executable, "-c", FAKE, job, p.modes.get(job, "ok")]
    yield p
    p.shutdown()


def _run(qtbot, page, start, timeout=20_000):
    with qtbot.waitSignal(page.runner.finished, timeout=timeout) as blocker:
        start()
    return blocker.args[0]


def test_training_run_fills_plots_table_and_model(qtbot, page):
    added = []
    page.model.benchmarks_changed.connect(added.append)
    out = _run(qtbot, page, page.train_button.click)
    assert out.status == "ok"
    xs, ys = page.curves["loss"].getData()
    assert list(xs) == [1, 2, 3, 4, 5] and ys[-1] == pytest.approx(0.46)
    assert page.table.rowCount() == 1
    assert page.table.item(0, 2).text() == "1,234" and page.table.item(0, 5).text() == "ok"
    run = page.model.report.benchmarks[-1]
    assert isinstance(run, BenchRun) and run.kind == "train" and run.status == "ok"
    assert run.metrics["samples_per_s"] == 1234.5 and run.settings["model"] == "simplecnn"
    assert added and page.train_button.isEnabled() and not page.cancel_button.isEnabled()
    assert page.use_button.isEnabled()
    with qtbot.waitSignal(page.model.recommendation_changed) as rec:
        page.use_button.click()
    assert isinstance(rec.args[0], ThreadRecommendation) and rec.args[0].threads == 2
    assert page.model.report.recommendation.samples_per_s == 1234.5


def test_cancel_keeps_partial_results(qtbot, page):
    page.modes["train"] = "forever"
    with qtbot.waitSignal(page.runner.progress, timeout=20_000):
        page.train_button.click()
    assert page.cancel_button.isEnabled() and not page.train_button.isEnabled()
    with qtbot.waitSignal(page.runner.finished, timeout=10_000) as blocker:
        page.cancel_button.click()
    out = blocker.args[0]
    assert out.status == "cancelled" and out.progress
    assert page.table.item(0, 5).text() == "cancelled"
    assert len(page.curves["loss"].getData()[0]) >= 1
    assert page.model.report.benchmarks[-1].status == "cancelled"
    assert "cancelled" in page.status.text()


def test_sigill_crash_is_shown_calmly_with_partial_results(qtbot, page):
    page.modes["train"] = "sigill"
    out = _run(qtbot, page, page.train_button.click)
    assert out.status == "crashed" and out.diagnosis.kind == "illegal_instruction"
    assert "Illegal instruction" in page.status.text() and "Partial results are kept" in page.status.text()
    assert list(page.curves["loss"].getData()[0]) == [1, 2, 3]
    assert page.table.item(0, 5).text() == "crashed" and "Illegal instruction" in page.table.item(0, 6).text()
    assert page.table.item(0, 2).text() == "1,003"          # the last progress line's samples/s
    assert page.train_button.isEnabled() and not page.use_button.isEnabled()


def test_sweep_plots_threads_and_recommends(qtbot, page):
    out = _run(qtbot, page, page.sweep_button.click)
    assert out.status == "ok" and page.tabs.currentIndex() == 1
    xs, ys = page.sweep_unpinned.getData()
    assert list(xs) == [1.0, 2.0] and list(ys) == [700.0, 1000.0]
    assert list(page.sweep_pinned.getData()[1]) == [1100.0]
    ticks = page.sweep_plot.getPlotItem().getAxis("bottom")._tickLevels
    assert ticks and [label for _, label in ticks[0]] == ["1", "2"]          # whole threads only
    assert "1.22× the PyTorch defaults" in page.best_label.text()
    page.use_best()
    rec = page.model.report.recommendation
    assert rec.cpus == [0, 1] and rec.variant.startswith("all cores, no SMT") and rec.default_samples_per_s == 900.0


def test_quiet_sweep_has_no_caveat(qtbot, page):
    _run(qtbot, page, page.sweep_button.click)
    assert page.sweep_notes.isHidden() and page.sweep_notes.text() == ""
    assert page.best_caveat == "" and "busy" not in page.best_label.text()
    assert page.table.item(0, TABLE_NOTE).text() == ""
    page.use_best()
    assert "busy" not in page.status.text()


def test_busy_sweep_is_labelled_before_use(qtbot, page):
    """The sweep said the machine was busy: the notes show under the plot and in the runs table, and the
    recommendation says so next to "Use these settings" (before the click, and again after it)."""
    page.modes["sweep"] = "busy"
    page.show()
    out = _run(qtbot, page, page.sweep_button.click)
    assert out.status == "ok"
    notes = page.sweep_notes.text()
    assert page.sweep_notes.isVisible() and "Measured on a busy machine" in notes
    assert "rerun it on an idle machine" in notes and "1 variant failed: 1 thread: out of memory." in notes
    best = page.best_label.text()
    assert best.index("Measured on a busy machine") < best.index("Best: all cores, no SMT")
    assert page.use_button.isEnabled() and "busy machine" in page.use_button.toolTip()
    assert "see the note under the plot" in page.status.text()
    note = page.table.item(0, TABLE_NOTE)
    assert note.text() == "busy machine: rerun" and "rerun it on an idle machine" in note.toolTip()
    assert "pinned to CPUs 0-1," in best
    run = page.model.report.benchmarks[-1]
    assert run.metrics["busy"] is True and run.metrics["notes"] and "idle machine" in run.note
    page.use_best()
    assert page.model.report.recommendation.threads == 2
    assert "busy machine" in page.status.text() and "rerun the sweep on an idle machine" in page.status.text()
    # A new sweep on a quiet machine clears the note and the caveat.
    page.modes["sweep"] = "ok"
    _run(qtbot, page, page.sweep_button.click)
    assert page.sweep_notes.isHidden() and page.best_caveat == "" and "busy" not in page.best_label.text()
    # A later plain training run's best setting carries no sweep caveat either.
    _run(qtbot, page, page.train_button.click)
    assert page.best_caveat == ""


def test_gemm_and_quant_show_results(qtbot, page):
    _run(qtbot, page, page.gemm_button.click)
    assert "62%" in page.bench_text.text() and "zen5" in page.bench_text.text()
    _run(qtbot, page, page.quant_button.click)
    assert "this CPU has VNNI" in page.bench_text.text()
    assert [page.table.item(r, 0).text() for r in range(2)] == ["gemm", "quant"]
    assert page.table.item(0, 3).text() == "100.0 GFLOP/s (torch-fp32)"


def test_pinning_choices_come_from_the_topology(page):
    items = [page.pin_box.itemText(i) for i in range(page.pin_box.count())]
    assert items[0] == "No pinning"
    assert items[1:] == ["CCX 0 (CPUs 0-3,8-11)", "CCX 1 (CPUs 4-7,12-15)", "all cores, no SMT (CPUs 0-7)"]
    page.pin_box.setCurrentIndex(items.index("CCX 1 (CPUs 4-7,12-15)"))
    assert page.train_settings().cpus == [4, 5, 6, 7, 12, 13, 14, 15]


def test_bf16_hint_follows_the_cpu(qtbot, page):
    from cpudoctor.probes.cpu import CpuInfo, IsaVerdict

    page.model.set_report(Report(cpu=CpuInfo(flags=["avx2", "avx512f", "avx512_bf16"], isa=IsaVerdict(avx512_bf16=True))))
    assert "AVX512_BF16" in page.bf16_hint.text() and "pay off" in page.bf16_hint.text()
    page.model.set_report(Report(cpu=CpuInfo(flags=["avx2", "fma"])))
    assert "usually slower" in page.bf16_hint.text()
    assert page._form.isRowVisible(page.bf16_hint)
    page.model.set_report(Report(topology=two_ccx_smt()))          # flags unknown: no hint, and no empty gap
    assert page.bf16_hint.text() == "" and not page._form.isRowVisible(page.bf16_hint)


def test_empty_plots_count_steps_not_fractions(qtbot, page):
    """Before any data the x axes read 0-100 steps (0-1 crowded '0.20.40.60.8' into narrow plots)."""
    for plot in (page.loss_plot, page.acc_plot, page.speed_plot):
        assert plot.getPlotItem().viewRange()[0] == pytest.approx([0, 100], abs=5)
    lo, hi = page.sweep_plot.getPlotItem().viewRange()[0]               # threads 1..CPUs, not 0..1
    cpus = len(page.model.report.topology.online_cpus)
    assert lo < 1 < cpus < hi < cpus + 1
    page.show()
    qtbot.waitExposed(page)
    _run(qtbot, page, page.train_button.click)
    box = page.loss_plot.getPlotItem().getViewBox()
    assert box.autoRangeEnabled()[0]                                   # the data takes over the x axis
    qtbot.waitUntil(lambda: box.viewRange()[0][1] < 10)                # ... which follows the 5 steps


def test_bad_settings_start_nothing(qtbot, page):
    page.data_box.setCurrentIndex(page.data_box.findData("mnist"))
    page.train_button.click()
    assert "Check the settings" in page.status.text() and "mnist_dir" in page.status.text()
    assert not page.runner.is_running() and page.table.rowCount() == 0


def test_saved_report_turns_the_lab_off(qtbot):
    model = AppModel()
    model.set_report(Report(), read_only=True, label="colleague.json")
    p = TrainingPage(model)
    qtbot.addWidget(p)
    assert not p.train_button.isEnabled() and not p.sweep_button.isEnabled()
    assert "saved report" in p.status.text()


def test_gui_process_never_imported_torch(page):
    if TORCH_BEFORE:
        pytest.skip("another test module imported torch into this process before these tests")
    assert "torch" not in sys.modules


def test_icon_exists(qapp):
    from cpudoctor.gui.icons import icon

    assert not icon(TrainingPage.icon_name).isNull()


def test_driving_the_page_in_a_fresh_process_never_imports_torch(tmp_path):
    """Independent of test order: a clean interpreter runs a fake job through the page."""
    import subprocess

    code = textwrap.dedent(f"""
        import sys
        from PySide6.QtWidgets import QApplication
        from PySide6.QtCore import QEventLoop, QTimer
        app = QApplication([])
        from cpudoctor.gui.model import AppModel
        from cpudoctor.gui.training_page import TrainingPage
        from cpudoctor.report import Report
        m = AppModel(); m.set_report(Report())
        p = TrainingPage(m)
        p.job_argv = lambda job, args: [sys.executable, "-c", {FAKE!r}, job, "ok"]
        loop = QEventLoop(); p.runner.finished.connect(lambda o: loop.quit())
        QTimer.singleShot(20_000, loop.quit)
        p.start_training(); loop.exec()
        print(p.runs[-1].status, "torch" in sys.modules)
    """)
    env = {**__import__("os").environ, "QT_QPA_PLATFORM": "offscreen"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split()[-2:] == ["ok", "False"]


STUBBORN = textwrap.dedent("""
    import json, signal, time
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    print(json.dumps({"type": "progress", "step": 1, "elapsed": 0.0}), flush=True)
    while True:
        time.sleep(0.05)
""")


def test_job_runner_kills_a_child_that_ignores_stop_and_sigterm(qtbot):
    import signal

    from cpudoctor.gui.job_runner import JobRunner

    runner = JobRunner()
    with qtbot.waitSignal(runner.progress, timeout=20_000):
        runner.start_argv([sys.executable, "-c", STUBBORN], job="stubborn")
    with qtbot.waitSignal(runner.finished, timeout=10_000) as blocker:
        runner.cancel()
    out = blocker.args[0]
    assert out.returncode == -signal.SIGKILL and out.status == "cancelled"
    assert out.progress == [{"step": 1, "elapsed": 0.0}] and not runner.is_running()


def test_job_runner_diagnoses_an_oom_kill_with_the_memory_seen(qtbot):
    import os
    import signal

    from cpudoctor.gui.job_runner import JobRunner

    # Holds 64 MiB (touched, so resident) and says its PID; the test plays the OOM killer once the
    # runner's memory watch has seen the 64 MiB, so no 250 ms timer races with the child's exit.
    code = ("import json, os, time; b = bytearray(64 << 20); b[::4096] = b'x' * len(b[::4096]);"
            "print(json.dumps({'type': 'progress', 'step': 1, 'pid': os.getpid()}), flush=True); time.sleep(600)")
    runner = JobRunner()
    with qtbot.waitSignal(runner.progress, timeout=60_000) as started:
        runner.start_argv([sys.executable, "-c", code], job="train")
    qtbot.waitUntil(lambda: (runner.outcome.peak_rss_bytes or 0) > 60 << 20, timeout=60_000)
    with qtbot.waitSignal(runner.finished, timeout=60_000) as blocker:
        os.kill(started.args[0]["pid"], signal.SIGKILL)
    out = blocker.args[0]
    assert out.status == "crashed" and out.diagnosis.kind == "out_of_memory"
    assert "used up to" in out.message and out.peak_rss_bytes > 60 << 20


def test_job_runner_reports_a_program_that_cannot_start(qtbot):
    from cpudoctor.gui.job_runner import JobRunner

    runner = JobRunner()
    with qtbot.waitSignal(runner.finished, timeout=10_000) as blocker:
        runner.start_argv(["/nonexistent/python3"], job="train")
    out = blocker.args[0]
    assert out.status == "error" and "could not start" in out.message


def test_sweep_caveat_words():
    from cpudoctor.gui.training_page import _sweep_caveat

    assert _sweep_caveat({"points": [{}, {}], "variants": 5}, "cancelled") == "From a partial sweep (2 of 5 variants)"
    assert _sweep_caveat({"busy": True, "points": [{}], "variants": 3}, "cancelled") == \
        "Measured on a busy machine, from a partial sweep (1 of 3 variants)"
    assert _sweep_caveat({"notes": ["older result without the busy key"]}, "ok") == "Measured on a busy machine"
    assert _sweep_caveat({"notes": [], "busy": False}, "ok") == ""
