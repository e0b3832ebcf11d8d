"""The GUI's JobRunner: a thin Qt adapter over the one child runner, driven by real children offscreen."""

from __future__ import annotations

import signal
import sys
import textwrap

import pytest
from PySide6.QtCore import QThread
from PySide6.QtWidgets import QApplication
from gui_support import no_qt_leaks  # noqa: F401 - autouse fixture
from child_support import assert_gone, forker, no_process_left  # noqa: F401 - autouse fixture

from cpudoctor.gui.job_runner import JobRunner
from cpudoctor.lab.runner import ASK_WAIT_S, TERM_WAIT_S

CHATTY = textwrap.dedent("""
    from cpudoctor.lab.jobs import _jobkit as protocol
    protocol.log("warming up")
    for step in (1, 2, 3):
        protocol.progress(step=step, elapsed=step * 0.01)
    print("a library talking on stdout", flush=True)
    protocol.result(status="ok", steps=3)
""")


def record(runner: JobRunner) -> list[tuple[str, object]]:
    seen: list[tuple[str, object]] = []
    runner.started.connect(lambda: seen.append(("started", None)))
    runner.progress.connect(lambda d: seen.append(("progress", d["step"])))
    runner.log.connect(lambda t: seen.append(("log", t)))
    runner.result.connect(lambda d: seen.append(("result", d["status"])))
    runner.error.connect(lambda d: seen.append(("error", d["message"])))
    runner.finished.connect(lambda o: seen.append(("finished", o.status)))
    return seen


def test_signals_arrive_in_order_on_the_gui_thread(qtbot):
    runner = JobRunner()
    seen = record(runner)
    on_gui_thread = []
    runner.progress.connect(lambda d: on_gui_thread.append(QThread.currentThread() == qtbot_app_thread()))
    with qtbot.waitSignal(runner.finished, timeout=20_000) as blocker:
        runner.start_argv([sys.executable, "-c", CHATTY], job="chatty")
    assert seen == [("started", None), ("log", "warming up"), ("progress", 1), ("progress", 2), ("progress", 3),
                    ("log", "a library talking on stdout"), ("result", "ok"), ("finished", "ok")]
    assert on_gui_thread == [True, True, True]
    out = blocker.args[0]
    assert out is runner.outcome and out.returncode == 0 and [p["step"] for p in out.progress] == [1, 2, 3]
    assert not runner.is_running()


def qtbot_app_thread() -> QThread:
    return QApplication.instance().thread()


def test_cancel_stops_the_job_and_its_setsid_grandchild_within_a_second(qtbot):
    # The staged stop is designed to take under a second (ask, then SIGTERM, then SIGKILL); how long it
    # takes on a busy machine is not asserted (the wait below only bounds a hang).
    assert ASK_WAIT_S + TERM_WAIT_S < 1.0
    runner = JobRunner()
    with qtbot.waitSignal(runner.progress, timeout=20_000) as blocker:
        runner.start_argv(forker("hang", "typed"), job="hang")
    grandchild = blocker.args[0]["grandchild"]
    with qtbot.waitSignal(runner.finished, timeout=60_000) as blocker:
        runner.cancel()
    out = blocker.args[0]
    assert out.status == "cancelled" and out.progress and not runner.is_running()
    assert_gone(grandchild)


def test_a_crash_after_a_fork_is_named_in_the_finished_outcome(qtbot):
    runner = JobRunner()
    with qtbot.waitSignal(runner.finished, timeout=20_000) as blocker:
        runner.start_argv(forker("abort", "typed"), job="train")
    out = blocker.args[0]
    assert out.status == "crashed" and out.diagnosis.signal_name == "SIGABRT"
    assert out.message == "the train job was killed by SIGABRT"
    assert_gone(out.progress[0]["grandchild"])


def test_wait_finished_delivers_everything_before_it_returns(qtbot):
    runner = JobRunner()
    seen = record(runner)
    runner.start_argv([sys.executable, "-c", CHATTY], job="chatty")
    assert runner.wait_finished(20_000)
    assert seen[-1] == ("finished", "ok") and ("result", "ok") in seen and not runner.is_running()


def test_kill_ends_a_job_at_once(qtbot):
    runner = JobRunner()
    with qtbot.waitSignal(runner.progress, timeout=20_000) as blocker:
        runner.start_argv(forker("stubborn", "typed"), job="stubborn")
    runner.kill()
    assert runner.wait_finished(3_000)
    assert runner.outcome.returncode == -signal.SIGKILL and runner.outcome.status == "cancelled"
    assert_gone(blocker.args[0]["grandchild"])


def test_a_second_start_while_running_is_refused(qtbot):
    runner = JobRunner()
    with qtbot.waitSignal(runner.progress, timeout=20_000):
        runner.start_argv(forker("hang", "typed"), job="hang")
    with pytest.raises(RuntimeError, match="already running"):
        runner.start_argv([sys.executable, "-c", "pass"])
    with qtbot.waitSignal(runner.finished, timeout=60_000) as blocker:
        runner.cancel()
    assert blocker.args[0].status == "cancelled"
