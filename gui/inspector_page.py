"""Inspector: pick a running training job and see why it is slow.

The picker lists processes (Python first; this window and its children left
out) with CPU%, threads and memory, refreshed on demand in a worker. Inspect
samples the chosen process for a few seconds on a pool thread (never on the UI
thread), runs the process rules over the result, and shows the threads, the
libraries and thread environment, the children (DataLoader workers), memory,
and the findings with the command to relaunch. The topology map shows each
thread as a marker on the core it last ran on, refreshed once a second while
the page is visible (one small stat read per thread, also off the UI thread).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import (QAbstractItemView, QCheckBox, QDoubleSpinBox, QHBoxLayout, QHeaderView, QLabel,
                               QLineEdit, QProgressBar, QPushButton, QSplitter, QTableWidget, QTableWidgetItem,
                               QTabWidget, QTextBrowser, QVBoxLayout, QWidget)

from cpudoctor.advisor.process_rules import run_process_rules
from cpudoctor.gui.common import SEVERITY_COLOUR, Card
from cpudoctor.gui.model import AppModel
from cpudoctor.gui.topology_map import TopologyMap
from cpudoctor.gui.workers import run_in_thread
from cpudoctor.probes._fs import format_cpulist
from cpudoctor.probes.process.inspect import (Inspection, InspectError, ProcessEntry, ThreadTracker, inspect_process,
                                      list_processes, markers_by_cpu)
from cpudoctor.probes import Topology, probe_topology
from cpudoctor.render.format import percent, size
from cpudoctor.render.inspect import render_text, state_text
from cpudoctor.render.escape import html_escape as _esc
from cpudoctor.render.words import DASH, plural, severity
from cpudoctor.report import Finding

log = logging.getLogger(__name__)

LIVE_MARKER_MS = 1000
PICKER_COLUMNS = ("PID", "CPU %", "Threads", "Memory", "Command")
THREAD_COLUMNS = ("TID", "Name", "CPU %", "CPU", "CCX", "NUMA", "Moves", "Wait %", "State")


def _item(text: Any, sort_value: float | None = None, align_right: bool = False) -> QTableWidgetItem:
    item = QTableWidgetItem("—" if text is None else str(text))
    item.setFlags(item.flags() & ~Qt.ItemFlag.ItemIsEditable)
    if sort_value is not None:
        item.setData(Qt.ItemDataRole.UserRole, sort_value)
    if align_right:
        item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
    return item


def _pct(v: float | None) -> str:
    """A table cell under a "CPU %" heading: the number alone."""
    return percent(v, DASH, symbol=False)


def _table(columns: tuple[str, ...]) -> QTableWidget:
    t = QTableWidget(0, len(columns))
    t.setHorizontalHeaderLabels(list(columns))
    t.verticalHeader().setVisible(False)
    t.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
    t.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
    t.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
    t.setAlternatingRowColors(True)
    t.horizontalHeader().setStretchLastSection(True)
    t.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
    # one compact line per row, like top: a long command line is elided (full text in its tooltip)
    t.setWordWrap(False)
    t.setTextElideMode(Qt.TextElideMode.ElideMiddle)
    t.verticalHeader().setDefaultSectionSize(t.fontMetrics().height() + 8)
    return t


def findings_html(findings: list[Finding]) -> str:
    """Findings as rich text: a coloured bar, title, why, fix, the command and a copy link.

    A QTextBrowser wraps and scrolls long text properly (word-wrapped labels in a
    scroll area do not); ``copy:N`` links copy the N-th finding's snippet.
    """
    if not findings:
        return ('<p style="color:%s"><b>Nothing to fix in this window.</b></p>'
                '<p>Inspect again while the job is in its busy phase (training steps, not start-up or '
                'evaluation) to be sure.</p>' % SEVERITY_COLOUR["ok"])
    parts = []
    for i, f in enumerate(findings):
        colour = SEVERITY_COLOUR.get(f.severity, "#888")
        body = [f'<b><span style="color:{colour}">{severity(f.severity).name}</span> {f.code}</b>'
                f' &mdash; <b>{_esc(f.title)}</b>']
        if f.why:
            body.append(f"<b>Why:</b> {_esc(f.why)}")
        if f.fix:
            body.append(f"<b>Fix:</b> {_esc(f.fix)}")
        html = "<br>".join(body)
        if f.snippet:
            what = "command" if f.snippet_lang == "bash" else "code"
            html += (f'<pre style="white-space: pre-wrap; font-family: monospace; margin-top: 4px;">'
                     f'{_esc(f.snippet)}</pre><a href="copy:{i}">Copy {what}</a>')
        parts.append(f'<table width="100%" cellspacing="0" cellpadding="4" style="margin-bottom: 8px;"><tr>'
                     f'<td width="4" bgcolor="{colour}"></td><td>{html}</td></tr></table>')
    return "".join(parts)


class InspectorPage(QWidget):
    title = "Inspector"
    icon_name = "inspector"

    inspection_done = Signal(object)          # Inspection (after the view is filled)
    processes_listed = Signal(list)           # list[ProcessEntry]
    inspect_failed = Signal(str)

    def __init__(self, model: AppModel, parent: QWidget | None = None):
        super().__init__(parent)
        self.model = model
        # Injectable for tests and for other sources; both run on a pool thread.
        self.list_fn: Callable[[], list[ProcessEntry]] = lambda: list_processes(interval=0.3)
        self.inspect_fn: Callable[..., Inspection] = inspect_process
        self.topology_fn: Callable[[], Topology] = lambda: probe_topology(Path("/"))
        self.tracker_factory: Callable[[int], ThreadTracker] = ThreadTracker

        self.entries: list[ProcessEntry] = []
        self.inspection: Inspection | None = None
        self.findings: list[Finding] = []
        self.topology: Topology | None = None
        self._stop = threading.Event()
        self._busy = False
        self._listing = False
        self._polling = False
        self._tracker: ThreadTracker | None = None
        self._listed_once = False
        self._probing_topology = False

        self._build()
        self.live_timer = QTimer(self)
        self.live_timer.setInterval(LIVE_MARKER_MS)
        self.live_timer.timeout.connect(self._poll_markers)
        model.report_changed.connect(self._on_report)
        if model.report is not None:
            self._on_report(model.report)

    # -- layout --

    def _build(self) -> None:
        outer = QVBoxLayout(self)
        outer.setContentsMargins(12, 12, 12, 12)
        # the same heading as the Advisor and Topology pages: a title, then a muted line
        head = QHBoxLayout()
        title = QLabel("Inspector")
        font = title.font()
        font.setPointSizeF(font.pointSizeF() * 1.3)
        font.setBold(True)
        title.setFont(font)
        subtitle = QLabel("— pick your running training script to see what it is doing right now")
        subtitle.setStyleSheet("color: palette(placeholder-text);")
        subtitle.setWordWrap(True)
        head.addWidget(title)
        head.addWidget(subtitle, 1)
        outer.addLayout(head)

        split = QSplitter(Qt.Orientation.Vertical)
        outer.addWidget(split, 1)

        # Picker.
        picker = QWidget()
        pl = QVBoxLayout(picker)
        pl.setContentsMargins(0, 0, 0, 0)
        row = QHBoxLayout()
        self.filter_edit = QLineEdit()
        self.filter_edit.setPlaceholderText("Filter by command, name or PID")
        self.filter_edit.setClearButtonEnabled(True)
        self.filter_edit.textChanged.connect(self._apply_filter)
        self.python_only = QCheckBox("Python only")
        self.python_only.toggled.connect(self._apply_filter)
        self.refresh_button = QPushButton("Refresh")
        self.refresh_button.clicked.connect(self.refresh_processes)
        row.addWidget(self.filter_edit, 1)
        row.addWidget(self.python_only)
        row.addWidget(self.refresh_button)
        pl.addLayout(row)
        self.process_table = _table(PICKER_COLUMNS)
        self.process_table.itemSelectionChanged.connect(self._on_pick)
        self.process_table.itemDoubleClicked.connect(lambda *_: self.start_inspection())
        # at least five processes visible: the results pane below wants all the height it can get
        self.process_table.setMinimumHeight(self.process_table.horizontalHeader().sizeHint().height()
                                            + 5 * self.process_table.verticalHeader().defaultSectionSize() + 4)
        pl.addWidget(self.process_table, 1)
        row2 = QHBoxLayout()
        row2.addWidget(QLabel("PID:"))
        self.pid_edit = QLineEdit()
        self.pid_edit.setPlaceholderText("any PID")
        self.pid_edit.setMaximumWidth(110)
        self.pid_edit.returnPressed.connect(self.start_inspection)
        row2.addWidget(self.pid_edit)
        row2.addWidget(QLabel("Sample for"))
        self.seconds_spin = QDoubleSpinBox()
        self.seconds_spin.setRange(0.5, 60.0)
        self.seconds_spin.setSingleStep(1.0)
        self.seconds_spin.setValue(3.0)
        self.seconds_spin.setSuffix(" s")
        row2.addWidget(self.seconds_spin)
        self.inspect_button = QPushButton("Inspect")
        self.inspect_button.setDefault(True)
        self.inspect_button.clicked.connect(self.start_inspection)
        self.stop_button = QPushButton("Stop")
        self.stop_button.setEnabled(False)
        self.stop_button.clicked.connect(self._stop.set)
        self.progress = QProgressBar()
        self.progress.setRange(0, 0)
        self.progress.setMaximumWidth(120)
        self.progress.setVisible(False)
        row2.addWidget(self.inspect_button)
        row2.addWidget(self.stop_button)
        row2.addWidget(self.progress)
        row2.addStretch(1)
        pl.addLayout(row2)
        self.status_label = QLabel("Refresh the list, pick a process and press Inspect.")
        self.status_label.setWordWrap(True)
        self.status_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        pl.addWidget(self.status_label)
        split.addWidget(picker)

        # Results: tabs on the left, the topology map on the right.
        results = QSplitter(Qt.Orientation.Horizontal)
        self.tabs = QTabWidget()
        results.addWidget(self.tabs)

        # Findings tab.
        fwrap = QWidget()
        fl = QVBoxLayout(fwrap)
        fl.setContentsMargins(4, 4, 4, 4)
        top = QHBoxLayout()
        self.summary_label = QLabel("No process inspected yet.")
        self.summary_label.setWordWrap(True)
        self.summary_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.copy_all_button = QPushButton("Copy as text")
        self.copy_all_button.setToolTip("The whole inspection and findings as plain text, safe to paste "
                                        "(whitelisted variables only, home folders as ~)")
        self.copy_all_button.setEnabled(False)
        self.copy_all_button.clicked.connect(self.copy_all)
        top.addWidget(self.summary_label, 1)
        top.addWidget(self.copy_all_button, 0, Qt.AlignmentFlag.AlignTop)
        fl.addLayout(top)
        self.findings_view = QTextBrowser()
        self.findings_view.setOpenLinks(False)
        self.findings_view.anchorClicked.connect(self._on_anchor)
        self.findings_view.setHtml("<p>Inspect a process to see what slows it down.</p>")
        fl.addWidget(self.findings_view, 1)
        self.tabs.addTab(fwrap, "Findings")

        self.thread_table = _table(THREAD_COLUMNS)
        self.tabs.addTab(self.thread_table, "Threads")

        envlib = QWidget()
        el = QVBoxLayout(envlib)
        el.addWidget(QLabel("<b>Native libraries</b> (from the memory map; file names only)"))
        self.lib_table = _table(("Library", "Kind", "File", "Shipped by"))
        el.addWidget(self.lib_table, 1)
        el.addWidget(QLabel("<b>Thread environment</b> (whitelisted names only, as the process started)"))
        self.env_table = _table(("Variable", "Value"))
        el.addWidget(self.env_table, 1)
        self.env_note = QLabel("")
        self.env_note.setWordWrap(True)
        el.addWidget(self.env_note)
        self.tabs.addTab(envlib, "Libraries && env")

        self.child_table = _table(("PID", "Name", "CPU %", "Threads", "Memory", "Command"))
        self.tabs.addTab(self.child_table, "Children")

        mem = QWidget()
        ml = QVBoxLayout(mem)
        self.process_card = Card("Process")
        self.memory_card = Card("Memory")
        ml.addWidget(self.process_card)
        ml.addWidget(self.memory_card)
        self.notes_label = QLabel("")
        self.notes_label.setWordWrap(True)
        ml.addWidget(self.notes_label)
        ml.addStretch(1)
        self.tabs.addTab(mem, "Process && memory")

        mapbox = QWidget()
        mb = QVBoxLayout(mapbox)
        mb.setContentsMargins(0, 0, 0, 0)
        self.map_caption = QLabel("Threads on cores (live)")
        self.map_caption.setToolTip("Each marker is a thread of the inspected process on the CPU it last ran on; "
                                    "the colour is that process's CPU use there")
        mb.addWidget(self.map_caption)
        self.topology_map = TopologyMap()
        mb.addWidget(self.topology_map, 1)
        results.addWidget(mapbox)
        results.setStretchFactor(0, 3)
        results.setStretchFactor(1, 2)
        split.addWidget(results)
        split.setStretchFactor(0, 2)
        split.setStretchFactor(1, 3)

    # -- topology --

    def _on_report(self, report) -> None:
        # A report opened from a file describes another machine: local processes are not on it.
        if report is not None and not self.model.read_only and report.topology is not None:
            self.set_topology(report.topology)

    def set_topology(self, topo: Topology | None) -> None:
        self.topology = topo
        if topo is not None:
            self.topology_map.set_topology(topo)

    def _on_local_topology(self, topo: Topology) -> None:
        if self.topology is None:
            self.set_topology(topo)

    def _local_topology(self) -> Topology | None:
        if self.topology is not None:
            return self.topology
        report = self.model.report
        if report is not None and not self.model.read_only:
            return report.topology
        return None

    # -- picker --

    def showEvent(self, event) -> None:  # noqa: N802 - Qt API
        super().showEvent(event)
        if not self._listed_once:
            self._listed_once = True
            self.refresh_processes()
        if self.topology is None and self.model.read_only and not self._probing_topology:
            # the window opened on a saved report: this machine's own map is still needed here
            self._probing_topology = True
            run_in_thread(probe_topology, on_result=self._on_local_topology,
                          on_error=lambda exc: log.warning("local topology unavailable: %s", exc))
        if self._tracker is not None and not self.live_timer.isActive():
            self.live_timer.start()

    def hideEvent(self, event) -> None:  # noqa: N802 - Qt API
        super().hideEvent(event)
        self.live_timer.stop()

    def refresh_processes(self) -> None:
        if self._listing:
            return
        self._listing = True
        self.refresh_button.setEnabled(False)
        self.status_label.setText("Listing processes…")
        run_in_thread(self.list_fn, on_result=self._on_listed, on_error=self._on_list_error,
                      on_finished=self._on_list_finished)

    def _on_listed(self, entries: list[ProcessEntry]) -> None:
        self.entries = list(entries)
        self._fill_processes()
        py = sum(1 for e in self.entries if e.is_python)
        self.status_label.setText(f"{len(self.entries)} processes ({py} Python). Pick one and press Inspect.")
        self.processes_listed.emit(self.entries)

    def _on_list_error(self, exc: BaseException) -> None:
        self.status_label.setText(f"Could not list processes: {exc}")

    def _on_list_finished(self) -> None:
        self._listing = False
        self.refresh_button.setEnabled(True)

    def _fill_processes(self) -> None:
        t = self.process_table
        selected = self.selected_pid()
        t.setRowCount(len(self.entries))
        for r, e in enumerate(self.entries):
            pid_item = _item(e.pid, align_right=True)
            pid_item.setData(Qt.ItemDataRole.UserRole, e.pid)
            cmd = _item(e.cmdline)
            cmd.setToolTip(e.cmdline)
            cells = (pid_item, _item(_pct(e.cpu_percent), align_right=True), _item(e.threads, align_right=True),
                     _item(size(e.rss_bytes, DASH), align_right=True), cmd)
            for c, cell in enumerate(cells):
                if not e.own:
                    cell.setToolTip("Another user's process: its environment and libraries need sudo to read")
                t.setItem(r, c, cell)
        t.horizontalHeader().setSectionResizeMode(4, QHeaderView.ResizeMode.Stretch)
        self._apply_filter()
        if selected is not None:
            self.select_pid(selected)

    def _apply_filter(self) -> None:
        text = self.filter_edit.text().strip().lower()
        py_only = self.python_only.isChecked()
        for r, e in enumerate(self.entries):
            hide = (py_only and not e.is_python) or bool(
                text and text not in e.cmdline.lower() and text not in e.name.lower() and text != str(e.pid))
            self.process_table.setRowHidden(r, hide)

    def visible_pids(self) -> list[int]:
        return [e.pid for r, e in enumerate(self.entries) if not self.process_table.isRowHidden(r)]

    def selected_pid(self) -> int | None:
        rows = self.process_table.selectionModel().selectedRows() if self.process_table.selectionModel() else []
        if not rows:
            return None
        item = self.process_table.item(rows[0].row(), 0)
        return item.data(Qt.ItemDataRole.UserRole) if item is not None else None

    def select_pid(self, pid: int) -> bool:
        for r, e in enumerate(self.entries):
            if e.pid == pid:
                self.process_table.selectRow(r)
                return True
        return False

    def _on_pick(self) -> None:
        pid = self.selected_pid()
        if pid is not None:
            self.pid_edit.setText(str(pid))

    # -- inspection --

    def start_inspection(self) -> None:
        if self._busy:
            return
        text = self.pid_edit.text().strip()
        if not text:
            self.status_label.setText("Pick a process in the list or type a PID.")
            return
        try:
            pid = int(text)
            if pid <= 0:
                raise ValueError
        except ValueError:
            self.status_label.setText(f"{text!r} is not a process ID: type a positive whole number.")
            return
        seconds = float(self.seconds_spin.value())
        self._busy = True
        self._stop.clear()
        self.inspect_button.setEnabled(False)
        self.stop_button.setEnabled(True)
        self.progress.setVisible(True)
        self.status_label.setText(f"Sampling process {pid} for {seconds:g} s…")
        self.model.status_message.emit(f"Inspecting process {pid}…")
        topo = self._local_topology()
        run_in_thread(self._inspect_job, pid, seconds, topo, on_result=self._on_inspected,
                      on_error=self._on_inspect_error, on_finished=self._on_inspect_finished)

    def _inspect_job(self, pid: int, seconds: float, topo: Topology | None):
        """Runs on a pool thread: sample, then the rules (cheap)."""
        if topo is None:
            topo = self.topology_fn()
        insp = self.inspect_fn(pid, seconds=seconds, topology=topo, should_stop=self._stop.is_set)
        return insp, run_process_rules(insp, topo), topo

    def _on_inspected(self, result) -> None:
        insp, findings, topo = result
        if topo is not None and topo is not self.topology:
            self.set_topology(topo)
        self.show_inspection(insp, findings)
        if insp.status == "exited":
            self.status_label.setText(f"Process {insp.pid} exited {insp.window_s or 0:.1f} s into the window: "
                                      "the figures cover only that part.")
            self._tracker = None
            self.live_timer.stop()
        else:
            msg = f"Inspected process {insp.pid} over {insp.window_s or 0:.1f} s."
            if insp.access_limited:
                msg += (f" It belongs to another user: its environment and libraries need sudo "
                        f"(run `sudo cpudoctor inspect {insp.pid}`).")
            self.status_label.setText(msg)
            self._tracker = self.tracker_factory(insp.pid)
            if self.isVisible():
                self.live_timer.start()
        self.model.status_message.emit(self.status_label.text())
        self.inspection_done.emit(insp)

    def _on_inspect_error(self, exc: BaseException) -> None:
        msg = str(exc) if isinstance(exc, InspectError) else f"Inspection failed: {type(exc).__name__}: {exc}"
        # the probe's advice is for the terminal; here the list is right above
        msg = msg.replace("pick one from `cpudoctor inspect --list`", "pick one from the list (Refresh updates it)")
        self.status_label.setText(msg[:1].upper() + msg[1:])
        self.model.status_message.emit(self.status_label.text())
        self.inspect_failed.emit(msg)

    def _on_inspect_finished(self) -> None:
        self._busy = False
        self.inspect_button.setEnabled(True)
        self.stop_button.setEnabled(False)
        self.progress.setVisible(False)

    # -- showing results --

    def show_inspection(self, insp: Inspection, findings: list[Finding]) -> None:
        self.inspection = insp
        self.findings = list(findings)
        self.copy_all_button.setEnabled(True)
        busy = sum(1 for t in insp.threads if (t.cpu_percent or 0) >= 25)
        worst = findings[0].severity if findings else "ok"
        colour = SEVERITY_COLOUR.get(worst, "#888")
        verdict = (f'<span style="color:{colour}">{plural(len(findings), "finding")}</span>'
                   if findings else f'<span style="color:{colour}">Nothing to fix in this window</span>')
        self.summary_label.setText(
            f"<b>{_esc(insp.name or '?')}</b> (PID {insp.pid}) — {verdict}<br>"
            f"{percent(insp.cpu_percent, '?')} CPU on {insp.usable_cpus or '?'} usable CPUs · "
            f"{insp.num_threads or '?'} threads ({busy} busy) · {plural(len(insp.children), 'child', 'children')} · "
            f"RSS {size(insp.rss_bytes, DASH)}")
        self._fill_findings()
        self._fill_threads(insp)
        self._fill_libs_env(insp)
        self._fill_children(insp)
        self._fill_cards(insp)
        labels, load = markers_by_cpu(insp.threads)
        self.topology_map.set_markers(labels)
        self.topology_map.set_load(self._full_load(load))

    def _fill_findings(self) -> None:
        self.findings_view.setHtml(findings_html(self.findings))

    def _on_anchor(self, url) -> None:
        text = url.toString()
        if text.startswith("copy:"):
            self.copy_snippet(int(text.split(":", 1)[1]))

    def copy_snippet(self, index: int) -> None:
        if 0 <= index < len(self.findings) and self.findings[index].snippet:
            QGuiApplication.clipboard().setText(self.findings[index].snippet)
            self.model.status_message.emit(f"{self.findings[index].code}: copied to the clipboard")

    def _fill_threads(self, insp: Inspection) -> None:
        t = self.thread_table
        rows = sorted(insp.threads, key=lambda th: -(th.cpu_percent or 0))
        t.setRowCount(len(rows))
        for r, th in enumerate(rows):
            cells = (_item(th.tid, align_right=True), _item(th.name), _item(_pct(th.cpu_percent), align_right=True),
                     _item(th.last_cpu, align_right=True), _item(th.l3, align_right=True),
                     _item(th.numa, align_right=True), _item(th.migrations, align_right=True),
                     _item(_pct(th.wait_percent), align_right=True), _item(state_text(th.state)))
            for c, cell in enumerate(cells):
                if th.cpus_seen:
                    cell.setToolTip(f"Seen on CPUs {format_cpulist(sorted(th.cpus_seen))}")
                t.setItem(r, c, cell)

    def _fill_libs_env(self, insp: Inspection) -> None:
        libs = insp.libraries
        self.lib_table.setRowCount(len(libs))
        for r, lib in enumerate(libs):
            for c, v in enumerate((lib.label, lib.kind, lib.file, lib.origin or "—")):
                self.lib_table.setItem(r, c, _item(v))
        env = list(insp.env.items())
        self.env_table.setRowCount(len(env))
        for r, (k, v) in enumerate(env):
            self.env_table.setItem(r, 0, _item(k))
            self.env_table.setItem(r, 1, _item(v))
        notes = []
        if not insp.libraries_readable:
            notes.append(f"Libraries: {insp.libraries_error}")
        if not insp.env_readable:
            notes.append(f"Environment: {insp.env_error}")
        elif not env:
            notes.append("No thread variables set: every library uses its default (usually all CPUs).")
        self.env_note.setText("\n".join(notes))

    def _fill_children(self, insp: Inspection) -> None:
        kids = insp.children
        self.child_table.setRowCount(len(kids))
        for r, c in enumerate(kids):
            cells = (_item(c.pid, align_right=True), _item(c.name), _item(_pct(c.cpu_percent), align_right=True),
                     _item(c.threads, align_right=True), _item(size(c.rss_bytes, DASH), align_right=True),
                     _item(c.cmdline))
            for col, cell in enumerate(cells):
                self.child_table.setItem(r, col, cell)
        self.tabs.setTabText(3, f"Children ({len(kids)})")

    def _fill_cards(self, insp: Inspection) -> None:
        p = self.process_card
        p.set("Command", insp.cmdline or "—")
        p.set("Affinity", format_cpulist(insp.affinity) if insp.affinity else "unknown")
        p.set("cgroup CPU quota", f"{insp.cpu_quota:g} CPUs" if insp.cpu_quota else "none")
        p.set("Usable CPUs", str(insp.usable_cpus) if insp.usable_cpus is not None else "unknown")
        p.set("Nice", str(insp.nice) if insp.nice is not None else "unknown")
        p.set("Runnable threads", f"{insp.runnable_mean} avg, {insp.runnable_max} peak"
              if insp.runnable_mean is not None else "unknown")
        p.set("Run-queue wait", f"{insp.wait_percent / 100:.2f} s per second" if insp.wait_percent is not None
              else "unknown")
        p.set("Migrations", str(insp.migrations) if insp.migrations is not None else "unknown")
        m = self.memory_card
        m.set("Resident (RSS)", size(insp.rss_bytes, DASH))
        m.set("Swapped out", size(insp.swap_bytes, DASH))
        m.set("Major page faults", f"{insp.major_faults_per_s:g} per second"
              if insp.major_faults_per_s is not None else "unknown")
        self.notes_label.setText("\n".join(f"• {n}" for n in insp.notes))

    def text(self) -> str:
        """The inspection as plain text (what Copy puts on the clipboard)."""
        if self.inspection is None:
            return ""
        return render_text(self.inspection, self.findings)

    def copy_all(self) -> None:
        QGuiApplication.clipboard().setText(self.text())
        self.model.status_message.emit("Inspection copied to the clipboard")

    # -- live markers --

    def _poll_markers(self) -> None:
        if self._tracker is None or self._polling or not self.isVisible():
            return
        self._polling = True
        run_in_thread(self._tracker.poll, on_result=self._on_places, on_finished=self._poll_done)

    def _poll_done(self) -> None:
        self._polling = False

    def _full_load(self, load: dict[int, float]) -> dict[int, float]:
        """This process's load on every CPU (0 where none of its threads ran): the map keeps
        unlisted CPUs at their last value, so a thread that moved must leave a 0 behind."""
        cpus = set(load)
        if self.topology is not None:
            cpus.update(self.topology.online_cpus)
            for d in self.topology.l3_domains:
                cpus.update(d.cpus)
        return {cpu: load.get(cpu, 0.0) for cpu in sorted(cpus)}

    def _on_places(self, places) -> None:
        if places is None:
            self._tracker = None
            self.live_timer.stop()
            self.map_caption.setText("Threads on cores — the process has exited")
            self.topology_map.set_markers({})
            self.topology_map.set_load(self._full_load({}))
            return
        if places and all(p.cpu_percent is None for p in places):
            return                     # the first poll only primes the CPU-time deltas
        labels, load = markers_by_cpu(places)
        self.topology_map.set_markers(labels)
        self.topology_map.set_load(self._full_load(load))
        self.map_caption.setText(f"Threads on cores (live, {len(places)} threads)")

    def closeEvent(self, event) -> None:  # noqa: N802 - Qt API
        self._stop.set()
        self.live_timer.stop()
        super().closeEvent(event)
