"""The Training page's notice when no Python environment has PyTorch, with the install command.

The lab's jobs run in one of the user's environments; the standalone app has
no torch of its own. The first time the page is shown, the environments are
listed off the UI thread (:func:`cpudoctor.probes.software.envs.discover`,
cached per interpreter) and judged by :func:`cpudoctor.advisor.torch_setup.torch_setup`;
when none has torch this banner says so and offers the command for this CPU,
to copy, and *Look again* once it has run. Hidden otherwise.
"""

from __future__ import annotations

import html
import platform
from typing import Callable

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QLineEdit, QPushButton, QVBoxLayout, QWidget

from cpudoctor.advisor.torch_setup import TorchSetup, torch_setup
from cpudoctor.gui.workers import run_in_thread
from cpudoctor.render.envs import torch_missing_text


def _discover():
    from cpudoctor.probes.software.envs import discover

    return discover()


class TorchMissingBanner(QFrame):
    """Hidden until the environments are known; shown only when none has PyTorch."""

    checked = Signal(object)               # the TorchSetup, after each look

    def __init__(self, parent: QWidget | None = None,
                 find_envs: Callable[[], list] = _discover,
                 system: Callable[[], tuple[str, str]] = lambda: (platform.system(), platform.machine())):
        super().__init__(parent)
        self.find_envs = find_envs          # tests give fake environments
        self.system = system
        self.setup: TorchSetup | None = None
        self._looking = False
        self._looked = False
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.setStyleSheet("TorchMissingBanner { border: 1px solid #c98a1a; border-radius: 4px; }")
        lay = QVBoxLayout(self)
        self.text = QLabel("")
        self.text.setWordWrap(True)
        self.text.setTextFormat(Qt.TextFormat.RichText)
        self.text.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        lay.addWidget(self.text)
        row = QHBoxLayout()
        self.command = QLineEdit()
        self.command.setReadOnly(True)
        self.copy_button = QPushButton("Copy")
        self.copy_button.clicked.connect(self.copy_command)
        self.again_button = QPushButton("Look again")
        self.again_button.setToolTip("List the Python environments again, e.g. after installing PyTorch")
        self.again_button.clicked.connect(self.look)
        row.addWidget(self.command, 1)
        row.addWidget(self.copy_button)
        row.addWidget(self.again_button)
        lay.addLayout(row)
        self.setVisible(False)

    def look_once(self) -> None:
        """Look the first time only (the page calls this when it is first shown)."""
        if not self._looked:
            self.look()

    def look(self) -> None:
        if self._looking:
            return
        self._looking = self._looked = True
        self.again_button.setEnabled(False)
        run_in_thread(self.find_envs, on_result=self._show, on_error=self._failed)

    def _failed(self, exc: BaseException) -> None:
        self._looking = False
        self.again_button.setEnabled(True)

    def _show(self, envs: list) -> None:
        self._looking = False
        self.again_button.setEnabled(True)
        os_name, machine = self.system()
        self.setup = torch_setup(envs, os_name, machine)
        if self.setup.has_torch:
            self.setVisible(False)
        else:
            headline, detail = torch_missing_text(self.setup)
            self.text.setText(f"<b>{html.escape(headline)}</b> {html.escape(detail)}")
            self.command.setText(self.setup.command)
            self.command.setCursorPosition(0)            # the interpreter's path first, not the index URL
            self.command.setVisible(bool(self.setup.command))
            self.copy_button.setVisible(bool(self.setup.command))
            self.setVisible(True)
        self.checked.emit(self.setup)

    def copy_command(self) -> None:
        QGuiApplication.clipboard().setText(self.command.text())
