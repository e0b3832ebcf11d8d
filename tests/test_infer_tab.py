"""The Training page's Inference tab offscreen, driven by a fake child that speaks the inference lab's protocol."""

from __future__ import annotations

import json
import sys
import textwrap

import pytest
from PySide6.QtCore import QThread, QThreadPool
from PySide6.QtWidgets import QApplication

from cpudoctor.gui.inference_tab import InferencePanel
from cpudoctor.gui.model import AppModel
from cpudoctor.gui.training_page import INFER_TAB, TrainingPage
from cpudoctor.lab.settings import SettingsError
from cpudoctor.model import CpuInfo, Report

sys.path.insert(0, __import__("os").path.dirname(__file__))
from test_infer_lab import fake_run, make_topology  # noqa: E402

FAKE = textwrap.dedent("""
    import json, sys
    from cpudoctor.lab.jobs import _jobkit as protocol
    result = json.load(open(sys.argv[1]))
    protocol.progress(phase="plan", variants=[v["name"] for v in result["variants"]], budget_s=60, elapsed=0.0)
    for i, v in enumerate(result["variants"]):
        for p in v["points"]:
            protocol.progress(phase="segment", round=1, step=i + 1, variant=v["name"], batch=p["batch"],
                              segment_median_ms=p["latency_ms"], elapsed=1.0 + i, budget_s=60)
    protocol.result(**result)
""")


@pytest.fixture(autouse=True)
def no_qt_leaks(qapp):
    yield
    assert QThreadPool.globalInstance().waitForDone(30_000)
    QApplication.processEvents()
    assert not [t for t in qapp.findChildren(QThread) if t.isRunning()]


@pytest.fixture
def page(qtbot, tmp_path):
    model = AppModel()
    model.set_report(Report(cpu=CpuInfo(brand="AMD Ryzen 5 5600X"), topology=make_topology(2)))
    p = TrainingPage(model)
    qtbot.addWidget(p)
    result = tmp_path / "result.json"
    result.write_text(json.dumps(fake_run()))
    p.seen_args = []

    def argv(job, args):
        p.seen_args.append((job, args))
        return [sys.executable, "-c", FAKE, str(result)]

    p.job_argv = argv
    yield p
    p.shutdown()


def test_the_inference_tab_runs_in_a_child_and_draws_each_variant(qtbot, page):
    assert page.infer.run_button in page.job_buttons
    page.infer.batches.setText("1")
    with qtbot.waitSignal(page.runner.finished, timeout=20_000) as blocker:
        page.infer.run_button.click()
    assert blocker.args[0].status == "ok"
    assert page.tabs.currentIndex() == INFER_TAB
    job, args = page.seen_args[0]
    assert job == "infer" and args["model"] == "resnet18" and args["budget_s"] == 60
    assert args.get("topology") and "native_bf16" in args          # the parent's facts go to the orchestrator
    tab = page.infer
    assert [name for name, *_ in tab.rows()] == ["inference_mode", "eager fp32", "1 thread", "channels_last",
                                                 "int8 dynamic"]
    wrong = {name: bad for name, _p, _dots, bad in tab.rows()}
    assert wrong["channels_last"] and not wrong["1 thread"]
    assert len(tab.plot.getPlotItem().items) > 10                    # boxes, whiskers, medians, dots
    text = tab.text.text()
    assert "batch 1: use &#x27;1 thread&#x27;" in text and "torch.set_num_threads(1)" in text
    assert "ONNX Runtime is not installed" in text and "no C++ compiler" in text
    assert tab.copy_button.isEnabled()
    tab.copy_code()
    assert "torch.set_num_threads(1)" in QApplication.clipboard().text()
    assert page.table.rowCount() == 1 and page.table.item(0, 6).text() == "b1: 1 thread"
    assert any(r.kind == "infer" for r in page.model.report.benchmarks)


def test_the_form_says_what_is_wrong(qtbot):
    tab = InferencePanel()
    qtbot.addWidget(tab)
    tab.source.setCurrentIndex(4)                  # ONNX file
    with pytest.raises(SettingsError, match="model file"):
        tab.settings()
    tab.target.setText("m.onnx")
    tab.batches.setText("1, x")
    with pytest.raises(SettingsError, match="whole numbers"):
        tab.settings()
    tab.batches.setText("1,8")
    s = tab.settings()
    assert s["source"] == "onnx" and s["target"] == "m.onnx" and s["batches"] == [1, 8]


def test_live_segments_are_drawn_before_the_result(qtbot):
    tab = InferencePanel()
    qtbot.addWidget(tab)
    for ms in (4.0, 5.0):
        tab.show_progress({"phase": "segment", "variant": "inference_mode", "batch": 1, "segment_median_ms": ms})
    tab.show_progress({"phase": "prepared", "variant": "x"})
    assert [(n, dots) for n, _p, dots, _w in tab.rows()] == [("inference_mode", [4.0, 5.0])]


def test_a_model_that_cannot_be_prepared_is_said_in_one_line(qtbot, page, tmp_path):
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps({"status": "ok", "variants": [], "decisions": [],
                                  "main_worker": "/usr/bin/python3 cannot import torch: No module named 'torch'"}))
    page.job_argv = lambda job, args: [sys.executable, "-c", FAKE, str(broken)]
    with qtbot.waitSignal(page.runner.finished, timeout=20_000):
        page.infer.run_button.click()
    assert "could not prepare the model: /usr/bin/python3 cannot import torch" in page.status.text()


def test_the_pick_in_new_processes_is_drawn_below_the_variants(qtbot):
    from cpudoctor.lab.results import read_outcome
    from test_infer_lab import outcome

    tab = InferencePanel()
    qtbot.addWidget(tab)
    plain = read_outcome("infer", outcome(fake_run()), None).metrics()
    tab.show_result(plain)
    assert tab.fresh_rows() == []
    without = len(tab.plot.getPlotItem().items)
    tab.show_result(read_outcome("infer", outcome(fake_run(fresh={0: [12.1, 12.4], 1: [12.0, 12.3]})), None).metrics())
    [(label, fresh)] = tab.fresh_rows()
    assert label == "1 thread · new processes" and fresh["latency_ms_lo"] == 12.0
    assert len(tab.plot.getPlotItem().items) == without + 3                  # its segments, its range, its median
    ticks = tab.plot.getPlotItem().getAxis("left")._tickLevels[0]
    assert ticks[-1] == (0, "1 thread · new processes")                       # the bottom row
