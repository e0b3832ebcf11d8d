"""Advisor page, offscreen: groups and counts, filter, details, shell selector, copy, save, re-run."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from PySide6.QtGui import QGuiApplication

from gui_support import no_qt_leaks  # noqa: F401 - fixture

from cpudoctor.report_file import load_report
from cpudoctor.advisor import diagnose
from cpudoctor.gui.advisor_page import GROUPS, AdvisorPage, matches
from cpudoctor.gui.model import AppModel
from cpudoctor.model import Report, ThreadRecommendation

SCENARIOS = Path(__file__).parent / "fixtures" / "scenarios"


def _report(name: str, findings: bool = True) -> Report:
    r = load_report(SCENARIOS / f"{name}.json")
    if findings:
        r.findings = diagnose(r)
    return r


@pytest.fixture
def page(qtbot):
    model = AppModel()
    p = AdvisorPage(model)
    qtbot.addWidget(p)
    return p


def _group(page, severity):
    return page._groups[severity]


def test_page_metadata_and_empty_state(page):
    assert AdvisorPage.title == "Advisor" and AdvisorPage.icon_name == "advisor"
    assert page.details_title.text() == "No report yet"
    assert not page.save_button.isEnabled() or page.model.report is None


def test_icon_exists():
    from cpudoctor.gui.icons import known_icons

    assert "advisor" in known_icons()


def test_findings_grouped_by_severity_with_counts(page):
    r = _report("k10-tensorflow-sigill")
    page.model.set_report(r)
    counts = page.counts_by_severity()
    assert counts == {s: sum(1 for f in r.findings if f.severity == s) for s, _ in GROUPS}
    assert counts["error"] >= 1
    err = _group(page, "error")
    assert err.text(0) == f"Problems ({counts['error']})"
    assert err.childCount() == counts["error"]
    assert err.child(0).text(1) == "ISA003"
    assert ("1 problem" if counts["error"] == 1 else f"{counts['error']} problems") in page.counts.text()


def test_filter_hides_non_matching(page):
    page.model.set_report(_report("skylake-avx512-no-bf16-myths"))
    page.filter.setText("myth")
    codes = page.visible_codes()
    assert codes and all(c.startswith("MYTH") for c in codes)
    assert _group(page, "ok").isHidden()
    page.filter.setText("numa")
    assert set(page.visible_codes()) <= {"TOPO001", "TOPO002"}
    page.filter.clear()
    page.show_passed.setChecked(False)
    assert _group(page, "ok").isHidden()
    assert "ISA001" not in page.visible_codes()  # a passed check on this CPU


def test_matches_helper():
    f = _report("k10-container-quota").findings[0]
    assert matches(f, "") and matches(f, f.code.lower())
    assert not matches(f, "zzzz-nothing")


def test_details_and_shell_selector(page):
    page.model.set_report(_report("k10-container-quota"))
    assert page.select("THR002")
    assert "THR002" in page.details_title.text()
    html = page.details.toPlainText()
    assert "Why" in html and "Fix" in html and "4 usable CPUs" in html
    assert "topology.affinity.usable_cpus" in html  # evidence table
    assert "export OMP_NUM_THREADS=4" in page.snippet_text()
    for key, expected in (("fish", "set -gx OMP_NUM_THREADS 4"), ("powershell", "$env:OMP_NUM_THREADS = '4'"),
                          ("cmd", "set OMP_NUM_THREADS=4"), ("bash", "export OMP_NUM_THREADS=4")):
        page.shell.setCurrentIndex(page.shell.findData(key))
        assert expected in page.snippet_text()


def test_python_snippet_disables_shell_selector(page):
    page.model.set_report(_report("sapphirerapids-amx"))
    assert page.select("PREC001")
    assert "torch.autocast" in page.snippet_text()
    assert not page.shell.isEnabled()
    assert "python" in page.snippet_label.text()


def test_copy_button(page):
    page.model.set_report(_report("k10-container-quota"))
    page.select("THR002")
    page.copy_button.click()
    assert QGuiApplication.clipboard().text() == page.snippet_text()


def test_nothing_selected_shows_recommended_settings(page):
    page.model.set_report(_report("zen3-healthy"))
    page.tree.setCurrentItem(None)
    assert page.details_title.text() == "Recommended settings for this machine"
    assert "export OMP_NUM_THREADS=16" in page.snippet_text()
    assert "torch.set_num_threads(16)" in page.snippet_text()


def test_save_launch_script_is_runnable(page, tmp_path):
    page.model.set_report(_report("ryzen2700x-sweep-recommends-one-ccx"))
    page.shell.setCurrentIndex(page.shell.findData("bash"))
    target = tmp_path / "launch.sh"
    written = page.save_launch_script(target)
    assert written == target and os.access(target, os.X_OK)
    text = target.read_text()
    assert "taskset -c 0-3" in text and "export OMP_NUM_THREADS=4" in text
    assert subprocess.run(["bash", "-n", str(target)]).returncode == 0
    page.shell.setCurrentIndex(page.shell.findData("powershell"))
    ps = page.save_launch_script(tmp_path / "launch.ps1")
    assert "$env:OMP_NUM_THREADS = '4'" in ps.read_text()


def test_save_launch_script_error_keeps_page_alive(page, tmp_path):
    page.model.set_report(_report("zen3-healthy"))
    messages = []
    page.model.status_message.connect(messages.append)
    assert page.save_launch_script(tmp_path / "missing-dir" / "launch.sh") is None
    assert "does not exist" in messages[-1]


def test_a_launch_script_the_os_refuses_is_said_in_words(page, tmp_path, monkeypatch):
    """An OSError that atomic_write passes on as it is (not its own WriteError) reads as the OS's words and the
    file, never Python's '[Errno 13] ...'."""
    import cpudoctor.fileio as fileio

    def refuse(path, *args, **kwargs):
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(fileio, "atomic_write", refuse)
    page.model.set_report(_report("zen3-healthy"))
    messages = []
    page.model.status_message.connect(messages.append)
    assert page.save_launch_script(tmp_path / "launch.sh") is None
    assert messages[-1] == f"Permission denied: {tmp_path / 'launch.sh'}"


def test_rerun_rediagnoses_and_sets_findings(page, qtbot):
    r = _report("k10-container-quota", findings=False)
    page.model.set_report(r)
    assert page.counts_by_severity() == {s: 0 for s, _ in GROUPS}
    with qtbot.waitSignal(page.model.findings_changed, timeout=10_000) as blocker:
        page.rerun()
    assert any(f.code == "THR002" and f.severity == "warning" for f in blocker.args[0])
    assert page.counts_by_severity()["warning"] >= 1
    assert page.model.report.findings == blocker.args[0]
    assert r.findings == []                          # the model diagnoses its own copy, never the caller's
    qtbot.waitUntil(page.rerun_button.isEnabled, timeout=10_000)


def test_recommendation_change_rediagnoses(page, qtbot):
    page.model.set_report(_report("zen3-healthy"))
    page.tree.setCurrentItem(None)
    with qtbot.waitSignal(page.model.findings_changed, timeout=10_000):
        page.model.set_recommendation(ThreadRecommendation(threads=12, variant="all cores, no SMT"))
    page.tree.setCurrentItem(None)
    assert "export OMP_NUM_THREADS=12" in page.snippet_text()
    qtbot.waitUntil(page.rerun_button.isEnabled, timeout=10_000)


def test_selection_survives_new_findings(page):
    r = _report("k10-container-quota")
    page.model.set_report(r)
    page.select("THR002")
    page.model.set_findings(list(r.findings))
    assert "THR002" in page.details_title.text()


def test_filter_that_hides_the_selected_finding_clears_the_details(page):
    """The details pane and Copy never show a finding the filter has hidden."""
    page.model.set_report(_report("k10-container-quota"))
    assert page.select("THR002")
    page.filter.setText("zzzz-nothing")
    assert page.details_title.text() == "Recommended settings for this machine"
    assert "THR002" not in page.snippet_text()


def test_titles_keep_their_room_in_a_narrow_window(qtbot):
    """A long category ("WSL, VMs and containers") must not squeeze the title to 'Try AM…'."""
    model = AppModel()
    p = AdvisorPage(model)
    qtbot.addWidget(p)
    p.resize(780, 600)
    p.show()
    qtbot.waitExposed(p)
    model.set_report(_report("k10-container-quota"))
    tree = p.tree
    first = next(tree.topLevelItem(i).child(0) for i in range(tree.topLevelItemCount())
                 if tree.topLevelItem(i).childCount())
    qtbot.waitUntil(lambda: tree.columnWidth(0) >= 0.5 * tree.viewport().width())
    assert tree.isFirstColumnSpanned(0, tree.rootIndex())               # group headings span the row
    p.resize(1500, 900)
    qtbot.waitUntil(lambda: not tree.isColumnHidden(2))                 # room again: Category is back
    assert tree.columnWidth(0) >= tree.columnWidth(2)
    assert first.toolTip(2) == first.text(2)


def test_saved_report_recommends_for_its_own_machine(page):
    page.model.set_report(_report("k10-container-quota"), read_only=True, label="saved.json")
    assert page.details_title.text() == "Recommended settings for the machine in this report"


def test_one_severity_vocabulary_across_pages():
    """The Advisor's groups are the vocabulary's, worst first; Overview and Inspector name findings from it too."""
    from cpudoctor.render.words import SEVERITY

    assert GROUPS == tuple((s.key, s.group) for s in SEVERITY.values())
    for severity, group in GROUPS:
        assert group.lower().startswith(SEVERITY[severity].name.lower().rstrip("s")), (severity, group)


def test_details_speak_the_apps_words_not_python_reprs(qtbot):
    """Severity as the groups name it ('Suggestion'), evidence as words (no True / [] / None)."""
    from cpudoctor.gui.advisor_page import AdvisorPage
    from cpudoctor.gui.model import AppModel
    from cpudoctor.model import Finding

    f = Finding("THR001", "threads-unset", "threads", "info", "OMP_NUM_THREADS is not set",
                why="w", evidence={"software.thread_env.OMP_NUM_THREADS": None, "cpu.isa.avx512_usable": True,
                                   "software.preload_libs": []})
    model = AppModel()
    page = AdvisorPage(model)
    qtbot.addWidget(page)
    page._show_details(f)
    text = page.details.toPlainText()
    assert "Suggestion" in text and "INFO" not in text
    assert "not set / unknown" in text and "yes" in text and "none" in text
    assert "True" not in text and "[]" not in text


def test_problems_first_then_by_relevance_not_zentorch_first(page):
    """Within Suggestions the optional zentorch plug-in ('smaller gains on this CPU') comes after real fixes."""
    from cpudoctor.advisor.ranking import relevance

    report = _report("ryzen2700x-cuda-wheel")
    page.model.set_report(report)
    page.set_findings(report.findings)
    order = page.visible_codes()
    severities = {f.code: f.severity for f in report.findings}
    assert [severities[c] for c in order] == sorted((severities[c] for c in order),
                                                    key=["error", "warning", "info", "ok"].index)
    suggestions = [c for c in order if severities[c] == "info"]
    assert suggestions[0] != "TORCH006" and suggestions.index("TOPO002") < suggestions.index("TORCH006")
    assert relevance("TORCH006") == "low" and relevance("TOPO002") == "high"


def test_zentorch_evidence_says_not_installed(page):
    report = _report("zen3-healthy")
    f = next(f for f in report.findings if f.code == "TORCH006")
    assert f.evidence["software.packages[zentorch]"] == "not installed"
    page.model.set_report(report)
    page._show_details(f)
    text = page.details.toPlainText()
    assert "not installed" in text and "not set / unknown" not in text


def test_long_titles_are_whole_in_the_tooltip(page, qtbot):
    report = _report("zen3-healthy")
    page.resize(900, 600)
    page.show()
    qtbot.waitExposed(page)
    page.model.set_report(report)
    page.set_findings(report.findings)
    import html

    item = next(page._groups["info"].child(i) for i in range(page._groups["info"].childCount()))
    assert item.text(0) in html.unescape(item.toolTip(0))          # rich text: the title escaped, then shown whole


def test_launch_script_runs_in_the_reports_environment(page, tmp_path):
    """Issue 28, 2: the saved script ran `python3` from PATH, not the environment chosen in the toolbar
    (`./launch-train.sh t.py` failed with No module named 'torch' until PYTHON= was set)."""
    import dataclasses
    import shutil

    env = tmp_path / "my env" / "bin"             # a space in the path: the script must quote it
    env.mkdir(parents=True)
    python = env / "python"
    python.write_text('#!/bin/sh\necho "ran in the chosen environment: $*"\n')
    python.chmod(0o755)
    r = _report("zen3-healthy")
    r.software.python = dataclasses.replace(r.software.python, executable=str(python))
    page.model.set_report(r)
    page.shell.setCurrentIndex(page.shell.findData("bash"))
    script = page.save_launch_script(tmp_path / "launch.sh")
    clean = {k: v for k, v in os.environ.items() if k != "PYTHON"}
    out = subprocess.run([str(script), "t.py", "--epochs", "1"], capture_output=True, text=True, env=clean, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ran in the chosen environment: t.py --epochs 1"
    # $PYTHON still wins when the user sets it
    out = subprocess.run([str(script), "t.py"], capture_output=True, text=True, env={**clean, "PYTHON": "echo"},
                         timeout=60)
    assert out.stdout.strip() == "t.py"
    if shutil.which("fish"):
        page.shell.setCurrentIndex(page.shell.findData("fish"))
        fish = page.save_launch_script(tmp_path / "launch.fish")
        out = subprocess.run(["fish", str(fish), "t.py"], capture_output=True, text=True, env=clean, timeout=60)
        assert out.stdout.strip() == "ran in the chosen environment: t.py", out.stderr
    page.shell.setCurrentIndex(page.shell.findData("powershell"))
    assert f"else {{ '{python}' }}" in page.save_launch_script(tmp_path / "launch.ps1").read_text()


def test_tab_follows_the_page_and_every_stop_shows_focus(qtbot, page):
    """Issue 28, 11: Tab jumped around the Advisor page and one stop showed no focus."""
    from PySide6.QtCore import Qt
    from PySide6.QtWidgets import QApplication

    page.model.set_report(_report("zen3-healthy"))
    page.resize(1100, 700)
    page.show()
    qtbot.waitExposed(page)
    page.activateWindow()
    page.filter.setFocus()
    qtbot.waitUntil(page.filter.hasFocus, timeout=5_000)
    order = []
    for _ in range(9):
        order.append(QApplication.focusWidget())
        qtbot.keyClick(QApplication.focusWidget(), Qt.Key.Key_Tab)
    assert order == [page.filter, page.show_passed, page.rerun_button, page.save_button, page.tree, page.details,
                     page.shell, page.copy_button, page.snippet]
    for view in (page.details, page.snippet):                 # read-only views draw a focus frame
        assert ":focus" in view.styleSheet()


def test_titles_are_not_elided_while_category_has_room(qtbot):
    """Issue 40, 12: at 1280 the titles were elided while the Category column kept 40 % of the tree. The layout
    test's tree rule checks it at every width from a narrow tree to a wide one."""
    from gui_layout_check import tree_cells_cut

    model = AppModel()
    p = AdvisorPage(model)
    qtbot.addWidget(p)
    p.show()
    qtbot.waitExposed(p)
    model.set_report(_report("k10-container-quota"))
    p.tree.expandAll()
    problems = []
    for width in range(700, 1700, 60):
        p.resize(width, 700)
        qtbot.waitUntil(lambda: p.width() == width)
        qtbot.wait(10)
        problems += [f"{width}: {x}" for x in tree_cells_cut(p)]
    assert not problems, "\n".join(problems)
