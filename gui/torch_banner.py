"""The Training page's notice when the chosen Python environment has no PyTorch, with the install command.

The lab's jobs run in the environment chosen in the toolbar
(:class:`cpudoctor.gui.environments.EnvironmentChooser`); the standalone app
has no torch of its own. Once the chooser has decided and listed, the chosen
environment is judged by :func:`cpudoctor.advisor.torch_setup.torch_setup`:
with torch the banner is hidden; without, it says so, names environments that
have torch (to choose one in the toolbar), and offers the command that installs
PyTorch's CPU build for this CPU into it (or into a new environment where pip
should not install), to copy, and *Look again* once it has run. When nothing
usable was found at all it gives the words for "no environment has PyTorch".
"""

from __future__ import annotations

import html
import platform
from typing import Callable

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QLineEdit, QPushButton, QVBoxLayout, QWidget

from cpudoctor.advisor.torch_setup import TorchSetup, torch_setup
from cpudoctor.gui.environments import EnvironmentChooser, identity
from cpudoctor.render.env_choice import torch_missing_in
from cpudoctor.render.envs import torch_missing_text


class TorchMissingBanner(QFrame):
    """Hidden until the environment is chosen and the environments listed; shown when the chosen one has no PyTorch."""

    checked = Signal(object)               # the TorchSetup of the chosen environment, after each judgement

    def __init__(self, chooser: EnvironmentChooser, parent: QWidget | None = None,
                 system: Callable[[], tuple[str, str]] = lambda: (platform.system(), platform.machine())):
        super().__init__(parent)
        self.chooser = chooser
        self.system = system                # tests give another OS and CPU architecture
        self.setup: TorchSetup | None = None
        self.missing: bool | None = None    # the chosen environment has no torch (None: not known yet)
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
        chooser.listed.connect(lambda _envs: self.judge())
        chooser.chosen.connect(lambda _env, _how: self.judge())
        chooser.looking_changed.connect(lambda busy: self.again_button.setEnabled(not busy))
        self.judge()

    def look_once(self) -> None:
        """Have the environments looked up if nobody has yet (the page calls this when it is first shown)."""
        self.chooser.start()

    def look(self) -> None:
        """Look again, without the cache (after the command has run)."""
        self.chooser.look_again()

    def judge(self) -> None:
        """Show or hide the banner for the chosen environment (nothing before it is chosen and listed)."""
        c = self.chooser
        if not (c.decided and c.listed_once):
            return
        os_name, machine = self.system()
        env = c.current
        if env is None:                     # nothing usable found: CPU Doctor's own (the app has no torch)
            self.setup = torch_setup(c.envs, os_name, machine)
            headline, detail = torch_missing_text(self.setup)
            missing = not self.setup.has_torch
        else:
            self.setup = torch_setup([env], os_name, machine)
            missing = not env.torch
            others = [e for e in c.envs if e.usable and e.torch and e.kind != "pipx" and identity(e) != identity(env)]
            headline, detail = torch_missing_in(env, self.setup, others) if missing else ("", "")
        if missing:
            self.text.setText(f"<b>{html.escape(headline)}</b> {html.escape(detail)}")
            self.command.setText(self.setup.command)
            self.command.setCursorPosition(0)            # the interpreter's path first, not the index URL
            self.command.setVisible(bool(self.setup.command))
            self.copy_button.setVisible(bool(self.setup.command))
        self.missing = missing
        self.setVisible(missing)
        self.checked.emit(self.setup)

    def copy_command(self) -> None:
        QGuiApplication.clipboard().setText(self.command.text())
