"""The Inspector page, offscreen: picker, inspection on a worker thread, results, copy, live markers."""

from __future__ import annotations

import subprocess
import sys
import threading

import pytest
from PySide6.QtCore import QThread, QThreadPool, QTimer
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QApplication

from PySide6.QtCore import QUrl

from cpudoctor.jobrun import Machine
from cpudoctor.gui.inspector_model import InspectorModel
from cpudoctor.gui.inspector_page import InspectorPage
from cpudoctor.gui.model import AppModel
from cpudoctor.model.inspection import (ChildProcess, Inspection, NativeLib, ProcessEntry, ThreadInfo,
                                        ThreadPlace)
from cpudoctor.probes.process.inspect import InspectError, place_threads
from cpudoctor.model import Topology
from cpudoctor.probes import probe_topology
from inspect_fakes import two_ccx_topology


@pytest.fixture(autouse=True)
def no_qt_leaks(qapp):
    """Fail a test that leaves a pool job, a running QThread or an active QTimer behind."""
    yield
    assert QThreadPool.globalInstance().waitForDone(30_000)
    QApplication.processEvents()
    timers = [t for w in QApplication.topLevelWidgets() for t in w.findChildren(QTimer)
              if t.isActive() and isinstance(t.parent(), InspectorModel)]
    assert not timers, "the inspector left its live timer running"
    assert not [t for t in qapp.findChildren(QThread) if t.isRunning()]


ENTRIES = [
    ProcessEntry(200, "python", "python train.py --epochs 3", True, 4, 190.0, 900 << 20),
    ProcessEntry(201, "python3", "python3 -m http.server", True, 1, 0.0, 20 << 20),
    ProcessEntry(300, "bash", "bash", False, 1, 0.0, 4 << 20),
    ProcessEntry(301, "postgres", "postgres -D /var/lib/pg", False, 6, 3.0, 60 << 20, own=False),
]


def fake_inspection(pid: int = 200) -> Inspection:
    threads = [ThreadInfo(pid, "python", "R", cpu_percent=97.0, last_cpu=0, cpus_seen=[0, 2], migrations=3),
               ThreadInfo(pid + 1, "python", "R", cpu_percent=88.0, last_cpu=2, cpus_seen=[2]),
               ThreadInfo(pid + 2, "pt_autograd", "S", cpu_percent=0.0, last_cpu=5, cpus_seen=[5])]
    insp = Inspection(pid=pid, name="python", cmdline="python train.py --epochs 3", is_python=True, window_s=1.0,
                      samples=11, num_threads=3, threads=threads, cpu_percent=185.0, runnable_mean=2.0,
                      runnable_max=2, wait_percent=2.0, migrations=3, affinity=list(range(8)), usable_cpus=8,
                      nice=0, env={"OMP_NUM_THREADS": "2"}, env_readable=True, libraries_readable=True,
                      libraries=[NativeLib("libgomp.so.1", "openmp", "libgomp", "gomp", "torch"),
                                 NativeLib("libiomp5.so", "openmp", "libiomp5", "iomp", "")],
                      children=[ChildProcess(pid + 10, "python", "python train.py", 1, 40.0, 300 << 20)],
                      children_threads=1, children_cpu_percent=40.0, rss_bytes=900 << 20, swap_bytes=0,
                      major_faults=0, major_faults_per_s=0.0, notes=["a note for the user"])
    place_threads(insp, two_ccx_topology())
    return insp


class FakeTracker:
    def __init__(self, pid: int):
        self.pid = pid
        self.polls = 0

    def poll(self):
        self.polls += 1
        if self.polls == 1:                      # like the real tracker: no CPU% before a second poll
            return [ThreadPlace(self.pid, "python", 1, None), ThreadPlace(self.pid + 1, "python", 6, None)]
        if self.polls >= 4:
            return None                          # the process exited
        return [ThreadPlace(self.pid, "python", 1, 99.0), ThreadPlace(self.pid + 1, "python", 6, 50.0)]


@pytest.fixture
def page(qtbot):
    model = AppModel()
    p = InspectorPage(model)
    qtbot.addWidget(p)
    calls: dict = {"threads": [], "markers": [], "loads": []}

    def fake_inspect(pid, seconds, topology=None, should_stop=None):
        calls["threads"].append(threading.current_thread() is threading.main_thread())
        calls["seconds"] = seconds
        if pid == 404:
            raise InspectError("no_such_process", 404)
        return fake_inspection(pid)

    p.inspections.list_fn = lambda: list(ENTRIES)
    p.inspections.inspect_fn = fake_inspect
    p.inspections.machine_fn = lambda: Machine(topology=two_ccx_topology())
    p.inspections.tracker_factory = FakeTracker
    p.topology_map.set_markers = lambda m: calls["markers"].append(m)
    p.topology_map.set_load = lambda m: calls["loads"].append(m)
    p.calls = calls
    yield p
    p.inspections.live_timer.stop()
    p.hide()


def _list(qtbot, page):
    with qtbot.waitSignal(page.processes_listed, timeout=10_000):
        page.refresh_processes()


def test_page_contract():
    assert InspectorPage.title == "Inspector" and InspectorPage.icon_name == "inspector"
    from cpudoctor.gui.icons import known_icons

    assert "inspector" in known_icons()


def test_picker_lists_filters_and_selects(qtbot, page):
    _list(qtbot, page)
    t = page.process_table
    assert t.rowCount() == 4
    assert [t.item(r, 0).text() for r in range(4)] == ["200", "201", "300", "301"]
    assert t.item(0, 4).text() == "python train.py --epochs 3" and t.item(0, 1).text() == "190"
    page.filter_edit.setText("http")
    assert page.visible_pids() == [201]
    page.filter_edit.setText("")
    page.python_only.setChecked(True)
    assert page.visible_pids() == [200, 201]
    page.python_only.setChecked(False)
    page.select_pid(300)
    assert page.selected_pid() == 300 and page.pid_edit.text() == "300"
    assert "sudo" in t.item(3, 0).toolTip()


def test_inspect_runs_off_the_ui_thread_and_fills_the_view(qtbot, page):
    _list(qtbot, page)
    page.select_pid(200)
    page.seconds_spin.setValue(1.5)
    with qtbot.waitSignal(page.inspection_done, timeout=10_000):
        page.start_inspection()
        assert not page.inspect_button.isEnabled() and page.stop_button.isEnabled()
    qtbot.waitUntil(lambda: page.inspect_button.isEnabled(), timeout=30_000)
    assert page.calls["threads"] == [False] and page.calls["seconds"] == 1.5
    # Findings: two OpenMP runtimes, with the relaunch command and a working copy button.
    codes = [f.code for f in page.findings]
    assert "PROC005" in codes
    i5 = codes.index("PROC005")
    proc5 = page.findings[i5]
    html = page.findings_view.toHtml()
    assert "PROC005" in html and f"copy:{i5}" in html and "Copy command" in html
    page.findings_view.anchorClicked.emit(QUrl(f"copy:{i5}"))
    assert QGuiApplication.clipboard().text() == proc5.snippet
    assert "OMP_NUM_THREADS=" in proc5.snippet
    # Threads table, busiest first, with the CCX/NUMA of the last CPU.
    tt = page.thread_table
    assert tt.rowCount() == 3 and tt.item(0, 0).text() == "200" and tt.item(0, 2).text() == "97"
    assert (tt.item(1, 3).text(), tt.item(1, 4).text(), tt.item(1, 5).text()) == ("2", "1", "1")
    assert "Seen on CPUs 0,2" in tt.item(0, 0).toolTip()
    states = {tt.item(r, 8).text() for r in range(tt.rowCount())}
    assert states and all("(" in s and not s.startswith("(") for s in states)    # "running (R)", not "R"
    # four processes stay visible (five did not leave the results room in a 600 px window: tests/test_gui_layout.py)
    from cpudoctor.gui.inspector_page import PICKER_MIN_ROWS

    assert PICKER_MIN_ROWS == 4
    assert not tt.wordWrap() and page.process_table.minimumHeight() > 4 * tt.verticalHeader().defaultSectionSize()
    # Libraries, env, children, memory.
    assert [page.lib_table.item(r, 2).text() for r in range(2)] == ["libgomp.so.1", "libiomp5.so"]
    assert (page.env_table.item(0, 0).text(), page.env_table.item(0, 1).text()) == ("OMP_NUM_THREADS", "2")
    assert page.child_table.rowCount() == 1 and page.tabs.tabText(3) == "Children (1)"
    assert page.memory_card.value("Resident (RSS)") == "900 MiB"
    assert page.process_card.value("Usable CPUs") == "8"
    assert "a note for the user" in page.notes_label.text()
    # The map got the threads as markers on their CPUs, and their load.
    assert page.calls["markers"][-1] == {0: ["python 200 (97 %)"], 2: ["python 201 (88 %)"], 5: ["pt_autograd 202 (0 %)"]}
    assert page.calls["loads"][-1][0] == 97.0 and page.calls["loads"][-1][7] == 0.0    # every CPU, 0 = none
    # Copy as text: the CLI's rendering, safe to paste.
    text = page.text()
    assert text.startswith("Process 200 (python)") and "PROC005" in text
    page.copy_all_button.click()
    assert QGuiApplication.clipboard().text() == text


def test_live_markers_refresh_while_visible_and_stop_on_exit(qtbot, page):
    page.show()
    qtbot.waitUntil(lambda: page.process_table.rowCount() == 4, timeout=10_000)   # first show lists
    page.pid_edit.setText("200")
    with qtbot.waitSignal(page.inspection_done, timeout=10_000):
        page.start_inspection()
    assert page.inspections.live_timer.isActive()
    page.inspections.live_timer.setInterval(20)
    qtbot.waitUntil(lambda: {1: ["python 200 (99 %)"], 6: ["python 201 (50 %)"]} in page.calls["markers"],
                    timeout=30_000)
    # The priming poll (no CPU% yet) never replaced the inspection's markers and load.
    assert {1: ["python 200"], 6: ["python 201"]} not in page.calls["markers"]
    assert all(load.get(0) in (97.0, 0.0) for load in page.calls["loads"])
    # The fake tracker reports the process gone on its third poll: markers cleared, timer stopped.
    qtbot.waitUntil(lambda: not page.inspections.live_timer.isActive(), timeout=30_000)
    assert page.calls["markers"][-1] == {} and "exited" in page.map_caption.text()


def test_hidden_page_stops_live_timer(qtbot, page):
    page.show()
    qtbot.waitUntil(lambda: page.process_table.rowCount() == 4, timeout=10_000)
    page.pid_edit.setText("201")
    with qtbot.waitSignal(page.inspection_done, timeout=10_000):
        page.start_inspection()
    assert page.inspections.live_timer.isActive()
    page.hide()
    assert not page.inspections.live_timer.isActive()


def test_errors_are_one_clear_message(qtbot, page):
    page.pid_edit.setText("404")
    with qtbot.waitSignal(page.inspect_failed, timeout=10_000) as blocker:
        page.start_inspection()
    assert blocker.args[0].startswith("no process with PID 404")
    assert page.status_label.text().startswith("No process with PID 404")
    qtbot.waitUntil(lambda: page.inspect_button.isEnabled(), timeout=30_000)
    page.pid_edit.setText("abc")
    page.start_inspection()
    assert "is not a process ID" in page.status_label.text() and page.inspect_button.isEnabled()


def test_real_topology_map_gets_markers(qtbot):
    """No recorder: the real TopologyMap widget holds the markers on the inspected threads' CPUs."""
    page = InspectorPage(AppModel())
    qtbot.addWidget(page)
    page.inspections.inspect_fn = lambda pid, seconds, topology=None, should_stop=None: fake_inspection(pid)
    page.inspections.machine_fn = lambda: Machine(topology=two_ccx_topology())
    page.inspections.tracker_factory = FakeTracker
    page.pid_edit.setText("200")
    with qtbot.waitSignal(page.inspection_done, timeout=10_000):
        page.start_inspection()
    m = page.topology_map
    assert set(m.pu_items) == set(range(8))
    assert m.pu_items[0].markers == ["python 200 (97 %)"] and m.pu_items[2].markers == ["python 201 (88 %)"]
    assert m.pu_items[3].markers == [] and m.pu_items[0].load == 97.0 and m.pu_items[3].load == 0.0


def test_report_topology_feeds_the_map_unless_read_only(qtbot):
    from cpudoctor.model import Report

    model = AppModel()
    page = InspectorPage(model)
    qtbot.addWidget(page)
    topo = two_ccx_topology()
    model.set_report(Report(topology=topo))
    assert page.topology is topo
    other = InspectorPage(model)
    qtbot.addWidget(other)
    model.set_report(Report(topology=Topology()), read_only=True, label="colleague.json")
    assert other.topology is topo          # a saved report from another machine never replaces this one


@pytest.mark.slow
def test_real_process_end_to_end(qtbot):
    """The real lister and sampler against a real child: the page shows it and finds no problem."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; print('ready', flush=True); time.sleep(30)"],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "ready"
    try:
        page = InspectorPage(AppModel())
        qtbot.addWidget(page)
        page.inspections.list_fn = lambda: __import__("cpudoctor.probes.process.inspect", fromlist=["x"]).list_processes(
            interval=0.1, exclude_self=False)
        _list(qtbot, page)
        assert page.select_pid(proc.pid)
        page.seconds_spin.setValue(0.5)
        with qtbot.waitSignal(page.inspection_done, timeout=20_000) as blocker:
            page.start_inspection()
        insp = blocker.args[0]
        assert insp.pid == proc.pid and insp.is_python and insp.status == "ok"
        assert page.thread_table.rowCount() == insp.num_threads
        page.inspections.live_timer.stop()
    finally:
        proc.kill()
        proc.wait()


def test_stop_ends_a_long_inspection_early(qtbot, page):
    started = threading.Event()

    def slow_inspect(pid, seconds, topology=None, should_stop=None):
        started.set()
        while not should_stop():                 # a 60 s window, stopped by the button
            threading.Event().wait(0.01)
        return fake_inspection(pid)

    page.inspections.inspect_fn = slow_inspect
    page.seconds_spin.setValue(60)
    page.pid_edit.setText("200")
    with qtbot.waitSignal(page.inspection_done, timeout=10_000):
        page.start_inspection()
        assert started.wait(60)
        page.stop_button.click()
    qtbot.waitUntil(lambda: page.inspect_button.isEnabled(), timeout=30_000)
    assert not page.stop_button.isEnabled() and not page.progress.isVisible()


def test_page_module_does_not_import_torch():
    code = ("import sys; import cpudoctor.gui.inspector_page; "
            "print(any(m == 'torch' or m.startswith('torch.') for m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env={**__import__("os").environ, "QT_QPA_PLATFORM": "offscreen"})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


def test_gone_process_message_points_at_the_list_not_the_cli(qtbot, page):
    """The probe's 'pick one from `cpudoctor inspect --list`' is terminal advice; the page has the list."""
    import os

    from cpudoctor.probes.process.inspect import inspect_process

    page.inspections.inspect_fn = inspect_process
    gone = next(p for p in range(4_000_000, 4_100_000) if not os.path.exists(f"/proc/{p}"))
    page.pid_edit.setText(str(gone))
    page.seconds_spin.setValue(0.2)
    with qtbot.waitSignal(page.inspect_failed, timeout=10_000):
        page.start_inspection()
    text = page.status_label.text()
    assert text.startswith(f"No process with PID {gone}") and "Refresh" in text and "cpudoctor inspect" not in text
    qtbot.waitUntil(lambda: page.inspect_button.isEnabled(), timeout=30_000)


@pytest.mark.hardware
def test_window_opened_on_a_saved_report_still_maps_this_machine(qtbot):
    """cpudoctor-gui REPORT.json: the Inspector inspects this machine, so it reads this machine's topology."""
    from cpudoctor.model import Report

    model = AppModel()
    model.set_report(Report(topology=Topology()), read_only=True, label="colleague.json")
    page = InspectorPage(model)
    page.inspections.list_fn = lambda: []
    qtbot.addWidget(page)
    page.show()
    qtbot.waitUntil(lambda: page.topology is not None, timeout=10_000)
    assert page.topology.online_cpus == probe_topology().online_cpus


def test_relaunch_commands_only_for_the_users_own_jobs(qtbot, page):
    """Issue 28, 1: PROC014 relaunches every job on the CPUs; the Inspector keeps the user's own ones and says
    whose the others are (only their owner can restart them)."""
    from cpudoctor.probes.process.peers import PeerJob

    def crowded(pid, seconds, topology=None, should_stop=None):
        insp = fake_inspection(pid)
        insp.env = {}
        insp.peers = [PeerJob(pid=310, name="python", cmdline="python mine.py", threads=8, cpu_percent=150.0,
                              affinity=list(range(8)), shared_cpus=list(range(8))),
                      PeerJob(pid=311, name="python", cmdline="python theirs.py", threads=8, cpu_percent=150.0,
                              affinity=list(range(8)), shared_cpus=list(range(8)))]
        return insp

    page.inspections.inspect_fn = crowded
    page.inspections.owner_fn = lambda pid: pid != 311          # 311 runs as another user
    page.pid_edit.setText("200")
    with qtbot.waitSignal(page.inspection_done, timeout=10_000):
        page.start_inspection()
    proc14 = next(f for f in page.findings if f.code == "PROC014")
    lines = proc14.snippet.splitlines()
    assert "python mine.py" in proc14.snippet and "python train.py" in proc14.snippet
    assert "theirs.py" not in proc14.snippet
    assert any(line.startswith("# PID 311 belongs to another user") for line in lines)
    assert "theirs.py" not in page.text()            # Copy as text says the same as the view
    # Nobody's job is the user's: no command at all, so no Copy link either.
    qtbot.waitUntil(lambda: page.inspect_button.isEnabled(), timeout=30_000)
    page.inspections.owner_fn = lambda pid: False
    with qtbot.waitSignal(page.inspection_done, timeout=10_000):
        page.start_inspection()
    assert next(f for f in page.findings if f.code == "PROC014").snippet == ""


def test_own_relaunches_keeps_lines_of_unknown_owners():
    from cpudoctor.render.own_jobs import own_relaunches, relaunched_pids

    snippet = "# this job (PID 10):\ntaskset -c 0 python a.py\n# PID 11:\ntaskset -c 1 python b.py\n# PID 12:\nx"
    assert relaunched_pids(snippet) == [10, 11, 12]
    kept = own_relaunches(snippet, {10: True, 11: False, 12: None}).splitlines()
    assert kept[:2] == ["# this job (PID 10):", "taskset -c 0 python a.py"]
    assert kept[2].startswith("# PID 11 belongs to another user") and kept[3:] == ["# PID 12:", "x"]
