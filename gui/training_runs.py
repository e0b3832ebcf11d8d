"""The Training page's runs: a table to compare them, kept between sessions per machine and environment.

Every row is a :class:`~cpudoctor.model.BenchRun`, the record a report keeps,
so a run measured now, one kept from an earlier session and one in a saved
report are shown alike (:func:`cpudoctor.render.training.run_cells`).
:class:`RunStore` keeps the last :data:`KEEP` runs of each machine and
Python environment in one small JSON file beside the window's settings,
written atomically; an unreadable file is ignored, never fatal. The file is
read like a saved report (a regular file, bounded, numbers and nesting
checked) and every run must fit its kind's schema; a file that is not a
regular file, or too large, is left as it is.
"""

from __future__ import annotations

import logging
import socket
from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QPalette
from PySide6.QtWidgets import (QAbstractItemView, QHBoxLayout, QHeaderView, QLabel, QPushButton, QTableWidget,
                               QTableWidgetItem, QVBoxLayout, QWidget)

from cpudoctor.model import BenchRun, Report
from cpudoctor.model.serde import from_data, to_data
from cpudoctor.render import training as words
from cpudoctor.render.lab import metric_definition

log = logging.getLogger(__name__)

KEEP = 20                          # runs kept per machine and environment
MAX_FILE_BYTES = 4 << 20           # a runs file larger than this is not read (someone else's, or damaged)
# Columns that give up room first (their text wraps, or elides) when the table is narrow; the others keep their text.
ELASTIC_COLUMNS = ("Settings", "Result", "Note")
CELL_PAD = 16                      # a cell's margins around its text (the style's 2 x 3 px, the focus frame, a gap)


def wrapped_lines(fm, text: str, width: int) -> int:
    """How many lines ``text`` takes wrapped at word boundaries to ``width`` pixels (as the table draws it)."""
    from PySide6.QtCore import QRect

    rect = fm.boundingRect(QRect(0, 0, max(1, width), 10_000), int(Qt.TextFlag.TextWordWrap), text)
    return max(1, round(rect.height() / fm.lineSpacing()))


def store_key(report: Report | None, python: str | None) -> str:
    """Which runs belong together: this host, its CPU and the interpreter the jobs ran in."""
    brand = report.cpu.brand if report is not None and report.cpu.brand else "unknown CPU"
    return f"{socket.gethostname()} | {brand} | {python or 'CPU Doctor own Python'}"


class RunStore:
    """The last runs per key in a JSON file: ``{"version": 1, "runs": {key: [BenchRun, ...]}}``."""

    def __init__(self, path: Path):
        self.path = Path(path)

    def _read(self) -> dict[str, list] | None:
        """The runs by key; {} for no file or a damaged one; None when the file is no regular file of ours
        (it is then left alone)."""
        from cpudoctor.kits.rooted import read_bytes_checked
        from cpudoctor.model import ReportError
        from cpudoctor.report_file import check_limits, parse

        try:
            data = parse(read_bytes_checked(self.path, MAX_FILE_BYTES).decode("utf-8"))
            check_limits(data)
        except FileNotFoundError:
            return {}
        except OSError as exc:           # not a regular file, too large, not ours to read: left alone
            log.warning("the kept lab runs in %s were not read (%s)", self.path, exc.strerror or exc)
            return None
        except (ValueError, ReportError) as exc:      # damaged: the next save starts it afresh
            log.warning("the kept lab runs in %s are damaged (%s)", self.path, exc)
            return {}
        runs = data.get("runs") if isinstance(data, dict) else None
        return {k: v for k, v in runs.items() if isinstance(v, list)} if isinstance(runs, dict) else {}

    def load(self, key: str) -> list[BenchRun]:
        from cpudoctor.report_file import lab_run_problem

        out = []
        for item in (self._read() or {}).get(key) or []:
            problem = lab_run_problem(item)
            if problem is not None:
                log.info("a kept lab run is damaged (%s): skipped", problem.lstrip(": "))
                continue
            try:
                out.append(from_data(BenchRun, item))
            except (TypeError, ValueError) as exc:
                log.info("a kept lab run could not be read (%s): skipped", exc)
        return out[-KEEP:]

    def save(self, key: str, runs: list[BenchRun]) -> None:
        from cpudoctor.fileio import WriteError, atomic_write
        from cpudoctor.model.report import json_text

        data = self._read()
        if data is None:
            return                     # a file that could not be read is not replaced (see the module doc)
        if runs:
            data[key] = [to_data(r) for r in runs[-KEEP:]]
        else:
            data.pop(key, None)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(self.path, json_text({"version": 1, "runs": data}, indent=1), overwrite=True,
                         regular_only=True)
        except (WriteError, OSError) as exc:
            log.warning("lab runs not kept: %s", exc)


class RunsPanel(QWidget):
    """The runs table with its heading and Clear; rows from BenchRun records, newest last."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        head = QHBoxLayout()
        self.heading = QLabel(words.RUNS_HEADING)
        self.heading.setToolTip(words.RUNS_TIP)
        self.heading.setWordWrap(True)        # a narrow window wraps it instead of cutting it off
        self.clear_button = QPushButton("Clear")
        self.clear_button.setToolTip(words.CLEAR_TIP)
        self.clear_button.setEnabled(False)
        head.addWidget(self.heading, 1)
        head.addWidget(self.clear_button, 0, Qt.AlignmentFlag.AlignBottom)
        lay.addLayout(head)
        self.table = self._build_table()
        lay.addWidget(self.table, 1)
        self.runs: list[BenchRun] = []
        self.earlier = 0                       # how many of the first rows are from earlier sessions

    def _build_table(self) -> QTableWidget:
        columns = words.RUN_COLUMNS
        table = QTableWidget(0, len(columns))
        table.setHorizontalHeaderLabels(columns)
        table.verticalHeader().setVisible(False)
        table.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        table.setSelectionBehavior(QTableWidget.SelectionBehavior.SelectRows)
        table.setWordWrap(False)                 # one line per run, like the Inspector's tables
        table.setTextElideMode(Qt.TextElideMode.ElideRight)
        table.setHorizontalScrollMode(QAbstractItemView.ScrollMode.ScrollPerPixel)
        # Never wider than the view: the long columns give up room and elide (the tooltip has the text).
        table.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        header = table.horizontalHeader()
        header.setMinimumSectionSize(36)
        header.setSectionResizeMode(QHeaderView.ResizeMode.Fixed)
        header.setStretchLastSection(False)
        for i, name in enumerate(columns):
            item = table.horizontalHeaderItem(i)
            if item is not None and name in ("Samples/s", "Held-out"):
                item.setToolTip(metric_definition("samples_per_s" if name == "Samples/s" else "eval_accuracy"))
        table.verticalHeader().setDefaultSectionSize(table.fontMetrics().height() + 8)
        table.viewport().installEventFilter(self)
        return table

    def eventFilter(self, obj, event) -> bool:  # noqa: N802 - Qt API
        if obj is self.table.viewport() and event.type() == event.Type.Resize:
            self.fit_columns()
        return super().eventFilter(obj, event)

    # -- rows --

    def show_runs(self, runs: list[BenchRun], earlier: int = 0, saved: bool = False) -> None:
        """Show ``runs`` (the first ``earlier`` of them kept from earlier sessions, in a muted colour)."""
        self.runs, self.earlier = list(runs), earlier
        self.heading.setText(words.SAVED_RUNS_HEADING if saved else words.RUNS_HEADING)
        self.clear_button.setVisible(not saved)
        self.clear_button.setEnabled(bool(runs) and not saved)
        self.table.setRowCount(0)
        for i, run in enumerate(self.runs):
            self._append(run, muted=i < earlier)
        self.fit_columns()

    def add(self, run: BenchRun) -> None:
        self.runs.append(run)
        self._append(run, muted=False)
        self.clear_button.setEnabled(True)
        self.fit_columns()
        self.table.scrollToBottom()

    def _append(self, run: BenchRun, muted: bool) -> None:
        r = self.table.rowCount()
        self.table.insertRow(r)
        grey = self.palette().color(QPalette.ColorRole.PlaceholderText)
        for c, (text, tip) in enumerate(words.run_cells(run)):
            item = QTableWidgetItem(text)
            if tip or text:
                item.setToolTip(tip or text)         # the full text behind a short or elided cell
            if words.RUN_COLUMNS[c] in ("Samples/s", "Held-out"):
                item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
            if muted:
                item.setForeground(QColor(grey))
                if c == 0:
                    item.setToolTip(f"{tip} — {words.restored_text(self.earlier)}")
            self.table.setItem(r, c, item)

    def fit_columns(self) -> None:
        """Every column as wide as its text when the view has room, the room to spare shared by the text columns
        (a wide window stretches them); when it has not, Settings, Result and Note give up room in turn and their
        text wraps onto more lines while the table has height to spare (nothing cut while it is half empty),
        else elides (the tooltip has it)."""
        table, header = self.table, self.table.horizontalHeader()
        fm = table.fontMetrics()
        wanted = []
        for c, name in enumerate(words.RUN_COLUMNS):
            texts = [table.item(r, c).text() for r in range(table.rowCount()) if table.item(r, c) is not None]
            wanted.append(max([fm.horizontalAdvance(t) for t in texts] + [header.fontMetrics().horizontalAdvance(name)])
                          + CELL_PAD)
        room = table.viewport().width()
        widths = list(wanted)
        when = words.RUN_COLUMNS.index("When")
        elastic = [words.RUN_COLUMNS.index(n) for n in ELASTIC_COLUMNS]
        over = sum(widths) - room
        # too narrow: the elastic columns give up room first, the widest ones down to a common width (each keeps
        # as much as the others); then When goes (the Job cell's tooltip has it); then the others, down to their
        # headings; never below a few characters, so Status and Note stay in view
        floor = max(header.minimumSectionSize(), fm.horizontalAdvance("Sett…") + CELL_PAD)
        over = _level(widths, elastic, over, floor)
        hide_when = over > 0
        if hide_when:
            over -= widths[when]
            widths[when] = 0
        others = [c for c, n in enumerate(words.RUN_COLUMNS) if n not in ELASTIC_COLUMNS and c != when]
        for c in sorted(others, key=lambda k: -widths[k]):
            heading = header.fontMetrics().horizontalAdvance(words.RUN_COLUMNS[c]) + CELL_PAD
            over = _level(widths, [c], over, max(floor, heading)) if over > 0 else over
        over = _level(widths, [c for c in range(len(widths)) if c != when], over, header.minimumSectionSize())
        if over < 0:                       # room to spare: the text columns share it, as wide as their text asks
            spare, weight = -over, sum(wanted[c] for c in elastic) or 1
            for c in elastic:
                widths[c] += spare * wanted[c] // weight
            widths[elastic[-1]] += room - sum(widths)           # the rounding's last pixels
        table.setColumnHidden(when, hide_when)
        for c, w in enumerate(widths):
            if w:
                table.setColumnWidth(c, w)
        self._fit_rows(widths)

    def _fit_rows(self, widths: list[int]) -> None:
        """Rows as tall as their wrapped text while the view has the height; with less, the height there is goes
        to the rows one line at a time (the newest first) and the rest is cut at the row's foot (the tooltip has
        it)."""
        table, fm = self.table, self.table.fontMetrics()
        one, step = table.verticalHeader().defaultSectionSize(), fm.lineSpacing()
        wanted = []
        for r in range(table.rowCount()):
            lines = 1
            for c in range(table.columnCount()):
                item = table.item(r, c)
                if item is not None and widths[c] > CELL_PAD and item.text() and not table.isColumnHidden(c):
                    lines = max(lines, wrapped_lines(fm, item.text(), widths[c] - CELL_PAD))
            wanted.append(lines)
        given = [1] * len(wanted)
        room = table.viewport().height() - one * len(wanted)
        while room >= step:
            short = [r for r in reversed(range(len(wanted))) if given[r] < wanted[r]]
            if not short:
                break
            for r in short:
                if room < step:
                    break
                given[r] += 1
                room -= step
        wrap = any(g > 1 for g in given)
        table.setWordWrap(wrap)
        for r, g in enumerate(given):
            table.setRowHeight(r, one + step * (g - 1))

    def clear(self) -> None:
        self.show_runs([])


def _level(widths: list[int], columns: list[int], over: int, floor: int) -> int:
    """Take ``over`` pixels from ``columns`` by lowering the widest of them to one common width (not below
    ``floor``); returns what could not be taken (a negative ``over``, room to spare, as it is)."""
    if over <= 0:
        return over
    while over > 0:
        tall = [c for c in columns if widths[c] > floor]
        if not tall:
            return over
        top = max(widths[c] for c in tall)
        widest = [c for c in tall if widths[c] == top]
        below = max([widths[c] for c in tall if widths[c] < top] + [floor])
        step = min(top - below, -(-over // len(widest)))          # ceil: no pixel left over
        for c in widest:
            take = min(step, over)
            widths[c] -= take
            over -= take
    return 0

