"""How a job ``cpudoctor run`` started died, when it died of a signal: the signal, and where in Python.

A job that dies of SIGILL, SIGSEGV or SIGBUS leaves an exit status and, by
default, nothing else: no Python traceback. ``run`` therefore switches Python's
fault handler on for the job (``PYTHONFAULTHANDLER=1``, where the job does not
set it): on such a signal the interpreter prints the Python stack of every
thread to stderr before it dies. The job's stderr goes on to the user as it
comes; :class:`FaultTap` also keeps that report for CPU Doctor. From it,
:func:`job_crash` takes the crashing thread's frames and the top-level module
whose code ran (``import cv2`` that dies inside NumPy's code names numpy, as the
import checks do: :func:`cpudoctor.probes.software.importcheck.crashed_in`) and
reads that package's installed distribution and version beside the frame's
file. Nothing here judges; the evidence rules do (EVID023).
"""

from __future__ import annotations

import signal
from pathlib import Path

from cpudoctor.model.evidence import JobCrash
from cpudoctor.probes.process.procfs import redact_paths
from cpudoctor.probes.software.importcheck import installed_frame

FAULT_START = "Fatal Python error:"
FAULT_END = "Extension modules:"      # Python 3.10+ ends its report with the extension modules loaded
MAX_FAULT_LINES = 120                 # kept of one report (every thread's stack): the crashing thread is in it
MAX_FRAMES = 24                       # frames kept of the crashing thread
# Signals a process dies of by itself (its code or the kernel), as opposed to one CPU Doctor sends to stop it.
CRASH_SIGNALS = ("SIGILL", "SIGSEGV", "SIGBUS", "SIGFPE", "SIGABRT", "SIGKILL", "SIGSYS", "SIGTRAP", "SIGXCPU")


class FaultTap:
    """A stream tap: True for the lines of Python's fault report (from "Fatal Python error:" to its end).

    Stateful (the report spans lines): one per stream, called in order from the stream's reader thread.
    """

    def __init__(self) -> None:
        self._left = 0

    def __call__(self, line: str) -> bool:
        if line.startswith(FAULT_START):
            self._left = MAX_FAULT_LINES
        if self._left <= 0:
            return False
        self._left -= 1
        if line.startswith(FAULT_END):
            self._left = 0
        return True


def could_start_fault(head: bytes) -> bool:
    """The first bytes of a line may still become the report's first line (wait for the rest of it)."""
    start = FAULT_START.encode()
    return start.startswith(head) or head.startswith(start)


def fault_frames(lines: list[str]) -> list[str]:
    """The crashing thread's frames (innermost first) in the newest fault report among ``lines``."""
    start = max((k for k, line in enumerate(lines) if line.startswith(FAULT_START)), default=None)
    if start is None:
        return []
    report = [line.rstrip("\r\n") for line in lines[start:start + MAX_FAULT_LINES]]
    # "Current thread 0x... (most recent call first):" marks the thread that crashed; a one-thread report
    # may say "Stack (most recent call first):" instead
    head = next((k for k, line in enumerate(report)
                 if line.startswith(("Current thread", "Stack (most recent call first)"))), None)
    if head is None:
        return []
    frames = []
    for line in report[head + 1:]:
        if not line.strip().startswith("File "):
            break
        frames.append(line.strip())
    return frames[:MAX_FRAMES]


def installed_distribution(module: str, site: Path) -> tuple[str | None, str | None]:
    """(distribution name, version) of the package that installs ``module`` into ``site``, from its metadata."""
    from importlib import metadata

    try:
        dists = list(metadata.distributions(path=[str(site)]))
    except Exception:  # noqa: BLE001 - a damaged site-packages folder: the package stays unnamed
        return None, None
    for dist in dists:
        try:
            tops = (dist.read_text("top_level.txt") or "").split()
            if not tops:
                tops = sorted({Path(str(f)).parts[0].split(".")[0] for f in dist.files or [] if Path(str(f)).parts})
            if module in tops:
                return dist.metadata["Name"], dist.version
        except Exception:  # noqa: BLE001 - one damaged distribution does not hide the others
            continue
    return None, None


def job_crash(returncode: int | None, kept_lines: list[str], after_s: float) -> JobCrash | None:
    """The crash of a job that died of a signal of its own (``returncode`` as Popen gives it: -4 for SIGILL), or
    exited with 128+n for such a signal (a shell in between says so); None for an exit."""
    if returncode is None or returncode == 0:
        return None
    via_shell = returncode > 0
    signum = -returncode if returncode < 0 else returncode - 128
    try:
        name = signal.Signals(signum).name
    except ValueError:
        return None if via_shell else JobCrash(signal=f"signal {signum}", after_s=after_s)
    description = signal.strsignal(signum) or ""
    if via_shell and name not in CRASH_SIGNALS:
        return None                                   # exit 130 from a shell is its Ctrl-C, not a crash
    frames = [redact_paths(line) for line in fault_frames(kept_lines)]
    module, site = installed_frame("\n".join(fault_frames(kept_lines)))
    dist, version = installed_distribution(module, Path(site)) if module and site else (None, None)
    return JobCrash(signal=name, description=description, via_shell=via_shell, after_s=after_s, frames=frames, module=module,
                    distribution=dist, version=version)
