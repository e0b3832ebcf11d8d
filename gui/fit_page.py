"""Memory fit: will a training fit in this machine's memory, what takes the memory, and how to make it fit.

The window's face of ``cpudoctor fit`` (:mod:`cpudoctor.fitrun`, the same request and plan, the words of
:mod:`cpudoctor.render.fit`): a model given as ``module:callable`` (or a lab model) is measured in a child
process in the Python environment chosen in the toolbar, on a pool thread (never on the UI thread; each
measured batch shows as it comes, Stop ends the child in stages); a saved ``cpudoctor run`` or a parameter
count work too. The plan shows the need part by part against what the job may use, the largest batch, and the
strategies ranked; choosing one shows why and its code, ready to copy.
"""

from __future__ import annotations

import threading

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import (QAbstractItemView, QCheckBox, QComboBox, QFileDialog, QFormLayout, QHBoxLayout,
                               QHeaderView, QLabel, QLineEdit, QPushButton, QScrollArea, QSpinBox, QSplitter,
                               QTableWidget, QTableWidgetItem, QTextBrowser, QVBoxLayout, QWidget)

from cpudoctor.gui.environments import job_python
from cpudoctor.gui.model import AppModel
from cpudoctor.gui.workers import run_in_thread
from cpudoctor.kits.escape import html_escape
from cpudoctor.kits.format import size
from cpudoctor.model.fit import FitPlan
from cpudoctor.render import fit as words

OPTIMIZERS = ("adam", "adamw", "sgd", "sgd-momentum", "rmsprop", "adagrad", "adafactor", "none")
HINT = ("Give the model as module:callable (a function or class that builds it, imported from the folder; it may "
        "return (model, make_batch)), a lab model (simplecnn, lenet5, resnet18), a parameter count, or a saved run.")


def _table(columns: tuple[str, ...]) -> QTableWidget:
    t = QTableWidget(0, len(columns))
    t.setHorizontalHeaderLabels(list(columns))
    t.verticalHeader().setVisible(False)
    t.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
    t.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
    t.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
    t.setWordWrap(False)
    t.setTextElideMode(Qt.TextElideMode.ElideRight)
    header = t.horizontalHeader()
    header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
    header.setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
    return t


def _cell(text: str, numeric: bool = False, tip: str = "") -> QTableWidgetItem:
    item = QTableWidgetItem(text)
    if numeric:
        item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
    item.setToolTip(tip or text)
    return item


class FitPage(QWidget):
    title = "Memory fit"
    icon_name = "memory"

    planned = Signal(object)            # FitPlan, after the view is filled
    failed = Signal(str)

    def __init__(self, model: AppModel, parent: QWidget | None = None):
        super().__init__(parent)
        self.model = model
        self.plan: FitPlan | None = None
        self._stop: threading.Event | None = None
        self._worker = None
        self._build()

    # -- building -----------------------------------------------------------------------------------

    def _build(self) -> None:
        outer = QVBoxLayout(self)
        outer.setContentsMargins(12, 12, 12, 12)
        intro = QLabel(HINT)
        intro.setWordWrap(True)
        outer.addWidget(intro)
        form = QFormLayout()
        form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.AllNonFixedFieldsGrow)
        self.model_edit = QLineEdit()
        self.model_edit.setPlaceholderText("train:build_model, resnet18, or a parameter count: 125000000")
        form.addRow("Model", self.model_edit)
        folder = QHBoxLayout()
        self.folder_edit = QLineEdit()
        self.folder_edit.setPlaceholderText("the folder the module is imported from")
        browse = QPushButton("Folder…")
        browse.clicked.connect(self._choose_folder)
        folder.addWidget(self.folder_edit, 1)
        folder.addWidget(browse)
        form.addRow("Folder", folder)
        row = QHBoxLayout()
        self.input_edit = QLineEdit()
        self.input_edit.setPlaceholderText("one sample, e.g. 3x224x224")
        self.batch_spin = QSpinBox()
        self.batch_spin.setRange(1, 1 << 20)
        self.batch_spin.setValue(64)
        self.optimizer_combo = QComboBox()
        self.optimizer_combo.addItems(OPTIMIZERS)
        for label, widget in (("Input", self.input_edit), ("Batch", self.batch_spin), ("Optimizer", self.optimizer_combo)):
            row.addWidget(QLabel(label))
            row.addWidget(widget, 1 if widget is self.input_edit else 0)
        form.addRow("Step", row)
        row = QHBoxLayout()
        self.workers_spin = QSpinBox()
        self.workers_spin.setRange(0, 1024)
        self.dataset_edit = QLineEdit()
        self.dataset_edit.setPlaceholderText("in memory, e.g. 6G")
        self.memory_edit = QLineEdit()
        self.memory_edit.setPlaceholderText("this machine")
        for label, widget in (("Workers", self.workers_spin), ("Dataset", self.dataset_edit),
                              ("Limit", self.memory_edit)):
            row.addWidget(QLabel(label))
            row.addWidget(widget, 0 if widget is self.workers_spin else 1)
        form.addRow("Job", row)
        outer.addLayout(form)
        buttons = QHBoxLayout()
        self.checkpoint_box = QCheckBox("Measure activation checkpointing")
        self.checkpoint_box.setChecked(True)
        self.run_button = QPushButton("Estimate")
        self.run_button.setDefault(True)
        self.run_button.clicked.connect(self.estimate)
        self.from_run_button = QPushButton("From a saved run…")
        self.from_run_button.clicked.connect(self._choose_run)
        self.stop_button = QPushButton("Stop")
        self.stop_button.setEnabled(False)
        self.stop_button.clicked.connect(self.stop)
        buttons.addWidget(self.checkpoint_box)
        buttons.addStretch(1)
        for b in (self.from_run_button, self.run_button, self.stop_button):
            buttons.addWidget(b)
        outer.addLayout(buttons)
        self.status = QLabel("")
        self.status.setWordWrap(True)
        self.status.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        outer.addWidget(self.status)
        outer.addWidget(self._results(), 1)

    def _results(self) -> QWidget:
        split = QSplitter(Qt.Orientation.Vertical)
        top = QWidget()
        lay = QVBoxLayout(top)
        lay.setContentsMargins(0, 0, 0, 0)
        self.verdict = QLabel("")
        self.verdict.setWordWrap(True)
        self.verdict.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        lay.addWidget(self.verdict)
        tables = QHBoxLayout()
        self.parts_table = _table(("Part", "Memory", "How"))
        self.strategies_table = _table(("Strategy", "Saves", "Then", "Speed"))
        self.strategies_table.itemSelectionChanged.connect(self._show_strategy)
        tables.addWidget(self.parts_table, 2)
        tables.addWidget(self.strategies_table, 3)
        lay.addLayout(tables, 1)
        split.addWidget(top)
        detail = QWidget()
        dl = QVBoxLayout(detail)
        dl.setContentsMargins(0, 0, 0, 0)
        self.detail = QTextBrowser()
        self.detail.setOpenExternalLinks(False)
        self.copy_button = QPushButton("Copy the code")
        self.copy_button.setEnabled(False)
        self.copy_button.clicked.connect(self._copy)
        dl.addWidget(self.detail, 1)
        dl.addWidget(self.copy_button, 0, Qt.AlignmentFlag.AlignRight)
        split.addWidget(detail)
        split.setStretchFactor(0, 3)
        split.setStretchFactor(1, 2)
        area = QScrollArea()
        area.setWidgetResizable(True)
        area.setWidget(split)
        split.setMinimumHeight(260)
        return area

    # -- input ---------------------------------------------------------------------------------------------

    def _choose_folder(self) -> None:
        folder = QFileDialog.getExistingDirectory(self, "The folder of the model's module", self.folder_edit.text())
        if folder:
            self.folder_edit.setText(folder)

    def _choose_run(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "A saved run (cpudoctor run --format json -o run.json)", "",
                                              "JSON (*.json);;All files (*)")
        if path:
            self.estimate(from_run=path)

    def request(self, from_run: str | None = None):
        """The request the form describes; ValueError with the words to show when it is not one."""
        import argparse

        from cpudoctor.argtypes import byte_size, shape
        from cpudoctor.fitrun import FitRequest

        text = self.model_edit.text().strip()
        req = FitRequest(batch=self.batch_spin.value(), optimizer=self.optimizer_combo.currentText(),
                         workers=self.workers_spin.value(), checkpoint=self.checkpoint_box.isChecked(),
                         from_run=from_run, path=self.folder_edit.text().strip() or None,
                         python=job_python(self.model.environments.current))
        try:
            if self.input_edit.text().strip():
                req.input = shape()(self.input_edit.text())
            if self.dataset_edit.text().strip():
                req.dataset_bytes = byte_size(what="a dataset size")(self.dataset_edit.text())
            if self.memory_edit.text().strip():
                req.memory_bytes = byte_size(1 << 20, what="a memory limit")(self.memory_edit.text())
        except argparse.ArgumentTypeError as exc:
            raise ValueError(str(exc)) from None
        if text.replace(",", "").replace("_", "").isdigit():
            req.params = int(text.replace(",", "").replace("_", ""))
        elif text:
            req.model = text
        elif not from_run:
            raise ValueError(HINT)
        return req

    # -- the work -----------------------------------------------------------------------------------------

    def estimate(self, from_run: str | None = None) -> None:
        if self._worker is not None:
            return
        try:
            req = self.request(from_run if isinstance(from_run, str) else None)
        except ValueError as exc:
            self.status.setText(str(exc))
            return
        from cpudoctor.fitrun import run_fit

        self._stop = threading.Event()
        self._busy(True)
        self.status.setText(f"Measuring {req.model} in a child process (up to {req.seconds:g} s)…" if req.model
                            else "Estimating…")
        self._worker = run_in_thread(run_fit, req, stop=self._stop, on_result=self._on_result,
                                     on_error=self._on_error, on_finished=lambda: self._busy(False),
                                     on_progress=self._on_progress, progress_arg="on_progress")

    def stop(self) -> None:
        if self._stop is not None:
            self._stop.set()
            self.status.setText("Stopping the measurement…")

    def _busy(self, busy: bool) -> None:
        self.run_button.setEnabled(not busy)
        self.from_run_button.setEnabled(not busy)
        self.stop_button.setEnabled(busy)
        if not busy:
            self._worker = None

    def _on_progress(self, data) -> None:
        if isinstance(data, dict) and data.get("phase") == "measured":
            variant = {"checkpoint": " checkpointed", "bf16": " in bf16"}.get(data.get("variant"), "")
            self.status.setText(f"Measured batch {data.get('batch')}{variant}: a step adds "
                                f"{size(data.get('peak_delta_bytes'), '?')}…")

    def _on_error(self, exc: BaseException) -> None:
        from cpudoctor.fitrun import FitInputError

        text = str(exc) if isinstance(exc, FitInputError) else f"The estimate failed: {type(exc).__name__}: {exc}"
        self.status.setText(text)
        self.failed.emit(text)

    def _on_result(self, outcome) -> None:
        self.show_plan(outcome.plan)
        self.status.setText("")

    # -- showing a plan -------------------------------------------------------------------------------------

    def show_plan(self, plan: FitPlan) -> None:
        self.plan = plan
        lines = [words.verdict(plan), f"May use: {words.budget_text(plan.budget)}"]
        largest = words.largest_text(plan)
        if largest:
            lines.append(f"Largest batch: {largest}")
        notes = plan.notes + (plan.measurement.notes if plan.measurement else [])
        self.verdict.setText("\n".join(lines + [f"Note: {n}" for n in notes]))
        self.parts_table.setRowCount(len(plan.parts) + 1)
        for r, p in enumerate(plan.parts):
            for c, cell in enumerate((_cell(words.part_label(p.part)), _cell(size(p.bytes), True),
                                      _cell(words.HOW.get(p.how, p.how)))):
                self.parts_table.setItem(r, c, cell)
        for c, cell in enumerate((_cell("in all"), _cell(size(plan.total_bytes, "?"), True), _cell(""))):
            self.parts_table.setItem(len(plan.parts), c, cell)
        shown = [s for s in plan.strategies if s.applicable]
        self.strategies_table.setRowCount(len(shown))
        for r, s in enumerate(shown):
            then = ""
            if s.total_bytes is not None:
                then = f"{size(s.total_bytes)}, " + ("fits" if s.fits else "short")
            for c, cell in enumerate((_cell(words.strategy_title(s)), _cell(size(s.saves_bytes, "-"), True),
                                      _cell(then), _cell(words.speed_words(s)))):
                self.strategies_table.setItem(r, c, cell)
        self._shown = shown
        if shown:
            self.strategies_table.selectRow(0)
        else:
            self.detail.clear()
            self.copy_button.setEnabled(False)
        self.planned.emit(plan)

    def _show_strategy(self) -> None:
        rows = self.strategies_table.selectionModel().selectedRows() if self.strategies_table.selectionModel() else []
        if not rows or self.plan is None:
            return
        s = self._shown[rows[0].row()]
        html = f"<p><b>{html_escape(words.strategy_title(s))}</b></p><p>{html_escape(words.EXPLAIN.get(s.id, ''))}</p>"
        if s.snippet:
            html += f"<pre>{html_escape(s.snippet)}</pre>"
        self.detail.setHtml(html)
        self.copy_button.setEnabled(bool(s.snippet))

    def _copy(self) -> None:
        rows = self.strategies_table.selectionModel().selectedRows()
        if rows and self.plan is not None:
            QGuiApplication.clipboard().setText(self._shown[rows[0].row()].snippet)
