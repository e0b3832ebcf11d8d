""""Run a script…": choose a training script, its arguments and how long to watch it.

The Inspector runs it the way ``cpudoctor run`` does (:mod:`cpudoctor.jobrun`), in
the window's Python environment, off the UI thread; its output is kept for the
Time tab instead of a terminal.
"""

from __future__ import annotations

import threading

from PySide6.QtWidgets import (QCheckBox, QDialog, QDialogButtonBox, QFileDialog, QFormLayout, QHBoxLayout, QLabel,
                               QLineEdit, QPushButton, QSpinBox, QWidget)

VERIFY_BUDGET_S = 180           # the Verify switch's time limit the first time (cpudoctor run --verify's default)


class RunScriptDialog(QDialog):
    def __init__(self, python: str, parent: QWidget | None = None, script: str = "", arguments: str = "",
                 seconds: float | None = 60.0, verify: bool = False, budget: float = VERIFY_BUDGET_S):
        super().__init__(parent)
        self.setWindowTitle("Run a script")
        form = QFormLayout(self)
        form.addRow(QLabel("CPU Doctor starts the script, watches where its time goes and what its kernels do, "
                           "and says what to change. Your script is not modified."))
        row = QHBoxLayout()
        self.script_edit = QLineEdit(script)
        self.script_edit.setPlaceholderText("train.py")
        browse = QPushButton("Browse…")
        browse.clicked.connect(self._browse)
        row.addWidget(self.script_edit, 1)
        row.addWidget(browse)
        form.addRow("Script:", row)
        self.args_edit = QLineEdit(arguments)
        self.args_edit.setPlaceholderText("--epochs 1 --lr 0.1")
        form.addRow("Arguments:", self.args_edit)
        self.seconds_spin = QSpinBox()
        self.seconds_spin.setRange(0, 24 * 3600)
        self.seconds_spin.setValue(int(seconds) if seconds else 0)
        self.seconds_spin.setSpecialValueText("until it exits")
        self.seconds_spin.setSuffix(" s")
        form.addRow("Stop after:", self.seconds_spin)
        form.addRow("Python:", QLabel(python))
        row = QHBoxLayout()
        self.verify_check = QCheckBox("Verify the fixes on the script")
        self.verify_check.setChecked(verify)
        self.verify_check.setToolTip(
            "After the diagnosis, each fix that can be applied from outside the script (thread variables, CPU "
            "binding, a variable cleared) is measured on the script itself: it runs again, unchanged and with the "
            "fix, in interleaved windows, and the findings are ranked by the measured effect. A script that holds "
            "files open for writing in its folder is not run again from here (verify it with cpudoctor run --verify "
            "--yes).")
        self.budget_spin = QSpinBox()
        self.budget_spin.setRange(20, 24 * 3600)
        self.budget_spin.setValue(int(budget))
        self.budget_spin.setSuffix(" s at most")
        self.budget_spin.setEnabled(verify)
        self.verify_check.toggled.connect(self.budget_spin.setEnabled)
        row.addWidget(self.verify_check)
        row.addWidget(self.budget_spin)
        row.addStretch(1)
        form.addRow("Verify:", row)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel)
        buttons.button(QDialogButtonBox.StandardButton.Ok).setText("Run")
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        form.addRow(buttons)

    def _browse(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Training script", "", "Python scripts (*.py);;All files (*)")
        if path:
            self.script_edit.setText(path)

    def values(self) -> tuple[str, str, float | None]:
        seconds = self.seconds_spin.value()
        return self.script_edit.text().strip(), self.args_edit.text().strip(), float(seconds) if seconds else None

    def verify_values(self) -> tuple[bool, float]:
        """(the Verify switch, its time limit in seconds)."""
        return self.verify_check.isChecked(), float(self.budget_spin.value())


class OutputSink:
    """A file-like sink for the job's stdout/stderr while it runs in the window (kept, bounded)."""

    LIMIT = 200_000

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._data = bytearray()

    def write(self, data: bytes) -> int:
        with self._lock:
            self._data += data
            if len(self._data) > self.LIMIT:
                del self._data[: len(self._data) - self.LIMIT]
        return len(data)

    def flush(self) -> None:
        pass

    def text(self) -> str:
        with self._lock:
            return self._data.decode("utf-8", "replace")
