"""Advisor page: what is wrong, why, and exactly what to type.

Findings come from the model (the collector runs the advisor after each probe
stage; "Re-run" diagnoses ``model.report`` again on a worker thread). They are
grouped by severity with counts, filtered by a search box, and the selected
one shows its why, its fix and its snippet, translated to the chosen shell.
With nothing selected the details pane shows this machine's recommended
settings. "Save launch script..." writes a complete script for the chosen shell
(atomically). The page never calls a probe: it only reads the model.
"""

from __future__ import annotations

import os
from pathlib import Path

from PySide6.QtCore import QEvent, QModelIndex, Qt, Signal
from PySide6.QtGui import QFont, QFontDatabase, QGuiApplication
from PySide6.QtWidgets import (QCheckBox, QComboBox, QFileDialog, QHBoxLayout, QHeaderView, QLabel, QLineEdit, QMessageBox,
                               QPlainTextEdit, QPushButton, QSplitter, QStyle, QTextBrowser, QTreeWidget,
                               QTreeWidgetItem, QVBoxLayout, QWidget)

from cpudoctor.advisor import snippets
from cpudoctor.advisor.ranking import ranked
from cpudoctor.gui.common import SEVERITY_COLOUR
from cpudoctor.gui.model import AppModel
from cpudoctor.render.doctor import environment_line
from cpudoctor.render.overview import PROVISIONAL_NOTE
from cpudoctor.kits.escape import html_escape, terminal_safe
from cpudoctor.render.finding_html import finding_html
from cpudoctor.render.finding_view import ShellChoice, finding_view, shell_snippet
from cpudoctor.render.words import SEVERITY, plural
from cpudoctor.model import Finding, Report

# (severity, group heading), worst first: the vocabulary's order and names
GROUPS: tuple[tuple[str, str], ...] = tuple((s.key, s.group) for s in SEVERITY.values())
FINDING_ROLE = Qt.ItemDataRole.UserRole + 1
SHELL_CHOICES: tuple[tuple[str, str], ...] = tuple((s, snippets.SHELL_LABELS[s]) for s in snippets.SHELLS)
NARROW_TREE_PX = 440       # below this the Category column is hidden (see _fit_category_column)


def matches(finding: Finding, text: str) -> bool:
    """Case-insensitive match of the filter text against code, symbol, title, category and why."""
    text = text.strip().lower()
    if not text:
        return True
    view = finding_view(finding)
    hay = " ".join((view.code, view.symbol, view.title, finding.category, view.category, view.why)).lower()
    return all(word in hay for word in text.split())


class AdvisorPage(QWidget):
    title = "Advisor"
    icon_name = "advisor"

    script_saved = Signal(str)             # path of a saved launch script

    def __init__(self, model: AppModel, parent: QWidget | None = None):
        super().__init__(parent)
        self.model = model
        self._findings: list[Finding] = []
        self._build()
        model.report_changed.connect(self._on_report)
        model.findings_changed.connect(self.set_findings)
        model.diagnosing_changed.connect(self._on_diagnosing)
        if model.report is not None:
            self._on_report(model.report)
            self.set_findings(list(model.report.findings))
        else:
            self._show_details(None)

    # ------------------------------------------------------------------ layout

    def _build(self) -> None:
        outer = QVBoxLayout(self)
        outer.setContentsMargins(16, 12, 16, 12)
        outer.setSpacing(8)

        head = QHBoxLayout()
        self.heading = QLabel("Advisor")
        font = self.heading.font()
        font.setPointSizeF(font.pointSizeF() * 1.3)
        font.setBold(True)
        self.heading.setFont(font)
        self.source = QLabel("")
        self.source.setStyleSheet("color: palette(placeholder-text);")
        head.addWidget(self.heading)
        head.addWidget(self.source)
        head.addStretch(1)
        self.counts = QLabel("")
        self.counts.setTextFormat(Qt.TextFormat.RichText)
        head.addWidget(self.counts)
        outer.addLayout(head)
        self.environment = QLabel("")
        self.environment.setWordWrap(True)
        self.environment.setStyleSheet("color: palette(placeholder-text);")
        self.environment.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.environment.setVisible(False)
        outer.addWidget(self.environment)

        bar = QHBoxLayout()
        self.filter = QLineEdit()
        self.filter.setPlaceholderText("Filter: code, title or category (e.g. THR, numa, bf16)")
        self.filter.setClearButtonEnabled(True)
        self.filter.textChanged.connect(self._apply_filter)
        self.show_passed = QCheckBox("Show passed checks")
        self.show_passed.setChecked(True)
        self.show_passed.toggled.connect(self._apply_filter)
        self.rerun_button = QPushButton("Re-run")
        self.rerun_button.setToolTip("Diagnose the current report again (after a sweep, or with new rules)")
        self.rerun_button.clicked.connect(self.rerun)
        self.save_button = QPushButton("Save launch script…")
        self.save_button.setToolTip("A complete script with this machine's thread settings and pinning")
        self.save_button.clicked.connect(lambda: self.save_launch_script())
        bar.addWidget(self.filter, 1)
        bar.addWidget(self.show_passed)
        bar.addWidget(self.rerun_button)
        bar.addWidget(self.save_button)
        outer.addLayout(bar)
        outer.addWidget(self._build_split(), 1)
        self._set_tab_order()

        style = self.style()
        self._icons = {
            "error": style.standardIcon(QStyle.StandardPixmap.SP_MessageBoxCritical),
            "warning": style.standardIcon(QStyle.StandardPixmap.SP_MessageBoxWarning),
            "info": style.standardIcon(QStyle.StandardPixmap.SP_MessageBoxInformation),
            "ok": style.standardIcon(QStyle.StandardPixmap.SP_DialogApplyButton),
        }
        self._current: Finding | None = None
        self._raw_snippet = ""
        self._snippet_lang = "bash"

    def _build_split(self) -> QSplitter:
        """The findings tree on the left; the selected finding's details and its snippet on the right."""
        split = QSplitter(Qt.Orientation.Horizontal)
        self.tree = QTreeWidget()
        self.tree.setHeaderLabels(["Check", "Code", "Category"])
        self.tree.setRootIsDecorated(True)
        self.tree.setUniformRowHeights(True)
        self.tree.setAlternatingRowColors(True)
        header = self.tree.header()
        header.setStretchLastSection(False)
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        header.setSectionResizeMode(1, QHeaderView.ResizeMode.ResizeToContents)
        # Category is elided, not sized to its contents: "WSL, VMs and containers" would
        # otherwise squeeze the finding's title to "Try AM…" in a narrow window
        header.setSectionResizeMode(2, QHeaderView.ResizeMode.Fixed)
        self.tree.viewport().installEventFilter(self)
        self.tree.currentItemChanged.connect(lambda cur, _prev: self._show_details(self._finding_of(cur)))
        split.addWidget(self.tree)

        right = QWidget()
        rv = QVBoxLayout(right)
        rv.setContentsMargins(8, 0, 0, 0)
        self.details_title = QLabel("")
        self.details_title.setWordWrap(True)
        tfont = self.details_title.font()
        tfont.setBold(True)
        tfont.setPointSizeF(tfont.pointSizeF() * 1.1)
        self.details_title.setFont(tfont)
        self.details = QTextBrowser()
        self.details.setOpenExternalLinks(True)
        snippet_bar = QHBoxLayout()
        self.snippet_label = QLabel("What to type")
        self.shell = QComboBox()
        for key, label in SHELL_CHOICES:
            self.shell.addItem(label, key)
        self.shell.setToolTip("Shell the snippet and the launch script are written for")
        self.shell.currentIndexChanged.connect(lambda _i: self._refresh_snippet())
        # The user's pick wins; until then the user's shell (PowerShell on Windows and for a Windows machine).
        self.shell.activated.connect(lambda _i: setattr(self, "_shell_chosen", True))
        self._shell_chosen = False
        self.copy_button = QPushButton("Copy")
        self.copy_button.clicked.connect(self.copy_snippet)
        snippet_bar.addWidget(self.snippet_label)
        snippet_bar.addStretch(1)
        shell_label = QLabel("&Shell:")
        shell_label.setBuddy(self.shell)
        snippet_bar.addWidget(shell_label)
        snippet_bar.addWidget(self.shell)
        snippet_bar.addWidget(self.copy_button)
        self.snippet = QPlainTextEdit()
        self.snippet.setReadOnly(True)
        mono = QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont)
        mono.setStyleHint(QFont.StyleHint.Monospace)
        self.snippet.setFont(mono)
        self.snippet.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        rv.addWidget(self.details_title)
        rv.addWidget(self.details, 3)
        rv.addLayout(snippet_bar)
        rv.addWidget(self.snippet, 2)
        split.addWidget(right)
        # the list gets the larger share: a finding's title is what a person reads first
        split.setStretchFactor(0, 3)
        split.setStretchFactor(1, 2)
        split.setSizes([560, 440])
        self.tree.setTextElideMode(Qt.TextElideMode.ElideRight)
        # the read-only text views show where the keyboard is (Fusion draws no focus frame on them)
        for view in (self.details, self.snippet):
            view.setStyleSheet(f"{type(view).__name__}:focus {{ border: 2px solid palette(highlight); }}")
        return split

    def _set_tab_order(self) -> None:
        """Tab follows the page as it reads: the filter bar, the list, the details, the shell, Copy, the snippet."""
        chain = (self.filter, self.show_passed, self.rerun_button, self.save_button, self.tree, self.details,
                 self.shell, self.copy_button, self.snippet)
        for first, second in zip(chain, chain[1:]):
            QWidget.setTabOrder(first, second)

    def eventFilter(self, obj, event) -> bool:  # noqa: N802 - Qt API
        if obj is self.tree.viewport() and event.type() == QEvent.Type.Resize:
            self._fit_category_column()
        return super().eventFilter(obj, event)

    def _fit_category_column(self) -> None:
        """Category takes what the titles leave (at most 40 % of what Code leaves), and goes away in a narrow tree.

        The finding's title is what a person reads; the category is also in the
        filter, the tooltip and the details pane.
        """
        header = self.tree.header()
        room = self.tree.viewport().width() - header.sectionSize(1)
        narrow = room < NARROW_TREE_PX
        self.tree.setColumnHidden(2, narrow)
        if not narrow:
            wanted = max(self.tree.sizeHintForColumn(2), header.sectionSizeHint(2)) + 8
            # the titles first: Category gets what the longest title leaves, between 60 px and 40 % of the room
            left = room - self.tree.sizeHintForColumn(0)
            self.tree.setColumnWidth(2, max(60, min(wanted, int(room * 0.4), left)))

    # ------------------------------------------------------------------ model

    def _on_report(self, report: Report) -> None:
        self.source.setText(f"— {self.model.source_label}")
        if report is not None and not self._shell_chosen:
            index = self.shell.findData(snippets.user_shell(report))
            if index >= 0 and index != self.shell.currentIndex():
                self.shell.blockSignals(True)
                self.shell.setCurrentIndex(index)
                self.shell.blockSignals(False)
        # which Python environment the findings are about (the doctor page's line)
        line = environment_line(report) if report is not None else None
        self.environment.setText(line or "")
        self.environment.setVisible(bool(line))
        self.save_button.setEnabled(report is not None)
        self.rerun_button.setEnabled(report is not None)
        if self._current is None:
            self._show_details(None)

    def _on_diagnosing(self, busy: bool) -> None:
        self.rerun_button.setEnabled(not busy and self.model.report is not None)

    def set_findings(self, findings: list[Finding]) -> None:
        keep = (self._current.code, self._current.title) if self._current is not None else None
        self._findings = list(findings)
        self.tree.blockSignals(True)
        self.tree.clear()
        self._groups: dict[str, QTreeWidgetItem] = {}
        for severity, label in GROUPS:
            group = QTreeWidgetItem([label])
            group.setIcon(0, self._icons[severity])
            gfont = group.font(0)
            gfont.setBold(True)
            group.setFont(0, gfont)
            group.setData(0, Qt.ItemDataRole.UserRole, severity)
            group.setFlags(Qt.ItemFlag.ItemIsEnabled)
            self.tree.addTopLevelItem(group)
            # "Suggestions (7)" spans the row: it is a heading, not a title to squeeze
            self.tree.setFirstColumnSpanned(self.tree.indexOfTopLevelItem(group), QModelIndex(), True)
            self._groups[severity] = group
        selected = None
        for f in ranked(self._findings):
            group = self._groups.get(f.severity)
            if group is None:
                continue
            view = finding_view(f)
            item = QTreeWidgetItem([view.title, view.code, view.category])
            item.setIcon(0, self._icons[f.severity])
            # the whole title even when the column elides it, then the why
            item.setToolTip(0, f"<b>{html_escape(view.title)}</b>" + (f"<br>{html_escape(view.why)}" if view.why else ""))
            item.setToolTip(2, item.text(2))
            item.setData(0, FINDING_ROLE, f)
            group.addChild(item)
            if keep is not None and (f.code, f.title) == keep:
                selected = item
        for severity, group in self._groups.items():
            group.setExpanded(severity != "ok")
        self.tree.blockSignals(False)
        self._apply_filter()
        self._fit_category_column()
        self._update_counts()
        if selected is not None:
            self.tree.setCurrentItem(selected)
        else:
            self._show_details(None)

    def _update_counts(self) -> None:
        parts = []
        for severity, label in GROUPS:
            n = sum(1 for f in self._findings if f.severity == severity)
            colour = SEVERITY_COLOUR[severity]
            parts.append(f'<span style="color:{colour}">●</span> {plural(n, *SEVERITY[severity].noun)}')
        so_far = (f"&nbsp;&nbsp;<span style='color:gray'>({PROVISIONAL_NOTE})</span>"
                  if self.model.provisional and not self.model.read_only else "")
        self.counts.setText(("&nbsp;&nbsp;".join(parts) if self._findings else "No findings yet") + so_far)

    def counts_by_severity(self) -> dict[str, int]:
        return {s: sum(1 for f in self._findings if f.severity == s) for s, _ in GROUPS}

    # ------------------------------------------------------------------ filter

    def _apply_filter(self) -> None:
        text = self.filter.text()
        for severity, group in getattr(self, "_groups", {}).items():
            shown = 0
            for i in range(group.childCount()):
                child = group.child(i)
                visible = matches(child.data(0, FINDING_ROLE), text) and (severity != "ok" or self.show_passed.isChecked())
                child.setHidden(not visible)
                shown += visible
            total = group.childCount()
            label = dict(GROUPS)[severity]
            group.setText(0, f"{label} ({shown})" if shown == total else f"{label} ({shown} of {total})")
            group.setHidden(shown == 0)
        current = self.tree.currentItem()
        if current is not None and (current.isHidden() or (current.parent() and current.parent().isHidden())):
            # a finding the filter hides must not stay in the details pane (nor be what Copy copies)
            self.tree.setCurrentItem(None)
            self.tree.clearSelection()
            self._show_details(None)

    def visible_codes(self) -> list[str]:
        out = []
        for group in getattr(self, "_groups", {}).values():
            if group.isHidden():
                continue
            for i in range(group.childCount()):
                child = group.child(i)
                if not child.isHidden():
                    out.append(child.data(0, FINDING_ROLE).code)
        return out

    # ------------------------------------------------------------------ details

    @staticmethod
    def _finding_of(item: QTreeWidgetItem | None) -> Finding | None:
        return item.data(0, FINDING_ROLE) if item is not None else None

    def select(self, code: str) -> bool:
        """Select the first finding with ``code`` (used by the Overview's top findings)."""
        for group in self._groups.values():
            for i in range(group.childCount()):
                child = group.child(i)
                if child.data(0, FINDING_ROLE).code == code.upper():
                    self.tree.setCurrentItem(child)
                    return True
        return False

    def _show_details(self, finding: Finding | None) -> None:
        self._current = finding
        report = self.model.report
        if finding is None:
            if report is None:
                self.details_title.setText("No report yet")
                self.details.setHtml("<p>The advisor runs as soon as the probes have read this machine.</p>")
                self._set_snippet("", "bash")
                return
            plan = snippets.thread_plan(report)
            self.details_title.setText("Recommended settings for the machine in this report" if self.model.read_only
                                       else "Recommended settings for this machine")
            notes = "".join(f"<li>{html_escape(n)}</li>" for n in plan.notes)
            self.details.setHtml(
                f"<p><b>{plan.threads}</b> compute threads: {html_escape(plan.source)}.</p>"
                f"<p>DataLoader workers: <b>{plan.workers}</b>. Select a finding on the left for its why and fix.</p>"
                + (f"<ul>{notes}</ul>" if notes else ""))
            text = snippets.shell_exports(report, "bash") + "\n\n# Python\n" + "\n".join(
                "# " + line if line else "#" for line in snippets.python_settings(report).splitlines())
            self._set_snippet(text, "bash")
            return
        view = finding_view(finding, self._shell_choice())
        self.details_title.setText(f"{view.title}  ({view.code})")
        # the title is the pane's heading and the snippet has its own editor, with the shell switch beside it
        self.details.setHtml(finding_html(view, "widget", title=False, snippet=False))
        self._set_snippet("", "bash")

    def _set_snippet(self, text: str, lang: str) -> None:
        """The snippet of the recommended settings (bash, shown in the chosen shell); a finding's comes from
        its view."""
        self._raw_snippet = text
        self._snippet_lang = lang
        self._refresh_snippet()

    def _shell_choice(self) -> ShellChoice:
        report = self.model.report
        return ShellChoice(self.current_shell(), report.topology if report is not None else None)

    def _refresh_snippet(self) -> None:
        """The snippet as typed in the chosen shell (the finding view's translation); Python stays Python."""
        choice = self._shell_choice()
        if self._current is not None:
            snippet = finding_view(self._current, choice).snippet
        else:
            snippet = shell_snippet(self._raw_snippet, self._snippet_lang, choice.shell or "bash", choice.topology)
        self.shell.setEnabled(snippet.shell is not None or not snippet.text)
        self.snippet.setPlainText(snippet.text)
        self.snippet_label.setText("What to type" if snippet.shell is not None or not snippet.text
                                   else f"What to type ({snippet.lang})")
        self.copy_button.setEnabled(bool(snippet.text))

    def current_shell(self) -> str:
        return str(self.shell.currentData())

    def snippet_text(self) -> str:
        return self.snippet.toPlainText()

    def copy_snippet(self) -> None:
        text = self.snippet_text()
        if text:
            QGuiApplication.clipboard().setText(terminal_safe(text))
            self.model.status_message.emit("Snippet copied to the clipboard")

    # ------------------------------------------------------------------ actions

    def rerun(self) -> None:
        """Diagnose the shown report again (the model runs the advisor; ``findings_changed`` follows)."""
        self.model.rediagnose()

    def save_launch_script(self, path: str | os.PathLike | None = None) -> Path | None:
        """Write the launch script for the selected shell (asks for a file when ``path`` is None)."""
        report = self.model.report
        if report is None:
            return None
        shell = self.current_shell()
        text = snippets.launch_script(report, shell)
        if path is None:
            suffix = snippets.SCRIPT_SUFFIX[shell]
            start = str(Path.home() / f"launch-train{suffix}")
            chosen, _ = QFileDialog.getSaveFileName(self, "Save launch script", start,
                                                    f"{snippets.SHELL_LABELS[shell]} script (*{suffix});;All files (*)")
            if not chosen:
                return None
            path = chosen
        from cpudoctor.fileio import WriteError, atomic_write

        try:
            written = atomic_write(path, text, executable=shell in ("bash", "zsh", "fish"))
        except (WriteError, OSError) as exc:
            from cpudoctor.render.words import reason_of

            message = str(exc.strerror or exc) if isinstance(exc, WriteError) else reason_of(exc)  # never '[Errno 13] …'
            self.model.status_message.emit(message)
            if self.isVisible():
                QMessageBox.warning(self, "Launch script not saved", message)
            return None
        self.model.status_message.emit(f"Launch script saved to {written}")
        self.script_saved.emit(str(written))
        return written
