"""Every page of the real window, filled with a real machine's data, at its minimum size (760x520), 900x600,
1280x800 and 1920x1080: no text drawn over other text, no label, button, live value, plot title, table cell or
status message cut off, no plot squashed under 60 px, nothing in the toolbar's overflow menu or behind a tab
bar's arrows (see gui_layout_check.py for the rules).

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

MINIMUM = (0, 0)              # the window's own minimum size (MainWindow.minimumSize)
SIZES = (MINIMUM, (900, 600), (1280, 800), (1920, 1080))


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


@pytest.mark.parametrize("size", SIZES, ids=["minimum" if s == MINIMUM else f"{s[0]}x{s[1]}" for s in SIZES])
def test_no_page_overlaps_or_cuts_text(qtbot, filled_window, size):
    window = filled_window
    if size == MINIMUM:
        size = (window.minimumSize().width(), window.minimumSize().height())
    window.resize(*size)
    _settle(qtbot)
    # the longest message the window shows for long: the advisor's summary of a real report
    from cpudoctor.render.words import status_text

    window.statusBar().showMessage(f"Advisor: {status_text(window.model.report.findings)}", 60_000)
    problems: list[str] = []
    for title in window.pages:
        window.show_page(title)
        _settle(qtbot)

        def check(where: str = "", title: str = title) -> None:
            found = page_fits(window.pages[title], window.stack) + layout_problems(window)
            problems.extend(f"{title}{where} at {size[0]}x{size[1]}: {p}" for p in found)

        _walk_tabs(qtbot, window.pages[title], check)
        if title == "Inspector":                # the process list filtered down to one PID (issue 40, 12)
            page = window.pages[title]
            page.filter_edit.setText(str(page.entries[0].pid))
            _settle(qtbot)
            check(" (filtered by PID)")
            page.filter_edit.clear()
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


def test_the_checker_sees_cut_live_values_plot_titles_cells_squeezed_columns_and_toolbar_overflow(qtbot):
    """What the second tour found (issue 28, 6) and the first checker missed: a live value elided in its tile, a
    plot title cut by its plot ("Loss (last 20 ste"), a cell elided in a half-empty table, a column cut at its
    left edge by a squeezed container, a toolbar item in the overflow menu."""
    import pyqtgraph as pg
    from PySide6.QtGui import QAction
    from PySide6.QtWidgets import QMainWindow, QTableWidget, QTableWidgetItem, QToolBar, QWidget

    from cpudoctor.gui.monitor_page import LiveText
    from gui_layout_check import cut_texts

    w = QMainWindow()
    qtbot.addWidget(w)
    w.resize(700, 400)
    body = QWidget()
    w.setCentralWidget(body)
    tile = LiveText("in use of 64 GiB, swap 1 GiB of 8 GiB", parent=body)
    tile.setGeometry(10, 10, 90, 20)
    two_lines = LiveText("in use of 64 GiB, swap 1 GiB of 8 GiB", parent=body, lines=2)
    two_lines.setGeometry(10, 40, 190, 40)
    plot = pg.PlotWidget(body)
    plot.setTitle("Loss (last 20 steps)", size="10pt")
    plot.setGeometry(220, 10, 80, 120)
    table = QTableWidget(1, 2, body)
    table.setWordWrap(False)                          # one line per row, like the runs table
    table.setGeometry(320, 10, 360, 80)
    table.setItem(0, 0, QTableWidgetItem("loss 1.626 · held-out 63.3 %"))
    table.setColumnWidth(0, 60)
    table.setColumnWidth(1, 40)
    narrow = QWidget(body)
    narrow.setGeometry(10, 150, 60, 30)
    squeezed = QLabel("Jobs run in resnet", narrow)
    squeezed.setGeometry(-40, 0, 120, 20)            # a column pushed off its container's left edge
    bar = QToolBar("Main")
    for name in ("Export report", "Open report", "Refresh", "Environment", "About CPU Doctor"):
        bar.addAction(QAction(name, w))
    w.addToolBar(bar)
    w.show()
    qtbot.waitExposed(w)
    w.resize(300, 400)                                # the toolbar no longer fits
    qtbot.waitUntil(lambda: bar.width() <= 300, timeout=5_000)
    found = " | ".join(p.what for p in cut_texts(w))
    assert "'in use of 64 GiB, swap 1 GiB of 8 GiB' does not fit its 90 px" in found
    assert found.count("in use of 64 GiB") == 1                   # on two lines it fits
    assert "plot title 'Loss (last 20 steps)'" in found
    assert "table cell 'loss 1.626 · held-out 63.3 %' is elided" in found
    assert "'Jobs run in resnet'" in found and "left edge" in found
    assert "toolbar 'Main' hides items in its overflow menu" in found


def test_the_checker_sees_flat_plots_cut_cells_in_an_empty_table_hidden_tabs_and_a_cut_status(qtbot):
    """What the third tour found (issue 40, 12) and the checker missed: a plot 20 px high, "SimpleCNN, …" elided in
    a table whose rows fill a third of it, a tab behind the tab bar's arrows, a status message under the source."""
    import pyqtgraph as pg
    from PySide6.QtWidgets import QMainWindow, QTableWidget, QTableWidgetItem, QTabWidget, QWidget

    from gui_layout_check import cut_texts, plots_too_small

    w = QMainWindow()
    qtbot.addWidget(w)
    w.resize(700, 400)
    body = QWidget()
    w.setCentralWidget(body)
    flat = pg.PlotWidget(body)
    flat.setTitle("Loss", size="10pt")
    flat.setGeometry(10, 10, 200, 90)                    # the title and the axis leave about 20 px of data
    table = QTableWidget(1, 2, body)
    table.setWordWrap(False)
    table.setGeometry(220, 10, 300, 200)
    table.setItem(0, 0, QTableWidgetItem("SimpleCNN, fp32, batch 64, 40 threads"))
    table.setItem(0, 1, QTableWidgetItem("measured while 31 % of the CPU went to other programs"))
    table.setColumnWidth(0, 130)
    table.setColumnWidth(1, 140)
    tabs = QTabWidget(body)
    for name in ("Findings", "Threads", "Libraries && env", "Children", "Process && memory", "Time"):
        tabs.addTab(QWidget(), name)
    tabs.setGeometry(10, 220, 260, 120)
    w.statusBar().addPermanentWidget(QLabel("This machine · Python: resnet (venv, Python 3.11.9)" * 2))
    w.statusBar().showMessage("Advisor: Nothing to fix — 3 suggestions, 25 checks passed")
    w.show()
    qtbot.waitExposed(w)
    found = " | ".join(p.what for p in cut_texts(w) + plots_too_small(w))
    assert "plot 'Loss' has a" in found and "under 60 px" in found
    assert "table cell 'SimpleCNN, fp32, batch 64, 40 threads' is elided while its rows fill" in found
    assert "tab bar hides tabs behind its scroll arrows" in found
    assert "status message 'Advisor: Nothing to fix" in found


@pytest.mark.parametrize("size", SIZES, ids=["minimum" if s == MINIMUM else f"{s[0]}x{s[1]}" for s in SIZES])
def test_the_total_load_axis_reads_0_to_100_at_every_size(qtbot, filled_window, size):
    """Issue 40, 13: below 1920x1080 the Monitor's total-load axis read 25, 50, 75 (pyqtgraph leaves out a label
    that reaches past the plot)."""
    from PySide6.QtGui import QImage, QPainter

    window = filled_window
    if size == MINIMUM:
        size = (window.minimumSize().width(), window.minimumSize().height())
    window.resize(*size)
    window.show_page("Monitor")
    _settle(qtbot)
    axis = window.pages["Monitor"].total_plot.getAxis("left")
    image = QImage(10, 10, QImage.Format.Format_ARGB32)
    painter = QPainter(image)
    try:
        labels = [text for _rect, _flags, text in axis.generateDrawSpecs(painter)[2]]
    finally:
        painter.end()
    assert labels == ["0", "25", "50", "75", "100"]
