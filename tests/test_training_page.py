"""The Training page offscreen, driven with fake jobs: tiny python children speaking the protocol."""

from __future__ import annotations

import sys
import textwrap

import pytest
from PySide6.QtCore import QThread, QThreadPool, QTimer
from PySide6.QtWidgets import QApplication

from cpudoctor.gui.model import AppModel
from cpudoctor.gui.training_page import TrainingPage
from cpudoctor.model import Affinity, Core, L3Domain, NumaNode, Topology
from cpudoctor.model import CpuInfo
from cpudoctor.render.training import RUN_COLUMNS
from cpudoctor.model import BenchRun, Report, ThreadRecommendation

TORCH_BEFORE = "torch" in sys.modules

FAKE = textwrap.dedent("""
    import json, os, signal, sys, time
    from cpudoctor.lab.jobs import _jobkit as protocol
    job, mode = sys.argv[1], sys.argv[2]
    stop = protocol.StopFlag()
    stop.watch_stdin()
    if job == "train" and mode == "silent":              # cancelled while still starting: nothing measured
        while not stop.is_set():
            time.sleep(0.02)
        protocol.result(status="cancelled")
    elif job == "train" and mode in ("busy-start", "big-loss"):
        # as train.py ends a 10 s run on a busy machine: start-up took 9.2 s, one (warm-up) step, nothing timed
        loss = 100.0 if mode == "big-loss" else 0.5
        protocol.progress(step=1, loss=loss, accuracy=0.1, samples_per_s=None, elapsed=0.2, dtype="fp32")
        protocol.result(status="ok", steps=1, samples_per_s=None, window_rates=[], initial_loss=loss, final_loss=loss,
                        train_accuracy=0.1, eval_accuracy=None, smoothing_steps=20, threads=2, interop_threads=2,
                        elapsed=0.6, budget_s=10.0, startup_s=9.2, warmup_s=0.6, job_s=9.9, ended_by="budget",
                        not_measured="the 10 s budget (start-up included) ended before a fp32 step was measured",
                        interference={"other_share": 0.6, "steal_share": 0.0, "cpus": [0, 1], "wall_s": 0.6})
    elif job == "train":
        step = 0
        dtype = "bf16" if mode == "bf16" else "fp32"
        while not stop.is_set():
            step += 1
            extra = {"reference_samples_per_s": 900.0 + step} if dtype == "bf16" else {}
            protocol.progress(step=step, loss=2.3 / step, accuracy=min(0.1 * step, 0.95), dtype=dtype,
                              samples_per_s=(1000.0 + step) if step > 1 else None, elapsed=step * 0.01, **extra)
            if mode == "sigill" and step == 3:
                os.kill(os.getpid(), signal.SIGILL)
            if mode in ("ok", "bf16") and step == 5:
                break
            time.sleep(0.02)
        # like train.py: a last progress line with the result's own figures, then the result
        protocol.progress(step=step, loss=0.46, accuracy=0.5, samples_per_s=1234.5, elapsed=step * 0.01, dtype=dtype)
        extra = {"reference": {"dtype": "fp32", "samples_per_s": 1000.0, "window_rates": [990.0, 1010.0]},
                 "dtype": "bf16"} if dtype == "bf16" else {}
        protocol.result(status="cancelled" if stop.is_set() else "ok", steps=step, samples_per_s=1234.5,
                        window_rates=[1200.0, 1234.0, 1260.0], initial_loss=2.3, final_loss=0.46, train_accuracy=0.5,
                        eval_accuracy=0.45, smoothing_steps=20, threads=2, interop_threads=2, elapsed=0.05,
                        interference={"other_share": 0.01, "steal_share": 0.0, "cpus": [0, 1], "wall_s": 0.05},
                        **extra)
    elif job == "sweep":
        pts = [dict(variant="PyTorch defaults", group="default", threads=None, cpus=None, threads_used=2,
                    samples_per_s=900.0, samples_per_s_lo=880.0, samples_per_s_hi=910.0, samples_per_s_n=3),
               dict(variant="1 thread", group="threads", threads=1, cpus=None, threads_used=1, samples_per_s=700.0,
                    samples_per_s_lo=690.0, samples_per_s_hi=720.0, samples_per_s_n=3),
               dict(variant="2 threads", group="threads", threads=2, cpus=None, threads_used=2, samples_per_s=1000.0,
                    samples_per_s_lo=990.0, samples_per_s_hi=1010.0, samples_per_s_n=3),
               dict(variant="all cores, no SMT (CPUs 0-1)", group="pinning", threads=2, cpus=[0, 1], threads_used=2,
                    samples_per_s=1100.0, samples_per_s_lo=1090.0, samples_per_s_hi=1120.0, samples_per_s_n=3)]
        if mode == "one-point":            # a busy 2-CPU machine: the budget ended inside the first round
            from cpudoctor.lab.verdicts import inconclusive
            p = dict(pts[1], samples_per_s=220.1, samples_per_s_lo=220.1, samples_per_s_hi=220.1, samples_per_s_n=1,
                     segments=1)
            rest = [dict(q, samples_per_s=None, segments=0) for q in (pts[0], pts[2])]
            protocol.result(status="ok", points=[p] + rest, verdict="inconclusive", recommendation=None, rounds=0,
                            reason=inconclusive("unsettled", why="the budget ended before every setting was measured "
                                             "once", rounds=0, measurements=1, budget_s=45),
                            interference={"other_share": 0.05, "steal_share": 0.0, "share": 0.05, "seconds": 40.0},
                            variants=3, budget_s=45, segment_s=1)
            sys.exit(0)
        protocol.progress(phase="plan", variants=[p["variant"] for p in pts], budget_s=45, elapsed=0.0)
        for i, p in enumerate(pts):
            protocol.progress(phase="segment", round=1, step=i + 1, elapsed=i * 0.01, budget_s=45,
                              segment_samples_per_s=p["samples_per_s"], **p)
        share = 0.48 if mode == "busy" else 0.02
        noise = {"other_share": share, "steal_share": 0.0, "share": share, "seconds": 12.0}
        if mode == "busy":
            protocol.result(status="ok", points=pts, verdict="inconclusive", recommendation=None, rounds=3,
                            reason="inconclusive: 48 % of the CPU went to other programs", interference=noise,
                            failures=["1 thread: out of memory"], variants=len(pts), budget_s=45, segment_s=1)
        else:
            rec = dict(threads=2, interop_threads=None, cpus=[0, 1], variant=pts[-1]["variant"], samples_per_s=1100.0,
                       default_samples_per_s=900.0, model="simplecnn")
            protocol.result(status="ok", points=pts, verdict="recommended", recommendation=rec, rounds=3,
                            reason="'all cores, no SMT (CPUs 0-1)' vs '2 threads': faster beyond both spreads",
                            interference=noise, variants=len(pts), budget_s=45, segment_s=1)
    elif job == "gemm":
        p = dict(backend="torch-fp32", library="torch", precision="fp32", threads=1, size=64, gflops=100.0,
                 gflops_lo=98.0, gflops_hi=101.0, best_gflops=101.0, reps=3, emulated=False)
        protocol.progress(step=1, total=1, elapsed=0.01, **p)
        protocol.result(status="ok", points=[p], size=64, sizes={"torch-fp32": 64}, emulated=[], notes=[])
    elif job == "quant" and mode == "busy":
        # as lab/jobs/quant.py writes it beside a busy loop: p10-p90 spreads and each point's interference
        pts = [dict(batch=1, fp32_ms=0.17, int8_ms=72.5, speedup=0.0023, fp32_p10_ms=0.12, fp32_p90_ms=9.8,
                    int8_p10_ms=0.31, int8_p90_ms=140.2,
                    interference={"other_share": 0.84, "steal_share": 0.0, "cpus": [0, 1], "wall_s": 2.0}),
               dict(batch=64, fp32_ms=1.9, int8_ms=1.4, speedup=1.36, fp32_p10_ms=1.7, fp32_p90_ms=6.1,
                    int8_p10_ms=1.2, int8_p90_ms=5.9,
                    interference={"other_share": 0.84, "steal_share": 0.0, "cpus": [0, 1], "wall_s": 2.0})]
        for i, p in enumerate(pts):
            protocol.progress(step=i + 1, total=2, elapsed=0.01, **p)
        protocol.result(status="ok", points=pts, api="torch.ao", api_name="torch.ao.quantization.quantize_dynamic",
                        top1_agreement=0.97, hidden=256)
    elif job == "quant":
        p = dict(batch=1, fp32_ms=0.2, int8_ms=0.1, speedup=2.0)
        protocol.progress(step=1, total=1, elapsed=0.01, **p)
        protocol.result(status="ok", points=[p], api="torch.ao", api_name="torch.ao.quantization.quantize_dynamic",
                        api_warnings=["torch.ao.quantization is deprecated"], top1_agreement=0.97, hidden=1024)
""")

COLUMN = {name: i for i, name in enumerate(RUN_COLUMNS)}


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
    # A Zen 5 at 2.5 GHz: 64 FLOP/cycle/core (resources/peak_flops.json), so one core peaks at 160 GFLOP/s.
    model.set_report(Report(cpu=CpuInfo(microarchitecture="zen5", brand="AMD Ryzen 9 9950X 16-Core Processor",
                                        max_mhz=2500.0), topology=two_ccx_smt()))
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
    xs, ys = page.live.curves["loss"].getData()
    assert list(xs) == [1, 2, 3, 4, 5, 5] and ys[-1] == pytest.approx(0.46)
    # the plot's last point is the table's figure: one definition of samples/s
    assert page.live.curves["samples_per_s"].getData()[1][-1] == pytest.approx(1234.5)
    assert page.live.speed_plot.getPlotItem().viewRange()[1][0] == pytest.approx(0)        # samples/s from zero
    assert page.live.acc_plot.getPlotItem().viewRange()[1] == pytest.approx([0, 1], abs=0.05)
    assert page.table.rowCount() == 1
    assert page.table.item(0, COLUMN["Samples/s"]).text() == "1,234"
    assert page.table.item(0, COLUMN["Status"]).text() == "ok"
    # issue 28, 3: the accuracy column is the held-out one (the training accuracy is in its tooltip)
    assert page.table.item(0, COLUMN["Held-out"]).text() == "45.0 %"
    assert "training accuracy (last 20 steps): 50.0 %" in page.table.item(0, COLUMN["Held-out"]).toolTip()
    assert page.table.item(0, COLUMN["Result"]).text() == "loss 0.460"
    run = page.model.report.benchmarks[-1]
    assert isinstance(run, BenchRun) and run.kind == "train" and run.status == "ok"
    assert run.metrics["samples_per_s"] == 1234.5 and run.settings["model"] == "simplecnn"
    assert run.metrics["samples_per_s_lo"] == 1200.0 and run.metrics["quiet"] is True
    assert added and page.train_button.isEnabled() and not page.cancel_button.isEnabled()
    assert page.use_button.isEnabled()
    assert page.best_label.text() == "Best: measured run — 2 threads, 1,234 samples/s"
    with qtbot.waitSignal(page.model.recommendation_changed) as rec:
        page.use_button.click()
    assert isinstance(rec.args[0], ThreadRecommendation) and rec.args[0].threads == 2
    assert page.model.report.recommendation.samples_per_s == 1234.5
    assert "The advisor now uses 2 threads (measured run)." in page.status.text()


def test_plot_titles_say_what_is_plotted(page):
    """Short titles (a narrow window cut "Loss (last 20 ste"); the definitions are one hover away."""
    titles = [p.getPlotItem().titleLabel.text for p in (page.live.loss_plot, page.live.acc_plot, page.live.speed_plot)]
    assert titles == ["Loss", "Accuracy", "Samples/s"]
    assert "mean of the last 20 steps" in page.live.loss_plot.toolTip()
    assert "mean of the last 20 steps" in page.live.acc_plot.toolTip()
    header = page.table.horizontalHeaderItem(COLUMN["Samples/s"]).toolTip()
    assert header in page.live.speed_plot.toolTip()             # the table and the plot define it alike


def test_bf16_run_plots_fp32_from_the_same_job(qtbot, page):
    page.modes["train"] = "bf16"
    page.form.dtype_box.setCurrentIndex(page.form.dtype_box.findData("bf16"))
    _run(qtbot, page, page.train_button.click)
    ys = page.live.curves["reference_samples_per_s"].getData()[1]
    assert ys is not None and any(y == pytest.approx(905.0) for y in ys)
    assert page.live.speed_legend.isVisible()
    labels = [item[1].text for item in page.live.speed_legend.items]
    assert labels == ["bf16", "fp32, same job"]
    result = page.table.item(0, COLUMN["Result"]).text()
    assert "bf16 1.23× fp32" in result
    # this page's CPU flags are unknown: the why says so rather than guessing
    assert "unknown" in page.table.item(0, COLUMN["Result"]).toolTip()


def test_cancel_keeps_partial_results_and_plots_them(qtbot, page):
    page.modes["train"] = "forever"
    with qtbot.waitSignal(page.runner.progress, timeout=20_000):
        page.train_button.click()
    assert page.cancel_button.isEnabled() and not page.train_button.isEnabled()
    with qtbot.waitSignal(page.runner.finished, timeout=10_000) as blocker:
        page.cancel_button.click()
    out = blocker.args[0]
    assert out.status == "cancelled" and out.progress
    assert page.table.item(0, COLUMN["Status"]).text() == "cancelled"
    assert len(page.live.curves["loss"].getData()[0]) >= 1
    speeds = [y for y in page.live.curves["samples_per_s"].getData()[1] if y == y]
    assert speeds and speeds[-1] == pytest.approx(1234.5)               # the row's figure is plotted too
    assert page.table.item(0, COLUMN["Samples/s"]).text() == "1,234"
    assert page.model.report.benchmarks[-1].status == "cancelled"
    assert "cancelled" in page.status.text()


def test_sigill_crash_is_shown_calmly_with_partial_results(qtbot, page):
    page.modes["train"] = "sigill"
    out = _run(qtbot, page, page.train_button.click)
    assert out.status == "crashed" and out.diagnosis.kind == "illegal_instruction"
    assert "Illegal instruction" in page.status.text() and "Partial results are kept" in page.status.text()
    assert list(page.live.curves["loss"].getData()[0]) == [1, 2, 3]
    assert page.table.item(0, COLUMN["Status"]).text() == "crashed"
    assert "Illegal instruction" in page.table.item(0, COLUMN["Note"]).toolTip()
    assert page.table.item(0, COLUMN["Samples/s"]).text() == "1,003"     # the last progress line's samples/s
    assert page.train_button.isEnabled() and not page.use_button.isEnabled()


def test_sweep_plots_medians_with_spread_and_recommends(qtbot, page):
    out = _run(qtbot, page, page.sweep_button.click)
    assert out.status == "ok" and page.tabs.currentIndex() == 1
    xs, ys = page.sweep.sweep_unpinned.getData()
    assert list(xs) == [1.0, 2.0] and list(ys) == [700.0, 1000.0]
    assert list(page.sweep.sweep_pinned.getData()[1]) == [1100.0]
    assert sorted(page.sweep.sweep_bars.opts["top"]) == [10.0, 10.0, 20.0, 20.0]      # the spread of each point
    ticks = page.sweep.sweep_plot.getPlotItem().getAxis("bottom")._tickLevels
    assert ticks and [label for _, label in ticks[0]] == ["1", "2"]          # whole threads only
    assert "1.22× the PyTorch defaults" in page.best_label.text()
    notes = page.sweep.sweep_notes.text()
    assert page.sweep.sweep_notes.isVisibleTo(page) and "Recommended" in notes and "2 %" in notes
    assert page.table.item(0, COLUMN["Result"]).text() == "best: all cores, no SMT (CPUs 0-1)"
    assert page.table.item(0, COLUMN["Note"]).text() == ""
    page.use_best()
    rec = page.model.report.recommendation
    assert rec.cpus == [0, 1] and rec.variant.startswith("all cores, no SMT") and rec.default_samples_per_s == 900.0
    assert "busy" not in page.status.text()


def test_busy_sweep_recommends_nothing(qtbot, page):
    """An inconclusive sweep (48 % of the CPU went to other programs) says so and never reaches the advisor."""
    page.modes["sweep"] = "busy"
    page.show()
    out = _run(qtbot, page, page.sweep_button.click)
    assert out.status == "ok"
    notes = page.sweep.sweep_notes.text()
    assert page.sweep.sweep_notes.isVisible() and "No recommendation" in notes
    assert "inconclusive: 48 % of the CPU went to other programs" in notes
    assert "1 variant failed: 1 thread: out of memory." in notes
    assert not page.use_button.isEnabled() and page.best is None
    assert "without a recommendation" in page.status.text()
    note = page.table.item(0, COLUMN["Note"])
    assert note.text() == "busy machine (48 % to others): rerun" and "48 % of the CPU" in note.toolTip()
    # what was measured is shown, marked as no recommendation (issue 40, 5: the row said "—")
    assert page.table.item(0, COLUMN["Result"]).text() == "inconclusive (fastest: all cores, no SMT (CPUs 0-1))"
    assert page.table.item(0, COLUMN["Samples/s"]).text() == "1,100"
    assert "not a recommendation" in page.table.item(0, COLUMN["Samples/s"]).toolTip()
    run = page.model.report.benchmarks[-1]
    assert run.metrics["verdict"] == "inconclusive" and "recommendation" not in run.metrics
    assert page.model.report.recommendation is None
    # A later quiet sweep recommends again.
    page.modes["sweep"] = "ok"
    _run(qtbot, page, page.sweep_button.click)
    assert page.use_button.isEnabled() and "No recommendation" not in page.sweep.sweep_notes.text()


def test_gemm_and_quant_show_results(qtbot, page):
    _run(qtbot, page, page.gemm_button.click)
    text = page.bench.bench_text.text()
    assert "62 %" in text and "zen5" in text and "98.0–101.0" in text
    _run(qtbot, page, page.quant_button.click)
    text = page.bench.bench_text.text()
    assert "torch.ao.quantization.quantize_dynamic" in text and "deprecated" in text
    assert "int8 ran 2.00× at batch 1" in text
    assert [page.table.item(r, COLUMN["Job"]).text() for r in range(2)] == ["gemm", "quant"]
    assert page.table.item(0, COLUMN["Result"]).text() == "100.0 GFLOP/s (torch-fp32)"
    assert page.model.report.benchmarks[0].metrics["points"][0]["utilisation"] == 0.625


def test_status_and_note_stay_visible_in_a_narrow_table(qtbot, page):
    """Issue 17.2: with long settings and notes the table never scrolls Status and Note out of view."""
    page.modes["train"] = "sigill"                    # a long note (the Illegal instruction diagnosis)
    page.resize(900, 600)
    page.show()
    qtbot.waitExposed(page)
    _run(qtbot, page, page.train_button.click)
    _run(qtbot, page, page.train_button.click)
    for width in (420, 700):
        page.table.setFixedWidth(width)
        QApplication.processEvents()
        view = page.table.viewport().width()
        for name in ("Status", "Note"):
            col = COLUMN[name]
            left = page.table.columnViewportPosition(col)
            assert 0 <= left and left + page.table.columnWidth(col) <= view + 1, (name, width)
            assert page.table.columnWidth(col) >= 30


def test_pinning_choices_come_from_the_topology(page):
    items = [page.form.pin_box.itemText(i) for i in range(page.form.pin_box.count())]
    assert items[0] == "No pinning"
    assert items[1:] == ["CCX 0 (CPUs 0-3,8-11)", "CCX 1 (CPUs 4-7,12-15)", "all cores, no SMT (CPUs 0-7)"]
    page.form.pin_box.setCurrentIndex(items.index("CCX 1 (CPUs 4-7,12-15)"))
    assert page.train_settings().cpus == [4, 5, 6, 7, 12, 13, 14, 15]


def test_bf16_hint_follows_the_cpu(qtbot, page):
    from cpudoctor.model import CpuInfo, IsaVerdict

    page.model.set_report(Report(cpu=CpuInfo(flags=["avx2", "avx512f", "avx512_bf16"], isa=IsaVerdict(avx512_bf16=True))))
    assert "AVX512_BF16" in page.form.bf16_hint.text() and "pay off" in page.form.bf16_hint.text()
    page.model.set_report(Report(cpu=CpuInfo(flags=["avx2", "fma"])))
    assert "usually slower" in page.form.bf16_hint.text()
    assert page.form.form.isRowVisible(page.form.bf16_hint)
    page.model.set_report(Report(topology=two_ccx_smt()))          # flags unknown: no hint, and no empty gap
    assert page.form.bf16_hint.text() == "" and not page.form.form.isRowVisible(page.form.bf16_hint)


def test_empty_plots_count_steps_from_zero(qtbot, page):
    """Before any data the x axes read steps 0..10: never negative (issue 16: -40..40), never fractions."""
    def x_ranges():
        return [p.getPlotItem().viewRange()[0] for p in (page.live.loss_plot, page.live.acc_plot, page.live.speed_plot)]

    for lo, hi in x_ranges():
        assert lo == pytest.approx(0, abs=0.5) and hi == pytest.approx(10, abs=0.5)
    lo, hi = page.sweep.sweep_plot.getPlotItem().viewRange()[0]               # threads 1..CPUs, not 0..1
    cpus = len(page.model.report.topology.online_cpus)
    assert lo < 1 < cpus < hi < cpus + 1
    page.show()
    qtbot.waitExposed(page)
    _run(qtbot, page, page.train_button.click)
    for lo, hi in x_ranges():
        assert lo == pytest.approx(0, abs=0.5) and hi == pytest.approx(10, abs=0.5)    # 5 steps: 0..10
    # A second run starts from empty plots that again begin at step 0.
    page.modes["train"] = "forever"
    with qtbot.waitSignal(page.runner.started, timeout=20_000):
        page.train_button.click()
    for lo, hi in x_ranges():
        assert lo >= -0.5 and hi <= 11
    with qtbot.waitSignal(page.runner.finished, timeout=10_000):
        page.cancel()


def test_bad_settings_start_nothing(qtbot, page):
    page.form.data_box.setCurrentIndex(page.form.data_box.findData("mnist"))
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
        from cpudoctor.model import Report
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
    qtbot.waitUntil(lambda: (runner.peak_rss_bytes or 0) > 60 << 20, timeout=60_000)
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


def test_best_and_adopted_words_count_threads_once():
    """Issue 17.8: "Best: 1 thread — 1 threads" and "uses 1 threads (1 thread)" are gone."""
    from cpudoctor.render.lab import adopted_text, best_text

    one = ThreadRecommendation(threads=1, variant="1 thread", samples_per_s=1218.0, default_samples_per_s=609.0)
    assert best_text(one) == "Best: 1 thread, 1,218 samples/s — 2.00× the PyTorch defaults"
    assert adopted_text(one) == "The advisor now uses 1 thread."
    pinned = ThreadRecommendation(threads=2, variant="all cores, no SMT (CPUs 0,2)", cpus=[0, 2], samples_per_s=10.0)
    assert best_text(pinned) == "Best: all cores, no SMT (CPUs 0,2) — 2 threads, 10 samples/s"
    assert adopted_text(pinned) == "The advisor now uses 2 threads (all cores, no SMT (CPUs 0,2))."
    run = ThreadRecommendation(threads=1, variant="measured run", samples_per_s=5.0)
    assert adopted_text(run) == "The advisor now uses 1 thread (measured run)."


# ----------------------------------------------------------------------------- issue 28: the second tour


def test_train_shows_the_live_plots_whatever_tab_was_open(qtbot, page):
    """Issue 28, 3: Train from the GEMM & int8 tab left the live plots hidden for the whole run."""
    page.tabs.setCurrentIndex(2)
    _run(qtbot, page, page.train_button.click)
    assert page.tabs.currentWidget() is page.live


def _whole_cells(table) -> list[str]:
    """Cells that do not show their whole text: one line wider than the column, or wrapped lines taller than the row."""
    from PySide6.QtCore import QRect, Qt

    fm, cut = table.fontMetrics(), []
    for r in range(table.rowCount()):
        for c in range(table.columnCount()):
            text = table.item(r, c).text()
            if table.isColumnHidden(c) or not text:
                continue
            width = table.columnWidth(c) - 6
            if table.wordWrap():
                need = fm.boundingRect(QRect(0, 0, width, 10_000), int(Qt.TextFlag.TextWordWrap), text).height()
                if need > table.rowHeight(r) + 2:
                    cut.append(f"{RUN_COLUMNS[c]}: {text!r} needs {need} px, row {table.rowHeight(r)}")
            elif fm.horizontalAdvance(text) > width + 2:
                cut.append(f"{RUN_COLUMNS[c]}: {text!r}")
    return cut


def test_runs_table_shows_whole_results_while_it_has_room(qtbot, page):
    """Issue 28, 3 and 40, 7: "SimpleCNN, …" and "measured w…" were cut while two thirds of the table were empty.
    A narrow table wraps its text onto more lines while it has the height; a wide one stretches its text columns
    over the whole width (at 1920 they did not)."""
    page.resize(1280, 800)
    page.show()
    qtbot.waitExposed(page)
    _run(qtbot, page, page.train_button.click)
    page.modes["sweep"] = "busy"
    _run(qtbot, page, page.sweep_button.click)
    table = page.table

    def filled() -> bool:          # the columns span the whole width (the spare room went to the text columns)
        shown = [c for c in range(table.columnCount()) if not table.isColumnHidden(c)]
        return abs(sum(table.columnWidth(c) for c in shown) - table.viewport().width()) <= 2

    for width in (1280, 900, 1920):
        page.resize(width, 800)
        qtbot.waitUntil(lambda: page.width() == width and filled(), timeout=5_000)
        assert not _whole_cells(table), (width, _whole_cells(table))
    fm = page.table.fontMetrics()
    settings = COLUMN["Settings"]
    assert page.table.columnWidth(settings) > fm.horizontalAdvance(page.table.item(0, settings).text()) + 40


def test_the_tab_bar_stays_put_when_the_status_line_wraps(qtbot, page):
    """Issue 40, 7: the tab bar jumped 14 px down when the status line above it took a second line; clicks missed."""
    page.resize(1000, 700)
    page.show()
    qtbot.waitExposed(page)

    from PySide6.QtWidgets import QLabel

    def tabs_y() -> int:
        for _ in range(5):
            QApplication.processEvents()
        return page.tabs.tabBar().mapTo(page, page.tabs.tabBar().rect().topLeft()).y()

    assert QThreadPool.globalInstance().waitForDone(30_000)      # the PyTorch banner's look-up has settled
    page._set_status("Ready.")
    qtbot.wait(50)
    before = tabs_y()
    one_line = page.status.fontMetrics().height() + 4
    probe = QLabel()
    probe.setWordWrap(True)
    text = "Training: step 12, loss 1.234, accuracy 45 %, 1,234 samples/s"
    for _ in range(100):                       # the status grows until it takes a second line (not a third)
        probe.setText(text)
        if probe.heightForWidth(page.status.width()) > one_line:
            break
        text += ", 6 s of the 10 s left"
    page._set_status(text)
    assert tabs_y() == before


def test_use_these_settings_says_why_it_is_off(qtbot, page):
    """Issue 28, 3: after inconclusive sweeps the button stayed off with no word why."""
    assert not page.use_button.isEnabled() and "run a thread sweep" in page.best_label.text()
    page.modes["sweep"] = "busy"
    _run(qtbot, page, page.sweep_button.click)
    _run(qtbot, page, page.sweep_button.click)
    assert not page.use_button.isEnabled()
    text = page.best_label.text()
    assert "all 2 thread sweeps were inconclusive" in text and "48 % of the CPU went to other programs" in text
    assert "idle machine" in text


def test_a_saved_reports_runs_are_shown(qtbot):
    """Issue 28, 3: a saved report's lab runs did not appear on the Training page."""
    sys.path.insert(0, str(__import__("pathlib").Path(__file__).parent))
    from lab_samples import lab_runs

    model = AppModel()
    model.set_report(Report(benchmarks=lab_runs()), read_only=True, label="colleague.json")
    p = TrainingPage(model)
    qtbot.addWidget(p)
    assert [p.table.item(r, COLUMN["Job"]).text() for r in range(p.table.rowCount())] == \
        ["train", "sweep", "gemm", "quant"]
    assert p.table.item(0, COLUMN["Held-out"]).text() == "63.3 %"
    assert "saved report" in p.runs_panel.heading.text() and not p.runs_panel.clear_button.isVisibleTo(p)


def test_runs_are_kept_per_machine_and_environment_with_a_clear(qtbot, tmp_path):
    """Issue 28, 3: runs were lost on restart. They come back in a new window on the same machine and
    environment, muted; Clear forgets them."""
    from cpudoctor.gui.training_runs import RunStore

    def window():
        model = AppModel()
        model.set_report(Report(cpu=CpuInfo(brand="AMD Ryzen 9 9950X 16-Core Processor"), topology=two_ccx_smt()))
        p = TrainingPage(model)
        qtbot.addWidget(p)
        p.job_argv = lambda job, args: [sys.executable, "-c", FAKE, job, "ok"]
        p.set_run_store(RunStore(tmp_path / "lab-runs.json"))
        return p

    first = window()
    _run(qtbot, first, first.train_button.click)
    _run(qtbot, first, first.gemm_button.click)
    first.shutdown()
    second = window()
    assert [second.table.item(r, COLUMN["Job"]).text() for r in range(2)] == ["train", "gemm"]
    assert "earlier run" in second.table.item(0, 0).toolTip()
    assert second.table.item(0, COLUMN["Samples/s"]).text() == "1,234"
    assert second.runs_panel.clear_button.isEnabled()
    second.runs_panel.clear_button.click()
    assert second.table.rowCount() == 0
    third = window()
    assert third.table.rowCount() == 0


def test_a_cancel_before_any_figure_does_not_promise_partial_results(qtbot, page):
    """Issue 28, 11: "partial results kept" stood next to a row of dashes."""
    page.modes["train"] = "silent"
    with qtbot.waitSignal(page.runner.started, timeout=20_000):
        page.train_button.click()
    with qtbot.waitSignal(page.runner.finished, timeout=20_000):
        page.cancel_button.click()
    assert "before it measured anything" in page.status.text() and "kept" not in page.status.text()
    assert page.table.item(0, COLUMN["Note"]).text() == "cancelled before its first measurement"


def test_focus_goes_back_to_the_button_that_started_the_job(qtbot, page):
    """Issue 28, 11: after each job the focus landed in a spin box with its text selected."""
    from PySide6.QtWidgets import QAbstractSpinBox

    page.show()
    qtbot.waitExposed(page)
    page.activateWindow()
    page.tabs.setCurrentWidget(page.sweep)
    page.sweep_button.setFocus()
    qtbot.waitUntil(page.sweep_button.hasFocus, timeout=5_000)
    _run(qtbot, page, page.sweep_button.click)
    focus = QApplication.focusWidget()
    assert not isinstance(focus, QAbstractSpinBox) and not isinstance(focus.parent(), QAbstractSpinBox)
    assert focus is page.sweep_button


def test_sweep_plot_legend_and_empty_axis(qtbot, page):
    """Issue 28, 4: the legend covered the 1-thread point and named series never drawn; the empty plot read
    "samples/s (x0.001)" from -400 to 400."""
    plot = page.sweep.sweep_plot.getPlotItem()
    assert plot.legend is None                       # no legend box inside the plot
    left = plot.getAxis("left")
    assert not left.autoSIPrefix and not left.style["showValues"] and page.sweep.empty_text.isVisible()
    assert page.sweep.legend_names == []
    _run(qtbot, page, page.sweep_button.click)
    assert page.sweep.legend_names == ["threads, not pinned", "pinned", "PyTorch defaults"]
    assert left.style["showValues"] and not page.sweep.empty_text.isVisible()
    assert "●</span>&nbsp;threads, not pinned" in page.sweep.legend.text()


def test_sweep_legend_names_only_what_it_draws():
    from cpudoctor.gui.training_session import SweepSeries
    from cpudoctor.gui.training_widgets import SweepPanel

    panel = SweepPanel()
    series = SweepSeries()
    series.add({"variant": "1 thread", "group": "threads", "threads": 1, "threads_used": 1, "samples_per_s": 10.0})
    series.add({"variant": "CCX 0", "group": "pinning", "threads": 4, "status": "ok", "samples_per_s": None,
                "same_as": "4 threads"})
    panel.redraw(series, 8)
    assert panel.legend_names == ["threads, not pinned"]


def test_busy_int8_run_is_inconclusive_with_its_spread(qtbot, page):
    """Issue 28, 5: int8 at 0.00x while 84 % of the CPU went elsewhere was explained as quantisation overhead."""
    page.modes["quant"] = "busy"
    _run(qtbot, page, page.quant_button.click)
    text = page.bench.bench_text.text()
    assert "Inconclusive" in text and "84 % of the CPU went to other programs" in text
    assert "time goes to quantising" not in text and "one instruction" not in text
    assert "0.12–9.800" in text.replace("0.120", "0.12") and "140.200" in text       # p10–p90 of each figure
    assert "84 %" in text.split("CPU to others")[1]                                 # each point's share


def test_int8_verdict_reads_points_defensively():
    """Points without spreads or interference (older reports, other writers) still read; a job-given speed-up
    spread is used as is; a spread that straddles 1 is "within each other's spread"."""
    from cpudoctor.lab.results import QuantResult
    from cpudoctor.render.lab import quant_html, quant_verdict, speedup_range

    bare = QuantResult(points=[{"batch": 1, "fp32_ms": 0.2, "int8_ms": 0.1, "speedup": 2.0}])
    assert quant_verdict(bare)[0] == "measured" and "2.00×" in quant_html(bare)
    assert speedup_range({"speedup_lo": 0.9, "speedup_hi": 1.2, "fp32_p10_ms": 1, "fp32_p90_ms": 2}) == (0.9, 1.2)
    close = QuantResult(points=[{"batch": 64, "fp32_ms": 1.0, "int8_ms": 0.95, "speedup": 1.05, "fp32_p10_ms": 0.9,
                                 "fp32_p90_ms": 1.1, "int8_p10_ms": 0.9, "int8_p90_ms": 1.0}])
    kind, sentence = quant_verdict(close)
    assert kind == "overlap" and "batch 64" in sentence


# -- issue 40, 4: a run whose start-up took its budget ---------------------------------------------------------


def test_a_run_whose_start_up_took_the_budget_says_so_and_draws_its_one_point(qtbot, page):
    page.modes["train"] = "busy-start"
    out = _run(qtbot, page, page.train_button.click)
    assert out.status == "ok"
    text = page.status.text()
    assert "only 1 step ran: start-up took 9.2 of the 10 s" in text and "Run it for longer on an idle machine" in text
    loss = page.live.curves["loss"]
    assert list(loss.getData()[0]) == [1.0] and loss.opts["symbol"] == "o"      # one point: drawn as a dot
    assert loss.scatter.isVisible() and len(loss.scatter.data) == 1
    assert page.live.curves["samples_per_s"].opts["symbol"] is None            # nothing known: nothing drawn
    note = page.table.item(0, COLUMN["Note"]).toolTip()
    assert "only 1 step ran: start-up took 9.2 of the 10 s" in note


def test_each_training_run_starts_with_its_own_y_range(qtbot, page):
    def loss_top() -> float:
        view = page.live.loss_plot.getPlotItem().getViewBox()
        view.updateAutoRange()                                       # what the next paint does
        return view.viewRange()[1][1]

    page.modes["train"] = "big-loss"
    _run(qtbot, page, page.train_button.click)
    assert loss_top() > 50
    page.modes["train"] = "silent"
    with qtbot.waitSignal(page.runner.started, timeout=20_000):
        page.train_button.click()
    assert loss_top() < 2                                             # not the last run's 100
    with qtbot.waitSignal(page.runner.finished, timeout=10_000):
        page.cancel_button.click()
    assert loss_top() < 2
    page.modes["train"] = "busy-start"
    _run(qtbot, page, page.train_button.click)
    assert 0.3 < loss_top() < 2                                       # this run's one point, in view


def test_the_status_counts_start_up_and_what_is_left_of_the_budget(qtbot, page):
    """Before the first step (torch importing on a busy machine) the status says how long start-up has taken and
    what is left of the run's seconds, every half second, not one frozen 'Running…'."""
    page.modes["train"] = "silent"
    page.form.length_spin.setValue(20)
    page.train_button.click()
    qtbot.waitUntil(lambda: "no step timed yet" in page.status.text() and "s of the 20 s left" in page.status.text(),
                    timeout=10_000)
    first = page.status.text()
    qtbot.waitUntil(lambda: page.status.text() != first, timeout=10_000)      # it counts
    with qtbot.waitSignal(page.runner.finished, timeout=10_000):
        page.cancel_button.click()
    assert not page._clock.isActive()


# -- issue 40, 5: a sweep that ended inside its first round ------------------------------------------------------


def test_a_sweep_ended_before_one_full_round_says_what_it_measured(qtbot, page):
    """"inconclusive (0 rounds)" stood beside a plotted point on a 219.8-220.4 axis with fractional thread ticks,
    and the Runs row said "—"."""
    from cpudoctor.gui.training_widgets import whole_ticks

    ticks = page.sweep.sweep_plot.getPlotItem().getAxis("bottom")._tickLevels      # before any point: 1..16 CPUs
    assert ticks and all(float(label) == int(label) for _, label in ticks[0])
    page.modes["sweep"] = "one-point"
    _run(qtbot, page, page.sweep_button.click)
    notes = page.sweep.sweep_notes.text()
    assert "0 round" not in notes and "1 measurement, not one full round" in notes
    assert "the budget ended before every setting was measured once" in notes
    assert page.table.item(0, COLUMN["Samples/s"]).text() == "220"
    view = page.sweep.sweep_plot.getPlotItem().viewRange()
    assert view[1][0] == pytest.approx(0) and view[1][1] > 220                # samples/s from zero
    assert [label for _, label in page.sweep.sweep_plot.getPlotItem().getAxis("bottom")._tickLevels[0]] == ["1"]
    assert [label for _, label in whole_ticks(1, 64)] == ["1", "8", "16", "24", "32", "40", "48", "56", "64"]


def test_the_exports_never_chart_a_sweeps_segment_count():
    """The PDF's sweep chart read "segments vs threads" when fewer than two settings had samples/s."""
    from cpudoctor.render.svg_chart import find_charts

    points = [{"variant": "1 thread", "group": "threads", "threads": 1, "samples_per_s": 220.1, "segments": 1},
              {"variant": "2 threads", "group": "threads", "threads": 2, "samples_per_s": None, "segments": 0,
               "samples_per_s_n": 0, "other_share": 0.4}]
    titles = [c.title for c in find_charts({"points": points, "rounds": 0}, "Thread sweep")]
    assert not any("segments" in t or "CPU to others" in t for t in titles), titles
