"""Every page of the real window, filled with a real machine's data, at 900x600 and 1600x1000: no text drawn
over other text, no label or button cut off (see gui_layout_check.py for the rules).

The report is a scenario fixture made from a 2-socket Cascade Lake corpus tree (4 NUMA nodes, findings;
see gui_fill.py); the Monitor gets live samples for its CPUs, the Inspector an inspection with threads,
children and libraries, the Topology page a selection (so its snippet panel is full). Every tab of every
tab widget is visited, since a cramped tab only breaks when it is shown.
"""

from __future__ import annotations

import pytest
from PySide6.QtCore import QSettings
from PySide6.QtWidgets import QAbstractButton, QApplication, QLabel, QTabWidget

from gui_layout_check import layout_problems, page_fits
from gui_support import no_qt_leaks  # noqa: F401 - fixture

from cpudoctor.gui.main_window import MainWindow
from cpudoctor.gui.model import AppModel
from gui_fill import fill_window, realistic_report

SIZES = ((900, 600), (1600, 1000))


@pytest.fixture(params=["live", "saved"])
def filled_window(qtbot, tmp_path, request):
    """The window on this machine's data (``live``) or on a saved report (``saved``: banner, read-only)."""
    settings = QSettings(str(tmp_path / "layout.ini"), QSettings.Format.IniFormat)
    window = MainWindow(AppModel(), settings=settings, collect=False, children=False)
    qtbot.addWidget(window)
    window.show()
    qtbot.waitExposed(window)
    fill_window(window, realistic_report(), read_only=request.param == "saved",
                label="Report colleague.json")
    report_page = window.pages["Report"]
    qtbot.waitUntil(lambda: report_page.text.startswith("# CPU Doctor"), timeout=30_000)
    yield window
    window.sampler.stop()
    window.pages["Inspector"].inspections.live_timer.stop()
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
