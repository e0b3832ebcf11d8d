"""Run a callable off the GUI thread and report through signals (superqt's worker pattern).

``Worker(fn, *args)`` is a QRunnable for the global QThreadPool. It emits
``started``, then ``result(value)`` or ``error(exception)``, then ``finished``,
always in that order; an exception in ``fn`` becomes an ``error`` signal, never a
crash of the thread. Signals are queued to the receiver's thread, so slots run
on the GUI thread. A function that reports along the way (the report
pipeline's stages) gets a callback under ``progress_arg`` that emits
``progress(value)``: always on the worker's own signals object, which lives
until the run ends, so a receiver that is gone by then is never touched.
"""

from __future__ import annotations

import logging
import traceback
from typing import Any, Callable

from PySide6.QtCore import QObject, QRunnable, QThreadPool, Signal

log = logging.getLogger(__name__)

# Workers started by run_in_thread stay referenced here until they finish, so a
# caller that drops its reference cannot have the signals object collected mid-run.
_LIVE: set["Worker"] = set()


class WorkerSignals(QObject):
    started = Signal()
    result = Signal(object)
    progress = Signal(object)       # whatever ``fn`` reported through its progress callback
    error = Signal(object)          # the exception, with ``.traceback_text`` set
    finished = Signal()


class Worker(QRunnable):
    """One call of ``fn(*args, **kwargs)`` on a pool thread."""

    def __init__(self, fn: Callable[..., Any], *args: Any, progress_arg: str | None = None, **kwargs: Any):
        super().__init__()
        self.fn = fn
        self.args = args
        self.kwargs = kwargs
        self.signals = WorkerSignals()
        if progress_arg is not None:
            self.kwargs[progress_arg] = self.signals.progress.emit
        # the pool must not delete us while Python still holds the signals object
        self.setAutoDelete(False)

    # convenient aliases, so callers write worker.result.connect(...)
    @property
    def started(self):
        return self.signals.started

    @property
    def result(self):
        return self.signals.result

    @property
    def progress(self):
        return self.signals.progress

    @property
    def error(self):
        return self.signals.error

    @property
    def finished(self):
        return self.signals.finished

    def run(self) -> None:  # runs on a pool thread
        self._emit("started")
        try:
            value = self.fn(*self.args, **self.kwargs)
        except Exception as exc:  # noqa: BLE001 - every failure becomes an error signal
            exc.traceback_text = traceback.format_exc()  # type: ignore[attr-defined]
            log.debug("worker %s failed:\n%s", getattr(self.fn, "__name__", self.fn), exc.traceback_text)
            self._emit("error", exc)
        else:
            self._emit("result", value)
        finally:
            self._emit("finished")

    def _emit(self, name: str, *args: Any) -> None:
        """Emit, unless the app quit while ``fn`` ran and deleted the signals object: then nobody is
        listening, and the result is dropped instead of printing a traceback on the way out."""
        try:
            getattr(self.signals, name).emit(*args)
        except RuntimeError as exc:                  # "Signal source has been deleted"
            log.debug("worker %s: %s signal dropped (%s)", getattr(self.fn, "__name__", self.fn), name, exc)

    def start(self, pool: QThreadPool | None = None) -> "Worker":
        (pool or shared_pool()).start(self)
        return self


# The window's background work mostly waits (on child processes, files, a listing of interpreters), so
# it is not bounded by the CPU count: with Qt's default of one thread per CPU, a 2-CPU machine queued
# the user's "Open report" behind the environment listing and this machine's first report.
MIN_POOL_THREADS = 8


def shared_pool() -> QThreadPool:
    """Qt's global pool, with room for at least MIN_POOL_THREADS waiting jobs at once."""
    pool = QThreadPool.globalInstance()
    if pool.maxThreadCount() < MIN_POOL_THREADS:
        pool.setMaxThreadCount(MIN_POOL_THREADS)
    return pool


def run_in_thread(fn: Callable[..., Any], *args: Any,
                  on_result: Callable[[Any], None] | None = None,
                  on_error: Callable[[BaseException], None] | None = None,
                  on_finished: Callable[[], None] | None = None,
                  on_progress: Callable[[Any], None] | None = None,
                  progress_arg: str | None = None,
                  pool: QThreadPool | None = None, **kwargs: Any) -> Worker:
    """Start ``fn`` on the pool with the given slots connected; returns the worker.

    ``progress_arg``: the name of ``fn``'s callback argument for progress reports,
    which arrive at ``on_progress`` on the GUI thread.
    """
    worker = Worker(fn, *args, progress_arg=progress_arg, **kwargs)
    _LIVE.add(worker)
    worker.finished.connect(lambda: _LIVE.discard(worker))
    if on_progress is not None:
        worker.progress.connect(on_progress)
    if on_result is not None:
        worker.result.connect(on_result)
    if on_error is not None:
        worker.error.connect(on_error)
    if on_finished is not None:
        worker.finished.connect(on_finished)
    return worker.start(pool)
