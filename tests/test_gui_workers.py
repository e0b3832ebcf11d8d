"""The thread-pool worker: result and error signals, in order, delivered on the GUI thread."""

from __future__ import annotations

import threading

from PySide6.QtCore import QThread

from gui_support import no_qt_leaks  # noqa: F401 - fixture

from cpudoctor.gui.workers import _LIVE, Worker, run_in_thread


def test_result_signal_order_and_threads(qtbot):
    main = QThread.currentThread()
    seen: list = []
    ran_on: list = []

    def work(a, b=0):
        ran_on.append(threading.current_thread() is threading.main_thread())
        return a + b

    worker = Worker(work, 2, b=3)
    worker.started.connect(lambda: seen.append("started"))
    worker.result.connect(lambda v: seen.append(("result", v, QThread.currentThread() is main)))
    worker.finished.connect(lambda: seen.append("finished"))
    with qtbot.waitSignal(worker.finished, timeout=30_000):
        worker.start()
    assert seen == ["started", ("result", 5, True), "finished"]
    assert ran_on == [False]                        # the work itself ran off the GUI thread


def test_exception_becomes_error_signal(qtbot):
    errors: list = []
    results: list = []

    def boom():
        raise ValueError("probe exploded")

    run_in_thread(boom, on_result=results.append, on_error=errors.append)
    qtbot.waitUntil(lambda: bool(errors), timeout=30_000)
    assert results == []
    assert isinstance(errors[0], ValueError) and str(errors[0]) == "probe exploded"
    assert "Traceback" in errors[0].traceback_text and "boom" in errors[0].traceback_text


def test_work_that_outlives_its_signals_ends_quietly(qtbot, capfd):
    """The window closed (the app is quitting) while a probe still ran: when it finishes, its signals
    object is already deleted. Nobody is listening any more; no traceback may reach the terminal."""
    import shiboken6
    from PySide6.QtCore import QThreadPool

    inside, release = threading.Event(), threading.Event()

    def slow_probe():
        inside.set()
        release.wait(60)
        return "late"

    worker = Worker(slow_probe).start()
    assert inside.wait(60)
    shiboken6.delete(worker.signals)            # what teardown does to it at exit
    release.set()
    assert QThreadPool.globalInstance().waitForDone(60_000)
    err = capfd.readouterr().err
    assert "Traceback" not in err and "Signal source has been deleted" not in err, err


def test_waiting_jobs_do_not_queue_a_quick_one_whatever_the_cpu_count(qtbot):
    """Background jobs mostly wait (children, files): with one thread per CPU a 2-CPU machine queued the
    user's "Open report" behind the environment listing. Seven jobs that block must not hold up a quick one."""
    from cpudoctor.gui.workers import MIN_POOL_THREADS

    release = threading.Event()
    waiting = MIN_POOL_THREADS - 1          # more than Qt's default of one thread per CPU on small machines
    blocked = [run_in_thread(release.wait, 60) for _ in range(waiting)]
    try:
        got: list = []
        run_in_thread(lambda: "quick", on_result=got.append)
        qtbot.waitUntil(lambda: got == ["quick"], timeout=10_000)
    finally:
        release.set()
    qtbot.waitUntil(lambda: not any(w in _LIVE for w in blocked), timeout=30_000)
