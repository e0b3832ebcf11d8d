"""The Inspector's time breakdown and "Run a script…", offscreen, on real processes (no torch needed)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
from PySide6.QtCore import QThreadPool

from cpudoctor.jobrun import Machine
from cpudoctor.gui.inspector_page import InspectorPage
from cpudoctor.gui.model import AppModel
from inspect_fakes import two_ccx_topology

pytestmark = pytest.mark.slow


@pytest.fixture
def page(qtbot):
    model = AppModel()
    p = InspectorPage(model)
    qtbot.addWidget(p)
    p.inspections.list_fn = lambda: []
    p.inspections.machine_fn = lambda: Machine(topology=two_ccx_topology())
    yield p
    p.inspections.shutdown()
    p.runner.stop()
    assert QThreadPool.globalInstance().waitForDone(60_000)


def test_run_a_script_shows_the_bar_the_findings_and_its_output(qtbot, page, tmp_path):
    script = tmp_path / "busy.py"
    script.write_text(textwrap.dedent("""
        import sys, time
        print("hello from the job", flush=True)
        t = time.time()
        while time.time() - t < float(sys.argv[1]):
            sum(i * i for i in range(1000))
    """))
    with qtbot.waitSignal(page.run_done, timeout=120_000) as got:
        assert page.run_script(str(script), "2.5")
        assert not page.run_button.isEnabled() and page.stop_button.isEnabled()
    obs = got.args[0]
    assert obs.exit_code == 0 and obs.ended_by == "exit"
    assert "hello from the job" in page.time_tab.output.toPlainText()
    shares = {s.category for s in page.time_tab.bar.shares}
    assert "python" in shares and abs(sum(s.share for s in page.time_tab.bar.shares) - 1) < 0.01
    assert page.time_tab.table.rowCount() == len(page.time_tab.bar.shares) and page.time_tab.thread_table.rowCount() >= 1
    assert "Ran " in page.summary_label.text() and "exited with code 0" in page.status_label.text()
    qtbot.waitUntil(lambda: page.run_button.isEnabled(), timeout=30_000)


def test_stop_ends_a_script_that_would_run_on(qtbot, page, tmp_path):
    script = tmp_path / "forever.py"
    script.write_text("import time\nwhile True:\n    time.sleep(0.05)\n")
    with qtbot.waitSignal(page.run_done, timeout=120_000) as got:
        page.run_script(str(script))
        qtbot.waitUntil(lambda: page.runner.job is not None and page.runner.job.obs.pid is not None, timeout=30_000)
        page.stop_button.click()
    assert got.args[0].ended_by == "stopped"
    qtbot.waitUntil(lambda: page.run_button.isEnabled(), timeout=30_000)


def test_a_missing_script_is_one_message(page):
    assert not page.run_script("/no/such/train.py")
    assert "No script to run" in page.status_label.text() and page.run_button.isEnabled()


def test_inspecting_a_process_fills_the_time_tab(qtbot, page):
    job = subprocess.Popen([sys.executable, "-c", "import time\nt=time.time()\nwhile time.time()-t<30: sum(range(999))"])
    try:
        page.pid_edit.setText(str(job.pid))
        page.seconds_spin.setValue(1.5)
        with qtbot.waitSignal(page.inspection_done, timeout=60_000):
            page.start_inspection()
    finally:
        job.kill()
        job.wait()
    bd = page.time_breakdown
    assert bd is not None and bd.samples > 0 and page.time_tab.bar.shares
    assert page.time_tab.caption.text().startswith("Where the job's threads spent")
    qtbot.waitUntil(lambda: page.inspect_button.isEnabled(), timeout=30_000)
