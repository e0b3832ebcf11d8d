"""The Help menu: the documentation, the rules reference, and "Report a problem" with the report attached.

The rules are shown from this installation (``cpudoctor explain`` prints the
same), so they are there without a network. "Report a problem" saves this
window's report as redacted Markdown (the export's own redaction), copies it
to the clipboard and opens the project's new-issue page, then says where the
file is, so it can be dragged into the issue or pasted.
"""

from __future__ import annotations

import datetime as _dt
from pathlib import Path
from urllib.parse import urlencode

from PySide6.QtCore import QObject, QUrl, Signal
from PySide6.QtGui import QAction, QDesktopServices, QGuiApplication
from PySide6.QtWidgets import QDialog, QDialogButtonBox, QMessageBox, QTextBrowser, QVBoxLayout, QWidget

from cpudoctor import PROJECT_URL, docs_url
from cpudoctor.gui.model import AppModel
from cpudoctor.render.words import reason_of

ISSUE_TITLE = "Problem report: "
ISSUE_BODY = ("What happened, and what did you expect?\n\n\n"
              "The CPU Doctor report is attached below (identifying details replaced): drag the file saved by "
              "Help > Report a problem into this box, or paste it from the clipboard.\n")


def issue_url(cpu: str) -> str:
    """The project's new-issue page with a title and a body to fill in."""
    return f"{PROJECT_URL}/issues/new?" + urlencode({"title": ISSUE_TITLE + cpu, "body": ISSUE_BODY})


class RulesDialog(QDialog):
    """Every rule with what it checks, why it matters and the fix (the rules reference, from this install)."""

    def __init__(self, parent: QWidget | None = None):
        from cpudoctor.render.rules import render_process_rules_md, render_rules_md

        super().__init__(parent)
        self.setWindowTitle("CPU Doctor rules")
        self.view = QTextBrowser()
        self.view.setOpenExternalLinks(True)
        self.view.setMarkdown(render_rules_md() + "\n\n" + render_process_rules_md())
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        buttons.rejected.connect(self.reject)
        lay = QVBoxLayout(self)
        lay.addWidget(self.view, 1)
        lay.addWidget(buttons)
        self.resize(780, 640)


class HelpActions(QObject):
    """Documentation, Rules and Report a problem; the window puts them in its Help menu."""

    reported = Signal(object)          # Path of the report saved for an issue

    def __init__(self, model: AppModel, window: QWidget):
        super().__init__(window)
        self.model = model
        self.window = window
        self.last_dialog: QDialog | None = None
        self.docs = QAction("&Documentation", self)
        self.docs.setToolTip("Open CPU Doctor's documentation in the browser")
        self.docs.triggered.connect(lambda: self.open_url(docs_url("README.md")))
        self.rules = QAction("&Rules reference", self)
        self.rules.setToolTip("Every rule: what it checks, why it matters, the fix")
        self.rules.triggered.connect(self.show_rules)
        self.report_problem = QAction("Report a &problem…", self)
        self.report_problem.setToolTip("Save this report (identifying details replaced), copy it, and open a new "
                                       "issue to paste it into")
        self.report_problem.triggered.connect(self.start_report)

    def open_url(self, url: str) -> bool:
        """Open ``url`` in the browser; when there is none, say where it is (the address is copyable)."""
        if QDesktopServices.openUrl(QUrl(url)):
            return True
        box = QMessageBox(QMessageBox.Icon.Information, "No browser", f"No browser could be opened here. The page is "
                          f"at:\n{url}", QMessageBox.StandardButton.Close, self.window)
        self.last_dialog = box
        box.open()
        return False

    def show_rules(self) -> RulesDialog:
        dlg = RulesDialog(self.window)
        self.last_dialog = dlg
        dlg.open()
        return dlg

    def start_report(self, folder: Path | None = None) -> Path | None:
        """Save the report as redacted Markdown, copy it, open the new-issue page, say where the file is."""
        from cpudoctor.export import default_filename, render_export, unique_path
        from cpudoctor.fileio import WriteError, atomic_write
        from cpudoctor.gui.export import documents_folder

        report = self.model.report
        if report is None:
            self.model.status_message.emit("There is no report yet: wait for the probe to finish.")
            return None
        text = render_export(report, "md").decode("utf-8")
        QGuiApplication.clipboard().setText(text)
        target = unique_path(folder or documents_folder(), default_filename("md", _dt.datetime.now()))
        try:
            atomic_write(target, text, overwrite=False)
        except (WriteError, OSError) as exc:
            self.model.status_message.emit(f"The report is in the clipboard; it could not be saved: {reason_of(exc)}")
            target = None
        opened = QDesktopServices.openUrl(QUrl(issue_url(report.cpu.brand or "unknown CPU")))
        where = f"It is saved as {target} and" if target is not None else "It is"
        how = "A new issue is open in the browser: paste the report there" if opened else (
            f"No browser could be opened: open {PROJECT_URL}/issues/new and paste the report there")
        box = QMessageBox(QMessageBox.Icon.Information, "Report a problem",
                          f"{how}, and say what happened.\n\n{where} in the clipboard (identifying details "
                          "replaced).", QMessageBox.StandardButton.Close, self.window)
        self.last_dialog = box
        box.open()
        self.model.status_message.emit("Report copied for the issue" + (f" and saved to {target}" if target else ""))
        if target is not None:
            self.reported.emit(target)
        return target
