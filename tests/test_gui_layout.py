"""Every page of the real window, filled with a real machine's data, at 900x600 and 1600x1000: no text drawn
over other text, no label or button cut off (see gui_layout_check.py for the rules).

The report is a scenario fixture made from a 2-socket Cascade Lake corpus tree (4 NUMA nodes, findings,
a measured run); the Monitor gets live samples for its CPUs, the Inspector an inspection with threads,
children and libraries, the Topology page a selection (so its snippet panel is full). Every tab of every
tab widget is visited, since a cramped tab only breaks when it is shown.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtCore import QSettings
from PySide6.QtWidgets import QAbstractButton, QApplication, QLabel, QTabWidget

from gui_layout_check import layout_problems, page_fits
from gui_support import no_qt_leaks  # noqa: F401 - fixture

from cpudoctor.advisor import diagnose
from cpudoctor.advisor.process_rules import run_process_rules
from cpudoctor.gui.main_window import MainWindow
from cpudoctor.gui.model import AppModel
from cpudoctor.probes.live.sample import Sample
from cpudoctor.probes.process.inspect import ChildProcess, Inspection, NativeLib, ThreadInfo, place_threads
from cpudoctor.report import Report

SCENARIO = Path(__file__).parent / "fixtures" / "scenarios" / "cascadelake-2s-numa-pinned.json"
SIZES = ((900, 600), (1600, 1000))


def realistic_report() -> Report:
    report = Report.load(SCENARIO)
    report.findings = diagnose(report)
    return report


def samples(report: Report, n: int = 30):
    cpus = report.topology.online_cpus
    for i in range(n):
        yield Sample(t=1000.0 + i / 2, cpu_ids=cpus, cpu_percent=[float((i * 7 + c * 13) % 100) for c in cpus],
                     freq_mhz=[2100.0 + (c % 7) * 100 for c in cpus],
                     temps_c={"coretemp Package id 0": 61.0 + i % 5, "coretemp Package id 1": 58.0},
                     mem_total_bytes=64 << 30, mem_used_bytes=(20 + i % 3) << 30,
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
        libraries=[NativeLib("libgomp.so.1", "openmp", "GNU OpenMP (libgomp)", "gomp", "torch"),
                   NativeLib("libmkl_rt.so.2", "blas", "Intel MKL", "mkl", "numpy")],
        children=[ChildProcess(4300 + k, "python", "python -c from multiprocessing.spawn import spawn_main", 3,
                               40.0, 900 << 20) for k in range(4)],
        children_threads=12, children_cpu_percent=160.0, rss_bytes=12 << 30, swap_bytes=0, major_faults=0,
        major_faults_per_s=0.0, notes=["Sampled 31 times over 3.0 s", "Another note the user should read"])
    place_threads(insp, report.topology)
    return insp


@pytest.fixture(params=["live", "saved"])
def filled_window(qtbot, tmp_path, request):
    """The window on this machine's data (``live``) or on a saved report (``saved``: banner, read-only)."""
    settings = QSettings(str(tmp_path / "layout.ini"), QSettings.Format.IniFormat)
    window = MainWindow(AppModel(), settings=settings, collect=False, children=False)
    qtbot.addWidget(window)
    window.show()
    qtbot.waitExposed(window)
    window.sampler.pause()                      # the samples below stand in for this machine's
    report = realistic_report()
    if request.param == "saved":
        window.model.set_report(report, read_only=True, label="Report colleague-epyc-box.json")
    else:
        window.model.set_report(report)
    for s in samples(report):
        window.model.sample.emit(s)
    inspector = window.pages["Inspector"]
    inspector.list_fn = lambda: []
    insp = inspection(report)
    inspector.set_topology(report.topology)
    inspector.show_inspection(insp, run_process_rules(insp, report.topology))
    topo_page = window.pages["Topology"]
    topo_page.map.set_selection(report.topology.l3_domains[0].cpus)
    report_page = window.pages["Report"]
    qtbot.waitUntil(lambda: report_page.text.startswith("# CPU Doctor"), timeout=30_000)
    yield window
    window.sampler.stop()
    inspector.live_timer.stop()
    window.close()


def _settle(qtbot) -> None:
    for _ in range(3):
        QApplication.processEvents()
    qtbot.wait(30)


def _walk_tabs(qtbot, page, check) -> None:
    """Run ``check`` with each tab of each visible tab widget of ``page`` shown in turn."""
    check()
    for tabs in page.findChildren(QTabWidget):
        if not tabs.isVisible():
            continue
        current = tabs.currentIndex()
        for i in range(tabs.count()):
            if not (tabs.widget(i).findChildren(QLabel) or tabs.widget(i).findChildren(QAbstractButton)):
                continue                  # a tab of plain editors or plots: nothing the rules read
            tabs.setCurrentIndex(i)
            _settle(qtbot)
            check(f" (tab {tabs.tabText(i).replace('&&', '&')!r})")
        tabs.setCurrentIndex(current)


@pytest.mark.parametrize("size", SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
def test_no_page_overlaps_or_cuts_text(qtbot, filled_window, size):
    window = filled_window
    window.resize(*size)
    _settle(qtbot)
    problems: list[str] = []
    for title in window.pages:
        window.show_page(title)
        _settle(qtbot)

        def check(where: str = "", title: str = title) -> None:
            found = page_fits(window.pages[title], window.stack) + layout_problems(window)
            problems.extend(f"{title}{where} at {size[0]}x{size[1]}: {p}" for p in found)

        _walk_tabs(qtbot, window.pages[title], check)
    assert not problems, "\n".join(dict.fromkeys(problems))


def test_the_checker_sees_overlap_and_cut_text(qtbot):
    """The rules find what they are for: two labels on one spot, a clipped label, a squeezed button."""
    from PySide6.QtWidgets import QLabel, QPushButton, QWidget

    from gui_layout_check import cut_texts, overlaps

    w = QWidget()
    qtbot.addWidget(w)
    w.resize(400, 200)
    a = QLabel("Affinity", w)
    b = QLabel("cgroup CPU quota", w)
    a.setGeometry(10, 10, 200, 20)
    b.setGeometry(10, 14, 200, 20)                 # drawn 4 px below: on top of a
    cut = QLabel("Run-queue wait: 0.37 s per second", w)
    cut.setGeometry(10, 60, 40, 20)
    elided = QLabel("Run-queue w…", w)
    elided.setToolTip("Run-queue wait: 0.37 s per second")
    elided.setGeometry(10, 90, 200, 20)
    button = QPushButton("One thread per core", w)
    button.setGeometry(10, 120, 50, 28)
    fine = QPushButton("OK", w)
    fine.setGeometry(300, 120, 80, 28)
    w.show()
    qtbot.waitExposed(w)
    found = overlaps(w)
    assert len(found) == 1 and "Affinity" in found[0].what and "cgroup CPU quota" in found[0].what
    cut_names = " ".join(p.what for p in cut_texts(w))
    assert "Run-queue wait: 0.37" in cut_names and "One thread per core" in cut_names
    assert "Run-queue w…" not in cut_names and "'OK'" not in cut_names
