"""The Inspector's "Run a script…" with its Verify switch: the dialog's switch, and a run whose fixes are measured
(the measurement's windows faked: the real ones are tests/test_verify_job.py's), shown above the findings it ranks."""

from __future__ import annotations

from PySide6.QtCore import QThreadPool

from cpudoctor import verify
from cpudoctor.gui.inspector_page import InspectorPage
from cpudoctor.gui.model import AppModel
from cpudoctor.jobrun import Machine
from cpudoctor.model.jobstate import JobState, ModeSample, Progress
from inspect_fakes import two_ccx_topology


def test_the_dialog_has_a_verify_switch_with_its_time_limit(qtbot):
    from cpudoctor.gui.run_dialog import RunScriptDialog

    dialog = RunScriptDialog("python", None, "train.py", "", 60.0)
    qtbot.addWidget(dialog)
    assert dialog.verify_values() == (False, 180.0) and not dialog.budget_spin.isEnabled()
    dialog.verify_check.setChecked(True)
    dialog.budget_spin.setValue(90)
    assert dialog.verify_values() == (True, 90.0) and dialog.budget_spin.isEnabled()
    assert "--yes" in dialog.verify_check.toolTip()


def _fake_windows(argv, cwd=None, stopper=None, probe=True):
    def run(variant, seconds):
        rate = 10.0 if variant.name == verify.UNCHANGED else 20.0
        progress = [Progress(t, steps=int(rate * (t - 1)) + 1, last_step_s=t) for t in range(1, 9)]
        state = JobState(loaded=True, steps=progress[-1].steps, progress=progress, first_step_s=1.0,
                         samples=[ModeSample(threads=2 if variant.name == verify.UNCHANGED else 2)])
        return verify.WindowRun(state, seconds=seconds, ended="seconds", load={"other_share": 0.02})
    return run


def test_run_a_script_with_verify_shows_the_measured_table(qtbot, tmp_path, monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "8")           # PROC009: a relaunch with the usable CPUs' count
    monkeypatch.setattr(verify, "real_window", _fake_windows)
    monkeypatch.setattr(verify.job_rate, "choose_metric", lambda state, regex=None: "steps")
    page = InspectorPage(AppModel())
    qtbot.addWidget(page)
    page.inspections.list_fn = lambda: []
    page.inspections.machine_fn = lambda: Machine(topology=two_ccx_topology())
    script = tmp_path / "job.py"
    script.write_text("import time\nt = time.time()\nwhile time.time() - t < 1.0:\n    sum(range(999))\n")
    progress = []
    page.runner.progress.connect(progress.append)
    try:
        with qtbot.waitSignal(page.run_done, timeout=120_000) as got:
            assert page.run_script(str(script), "", None, verify=40.0)
        obs = got.args[0]
        ver = obs.verification
        assert ver is not None and ver.windows, ver
        measured = [c for c in ver.checks if c.status == "faster"]
        assert measured and page.findings[0].code == measured[0].code
        html = page.findings_view.toHtml()
        assert "Verified on the job" in html and "faster" in html
        assert progress and progress[0].startswith("round 1")
        # Copy as text is the run's report as `cpudoctor run` prints it: the measured table and the ranked findings
        assert page.copy_all_button.isEnabled()
        text = page.text()
        table = text.split("Verified", 1)[1] if "Verified" in text else ""
        assert f"{measured[0].code:<8} faster" in table, text
        qtbot.waitUntil(lambda: page.run_button.isEnabled(), timeout=30_000)
    finally:
        page.inspections.shutdown()
        page.runner.stop()
        assert QThreadPool.globalInstance().waitForDone(60_000)
