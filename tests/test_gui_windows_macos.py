"""The window on a recorded Windows machine and a recorded Mac, offscreen: the map, the pinning panel, the advisor.

The reports come from captures in tests/fixtures/windows and tests/fixtures/macos
through the same pipeline the window uses (``Source.tree``), so this is what a
person sees after ``cpudoctor --root CAPTURE`` or opening a report a Windows
colleague saved.
"""

from __future__ import annotations

import pytest
from PySide6.QtGui import QGuiApplication

from conftest import REPO
from cpudoctor.gui.advisor_page import AdvisorPage
from cpudoctor.gui.model import AppModel
from cpudoctor.gui.topology_page import TopologyPage
from cpudoctor.pipeline import Source, build_report
from gui_support import no_qt_leaks  # noqa: F401  (autouse fixture)

WINDOWS = REPO / "tests" / "fixtures" / "windows"
MACOS = REPO / "tests" / "fixtures" / "macos"


def _report(root):
    return build_report(Source.tree(root), children=False)


def _topology_page(qtbot, report) -> TopologyPage:
    model = AppModel()
    page = TopologyPage(model)
    qtbot.addWidget(page)
    page.resize(1200, 850)
    page.show()
    model.set_report(report, read_only=True, label="capture")
    return page


def _tabs(page: TopologyPage) -> list[str]:
    return [page.tabs.tabText(i) for i in range(page.tabs.count())]


def test_map_and_pinning_panel_on_a_two_group_threadripper(qtbot):
    report = _report(WINDOWS / "threadripper-3990x-win10")
    page = _topology_page(qtbot, report)
    assert len(page.map.pu_items) == 128
    assert "64 cores, 128 logical CPUs (SMT 2), 16 L3 domains (CCXs), 2 NUMA nodes" in page.summary.text()
    menu = page.ccx_buttons[0].menu().actions()
    assert menu[8].text().startswith("CCX 8: 16 MiB L3, CPUs 64-71")
    menu[8].trigger()                                       # a CCX in processor group 1
    assert page.map.selected_cpus() == list(range(64, 72))
    assert _tabs(page) == ["cmd.exe", "PowerShell", "OpenMP"]      # no psutil: it cannot leave its own group
    page.tabs.setCurrentIndex(0)
    page.copy_current()
    text = QGuiApplication.clipboard().text()
    assert text.splitlines()[-1] == 'start "" /b /wait /node 1 /affinity FF python train.py'
    assert "set OMP_NUM_THREADS=4" in text and "taskset" not in text and "numactl" not in text
    assert "NUMA node 1's processor group" in page.note_label.text()
    page.tabs.setCurrentIndex(1)
    assert page.current_snippet_text().endswith("cmd /c 'start \"\" /b /wait /node 1 /affinity FF python train.py'")
    assert not page.warnings_label.isVisible()              # the other group is reachable with start /node


def test_pinning_panel_on_one_group_uses_processoraffinity_and_psutil(qtbot):
    page = _topology_page(qtbot, _report(WINDOWS / "core-i9-13900k-win11"))
    page.map.set_selection(list(range(16)))                 # the performance cores
    assert _tabs(page) == ["cmd.exe", "PowerShell", "OpenMP", "Python"]
    page.tabs.setCurrentIndex(1)
    assert "$p.ProcessorAffinity = [IntPtr]0xFFFF  # CPUs 0-15" in page.current_snippet_text()
    page.tabs.setCurrentIndex(3)
    assert "psutil.Process().cpu_affinity([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15])" in (
        page.current_snippet_text())
    marked = sorted(c for item in page.map.box_items["core"] if page.map.is_efficiency(item.cpus) for c in item.cpus)
    assert page.map.hybrid and marked == list(range(16, 32))      # EfficiencyClass 0: drawn as E-cores


def test_advisor_on_a_windows_report_speaks_powershell_and_cmd(qtbot):
    report = _report(WINDOWS / "threadripper-3990x-win10")
    model = AppModel()
    page = AdvisorPage(model)
    qtbot.addWidget(page)
    model.set_report(report, read_only=True, label="capture")
    assert page.current_shell() == "powershell"            # the report's OS chooses, until the user does
    assert page.select("TOPO004")
    assert "64 of the 128 CPUs" in page.details_title.text()
    assert "start \"rank 1\" /node 1 python train.py" in page.snippet_text()
    assert page.select("TOPO002")
    assert "cmd /c 'start \"\" /b /wait /node 0 /affinity FF python train.py'" in page.snippet_text()
    page.shell.setCurrentIndex(page.shell.findData("cmd"))
    assert 'start "" /b /wait /node 0 /affinity FF python train.py' in page.snippet_text().splitlines()
    assert "numactl" not in page.snippet_text() and "taskset" not in page.snippet_text()


def test_pinning_panel_on_a_mac_says_macos_cannot_pin(qtbot):
    report = _report(MACOS / "apple-m3-max")
    page = _topology_page(qtbot, report)
    assert len(page.map.pu_items) == 14
    page.map.set_selection(list(range(4, 14)))
    assert page.tabs.count() == 0
    assert page.warnings_label.isVisible() and "macOS cannot pin" in page.warnings_label.text()


@pytest.mark.parametrize("root", [WINDOWS / "threadripper-3990x-win11", MACOS / "macbookpro-2012-i7-3615qm"])
def test_the_whole_window_shows_a_recorded_machine(qtbot, tmp_path, root):
    from PySide6.QtCore import QSettings

    from cpudoctor.gui.main_window import MainWindow

    settings = QSettings(str(tmp_path / "w.ini"), QSettings.Format.IniFormat)
    window = MainWindow(AppModel(), settings=settings, collect=False, children=False)
    qtbot.addWidget(window)
    window.show()
    report = _report(root)
    window.model.set_report(report, read_only=True, label="capture")
    for title in ("Overview", "Topology", "Advisor", "Report"):
        window.show_page(title)
        assert window.current_page_title() == title
    report_page = window.pages["Report"]
    qtbot.waitUntil(lambda: report_page.text.startswith("# CPU Doctor"), timeout=30_000)
    system = "Windows 11" if "win11" in root.name else "macOS"
    assert system in report_page.text and report.cpu.brand in report_page.text
    assert len(window.pages["Topology"].map.pu_items) == report.topology.logical_cpus
    window.sampler.stop()
    window.pages["Inspector"].inspections.live_timer.stop()
    window.close()


def test_monitor_says_why_windows_shows_no_temperature(qtbot):
    from cpudoctor.gui.monitor_page import MonitorPage
    from cpudoctor.probes.live.sample import Sample
    from cpudoctor.probes.live.sampler import temps_unavailable_reason

    why = temps_unavailable_reason("win32")
    assert "kernel driver" in why and "macOS" not in why and "administrators" in temps_unavailable_reason("darwin")
    model = AppModel()
    page = MonitorPage(model)
    qtbot.addWidget(page)
    page.resize(1100, 800)
    page.show()
    for i in range(5):
        model.sample.emit(Sample(t=float(i), cpu_ids=[0, 1], cpu_percent=[10.0, 20.0], temps_unavailable=why))
    assert page.is_unavailable("temp")
    assert "kernel driver" in page.unavailable["temp"].toPlainText().replace("\n", " ")
