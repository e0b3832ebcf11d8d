"""Fixtures shared by the GUI tests: a private QSettings file and a leak check.

Import the fixtures into a test module (``from gui_support import no_qt_leaks,
settings``); pytest picks them up there. The leak check fails a test that
leaves a pool job, a QThread or an active QTimer behind (napari does the same).
"""

from __future__ import annotations

import pytest
from PySide6.QtCore import QSettings, QThread, QThreadPool, QTimer
from PySide6.QtWidgets import QApplication, QStatusBar


@pytest.fixture
def settings(tmp_path) -> QSettings:
    """A QSettings in a temporary INI file: tests never touch the user's real configuration."""
    return QSettings(str(tmp_path / "cpudoctor-test.ini"), QSettings.Format.IniFormat)


@pytest.fixture(autouse=True)
def no_qt_leaks(qapp):
    yield
    pool = QThreadPool.globalInstance()
    assert pool.waitForDone(30_000), "a QThreadPool job was still running 30 s after the test"
    QApplication.processEvents()
    # QStatusBar's own one-shot timer (a message's timeout) is Qt's, not ours, and harmless.
    timers = [t for w in QApplication.topLevelWidgets()
              for t in w.findChildren(QTimer) if t.isActive() and not isinstance(t.parent(), QStatusBar)]
    threads = [t for t in qapp.findChildren(QThread) if t.isRunning()]
    owners = [f"{type(t.parent()).__name__}.{t.objectName() or 'timer'} ({t.interval()} ms)" for t in timers]
    assert not timers, f"active QTimers left by the test: {owners}"
    assert not threads, f"running QThreads left by the test: {threads}"
