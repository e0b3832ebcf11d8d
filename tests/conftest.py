"""Shared fixtures: the real-machine corpus and its ground truth."""

from __future__ import annotations

import contextlib
import gc
import json
import os
import signal
import sys
from pathlib import Path

import pytest

# Headless like `make test`, also for a bare `pytest` in an SSH session without $DISPLAY (Qt would
# abort the whole run: "could not connect to display"). A platform the user chose is kept.
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

REPO = Path(__file__).resolve().parents[1]

# The software facts describe one Python environment: by default the one the user most likely trains
# in, which differs from machine to machine. The suite describes its own interpreter's (child processes
# inherit this); tests about choosing an environment set up their own.
os.environ["CPUDOCTOR_PYTHON"] = sys.executable
# `doctor` and `report` write the fixes' commands for the user's login shell ($SHELL): the suite reads
# bash, whatever shell runs it; tests about the choice set $SHELL themselves.
os.environ["SHELL"] = "/bin/bash"
CORPUS = Path(os.environ.get("CPUDOCTOR_CORPUS", REPO.parent / "shared" / "corpus"))


def _manifest() -> dict:
    path = CORPUS / "manifest.json"
    if not path.is_file():
        return {"machines": {}, "summary": {}}
    return json.loads(path.read_text())


MANIFEST = _manifest()
MACHINES = sorted(MANIFEST["machines"])
HWLOC_MACHINES = [m for m in MACHINES if m.startswith("hwloc-")]


@pytest.fixture(scope="session")
def corpus() -> Path:
    if not CORPUS.is_dir():
        pytest.skip(f"corpus not found at {CORPUS} (set CPUDOCTOR_CORPUS)")
    return CORPUS


@pytest.fixture(scope="session")
def manifest() -> dict:
    if not MANIFEST["machines"]:
        pytest.skip(f"corpus manifest not found under {CORPUS}")
    return MANIFEST


def machine_root(name: str) -> Path:
    """A corpus machine's tree; skips the calling test when the corpus is not beside the repo."""
    if not (CORPUS / "machines").is_dir():
        pytest.skip(f"corpus not found at {CORPUS} (set CPUDOCTOR_CORPUS)")
    return CORPUS / "machines" / name


def probe_tree(root: Path | str = Path("/"), software: bool = True):
    """The report of ``root`` as the probe stages of the pipeline build it: no child processes, no advisor."""
    from cpudoctor.pipeline import Source, build_report

    return build_report(Source.tree(root), children=False, software=software, findings=False)


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    """Exit code, stdout, stderr of the real entry point, as the console script runs it
    (argparse errors leave through SystemExit(2))."""
    from cpudoctor.cli import main

    try:
        code = main(list(argv))
    except SystemExit as exc:
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err


@contextlib.contextmanager
def alarm(seconds: float, error: type[BaseException] = TimeoutError, words: str = "no answer after"):
    """Raise ``error`` in the main thread after ``seconds`` (it interrupts a blocking open of a FIFO too): a test
    fails instead of hanging; never a timing assertion on a good run."""
    def fire(*_):
        raise error(f"{words} {seconds:g} s")

    old = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def wait_for(condition, timeout: float = 30.0, what: str = "the condition", interval: float = 0.01):
    """Poll ``condition()`` until it returns something truthy (and return that), or fail after ``timeout``
    seconds saying ``what`` never happened. Tests wait for what they need, never for a fixed time: a
    loaded machine only makes them slower, not red."""
    import time

    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"{what} did not happen within {timeout:g} s")
        time.sleep(interval)


# Python's cyclic garbage collector runs in whichever thread allocates when its threshold is passed. A window's
# worker thread (a report's preview rendering) collected a Qt menu a GUI test had left, while the main thread was
# deleting Qt objects too: PySide 6.11 deadlocked the two (one held Qt's object lock and waited for the GIL, the
# other held the GIL and waited for the lock) and a test worker hung for good. The window itself collects on its
# main thread only (gui/app.py, pyqtgraph's GarbageCollector); the suite does the same: no automatic collection,
# and between tests the collection Python would have made, on the main thread.
_GC_THRESHOLDS = gc.get_threshold()
gc.disable()


@pytest.fixture(autouse=True)
def _collect_garbage_on_the_main_thread():
    yield
    if gc.isenabled():                           # a test switched it back on: not ours to keep off
        return
    young, middle, old = gc.get_count()
    if young > _GC_THRESHOLDS[0]:
        gc.collect(0)
        if middle > _GC_THRESHOLDS[1]:
            gc.collect(1)
            if old > _GC_THRESHOLDS[2]:
                gc.collect(2)
