"""The Roofline tab of the Training page and the Overview's peak rows, offscreen.

The plotted points are read back from the plot's scatter items and compared
with the runs they were drawn from; a fake roofline job (a tiny child
speaking the protocol) fills the tab the way the real one does.
"""

from __future__ import annotations

import json
import sys
import textwrap

import pytest
from PySide6.QtWidgets import QApplication

from gui_support import no_qt_leaks  # noqa: F401 - fixture

from cpudoctor.gui.model import AppModel
from cpudoctor.gui.overview_page import OverviewPage
from cpudoctor.gui.roofline_view import EMPTY_TEXT, RooflineView
from cpudoctor.gui.training_page import ROOFLINE_TAB
from cpudoctor.render.roofline import gemm_intensity, picture_from_runs
from tests import roofline_samples as samples
from tests.test_training_page import COLUMN
from tests.test_training_page import page as page  # noqa: F401 - the fixture this module's page builds on


def _key(kind, x, y):
    return kind, round(x, 3), round(y, 3)


def test_the_plot_shows_exactly_the_points_of_the_data(qtbot):
    view = RooflineView()
    qtbot.addWidget(view)
    runs = samples.runs()
    view.show_runs(runs)
    plotted = {_key(kind, x, y) for kind, _dtype, x, y in view.plotted_points()}
    expected = {_key("gemm", gemm_intensity(p["size"], p["precision"]), p["gflops"])
                for p in runs[1].metrics["points"]}
    expected |= {_key("operator", op["intensity"], op["gflops"]) for op in runs[2].metrics["operators"]}
    expected |= {_key("gemm-ladder", 2 * p["size"] / (3 * {"fp32": 4, "bf16": 2}[p["dtype"]]), p["gflops"])
                 for p in runs[0].metrics["gemm_points"] if p["threads"] == 2}
    assert plotted == expected
    compute = runs[0].metrics["compute"]
    drawn = [(roof.dtype, roof.threads, float(line.yData[0])) for roof, line in view.roof_items if roof.measured]
    assert sorted(drawn) == sorted((c["dtype"], c["threads"], c["gflops"]) for c in compute)
    assert float(view.memory_item.yData[0]) / float(view.memory_item.xData[0]) == pytest.approx(33.0)
    labels = {item.toPlainText() for item in view.labels}
    picture = picture_from_runs(runs)
    assert {p.label for p in picture.points if p.labelled} <= labels
    assert "Measured fp32 roof 288.0 GFLOP/s on 2 threads = 90 % of the nominal peak" in view.claim.full
    assert view.claim_area.isVisibleTo(view) and not view.empty.isVisibleTo(view)
    assert view.save.isEnabled() and not view.plot.isHidden()


def test_without_a_roofline_run_the_tab_says_how_to_get_one(qtbot):
    view = RooflineView()
    qtbot.addWidget(view)
    view.show_runs([samples.gemm_run()])
    assert view.empty.text() == EMPTY_TEXT and view.empty.isVisibleTo(view) and view.claim.full == ""
    assert view.plot.isHidden() and not view.save.isEnabled()
    assert view.plotted_points() == []


FAKE_ROOFLINE = textwrap.dedent("""
    import json, sys
    from cpudoctor.lab.jobs import _jobkit as protocol
    result = json.loads(sys.argv[1])
    for c in result["compute"]:
        protocol.progress(phase="compute", step=1, total=4, elapsed=0.1,
                          **{k: v for k, v in c.items() if k != "points"})
    protocol.result(**result)
""")


@pytest.fixture
def roofline_page(page):
    """The Training page of test_training_page (a Zen 5 at 2.5 GHz), with a fake roofline job."""
    page.job_argv = lambda job, args: [sys.executable, "-c", FAKE_ROOFLINE, json.dumps(samples.child_result())]
    return page


def test_measure_roofs_fills_the_tab_the_model_and_the_overview(qtbot, roofline_page):
    page = roofline_page
    overview = OverviewPage(page.model)
    qtbot.addWidget(overview)
    assert "not measured yet" in overview.cards["Clocks"].row("Measured roof").text()
    assert "GFLOP/s fp32" in overview.cards["Clocks"].row("Nominal peak").text()
    with qtbot.waitSignal(page.runner.finished, timeout=20_000):
        page.roofline_tab.measure.click()
    assert page.tabs.currentIndex() == ROOFLINE_TAB
    run = page.model.report.benchmarks[-1]
    assert run.kind == "roofline" and run.metrics["compute"][0]["gflops"] == 288.0
    assert page.roofline_tab.picture is not None and len(page.roofline_tab.plotted_points()) == 6
    assert page.table.item(0, COLUMN["Result"]).text() == "fp32 roof 288 GFLOP/s · copy 33.0 GB/s"
    roof = overview.cards["Clocks"].row("Measured roof").text()
    nominal = overview.cards["Clocks"].row("Nominal peak").text()
    assert roof.startswith("288 GFLOP/s fp32 on 2 threads") and "90 % of the nominal peak" in roof
    # the machine's nominal peak: 8 physical cores x 2.5 GHz x 64 FLOP/cycle (resources/peak_flops.json, zen5)
    assert nominal.startswith("1,280 GFLOP/s fp32 on 8 cores (cores × clock × FLOP/cycle)")


def test_the_picture_saves_as_svg_and_png(qtbot, roofline_page, tmp_path):
    page = roofline_page
    page.model.add_benchmark(samples.roofline_result().bench_run())
    page.save_roofline(str(tmp_path / "r.svg"))
    assert (tmp_path / "r.svg").read_text().startswith("<svg")
    page.save_roofline(str(tmp_path / "r.png"))
    assert (tmp_path / "r.png").read_bytes()[:4] == b"\x89PNG"


@pytest.mark.parametrize("read_only", [False, True], ids=["live", "saved"])
def test_readable_in_a_900x600_window(qtbot, tmp_path, read_only):
    """The whole window at 900x600 (a saved report adds its banner): the plot keeps a readable size, every
    point lies inside the view, and the labels shown touch neither each other nor the view's edge."""
    import math

    from PySide6.QtCore import QSettings

    from cpudoctor.gui.main_window import MainWindow
    from gui_fill import realistic_report

    settings = QSettings(str(tmp_path / "w.ini"), QSettings.Format.IniFormat)
    window = MainWindow(AppModel(), settings=settings, collect=False, children=False)
    qtbot.addWidget(window)
    window.resize(900, 600)
    window.show()
    qtbot.waitExposed(window)
    if read_only:
        window.model.set_report(realistic_report(), read_only=True, label="colleague.json")
    else:
        window.model.set_report(realistic_report())
    window.show_page("Training")
    page = window.pages["Training"]
    page.tabs.setCurrentIndex(ROOFLINE_TAB)
    for _ in range(5):
        QApplication.processEvents()
    view = page.roofline_tab
    plot = view.plot
    assert plot.isVisible() and plot.width() >= 380 and plot.height() >= 140, (plot.width(), plot.height())
    vb = plot.getPlotItem().getViewBox()
    (x0, x1), (y0, y1) = vb.viewRange()
    for _kind, _dtype, x, y in view.plotted_points():
        assert x0 <= math.log10(x) <= x1 and y0 <= math.log10(y) <= y1
    shown = [item.sceneBoundingRect() for item in view.labels if item.isVisible()]
    assert shown, "no label fits at all"
    box = vb.sceneBoundingRect()
    for i, a in enumerate(shown):
        assert box.contains(a)
        assert not any(a.intersects(b) for b in shown[i + 1:])
    window.sampler.stop()
    window.close()


# -- issue 40, 6: a contended measurement, one nominal line per dtype, units in the key, the whole summary ----------


def _contended_runs():
    """fp32 on 2 threads measured while another program took 30 % of the CPUs (21.7 GFLOP/s), 1 thread quiet
    (103.5): what the tour saw on a busy 2-CPU machine."""
    from types import SimpleNamespace

    from cpudoctor.lab.results import Context, read_outcome

    child = samples.child_result()
    for entry in child["compute"]:
        if entry["dtype"] == "fp32":
            g = 21.7 if entry["threads"] == 2 else 103.5
            entry.update(gflops=g, median_gflops=g, interference=samples.BUSY if entry["threads"] == 2 else samples.QUIET)
            for point in entry["points"]:
                point["gflops"] = min(point["gflops"], g)
            entry["points"][-1]["gflops"] = g
    ctx = Context(native=None, peak=samples.peak(), started_at="2026-12-01T10:00:00+00:00")
    result = read_outcome("roofline", SimpleNamespace(status="ok", result=child, progress=[], message="finished"), {},
                          ctx)
    return result, [result.bench_run()]


def test_the_headline_roof_is_the_measurement_others_did_not_contend():
    from cpudoctor.render.roofline import claim_text, peak_rows
    from cpudoctor.render.training import run_cells

    result, runs = _contended_runs()
    assert result.claim["roof_gflops"] == 103.5 and result.claim["threads"] == 1
    assert result.claim["nominal_gflops"] == 160.0                        # the one core it ran on
    text = claim_text(result.claim, result.nominal)
    assert text.startswith("Measured fp32 roof 103.5 GFLOP/s on 1 thread = 65 % of the nominal peak 160.0")
    assert "2 threads measured 21.7 GFLOP/s, slower than 1 thread (103.5) while other programs took 31 %" in text
    assert "(1 core × 2,500 MHz" in text
    measured = next(v for label, v, _tip in peak_rows(None, runs) if label == "Measured roof")
    assert measured.startswith("104 GFLOP/s fp32 on 1 thread")
    result_cell = run_cells(runs[0])[6][0]
    assert result_cell.startswith("fp32 roof 104 GFLOP/s")


def test_one_nominal_line_per_dtype_a_key_with_units_and_the_whole_summary(qtbot):
    view = RooflineView()
    qtbot.addWidget(view)
    view.resize(900, 600)                       # the Roofline tab's width in a 1280x800 window
    view.show()
    qtbot.waitExposed(view)
    view.show_runs(samples.runs())
    nominal = [(roof.dtype, float(line.yData[0])) for roof, line in view.roof_items if not roof.measured]
    assert sorted(nominal) == [("bf16", 640.0), ("fp32", 320.0)]            # one each, no 90 % line beside
    key = view.key.text()
    assert "fp32 roof 288 GFLOP/s" in key and "nominal fp32 320 GFLOP/s" in key and "memory 33.0 GB/s" in key
    qtbot.waitUntil(lambda: view.claim.height() >= view.claim.heightForWidth(view.claim.width()))
    assert view.claim.text() == view.picture.claim and "…" not in view.claim.text()


def test_a_theme_switch_redraws_the_labels_in_the_new_text_colour(qtbot):
    """Issue 40, 14 (View > Theme): the point labels kept the light theme's dark text on a dark plot."""
    from cpudoctor.gui.theme import dark_palette

    view = RooflineView()
    qtbot.addWidget(view)
    view.show_runs(samples.runs())
    assert view.labels and view.labels[0].color.lightness() < 128
    view.setPalette(dark_palette())
    qtbot.waitUntil(lambda: view.labels and view.labels[0].color.lightness() > 128, timeout=5_000)
    assert view.plot.backgroundBrush().color().lightness() < 128
