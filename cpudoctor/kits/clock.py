"""How long this process has run, for time budgets that count their own start-up.

``cpudoctor bench sweep --budget 15`` promises 15 s of the user's time, start-up included, so the budget
counts from the command's start, not from when the sweep began measuring. The lab's jobs have the same
function in ``lab/jobs/_jobkit.py``: they run in the user's interpreter and import only the standard library.
"""

from __future__ import annotations

import os
import time

_IMPORTED = time.monotonic()     # the fallback start (a few tens of milliseconds after the process began)


def process_age() -> float:
    """Seconds since this process started: Linux's start time against CLOCK_BOOTTIME (tick-exact), else
    psutil's create time (whole seconds of boot-time rounding on some systems), else since this module loaded."""
    try:
        with open("/proc/self/stat") as fh:
            text = fh.read()
        start_ticks = float(text[text.rfind(")") + 2:].split()[19])     # field 22, starttime, since boot
        age = time.clock_gettime(time.CLOCK_BOOTTIME) - start_ticks / os.sysconf("SC_CLK_TCK")
        if 0 <= age < 86400 * 365:
            return age
    except (OSError, ValueError, IndexError, AttributeError):
        pass
    try:
        import psutil

        age = time.time() - psutil.Process().create_time()
        if 0 <= age < 86400 * 365:
            return age
    except Exception:  # noqa: BLE001 - no psutil or no figure: since this module loaded
        pass
    return time.monotonic() - _IMPORTED


def process_started() -> float:
    """When this process started, on the monotonic clock (``time.monotonic()`` minus its age)."""
    return time.monotonic() - process_age()
