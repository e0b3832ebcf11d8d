"""The Report page: a preview of exactly what will be exported, with format, privacy and export buttons.

The preview is rendered with the same code and the same redaction as the
file, so what the user sees is what they share. Rendering runs on the thread
pool (the HTML of a big machine is a few hundred KB).
"""

from __future__ import annotations

from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import (QCheckBox, QComboBox, QHBoxLayout, QLabel, QPushButton, QTextBrowser, QVBoxLayout,
                               QWidget)

from cpudoctor.export import render_export, render_qt_html
from cpudoctor.gui.export import PRIVACY_TEXT, qt_markdown
from cpudoctor.gui.model import AppModel
from cpudoctor.gui.workers import run_in_thread
from cpudoctor.kits.format import size
from cpudoctor.render.words import reason_of

PREVIEW_FORMATS = (("md", "Markdown (for GitHub issues)"), ("html", "HTML page"), ("json", "JSON"))
# What the preview shows, said over it: a rendered Markdown table is not what the file holds.
EXACT = "— exactly what Export writes, redacted the same way"
RENDERED = {"md": "— the Markdown Export writes, as GitHub shows it (redacted the same way)",
            "html": "— the page Export writes, as a browser shows it (redacted the same way)"}


class ReportPage(QWidget):
    title = "Report"
    icon_name = "report"

    def __init__(self, model: AppModel, parent: QWidget | None = None):
        super().__init__(parent)
        self.model = model
        self.text = ""
        self.rendered = ""                 # the format the preview shows now
        self._generation = 0
        self.format_box = QComboBox()
        for key, label in PREVIEW_FORMATS:
            self.format_box.addItem(label, key)
        # short beside the format (the whole sentence did not fit a small window); the tooltip says which details
        self.privacy = QCheckBox("Include identifying details")
        self.privacy.setToolTip(PRIVACY_TEXT + ". Off: replaced by placeholders, safe to paste in public.")
        self.privacy.setChecked(False)
        # Markdown and HTML preview rendered; this shows the file's own text instead
        self.source = QCheckBox("Show the file's text")
        self.source.setToolTip("The characters Export writes (and Copy copies), instead of how they render")
        self.export_button = QPushButton("Export…")
        self.copy_button = QPushButton("Copy")
        self.copy_button.setToolTip("Copy the preview's text (as shown) to the clipboard")
        self.status = QLabel()
        self.status.setStyleSheet("color: palette(placeholder-text);")
        self.preview = QTextBrowser()
        self.preview.setOpenExternalLinks(True)
        # Qt's HTML centres <th>; the report's row headings read as a left-aligned column in browsers
        self.preview.document().setDefaultStyleSheet("th { text-align: left; padding-right: 12px; }")
        bar = QHBoxLayout()
        bar.addWidget(QLabel("Format"))
        bar.addWidget(self.format_box)
        bar.addWidget(self.privacy)
        bar.addStretch(1)
        bar.addWidget(self.copy_button)
        bar.addWidget(self.export_button)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(16, 12, 16, 12)      # as the Advisor, Topology and Inspector pages
        head = QHBoxLayout()
        heading = QLabel("Report")
        font = heading.font()
        font.setPointSizeF(font.pointSizeF() * 1.3)
        font.setBold(True)
        heading.setFont(font)
        self.subtitle = QLabel(EXACT)
        self.subtitle.setStyleSheet("color: palette(placeholder-text);")
        self.subtitle.setWordWrap(True)
        head.addWidget(heading)
        head.addWidget(self.subtitle, 1)
        lay.addLayout(head)
        lay.addLayout(bar)
        status_row = QHBoxLayout()          # the source switch beside the status: the bar above is full at 760 px
        status_row.addWidget(self.status, 1)
        status_row.addWidget(self.source)
        lay.addLayout(status_row)
        lay.addWidget(self.preview, 1)
        self.format_box.currentIndexChanged.connect(self.refresh)
        self.privacy.toggled.connect(self.refresh)
        self.source.toggled.connect(self.refresh)
        self.copy_button.clicked.connect(self.copy)
        self.export_button.clicked.connect(self.export)
        for sig in (model.report_changed, model.findings_changed, model.benchmarks_changed,
                    model.recommendation_changed):
            sig.connect(lambda *_: self.refresh())
        self.refresh()

    @property
    def fmt(self) -> str:
        return self.format_box.currentData()

    def refresh(self) -> None:
        report = self.model.report
        enabled = report is not None
        self.copy_button.setEnabled(enabled)
        self.export_button.setEnabled(enabled)
        if report is None:
            self.status.setText("No report yet: the probe is still running.")
            self.preview.clear()
            return
        self._generation += 1
        gen, fmt = self._generation, self.fmt
        self.status.setText("Rendering…")
        run_in_thread(_render_preview, report, fmt, self.privacy.isChecked(),
                      on_result=lambda out, g=gen, f=fmt: self._show(g, f, *out),
                      on_error=lambda exc: self.status.setText(f"Could not render the report: {reason_of(exc)}"))

    def _show(self, gen: int, fmt: str, data: bytes, qt_page: str | None = None,
              pictures: dict[str, str] | None = None) -> None:
        if gen != self._generation:       # a newer request superseded this one
            return
        self.text = data.decode("utf-8")
        rendered = fmt in RENDERED and not self.source.isChecked()
        self.source.setVisible(fmt in RENDERED)
        self.subtitle.setText(RENDERED[fmt] if rendered else EXACT)
        if not rendered:
            self.preview.setPlainText(self.text)
        elif fmt == "md":
            self.preview.setMarkdown(qt_markdown(self.text))
        elif fmt == "html" and qt_page is not None:
            # Qt's rich text shows inline SVG as loose text: show the page the PDF is made
            # from, with the map and charts as pictures (Copy still copies the real HTML file).
            from cpudoctor.render.pdf import attach_pictures

            width = max(320, self.preview.viewport().width() - 24)
            self.preview.setHtml(attach_pictures(self.preview.document(), qt_page, pictures or {}, width))
        else:
            self.preview.setPlainText(self.text)
        privacy = ("identifying details included" if self.privacy.isChecked()
                   else "host name, user and paths replaced by placeholders")
        self.status.setText(f"{self.model.source_label} · {size(len(data), digits=0)} · {privacy}")
        self.rendered = fmt

    def copy(self) -> None:
        QGuiApplication.clipboard().setText(self.text)
        self.model.status_message.emit("Report copied to the clipboard")

    def export(self) -> None:
        """Open Export as… preset to this page's format and privacy choice."""
        from pathlib import Path

        from PySide6.QtWidgets import QDialog, QMessageBox

        from cpudoctor.gui.export import ExportDialog, ReportActions

        dlg = ExportDialog(self, self.fmt)
        dlg.privacy.setChecked(self.privacy.isChecked())
        if dlg.exec() != QDialog.DialogCode.Accepted or self.model.report is None:
            return
        path: Path = dlg.path
        overwrite = False
        if path.exists():
            if QMessageBox.question(self, "Replace file?", f"{path.name} already exists. Replace it?") != \
                    QMessageBox.StandardButton.Yes:
                return
            overwrite = True
        actions = getattr(self.window(), "report_actions", None)
        if not isinstance(actions, ReportActions):
            actions = self._actions = ReportActions(self.model, self)
        actions.start_export(self.model.report, dlg.fmt, path, dlg.privacy.isChecked(), overwrite)


def _render_preview(report, fmt: str, include_identifying: bool) -> tuple[bytes, str | None, dict[str, str] | None]:
    """The exported bytes (for Copy) and, for HTML, the Qt-showable page and its pictures (worker thread)."""
    data = render_export(report, fmt, include_identifying)
    if fmt != "html":
        return data, None, None
    page, pictures = render_qt_html(report, include_identifying)
    return data, page, pictures
