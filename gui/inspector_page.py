"""Inspector: pick a running training job and see why it is slow.

The widgets live here. The work (listing, inspecting, the live markers' timer)
belongs to :class:`cpudoctor.gui.inspector_model.InspectorModel`, and what the
page shows (rows, texts, messages) is computed in the same module, without Qt.
The picker lists processes (Python first; this window and its children left
out) with CPU%, threads and memory. Inspect samples the chosen process for a
few seconds on a pool thread (never on the UI thread), runs the process rules
over the result, and shows the threads, the libraries and thread environment,
the children (DataLoader workers), memory, and the findings with the command
to relaunch (for the user's own jobs only). The topology map shows each
thread as a marker on the core it last ran on, refreshed once a second while
the page is visible.
A Python process's own interpreter is shown with "Diagnose this environment",
which makes it the window's environment (the toolbar's picker follows).
"""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import (QAbstractItemView, QCheckBox, QDoubleSpinBox, QFrame, QHBoxLayout, QHeaderView,
                               QLabel, QLineEdit, QProgressBar, QPushButton, QScrollArea, QSplitter, QTableWidget,
                               QTableWidgetItem, QTabWidget, QTextBrowser, QVBoxLayout, QWidget)

from cpudoctor.render.env_choice import DIAGNOSE, DIAGNOSE_SAVED_TIP, DIAGNOSE_TIP, inspector_text
from cpudoctor.render.inspect import render_text
from cpudoctor.render.words import reason_of
from cpudoctor.kits.escape import terminal_safe
from cpudoctor.gui import inspector_model as im
from cpudoctor.gui.common import Card
from cpudoctor.gui.inspector_time import RunScriptMixin, TimeTab
from cpudoctor.gui.model import AppModel
from cpudoctor.gui.tab_titles import FittedTabTitles
from cpudoctor.gui.topology_map import TopologyMap
from cpudoctor.jobrun import Machine
from cpudoctor.model.inspection import Inspection, ProcessEntry
from cpudoctor.render.inspect import thread_markers
from cpudoctor.model import Finding, Topology

PICKER_MIN_ROWS = 4
MAP_MIN_HEIGHT = 120
SHORT_TAB_TITLES = {"Libraries && env": "Libs", "Process && memory": "Memory"}   # a narrow tab bar's titles


def _item(cell: im.Cell) -> QTableWidgetItem:
    item = QTableWidgetItem(cell.text)
    item.setFlags(item.flags() & ~Qt.ItemFlag.ItemIsEditable)
    if cell.numeric:
        item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
    if cell.tooltip:
        item.setToolTip(cell.tooltip)
    return item


def _fill(table: QTableWidget, rows: list[list[im.Cell]]) -> None:
    table.setRowCount(len(rows))
    for r, row in enumerate(rows):
        for c, cell in enumerate(row):
            table.setItem(r, c, _item(cell))


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


def _scrolled(widget: QWidget) -> QScrollArea:
    """``widget`` in a frameless scroll area: a short tab scrolls instead of drawing rows on top of each other."""
    area = QScrollArea()
    area.setWidgetResizable(True)
    area.setFrameShape(QFrame.Shape.NoFrame)
    area.setWidget(widget)
    return area


class InspectorPage(RunScriptMixin, QWidget):
    title = "Inspector"
    icon_name = "inspector"

    inspection_done = Signal(object)          # Inspection (after the view is filled)
    processes_listed = Signal(list)           # list[ProcessEntry]
    inspect_failed = Signal(str)
    navigate = Signal(str)                    # page title to switch to (the Overview, once diagnosing another env)
    run_done = Signal(object)                 # RunObservation of "Run a script…" (after the view is filled)

    def __init__(self, model: AppModel, parent: QWidget | None = None):
        super().__init__(parent)
        self.model = model
        # The inspections and the live markers' timer: the page only shows what the model reports.
        self.inspections = im.InspectorModel(self)
        self.inspection: Inspection | None = None
        self.shown_run = None                  # the RunObservation of "Run a script…" when it is what is shown
        self.findings: list[Finding] = []
        self._listed_once = False
        self._build()
        ins = self.inspections
        ins.listing_changed.connect(self._on_listing)
        ins.listed.connect(self._on_listed)
        ins.list_failed.connect(lambda msg: self.status_label.setText(f"Could not list processes: {msg}"))
        ins.busy_changed.connect(self._on_busy)
        ins.inspected.connect(self._on_inspected)
        ins.failed.connect(self._on_inspect_error)
        ins.topology_changed.connect(self.topology_map.set_topology)
        ins.places.connect(self._on_places)
        model.report_changed.connect(self._on_report)
        self._diagnosing = False                  # "Diagnose this environment" waits for the chooser
        model.environments.picked.connect(self._on_picked)
        model.environments.rejected.connect(self._on_refused)
        if model.report is not None:
            self._on_report(model.report)

    @property
    def topology(self) -> Topology | None:
        """The machine the map draws (this one: a saved report's never replaces it)."""
        return self.inspections.topology

    @property
    def entries(self) -> list[ProcessEntry]:
        return self.inspections.entries

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

        split.addWidget(self._build_picker())
        split.addWidget(self._build_results())
        split.setStretchFactor(0, 2)
        split.setStretchFactor(1, 3)

    def _build_picker(self) -> QWidget:
        """The process list, its filter, the PID and window, Inspect and Stop, the status line."""
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
        self.process_table = _table(im.PICKER_COLUMNS)
        self.process_table.itemSelectionChanged.connect(self._on_pick)
        self.process_table.itemDoubleClicked.connect(lambda *_: self.start_inspection())
        # at least four processes visible: the results pane below wants all the height it can get
        self.process_table.setMinimumHeight(self.process_table.horizontalHeader().sizeHint().height()
                                            + PICKER_MIN_ROWS * self.process_table.verticalHeader().defaultSectionSize()
                                            + 4)
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
        self.seconds_spin.setValue(12.0)       # 36 stack samples at 3 Hz: enough to judge (advisor/job_verdict.py)
        self.seconds_spin.setSuffix(" s")
        row2.addWidget(self.seconds_spin)
        self.inspect_button = QPushButton("Inspect")
        self.inspect_button.setDefault(True)
        self.inspect_button.clicked.connect(self.start_inspection)
        self.stop_button = QPushButton("Stop")
        self.stop_button.setEnabled(False)
        self.stop_button.clicked.connect(self.inspections.stop)
        self.run_button = QPushButton("Run a script…")
        self.run_button.setToolTip("Start a training script in the window's Python environment, watch where its "
                                   "time goes and which kernels run, and say what to change (as `cpudoctor run`)")
        self.run_button.clicked.connect(self.ask_run_script)
        self.progress = QProgressBar()
        self.progress.setRange(0, 0)
        self.progress.setMaximumWidth(120)
        self.progress.setVisible(False)
        row2.addWidget(self.inspect_button)
        row2.addWidget(self.run_button)
        row2.addWidget(self.stop_button)
        row2.addWidget(self.progress)
        row2.addStretch(1)
        pl.addLayout(row2)
        self.status_label = QLabel("Refresh the list, pick a process and press Inspect.")
        self.status_label.setWordWrap(True)
        self.status_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        pl.addWidget(self.status_label)
        return picker

    def _build_results(self) -> QWidget:
        """Tabs (findings, threads, libraries and environment, children, memory) beside the live map."""
        results = QSplitter(Qt.Orientation.Horizontal)
        self.tabs = QTabWidget()
        results.addWidget(self.tabs)

        self.tabs.addTab(self._build_findings_tab(), "Findings")
        self.thread_table = _table(im.THREAD_COLUMNS)
        self.tabs.addTab(self.thread_table, "Threads")

        envlib = QWidget()
        el = QVBoxLayout(envlib)
        el.addWidget(QLabel("<b>Native libraries</b> (from the memory map; file names only)"))
        self.lib_table = _table(im.LIB_COLUMNS)
        el.addWidget(self.lib_table, 1)
        el.addWidget(QLabel("<b>Thread environment</b> (whitelisted names only, as the process started)"))
        self.env_table = _table(im.ENV_COLUMNS)
        el.addWidget(self.env_table, 1)
        self.env_note = QLabel("")
        self.env_note.setWordWrap(True)
        el.addWidget(self.env_note)
        for table in (self.lib_table, self.env_table):
            table.setMinimumHeight(table.horizontalHeader().sizeHint().height()
                                   + 2 * table.verticalHeader().defaultSectionSize() + 4)
        # scrolls when short, like Process & memory: two tables and their captions do not fit a 600 px window
        self.tabs.addTab(_scrolled(envlib), "Libraries && env")

        self.child_table = _table(im.CHILD_COLUMNS)
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
        self.tabs.addTab(_scrolled(mem), "Process && memory")
        self.time_tab = TimeTab(_table, _fill)
        self.time_tab.findings_view.anchorClicked.connect(self._on_anchor)   # its copy links: the page's findings
        self.tabs.addTab(_scrolled(self.time_tab), "Time")     # scrolls in a small window, like the others
        # a narrow window shortens the longest titles rather than hiding the Time tab behind scroll arrows
        self.tab_titles = FittedTabTitles(self.tabs, SHORT_TAB_TITLES)
        self._build_runner()

        mapbox = QWidget()
        mb = QVBoxLayout(mapbox)
        mb.setContentsMargins(0, 0, 0, 0)
        self.map_caption = QLabel("Threads on cores (live)")
        self.map_caption.setToolTip("Each marker is a thread of the inspected process on the CPU it last ran on; "
                                    "the colour is that process's CPU use there")
        mb.addWidget(self.map_caption)
        self.topology_map = TopologyMap()
        self.topology_map.setMinimumHeight(MAP_MIN_HEIGHT)
        mb.addWidget(self.topology_map, 1)
        results.addWidget(mapbox)
        results.setStretchFactor(0, 3)
        results.setStretchFactor(1, 2)
        return results

    def _build_findings_tab(self) -> QWidget:
        """The summary, Copy as text, the process's Python environment and the findings."""
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
        # a Python process's interpreter: the environment it trains in, to diagnose
        self.python_row = QWidget()
        pr = QHBoxLayout(self.python_row)
        pr.setContentsMargins(0, 0, 0, 0)
        self.python_label = QLabel("")
        self.python_label.setWordWrap(True)
        self.python_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.diagnose_button = QPushButton(DIAGNOSE)
        self.diagnose_button.setToolTip(DIAGNOSE_TIP)
        self.diagnose_button.clicked.connect(self.diagnose_environment)
        pr.addWidget(self.python_label, 1)
        pr.addWidget(self.diagnose_button, 0, Qt.AlignmentFlag.AlignTop)
        self.python_row.setVisible(False)
        fl.addWidget(self.python_row)
        self.findings_view = QTextBrowser()
        self.findings_view.setOpenLinks(False)
        self.findings_view.anchorClicked.connect(self._on_anchor)
        self.findings_view.setHtml("<p>Inspect a process to see what slows it down.</p>")
        fl.addWidget(self.findings_view, 1)
        return fwrap

    # -- topology --

    def _on_report(self, report) -> None:
        self._show_python(self.inspection)
        # A report opened from a file describes another machine: local processes are not on it.
        if report is not None and not self.model.read_only and report.topology is not None:
            self.set_machine(Machine.of_report(report))

    def set_machine(self, machine: Machine | None) -> None:
        """This machine's CPU and topology: the map draws it, the job pipeline judges against it."""
        self.inspections.set_machine(machine)

    # -- picker --

    def showEvent(self, event) -> None:  # noqa: N802 - Qt API
        super().showEvent(event)
        if not self._listed_once:
            self._listed_once = True
            self.refresh_processes()
        if self.model.read_only:
            # the window opened on a saved report: this machine's own map is still needed here
            self.inspections.need_local_machine()
        self.inspections.watch(True)

    def hideEvent(self, event) -> None:  # noqa: N802 - Qt API
        super().hideEvent(event)
        self.inspections.watch(False)

    def refresh_processes(self) -> None:
        if self.inspections.refresh():
            self.status_label.setText("Listing processes…")

    def _on_listing(self, busy: bool) -> None:
        self.refresh_button.setEnabled(not busy)

    def _on_listed(self, entries: list[ProcessEntry]) -> None:
        self._fill_processes()
        self.status_label.setText(im.listed_message(self.entries))
        self.processes_listed.emit(list(entries))

    def _fill_processes(self) -> None:
        selected = self.selected_pid()
        _fill(self.process_table, [im.process_row(e) for e in self.entries])
        for r, e in enumerate(self.entries):
            self.process_table.item(r, 0).setData(Qt.ItemDataRole.UserRole, e.pid)
        self.process_table.horizontalHeader().setSectionResizeMode(4, QHeaderView.ResizeMode.Stretch)
        self._apply_filter()
        if selected is not None:
            self.select_pid(selected)

    def _apply_filter(self) -> None:
        text, py_only = self.filter_edit.text(), self.python_only.isChecked()
        for r, e in enumerate(self.entries):
            self.process_table.setRowHidden(r, not im.process_matches(e, text, py_only))

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
        if self.inspections.busy:
            return
        pid, problem = im.parse_pid(self.pid_edit.text())
        if pid is None:
            self.status_label.setText(problem)
            return
        seconds = float(self.seconds_spin.value())
        if self.inspections.inspect(pid, seconds):
            self.status_label.setText(f"Sampling process {pid} for {seconds:g} s…")
            self.model.status_message.emit(f"Inspecting process {pid}…")

    def _on_busy(self, busy: bool) -> None:
        self.inspect_button.setEnabled(not busy)
        self.run_button.setEnabled(not busy)
        self.stop_button.setEnabled(busy)
        self.progress.setVisible(busy)

    def _on_inspected(self, insp: Inspection, findings: list[Finding]) -> None:
        self.show_inspection(insp, findings)
        self.status_label.setText(im.inspected_message(insp))
        self.model.status_message.emit(self.status_label.text())
        self.inspection_done.emit(insp)

    def _on_inspect_error(self, msg: str) -> None:
        self.status_label.setText(msg[:1].upper() + msg[1:])
        self.model.status_message.emit(self.status_label.text())
        self.inspect_failed.emit(msg)

    # -- showing results --

    def show_inspection(self, insp: Inspection, findings: list[Finding]) -> None:
        self.inspection = insp
        self.shown_run = None
        self.findings = list(findings)
        self.copy_all_button.setEnabled(True)
        self.summary_label.setText(im.summary_html(insp, self.findings))
        self._fill_findings()
        _fill(self.thread_table, im.thread_rows(insp))
        _fill(self.lib_table, im.library_rows(insp))
        _fill(self.env_table, im.env_rows(insp))
        self.env_note.setText(im.env_note(insp))
        _fill(self.child_table, im.child_rows(insp))
        self.tabs.setTabText(self.tabs.indexOf(self.child_table), im.children_tab_title(insp))
        self._fill_cards(insp)
        self._show_python(insp)
        self.time_tab.show_time(insp.time)
        self.time_tab.show_findings(self.findings)
        labels, load = thread_markers(insp.threads)
        self.topology_map.set_markers(labels)
        self.topology_map.set_load(im.full_load(load, self.topology))

    def _show_python(self, insp: Inspection | None) -> None:
        known = insp is not None and insp.is_python and bool(insp.python)
        self.python_row.setVisible(known)
        if not known:
            return
        self.python_label.setText(inspector_text(insp.python, insp.python_found_by))
        saved = bool(self.model.read_only)
        self.diagnose_button.setEnabled(not saved)
        self.diagnose_button.setToolTip(
            DIAGNOSE_SAVED_TIP if saved else DIAGNOSE_TIP)

    def diagnose_environment(self) -> None:
        """Make the inspected process's interpreter the window's environment (checked off the UI thread;
        one that cannot be used is one message, and nothing changes); the Overview follows."""
        insp = self.inspection
        if insp is None or not insp.python:
            return
        self._diagnosing = True
        self.model.environments.choose_path(insp.python)

    def _on_picked(self, _env) -> None:
        if self._diagnosing:
            self._diagnosing = False
            self.navigate.emit("Overview")

    def _on_refused(self, _message: str) -> None:
        self._diagnosing = False

    def _fill_findings(self) -> None:
        self.findings_view.setHtml(im.findings_html(self.findings))

    def _on_anchor(self, url) -> None:
        text = url.toString()
        if text.startswith("copy:"):
            self.copy_snippet(int(text.split(":", 1)[1]))

    def copy_snippet(self, index: int) -> None:
        """Copy the N-th finding's snippet as its view shows it."""
        from cpudoctor.render.finding_view import finding_view

        view = finding_view(self.findings[index]) if 0 <= index < len(self.findings) else None
        if view is not None and view.snippet:
            QGuiApplication.clipboard().setText(terminal_safe(view.snippet.text))
            self.model.status_message.emit(f"{view.code}: copied to the clipboard")

    def _fill_cards(self, insp: Inspection) -> None:
        for card, rows in ((self.process_card, im.process_facts(insp)), (self.memory_card, im.memory_facts(insp))):
            for label, text in rows:
                card.set(label, text)
        self.notes_label.setText(im.notes_text(insp))

    def text(self) -> str:
        """What is shown as plain text (what Copy puts on the clipboard): the script's run report when a run was
        the last thing shown (its verification table and ranked findings as `cpudoctor run` prints them), else the
        inspection."""
        if self.shown_run is not None:
            from cpudoctor.render.run_report import render_text as run_text

            return terminal_safe(run_text(self.shown_run, self.findings))
        if self.inspection is None:
            return ""
        return terminal_safe(render_text(self.inspection, self.findings))   # a process name may hold ESC

    def copy_all(self) -> None:
        QGuiApplication.clipboard().setText(self.text())
        what = "The run's report" if self.shown_run is not None else "Inspection"
        self.model.status_message.emit(f"{what} copied to the clipboard")

    # -- live markers --

    def _on_places(self, places) -> None:
        if places is None:
            self.map_caption.setText(im.live_caption(None))
            self.topology_map.set_markers({})
            self.topology_map.set_load(im.full_load({}, self.topology))
            return
        labels, load = thread_markers(places)
        self.topology_map.set_markers(labels)
        self.topology_map.set_load(im.full_load(load, self.topology))
        self.map_caption.setText(im.live_caption(places))

    def closeEvent(self, event) -> None:  # noqa: N802 - Qt API
        self.inspections.shutdown()
        self.runner.stop()
        super().closeEvent(event)
