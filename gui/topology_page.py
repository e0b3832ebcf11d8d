"""Topology page: the live map, a legend, one-click CPU sets and the pinning snippets for the selection.

Select cores, an L3 domain (CCX) or a NUMA node in the map, or with the
Select buttons, and the panel below shows how to run a job on exactly those
CPUs (taskset, numactl, OpenMP, GOMP_CPU_AFFINITY, Python), from the same
generator the advisor uses (:mod:`cpudoctor.advisor.pinning`).

The page only listens to the model: ``report_changed`` brings the topology,
``sample`` the live load and clocks (the main window's sampler emits them).
A saved report of another machine shows its topology without live load.
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QFontDatabase, QGuiApplication
from PySide6.QtWidgets import (QAbstractItemView, QFileDialog, QFrame, QHBoxLayout, QHeaderView, QLabel, QLineEdit,
                               QMenu, QPlainTextEdit, QPushButton, QScrollArea, QSplitter, QTableWidget,
                               QTableWidgetItem, QTabWidget, QVBoxLayout, QWidget)

from cpudoctor.advisor.pinning import (PinningPlan, l3_cpu_sets, numa_cpu_sets, one_thread_per_core,
                                       pinning_plan)
from cpudoctor.advisor.snippets import inherited_env
from cpudoctor.gui.model import AppModel
from cpudoctor.gui import topology_model as tm
from cpudoctor.gui.topology_legend import LoadLegend
from cpudoctor.gui.topology_map import TopologyMap
from cpudoctor.probes.live.sample import Sample
from cpudoctor.model import Topology
from cpudoctor.kits.format import cache_size, size
from cpudoctor.render.words import plural, shown_notes
from cpudoctor.render.topology import (cpus_text, display_notes, is_ccx_vendor, memory_note, summary_line,
                                       usable_line)
from cpudoctor.model import Report

MAP_MIN_HEIGHT = 90
NOTE_MAX_LINES = 2            # a longer snippet note is elided (the whole note in its tooltip)
SNIPPET_MIN_LINES = 2
MAX_INLINE_BUTTONS = 4        # more CCX + NUMA buttons than this (in a 1000 px window): drop-down menus


class TopologyPage(QWidget):
    title = "Topology"
    icon_name = "topology"

    def __init__(self, model: AppModel, parent: QWidget | None = None):
        super().__init__(parent)
        self.model = model
        self.topology: Topology | None = None
        self.plan: PinningPlan | None = None
        self._live = True
        self._pending_sample: Sample | None = None      # the newest sample while the page was hidden

        self.map = TopologyMap(self)
        self.map.setMinimumHeight(MAP_MIN_HEIGHT)       # the map zooms to fit: a small window keeps the snippets
        self.legend = LoadLegend(self.map, self)
        self.summary = QLabel()
        self.summary.setWordWrap(True)
        self.summary.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.limits = QLabel()
        self.limits.setWordWrap(True)

        self._build_select_row()
        panel = self._build_snippet_panel()
        self.numa_panel = self._build_numa_panel()
        map_row = QHBoxLayout()
        map_row.setContentsMargins(0, 0, 0, 0)
        map_row.addWidget(self.map, 1)
        map_row.addWidget(self.numa_panel)
        top = QWidget()
        tv = QVBoxLayout(top)
        tv.setContentsMargins(0, 0, 0, 0)
        tv.addLayout(map_row, 1)
        tv.addWidget(self.legend)

        self.splitter = QSplitter(Qt.Orientation.Vertical)
        self.splitter.addWidget(top)
        self.splitter.addWidget(panel)
        self.splitter.setStretchFactor(0, 3)
        self.splitter.setStretchFactor(1, 1)
        self.splitter.setChildrenCollapsible(False)

        outer = QVBoxLayout(self)
        outer.setContentsMargins(16, 8, 16, 6)
        outer.setSpacing(4)                          # a small window keeps its height for the map and snippets
        heading = QLabel("Topology")
        f = heading.font()
        f.setPointSizeF(f.pointSizeF() * 1.3)       # as the Advisor and Inspector headings
        f.setBold(True)
        heading.setFont(f)
        # the view's own buttons beside the heading: on the Select row they pushed it past a small window
        # and the summary line beside them, where it wraps if it must
        head = QHBoxLayout()
        head.addWidget(heading, 0, Qt.AlignmentFlag.AlignTop)
        head.addSpacing(8)
        head.addWidget(self.summary, 1)
        for w in (self.caches_button, self.zoom_out, self.fit_button, self.zoom_in, self.export_button):
            head.addWidget(w, 0, Qt.AlignmentFlag.AlignTop)
        outer.addLayout(head)
        outer.addWidget(self.limits)
        outer.addLayout(self.select_row)
        outer.addWidget(self.splitter, 1)

        self.map.selection_changed.connect(self._on_selection)
        model.report_changed.connect(self.on_report)
        model.sample.connect(self.on_sample)
        if model.report is not None:
            self.on_report(model.report)
        else:
            self._set_topology(None)

    def _build_select_row(self) -> None:
        """Per-CCX and per-NUMA buttons (or menus), whole machine, one thread per core, clear; caches, zoom,
        export."""
        self.select_row = QHBoxLayout()
        self.select_row.setSpacing(4)
        self.select_label = QLabel("Select:")
        self.all_button = QPushButton("All")
        self.all_button.setToolTip("Every CPU this process may use")
        self.all_button.clicked.connect(self._select_all)
        self.per_core_button = QPushButton("One thread per core")
        self.per_core_button.setToolTip("Keep only the first hardware thread of each selected core (drop SMT siblings)")
        self.per_core_button.clicked.connect(self._one_per_core)
        self.clear_button = QPushButton("Clear")
        self.clear_button.clicked.connect(self.map.clear_selection)
        self.ccx_buttons: list[QPushButton] = []
        self.numa_buttons: list[QPushButton] = []
        self._dynamic_select = QHBoxLayout()
        self._dynamic_select.setSpacing(4)
        self.select_row.addWidget(self.select_label)
        self.select_row.addLayout(self._dynamic_select)
        self.select_row.addWidget(self.all_button)
        self.select_row.addWidget(self.per_core_button)
        self.select_row.addWidget(self.clear_button)
        self.select_row.addStretch(1)
        self.zoom_out = QPushButton("−")
        self.zoom_out.setToolTip("Zoom out (ctrl+wheel)")
        self.zoom_out.setFixedWidth(30)
        self.zoom_out.clicked.connect(lambda: self.map.zoom_by(1 / 1.25))
        self.fit_button = QPushButton("Fit")
        self.fit_button.setToolTip("Show the whole machine")
        self.fit_button.clicked.connect(self.map.fit)
        self.zoom_in = QPushButton("+")
        self.zoom_in.setToolTip("Zoom in (ctrl+wheel)")
        self.zoom_in.setFixedWidth(30)
        self.zoom_in.clicked.connect(lambda: self.map.zoom_by(1.25))
        # one Export button with a menu: two wide buttons pushed the selection buttons off a small window
        self.export_button = QPushButton("Export")
        self.export_button.setToolTip("Save the map as an image")
        export_menu = QMenu(self.export_button)
        export_menu.addAction("SVG (vector, for documents)…", lambda: self._export("svg"))
        export_menu.addAction("PNG (image)…", lambda: self._export("png"))
        self.export_button.setMenu(export_menu)
        self.fit_button.setMinimumWidth(self.fit_button.fontMetrics().horizontalAdvance("Fit") + 24)
        self.fit_button.setMaximumWidth(60)
        self.caches_button = QPushButton("Caches")
        self.caches_button.setCheckable(True)
        self.caches_button.setToolTip("Show each core's L2 and L1 caches, as lstopo draws them")
        self.caches_button.toggled.connect(self._show_caches)

    def _build_snippet_panel(self) -> QWidget:
        """The selection, its warnings, the command to pin, a tab per snippet and Copy."""
        self.selection_label = QLabel()
        self.selection_label.setWordWrap(True)
        # room for two lines: a splitter pane ignores a wrapped label's height-for-width,
        # so without it the hint is cut in half at small window sizes
        self.selection_label.setMinimumHeight(2 * self.selection_label.fontMetrics().lineSpacing() + 4)
        self.warnings_label = QLabel()
        self.warnings_label.setWordWrap(True)
        self.warnings_label.setStyleSheet("color: #b3741a;")
        self.command_edit = QLineEdit("python train.py")
        self.command_edit.setToolTip("The command the snippets run")
        self.command_edit.textChanged.connect(lambda _t: self._update_snippets())
        self.tabs = QTabWidget()
        self.tabs.setDocumentMode(True)
        self.snippet_views: dict[str, QPlainTextEdit] = {}
        self.note_label = QLabel()
        self.note_label.setWordWrap(True)
        note_font = self.note_label.font()
        note_font.setItalic(True)
        self.note_label.setFont(note_font)
        self.tabs.currentChanged.connect(lambda _i: self._show_note())
        self.copy_button = QPushButton("Copy")
        self.copy_button.setToolTip("Copy the snippet of the open tab")
        self.copy_button.clicked.connect(self.copy_current)

        cmd_row = QHBoxLayout()
        cmd_row.addWidget(self.selection_label, 1)
        cmd_row.addWidget(QLabel("Command:"))
        cmd_row.addWidget(self.command_edit)
        copy_row = QHBoxLayout()
        copy_row.addWidget(self.note_label, 1)
        copy_row.addWidget(self.copy_button, 0, Qt.AlignmentFlag.AlignTop)

        panel = QWidget()
        pv = QVBoxLayout(panel)
        pv.setContentsMargins(0, 2, 0, 0)
        pv.addLayout(cmd_row)
        pv.addWidget(self.warnings_label)
        pv.addWidget(self.tabs, 1)
        pv.addLayout(copy_row)
        return panel

    # -- model --------------------------------------------------------------

    def on_report(self, report: Report) -> None:
        # A saved report shows another machine: this machine's live load would be wrong there.
        self._live = not self.model.read_only
        if not self._live:
            self.map.loads.clear()
            self.map.clocks.clear()
        self._set_topology(report.topology if report is not None else None)

    def on_sample(self, sample: Sample) -> None:
        if not self._live:
            return
        if not self.isVisible():
            self._pending_sample = sample        # nobody sees the map: colour it when the page shows
            return
        self._pending_sample = None
        self.map.set_load(sample.load_by_cpu())
        if sample.freq_mhz:
            self.map.set_clocks(dict(zip(sample.cpu_ids, sample.freq_mhz)))
        self.map.set_temperatures(sample.temps_c)

    def showEvent(self, event) -> None:  # noqa: N802 - Qt API
        super().showEvent(event)
        if self._pending_sample is not None and self._live:
            self.on_sample(self._pending_sample)

    def _show_caches(self, show: bool) -> None:
        self.map.set_show_caches(show)
        self.legend.refresh()

    # -- NUMA distances -----------------------------------------------------

    def _build_numa_panel(self) -> QWidget:
        panel = QWidget()
        v = QVBoxLayout(panel)
        v.setContentsMargins(8, 0, 0, 0)
        title = QLabel("<b>NUMA distances</b>")
        self.numa_table = QTableWidget(0, 0)
        self.numa_table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.numa_table.setSelectionMode(QAbstractItemView.SelectionMode.NoSelection)
        self.numa_table.setToolTip(tm.NUMA_DISTANCE_NOTE)
        for header in (self.numa_table.horizontalHeader(), self.numa_table.verticalHeader()):
            header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        self.numa_note = QLabel()
        self.numa_note.setWordWrap(True)
        self.numa_note.setStyleSheet("color: palette(placeholder-text);")
        v.addWidget(title)
        v.addWidget(self.numa_table)
        v.addWidget(self.numa_note)
        v.addStretch(1)
        # in a scroll area: a short window scrolls the table instead of squeezing the map's row
        area = QScrollArea()
        area.setWidgetResizable(True)
        area.setFrameShape(QFrame.Shape.NoFrame)
        area.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        area.setWidget(panel)
        area.setMinimumHeight(80)
        area.setVisible(False)
        return area

    def _fill_numa_panel(self, topo: Topology | None) -> None:
        found = tm.numa_distances(topo) if topo is not None else None
        self.numa_panel.setVisible(found is not None)
        if found is None:
            return
        ids, matrix = found
        t = self.numa_table
        t.setRowCount(len(ids))
        t.setColumnCount(len(ids))
        names = [str(i) for i in ids]
        t.setHorizontalHeaderLabels(names)
        t.setVerticalHeaderLabels([f"node {i}" for i in ids])
        for r, row in enumerate(matrix):
            for c, value in enumerate(row):
                item = QTableWidgetItem("—" if value is None else str(value))
                item.setTextAlignment(Qt.AlignmentFlag.AlignCenter)
                if r == c:
                    font = item.font()
                    font.setBold(True)
                    item.setFont(font)
                t.setItem(r, c, item)
        t.resizeRowsToContents()
        rows_h = sum(t.rowHeight(r) for r in range(t.rowCount()))
        t.setFixedHeight(min(rows_h + t.horizontalHeader().sizeHint().height() + 2 * t.frameWidth() + 2, 320))
        t.resizeColumnsToContents()
        width = (t.verticalHeader().sizeHint().width() + sum(t.columnWidth(c) for c in range(t.columnCount()))
                 + 2 * t.frameWidth() + 2)
        if rows_h + t.horizontalHeader().sizeHint().height() > 320:
            width += t.verticalScrollBar().sizeHint().width()       # 16+ nodes: the rest scrolls
        t.setFixedWidth(width)
        bar = self.numa_panel.verticalScrollBar().sizeHint().width()
        self.numa_panel.setFixedWidth(max(width, 160) + 8 + bar)
        mem = ", ".join(f"node {k}: {size(v)}" for k, v in sorted(topo.numa_memory_bytes.items(),
                                                                         key=lambda kv: int(kv[0])))
        self.numa_note.setText("10 = local, higher = farther (ACPI SLIT)."
                               + (" Memory per node is the kernel's per-node MemTotal." if mem else ""))
        self.numa_note.setToolTip(tm.NUMA_DISTANCE_NOTE + (f"\n\nMemory per node ({mem}): "
                                  + tm.NUMA_MEMORY_NOTE.format(id="N") if mem else ""))

    # -- building -----------------------------------------------------------

    def _set_topology(self, topo: Topology | None) -> None:
        self.topology = topo
        self.map.set_topology(topo)
        self.legend.refresh()
        self._fill_numa_panel(topo)
        if topo is None:
            self.summary.setText("Waiting for the system report…")
            self.limits.setText("")
        else:
            self.summary.setText(summary_line(topo))
            extra = []
            usable = usable_line(topo)
            if usable:
                extra.append(usable)
            if topo.offline_cpus:
                extra.append(f"Offline CPUs: {cpus_text(topo.offline_cpus)}")
            if topo.cpuless_numa_nodes:
                extra.append("Memory-only NUMA nodes: " + ", ".join(map(str, topo.cpuless_numa_nodes)))
            report = self.model.report
            os_ = report.software.os if report is not None and report.software is not None else None
            memory = tm.numa_memory_line(topo, os_.mem_total_bytes if os_ else None, os_.vm if os_ else None,
                                         report.meta.generated_at if report is not None else None)
            # the page's own memory line says what the report's note says, and more: one of them
            extra += shown_notes(n for n in display_notes(topo) if not (memory and n == memory_note(topo)))
            if memory:
                extra.append(memory)
            self.limits.setText("\n".join(extra))
            self.limits.setVisible(bool(extra))
        self._rebuild_select_buttons()
        self._on_selection(self.map.selected_cpus())

    def _rebuild_select_buttons(self) -> None:
        while self._dynamic_select.count():
            item = self._dynamic_select.takeAt(0)
            w = item.widget()
            if w is not None:
                w.setParent(None)
                w.deleteLater()
        self.ccx_buttons, self.numa_buttons = [], []
        topo = self.topology
        has = topo is not None and bool(topo.core_list)
        for w in (self.all_button, self.per_core_button, self.clear_button, self.export_button,
                  self.fit_button, self.zoom_in, self.zoom_out, self.caches_button):
            w.setEnabled(has)
        if has and not topo.core_caches:
            self.caches_button.setEnabled(False)
            self.caches_button.setToolTip("No L1/L2 cache details in this report (made by an older CPU Doctor, "
                                          "or the system shows no cache directories)")
        elif has:
            self.caches_button.setToolTip("Show each core's L2 and L1 caches, as lstopo draws them")
        if not has:
            return
        ccx = is_ccx_vendor(topo)
        l3_sets = l3_cpu_sets(topo)
        l3_entries = [(f"CCX {i}" if ccx else f"L3 #{i}",
                       f"{'CCX' if ccx else 'L3'} {i}: {cache_size(topo.l3_domains[i].size_bytes)} L3, "
                       f"CPUs {cpus_text(cpus)}", cpus) for i, cpus in enumerate(l3_sets)]
        numa_entries = [(f"Node {nid}", f"NUMA node {nid}: CPUs {cpus_text(cpus)}", cpus)
                        for nid, cpus in numa_cpu_sets(topo).items()]
        l3_entries = l3_entries if len(l3_entries) > 1 else []
        numa_entries = numa_entries if len(numa_entries) > 1 else []
        fits_all = len(l3_entries) + len(numa_entries) <= MAX_INLINE_BUTTONS
        if l3_entries:
            self._add_group(l3_entries, self.ccx_buttons, "CCX" if ccx else "L3", fits_all)
        if numa_entries:
            # next to a CCX drop-down only two node buttons fit a small window
            self._add_group(numa_entries, self.numa_buttons, "NUMA node", fits_all or len(numa_entries) <= 2)

    def _add_group(self, entries, buttons: list, name: str, inline: bool) -> None:
        if inline:
            for text, tip, cpus in entries:
                b = QPushButton(text)
                b.setToolTip(tip + "\nctrl-click adds to the selection")
                b.clicked.connect(lambda _=False, c=cpus: self._select_set(c))
                self._dynamic_select.addWidget(b)
                buttons.append(b)
            return
        b = QPushButton(name)
        b.setToolTip(f"Select one {name}")
        menu = QMenu(b)
        for text, tip, cpus in entries:
            act = menu.addAction(tip)
            act.triggered.connect(lambda _=False, c=cpus: self._select_set(c))
        b.setMenu(menu)
        self._dynamic_select.addWidget(b)
        buttons.append(b)

    # -- selection and snippets --------------------------------------------

    def _select_set(self, cpus: list[int]) -> None:
        mods = QGuiApplication.keyboardModifiers()
        if mods & Qt.KeyboardModifier.ControlModifier:
            self.map.set_selection(set(self.map.selected_cpus()) | set(cpus))
        else:
            self.map.set_selection(cpus)

    def _select_all(self) -> None:
        topo = self.topology
        if topo is None:
            return
        allowed = topo.affinity.allowed_cpus if self._live and topo.affinity.allowed_cpus else topo.online_cpus
        self.map.set_selection(allowed)

    def _one_per_core(self) -> None:
        if self.topology is None:
            return
        current = self.map.selected_cpus() or list(self.topology.online_cpus)
        self.map.set_selection(one_thread_per_core(current, self.topology))

    def _on_selection(self, cpus: list[int]) -> None:
        self.per_core_button.setEnabled(self.topology is not None and bool(self.topology.core_list))
        self._update_snippets()

    def _update_snippets(self) -> None:
        cpus = self.map.selected_cpus()
        topo = self.topology
        current = self.tabs.tabText(self.tabs.currentIndex()) if self.tabs.count() else None
        if topo is None or not cpus:
            self.plan = None
            self.selection_label.setText("Select CPUs for pinning commands: click a thread, core, L3 or NUMA "
                                         "label, or drag a rectangle (ctrl-click adds).")
            self.warnings_label.setVisible(False)
            self._set_tabs([])
            self.copy_button.setEnabled(False)
            self.note_label.setText("")
            return
        command = self.command_edit.text().strip() or "python train.py"
        # Binding variables in the report's environment (all four when it is unknown) are cleared by the commands.
        plan = pinning_plan(cpus, topo, command=command, environ=inherited_env(self.model.report)
                            if self.model.report is not None else None)
        self.plan = plan
        where = []
        if plan.l3_domains:
            word = "CCX" if is_ccx_vendor(topo) else "L3"
            where.append(f"{word} {', '.join(map(str, plan.l3_domains))}")
        if plan.numa_nodes:
            where.append(("NUMA nodes " if len(plan.numa_nodes) > 1 else "NUMA node ")
                         + ", ".join(map(str, plan.numa_nodes)))
        self.selection_label.setText(
            f"<b>{plural(len(cpus), 'CPU')}</b> on {plural(plan.threads, 'core')}: {cpus_text(cpus)}"
            + (f" — {'; '.join(where)}" if where else ""))
        self.warnings_label.setText("\n".join(f"⚠ {w}" for w in plan.warnings))
        self.warnings_label.setVisible(bool(plan.warnings))
        self._set_tabs(plan.snippets, keep=current)
        self.copy_button.setEnabled(True)
        self._show_note()

    def _set_tabs(self, snippets, keep: str | None = None) -> None:
        labels = [s.label for s in snippets]
        existing = [self.tabs.tabText(i) for i in range(self.tabs.count())]
        if labels != existing:
            self.tabs.blockSignals(True)
            self.tabs.clear()
            self.snippet_views = {}
            mono = QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont)
            for s in snippets:
                view = QPlainTextEdit()
                view.setReadOnly(True)
                view.setFont(mono)
                view.setMinimumHeight(SNIPPET_MIN_LINES * view.fontMetrics().lineSpacing() + 12)
                view.setLineWrapMode(QPlainTextEdit.LineWrapMode.WidgetWidth)
                self.tabs.addTab(view, s.label)
                self.snippet_views[s.kind] = view
            self.tabs.blockSignals(False)
            if keep in labels:
                self.tabs.setCurrentIndex(labels.index(keep))
        for s in snippets:
            view = self.snippet_views[s.kind]
            if view.toPlainText() != s.text:
                view.setPlainText(s.text)

    def _show_note(self) -> None:
        self._note = ""
        if self.plan is not None and self.plan.snippets:
            i = self.tabs.currentIndex()
            if 0 <= i < len(self.plan.snippets):
                self._note = self.plan.snippets[i].note
        self._fit_note()

    def _fit_note(self) -> None:
        """The snippet's note on at most two lines, elided beyond (its tooltip has it all), with the height it
        needs: a splitter pane ignores height-for-width and cut its last line."""
        label, text = self.note_label, getattr(self, "_note", "")
        width = label.width()
        shown = text
        label.setText(text)
        if width > 0 and text:
            fm = label.fontMetrics()
            limit = NOTE_MAX_LINES * fm.lineSpacing() + 2
            budget = NOTE_MAX_LINES * width
            while label.heightForWidth(width) > limit and budget > width // 2:
                budget -= width // 8
                shown = fm.elidedText(text, Qt.TextElideMode.ElideRight, budget)
                label.setText(shown)
        label.setToolTip(text if shown != text else "")
        needed = label.heightForWidth(width) if width > 0 and shown else 0
        if label.minimumHeight() != max(0, needed):
            label.setMinimumHeight(max(0, needed))

    def resizeEvent(self, event) -> None:  # noqa: N802 - Qt API
        super().resizeEvent(event)
        self._fit_note()

    def current_snippet_text(self) -> str:
        if self.plan is None or not self.plan.snippets:
            return ""
        i = max(0, self.tabs.currentIndex())
        return self.plan.snippets[i].text

    def copy_current(self) -> None:
        text = self.current_snippet_text()
        if text:
            QGuiApplication.clipboard().setText(text)
            self.model.status_message.emit(f"Copied the {self.plan.snippets[self.tabs.currentIndex()].label} "
                                           "snippet")

    # -- export -------------------------------------------------------------

    def _export(self, fmt: str) -> None:
        caption = "Export topology map as SVG" if fmt == "svg" else "Export topology map as PNG"
        filt = "SVG image (*.svg)" if fmt == "svg" else "PNG image (*.png)"
        path, _ = QFileDialog.getSaveFileName(self, caption, f"topology.{fmt}", filt)
        if not path:
            return
        if not path.lower().endswith(f".{fmt}"):
            path += f".{fmt}"
        try:
            (self.map.export_svg if fmt == "svg" else self.map.export_png)(path)
        except OSError as exc:
            self.model.status_message.emit(f"Export failed: {exc.strerror or exc}")
            return
        self.model.status_message.emit(f"Saved the topology map to {path}")

