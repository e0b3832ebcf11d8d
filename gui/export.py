"""Report actions for the main window: one-click export, Export as..., copy, open, compare, capture.

All rendering and file writing runs on the thread pool (PDF layout, a
capture's child process); results come back through signals. Every export is
redacted unless the user ticks "Include identifying details", and every
failure is a message that says what to do; nothing is half-written (writes go
through cpudoctor.fileio.atomic_write).
"""

from __future__ import annotations

import datetime as _dt
import re
from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QObject, QStandardPaths, Qt, QUrl, Signal
from PySide6.QtGui import QAction, QDesktopServices, QGuiApplication, QKeySequence
from PySide6.QtWidgets import (QCheckBox, QComboBox, QDialog, QDialogButtonBox, QFileDialog, QFormLayout,
                               QHBoxLayout, QLabel, QLineEdit, QMessageBox, QPushButton, QTextBrowser,
                               QVBoxLayout, QWidget)

from cpudoctor.export import FORMATS, ExportError, default_filename, export_report, format_for_path, unique_path
from cpudoctor.privacy import IDENTIFYING, KEPT_SHORT
from cpudoctor.gui.collector import ReportCollector
from cpudoctor.gui.icons import icon
from cpudoctor.gui.model import AppModel
from cpudoctor.gui.workers import run_in_thread
from cpudoctor.render.words import plural, reason_of
from cpudoctor.model import Report, ReportError

PRIVACY_TEXT = f"Include identifying details ({KEPT_SHORT})"
_SUMMARY_RE = re.compile(r"<summary>(.*?)</summary>")
_DETAILS_RE = re.compile(r"</?details( open)?>")
# A line in _underscores_: GitHub's italics, which Qt's Markdown reader underlines like a link
_UNDERSCORE_LINE_RE = re.compile(r"^_([^_\n](?:[^\n]*?[^\s\\])?)_$", re.MULTILINE)
EXPORT_FORMATS = ("html", "md", "json", "pdf")


def qt_markdown(text: str) -> str:
    """GitHub Markdown for QTextBrowser: ``<details>`` shown open, the summary as a bold line, marks as symbols.

    Qt's Markdown reader treats raw HTML blocks as opaque and drops what follows,
    and reads ``_text_`` as underline: whole lines in underscores become ``*text*``.
    The plain-text marks the file keeps for terminals and issues (``[✓]``,
    ``[-]``) are shown as coloured symbols (inline HTML spans, which Qt reads).
    """
    text = _UNDERSCORE_LINE_RE.sub(r"*\1*", text)
    return preview_marks(_SUMMARY_RE.sub(lambda m: f"\n**{m.group(1)}**\n", _DETAILS_RE.sub("", text)))


# the Markdown export's marks -> (symbol, severity whose colour it takes)
PREVIEW_MARKS = {"✓": ("✓", "ok"), "✗": ("✗", "error"), "!": ("⚠", "warning"), "i": ("ℹ", "info"),
                 "-": ("–", "")}
_MARK_RE = re.compile(r"\\?\[([✓✗!i-])\\?\]")


def preview_marks(text: str) -> str:
    """``[✓]`` / ``\\[✓\\]`` -> a green ✓ (and so on) outside code blocks and code spans."""
    from cpudoctor.gui.common import SEVERITY_COLOUR

    def mark(m: re.Match) -> str:
        symbol, severity = PREVIEW_MARKS[m.group(1)]
        return f'<span style="color:{SEVERITY_COLOUR.get(severity, "#8a8f96")}">{symbol}</span>'

    out, fenced = [], False
    for line in text.split("\n"):
        if line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
        if fenced or line.lstrip().startswith(("```", "~~~")):
            out.append(line)
            continue
        parts = line.split("`")
        out.append("`".join(_MARK_RE.sub(mark, p) if i % 2 == 0 else p for i, p in enumerate(parts)))
    return "\n".join(out)


def documents_folder() -> Path:
    """The platform's documents folder (XDG, Windows, macOS), created when it does not exist yet.

    A fresh account often has no ~/Documents (the XDG folder is only made by a
    desktop session); the export goes there anyway instead of into the home
    folder. Home is the fallback when the folder cannot be made.
    """
    loc = QStandardPaths.writableLocation(QStandardPaths.StandardLocation.DocumentsLocation)
    if not loc:
        return Path.home()
    folder = Path(loc)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        return Path.home()
    return folder if folder.is_dir() else Path.home()


def open_with_desktop(target: Path) -> bool:
    """Open a file or folder with the desktop's program; False when there is none (no xdg-open, a bare server)."""
    return QDesktopServices.openUrl(QUrl.fromLocalFile(str(target)))


class ExportDialog(QDialog):
    """Export as...: format, file and the privacy choice (off by default)."""

    def __init__(self, parent: QWidget | None = None, fmt: str = "html"):
        super().__init__(parent)
        self.setWindowTitle("Export report")
        self.format_box = QComboBox()
        for f in EXPORT_FORMATS:
            ext, label = FORMATS[f].suffix, FORMATS[f].label
            self.format_box.addItem(f"{label} ({ext})", f)
        self.format_box.setCurrentIndex(EXPORT_FORMATS.index(fmt))
        self.path_edit = QLineEdit(str(documents_folder() / default_filename(fmt)))
        browse = QPushButton("Browse…")
        browse.clicked.connect(self._browse)
        row = QHBoxLayout()
        row.addWidget(self.path_edit, 1)
        row.addWidget(browse)
        self.privacy = QCheckBox(PRIVACY_TEXT)
        self.privacy.setChecked(False)
        hint = QLabel(f"Off: {IDENTIFYING} are replaced by placeholders, so the file is safe to paste into a "
                      "public bug tracker. The host name is never collected.")
        hint.setWordWrap(True)
        hint.setStyleSheet("color: palette(placeholder-text);")
        form = QFormLayout()
        form.addRow("Format", self.format_box)
        form.addRow("File", row)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Cancel)
        self.export_button = buttons.addButton("Export", QDialogButtonBox.ButtonRole.AcceptRole)
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        lay = QVBoxLayout(self)
        lay.addLayout(form)
        lay.addWidget(self.privacy)
        lay.addWidget(hint)
        lay.addWidget(buttons)
        self.format_box.currentIndexChanged.connect(self._format_changed)
        self.resize(560, self.sizeHint().height())

    @property
    def fmt(self) -> str:
        return self.format_box.currentData()

    @property
    def path(self) -> Path:
        return Path(self.path_edit.text().strip()).expanduser()

    def _format_changed(self) -> None:
        p = self.path
        self.path_edit.setText(str(p.with_suffix(FORMATS[self.fmt].suffix)))

    def _browse(self) -> None:
        filters = ";;".join(f"{FORMATS[f].label} (*{FORMATS[f].suffix})" for f in EXPORT_FORMATS)
        chosen, _ = QFileDialog.getSaveFileName(self, "Export report", str(self.path), filters,
                                                f"{FORMATS[self.fmt].label} (*{FORMATS[self.fmt].suffix})")
        if chosen:
            self.path_edit.setText(chosen)
            self.format_box.setCurrentIndex(EXPORT_FORMATS.index(format_for_path(chosen, self.fmt)))


class CompareDialog(QDialog):
    """Pick two reports (or the current one and a file) and show what differs.

    The comparison is :func:`cpudoctor.compare.compare_reports`, what ``cpudoctor compare``
    prints, run on the thread pool (two reports are read and validated); ``compared`` or
    ``failed`` follows :meth:`run_compare`.
    """

    compared = Signal(object)          # cpudoctor.compare.Comparison
    failed = Signal(str)               # why there is nothing to show

    def __init__(self, current: Report | None, current_label: str, parent: QWidget | None = None):
        super().__init__(parent)
        self.setWindowTitle("Compare reports")
        self.current = current
        self.current_label = current_label
        self.a_edit, self.b_edit = QLineEdit(), QLineEdit()
        self.a_edit.setPlaceholderText(f"(current: {current_label})" if current is not None else "first report…")
        self.b_edit.setPlaceholderText("second report (JSON)…")
        form = QFormLayout()
        for label, edit in (("A", self.a_edit), ("B", self.b_edit)):
            row = QHBoxLayout()
            row.addWidget(edit, 1)
            btn = QPushButton("Browse…")
            btn.clicked.connect(lambda _=False, e=edit: self._browse(e))
            row.addWidget(btn)
            form.addRow(label, row)
        self.fmt_box = QComboBox()
        self.fmt_box.addItem("Table", "md")
        self.fmt_box.addItem("Plain text", "text")
        self.compare_button = QPushButton("Compare")
        self.compare_button.clicked.connect(self.run_compare)
        self.view = QTextBrowser()
        self.view.setOpenExternalLinks(False)
        self.view.setPlaceholderText("Choose report B (A is the report shown in the window unless you pick "
                                     "another file), then press Compare.")
        self.fmt_box.currentIndexChanged.connect(lambda _i: self._show_result())
        self.result = None
        self._generation = 0
        self.status = QLabel()
        self.status.setWordWrap(True)
        top = QHBoxLayout()
        top.addWidget(self.fmt_box)
        top.addStretch(1)
        top.addWidget(self.compare_button)
        lay = QVBoxLayout(self)
        lay.addLayout(form)
        lay.addLayout(top)
        lay.addWidget(self.status)
        lay.addWidget(self.view, 1)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        buttons.rejected.connect(self.reject)
        self.close_button = buttons.button(QDialogButtonBox.StandardButton.Close)
        lay.addWidget(buttons)
        self.resize(820, 620)

    def _browse(self, edit: QLineEdit) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Choose a CPU Doctor report", str(documents_folder()),
                                              "CPU Doctor reports (*.json);;All files (*)")
        if path:
            edit.setText(path)

    def _side(self, edit: QLineEdit) -> tuple[Report | Path, str]:
        """(the report shown in the window, or the file to read; its name)."""
        text = edit.text().strip()
        if not text:
            if edit is self.a_edit and self.current is not None:
                return self.current, self.current_label
            raise ReportError("Choose a report file for " + ("A" if edit is self.a_edit else "B")
                              + " (Browse…, or type its path).")
        path = Path(text).expanduser()
        return path, path.name

    def run_compare(self) -> bool:
        """Start comparing on the thread pool; False (and why, in the status line) when a side is missing."""
        try:
            (a, name_a), (b, name_b) = self._side(self.a_edit), self._side(self.b_edit)
        except ReportError as exc:
            self._failed(self._generation, exc)
            return False
        self._generation += 1
        generation = self._generation
        self.status.setText("Comparing…")
        run_in_thread(_compare_sides, a, name_a, b, name_b,
                      on_result=lambda result: self._compared(generation, result),
                      on_error=lambda exc: self._failed(generation, exc))
        return True

    def _compared(self, generation: int, result) -> None:
        if generation != self._generation:
            return                      # an older Compare press: its answer is not what the fields say now
        self.status.setText("No differences." if result.same else f"{plural(len(result.changes), 'difference')}.")
        self.result = result
        self._show_result()
        self.compared.emit(result)

    def _failed(self, generation: int, exc: BaseException) -> None:
        if generation != self._generation:
            return
        text = reason_of(exc) if isinstance(exc, (ReportError, OSError)) else f"Compare failed: {reason_of(exc)}"
        self.status.setText(text)
        self.view.clear()
        self.result = None
        self.failed.emit(text)

    def _show_result(self) -> None:
        """Render the last comparison in the chosen format (switching format needs no new Compare)."""
        from cpudoctor.compare import render_markdown, render_text

        if self.result is None:
            return
        if self.fmt_box.currentData() == "md":
            self.view.setMarkdown(qt_markdown(render_markdown(self.result)))
        else:
            self.view.setPlainText(render_text(self.result))


def _compare_sides(a: Report | Path, name_a: str, b: Report | Path, name_b: str):
    """The Compare dialog's work on the pool: read the files, then what ``cpudoctor compare`` does."""
    from cpudoctor.compare import compare_reports, read_report

    ra = a if isinstance(a, Report) else read_report(a)
    rb = b if isinstance(b, Report) else read_report(b)
    return compare_reports(ra, rb, name_a, name_b)


class ReportActions(QObject):
    """The File-menu/toolbar actions around reports; the main window places them."""

    exported = Signal(object)          # Path written
    failed = Signal(str)               # what went wrong, for the status bar / tests
    captured = Signal(object)          # cpudoctor.capture.CaptureResult

    def __init__(self, model: AppModel, window: QWidget, collector: ReportCollector | None = None):
        super().__init__(window)
        self.model = model
        self.window = window
        # Opening a report runs the report pipeline: the window's collector, or one of our own.
        self.collector = collector if collector is not None else ReportCollector(model, parent=self)
        self.collector.open_failed.connect(lambda message: self._fail(message, "Cannot open the report",
                                                                      notify=collector is None))
        self.last_message: QMessageBox | None = None
        self.workers: list = []
        # Export as… starts from the format and privacy choice the Report page shows (the window sets this)
        self.preferences: Callable[[], tuple[str, bool]] = lambda: ("html", False)

        self.export_quick = QAction(icon("export"), "&Export report", self)
        self.export_quick.setShortcut(QKeySequence("Ctrl+E"))
        self.export_quick.setToolTip("Save this report as an HTML page in your documents folder "
                                     "(identifying details replaced)")
        self.export_quick.triggered.connect(self.quick_export)
        self.export_as = QAction("Export &as…", self)
        self.export_as.setShortcut(QKeySequence("Ctrl+Shift+E"))
        self.export_as.triggered.connect(self.export_as_dialog)
        self.copy_markdown = QAction("&Copy as Markdown", self)
        self.copy_markdown.setShortcut(QKeySequence("Ctrl+Shift+C"))
        self.copy_markdown.setToolTip("Copy a Markdown report for a GitHub issue (identifying details replaced)")
        self.copy_markdown.triggered.connect(self.copy_as_markdown)
        self.open_report = QAction(icon("open"), "&Open report…", self)
        self.open_report.setShortcut(QKeySequence.StandardKey.Open)
        self.open_report.setToolTip("Open a saved JSON report read-only (yours or someone else's)")
        self.open_report.triggered.connect(self.open_report_dialog)
        self.compare = QAction("Co&mpare reports…", self)
        self.compare.triggered.connect(self.compare_dialog)
        self.capture = QAction("Save machine &capture…", self)
        self.capture.setToolTip("Pack the /proc and /sys files CPU Doctor reads and the Python environment it "
                                "describes, for `cpudoctor report --root`")
        self.capture.triggered.connect(self.capture_dialog)
        for act in (self.export_quick, self.export_as, self.copy_markdown):
            act.setEnabled(model.report is not None)
        model.report_changed.connect(self._on_report)

    def _on_report(self, report) -> None:
        for act in (self.export_quick, self.export_as, self.copy_markdown):
            act.setEnabled(report is not None)

    # --- export -------------------------------------------------------------------
    def quick_export(self) -> None:
        """One click: HTML, documents folder, timestamped name, never overwrites."""
        if self.model.report is None:
            return self._fail("There is no report yet: wait for the probe to finish.")
        folder = documents_folder()
        path = unique_path(folder, default_filename("html", _dt.datetime.now()))
        self.start_export(self.model.report, "html", path, include_identifying=False, overwrite=False)

    def export_as_dialog(self) -> None:
        if self.model.report is None:
            return self._fail("There is no report yet: wait for the probe to finish.")
        fmt, identifying = self.preferences()
        dlg = ExportDialog(self.window, fmt if fmt in EXPORT_FORMATS else "html")
        dlg.privacy.setChecked(identifying)
        self.last_dialog = dlg
        if dlg.exec() != QDialog.DialogCode.Accepted:
            return
        path, overwrite = dlg.path, False
        if path.exists():
            answer = QMessageBox.question(self.window, "Replace file?", f"{path.name} already exists. Replace it?")
            if answer != QMessageBox.StandardButton.Yes:
                return
            overwrite = True
        self.start_export(self.model.report, dlg.fmt, path, dlg.privacy.isChecked(), overwrite)

    def start_export(self, report: Report, fmt: str, path: Path, include_identifying: bool = False,
                     overwrite: bool = False):
        """Render and write on the pool; ``exported`` or ``failed`` follows."""
        worker = run_in_thread(export_report, report, fmt, path, include_identifying, overwrite,
                               on_result=self._exported, on_error=self._export_error)
        self.workers.append(worker)
        return worker

    def _exported(self, path: Path) -> None:
        self.exported.emit(path)
        self.model.status_message.emit(f"Report saved to {path}")
        box = QMessageBox(QMessageBox.Icon.Information, "Report saved", f"Saved <b>{path.name}</b>",
                          QMessageBox.StandardButton.Close, self.window)
        box.setInformativeText(f"in {path.parent}")
        open_btn = box.addButton("Open", QMessageBox.ButtonRole.ActionRole)
        folder_btn = box.addButton("Show in folder", QMessageBox.ButtonRole.ActionRole)
        copy_btn = box.addButton("Copy path", QMessageBox.ButtonRole.ActionRole)
        open_btn.clicked.connect(lambda: self.open_or_explain(path, path))
        folder_btn.clicked.connect(lambda: self.open_or_explain(path.parent, path))
        copy_btn.clicked.connect(lambda: self.copy_path(path))
        self.last_message = box
        box.open()

    def open_or_explain(self, target: Path, saved: Path) -> bool:
        """Open ``target`` with the desktop; when nothing can open it, say so and give the path to copy."""
        if open_with_desktop(target):
            return True
        what = "the folder" if target.is_dir() else saved.name
        text = (f"Could not open {what}: no program to open it is set up here (no desktop launcher such as "
                f"xdg-open). The report is saved at:\n{saved}")
        self.failed.emit(text)
        self.model.status_message.emit(f"No program to open {what}; the report is at {saved}")
        box = QMessageBox(QMessageBox.Icon.Warning, "Cannot open the report", text,
                          QMessageBox.StandardButton.Close, self.window)
        box.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        copy_btn = box.addButton("Copy path", QMessageBox.ButtonRole.ActionRole)
        copy_btn.clicked.connect(lambda: self.copy_path(saved))
        self.last_message = box
        box.open()
        return False

    def copy_path(self, path: Path) -> None:
        QGuiApplication.clipboard().setText(str(path))
        self.model.status_message.emit(f"Copied {path}")

    def _export_error(self, exc: BaseException) -> None:
        text = (reason_of(exc) if isinstance(exc, (ExportError, ReportError, OSError))
                else f"Export failed: {reason_of(exc)}")
        self._fail(text, "Could not export the report")

    def _fail(self, text: str, title: str = "CPU Doctor", notify: bool = True) -> None:
        """Say what went wrong: ``failed``, the status bar and (unless the window says it itself) a message box."""
        self.failed.emit(text)
        self.model.status_message.emit(text)
        if not notify:
            return
        box = QMessageBox(QMessageBox.Icon.Warning, title, text, QMessageBox.StandardButton.Ok, self.window)
        self.last_message = box
        box.open()

    def copy_as_markdown(self) -> str:
        from cpudoctor.export import render_export

        if self.model.report is None:
            self._fail("There is no report yet: wait for the probe to finish.")
            return ""
        text = render_export(self.model.report, "md").decode("utf-8")
        QGuiApplication.clipboard().setText(text)
        self.model.status_message.emit("Report copied as Markdown (identifying details replaced)")
        return text

    # --- open / compare ---------------------------------------------------------
    def open_report_dialog(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self.window, "Open a CPU Doctor report", str(documents_folder()),
                                              "CPU Doctor reports (*.json);;All files (*)")
        if path:
            self.open_path(Path(path))

    def open_path(self, path: Path) -> None:
        """Show a saved report read-only in every page, diagnosed off the GUI thread by the report
        pipeline; a bad file gets a clear message (``failed``)."""
        self.collector.open(Path(path))

    def compare_dialog(self) -> CompareDialog:
        dlg = CompareDialog(self.model.report, self.model.source_label, self.window)
        self.last_dialog = dlg
        dlg.open()
        return dlg

    # --- capture ----------------------------------------------------------------
    def capture_dialog(self) -> None:
        name = f"cpudoctor-capture-{_dt.datetime.now():%Y-%m-%d-%H%M}.tar.gz"
        path, _ = QFileDialog.getSaveFileName(self.window, "Save machine capture", str(documents_folder() / name),
                                              "Capture (*.tar.gz)")
        if path:
            self.start_capture(Path(path), force=Path(path).exists())   # the dialog asked about replacing

    def start_capture(self, path: Path, force: bool = False):
        self.model.status_message.emit("Capturing /proc and /sys and the Python environment…")
        worker = run_in_thread(capture_machine, path, force, _window_python(self.model.report),
                               on_result=self._captured, on_error=self._export_error)
        self.workers.append(worker)
        return worker

    def _captured(self, result) -> None:
        self.captured.emit(result)
        self.model.status_message.emit(result.summary().splitlines()[0])
        box = QMessageBox(QMessageBox.Icon.Information, "Capture saved", result.summary().splitlines()[0],
                          QMessageBox.StandardButton.Close, self.window)
        box.setInformativeText(result.summary().splitlines()[1])
        folder_btn = box.addButton("Show in folder", QMessageBox.ButtonRole.ActionRole)
        folder_btn.clicked.connect(lambda: self.open_or_explain(result.path.parent, result.path))
        self.last_message = box
        box.open()


def _window_python(report) -> tuple[str | None, str | None] | None:
    """(interpreter, how chosen) of the environment the window describes on this machine; None: not this machine's."""
    sw = report.software if report is not None else None
    if sw is None or sw.captured or report.meta.root not in ("", "/") or not sw.python.executable:
        return None
    return (None if sw.python.own else sw.python.executable), sw.python.chosen_by


def capture_machine(path: Path, force: bool, python: tuple[str | None, str | None] | None):
    """The capture the window saves (on a worker thread): this machine, with the environment the window
    describes in environment.json (the one doctor would choose when the window shows no report of this machine)."""
    from cpudoctor.capture import capture
    from cpudoctor.pipeline import Source, chosen_source

    source = Source.this_machine(*python) if python is not None else chosen_source()
    return capture(path, force=force, environment=source)
