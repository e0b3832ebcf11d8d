"""Reports too big to draw (issue 29, item 10): counts no machine has are refused when the report is opened,
and what the window draws is capped.

A valid report with 5,000 NUMA nodes froze the window (no screenshot in 240 s) and one with 65,536 notes took
145 s: the Overview and Topology pages set every note into one word-wrapped label. No kernel makes more than
1024 NUMA nodes (``1 << NODES_SHIFT``, at most 10); no probe writes more than a few dozen notes. So a saved
report is refused beyond those counts, with one line naming the path, and each page shows at most a handful of
notes and says how many more there are.
"""

from __future__ import annotations

import json

import pytest

from export_samples import sample_report
from cpudoctor.model import NumaNode, ReportError
from cpudoctor.report_file import MAX_NOTES, MAX_NUMA_NODES, report_from_json


def _with_nodes(n: int) -> str:
    report = sample_report()
    cpus = report.topology.online_cpus
    report.topology.numa_nodes = [NumaNode(id=k, cpus=[cpus[k]] if k < len(cpus) else [], distances=[])
                                  for k in range(n)]
    return report.to_json()


def _with_notes(n: int) -> str:
    report = sample_report()
    report.notes = [f"note {i}" for i in range(n)]
    report.topology.notes = [f"topology note {i}" for i in range(n)]
    report.cpu.notes = [f"cpu note {i}" for i in range(n)]
    return report.to_json()


def test_more_numa_nodes_than_any_kernel_makes_are_refused():
    assert MAX_NUMA_NODES == 1024
    report_from_json(_with_nodes(MAX_NUMA_NODES))
    with pytest.raises(ReportError) as exc:
        report_from_json(_with_nodes(5000))
    message = str(exc.value)
    assert "$.topology.numa_nodes" in message and "1024" in message and "\n" not in message


def test_more_notes_than_any_probe_writes_are_refused():
    report_from_json(_with_notes(MAX_NOTES))
    for where in ("$.notes", "$.topology.notes", "$.cpu.notes"):
        data = json.loads(_with_notes(10))
        parent = data
        for key in where[2:].split(".")[:-1]:
            parent = parent[key]
        parent["notes"] = [f"n{i}" for i in range(65_536)]
        with pytest.raises(ReportError, match=f"^the report is damaged: {where.replace('$', '[$]')}"):
            report_from_json(json.dumps(data))


def test_pages_show_a_handful_of_notes_and_count_the_rest():
    from cpudoctor.render.words import MAX_SHOWN_NOTES, shown_notes

    notes = [f"note {i}" for i in range(500)] + ["note 3"]
    shown = shown_notes(notes)
    assert len(shown) == MAX_SHOWN_NOTES + 1
    assert shown[:MAX_SHOWN_NOTES] == [f"note {i}" for i in range(MAX_SHOWN_NOTES)]
    assert shown[-1] == f"… and {500 - MAX_SHOWN_NOTES} more (all of them are in the exported report)"
    assert shown_notes(["a", "b", "a"]) == ["a", "b"]


def test_the_window_shows_a_report_at_the_limits(qtbot, tmp_path):
    """Every page of the window draws a report with the most NUMA nodes and notes a report may hold."""
    from PySide6.QtCore import QSettings, QThreadPool
    from PySide6.QtWidgets import QApplication, QMessageBox

    from cpudoctor.gui.main_window import MainWindow
    from cpudoctor.gui.model import AppModel
    from cpudoctor.render.words import MAX_SHOWN_NOTES

    data = json.loads(_with_nodes(MAX_NUMA_NODES))
    data["notes"] = data["topology"]["notes"] = data["cpu"]["notes"] = [f"note {i}" for i in range(MAX_NOTES)]
    path = tmp_path / "big.json"
    path.write_text(json.dumps(data))
    win = MainWindow(AppModel(), settings=QSettings(str(tmp_path / "s.ini"), QSettings.Format.IniFormat),
                     collect=False)
    qtbot.addWidget(win)
    win.show()
    shown: list[str] = []
    old = QMessageBox.warning
    QMessageBox.warning = staticmethod(lambda *a, **k: shown.append(a[2]))
    try:
        with qtbot.waitSignal(win.collector.opened, timeout=300_000):
            win.open_report(path)
        assert shown == []
        for title in list(win.pages):
            win.show_page(title)
            QApplication.processEvents()
            win.grab()                                    # draw it, as a screenshot does
        overview = win.pages["Overview"]
        assert overview.notes.text().count("note ") <= 3 * MAX_SHOWN_NOTES
        assert "more (all of them are in the exported report)" in overview.notes.text()
        assert QThreadPool.globalInstance().waitForDone(120_000)
    finally:
        QMessageBox.warning = old
        win.close()
        QThreadPool.globalInstance().waitForDone(60_000)
