"""What one minor page fault costs on this machine, measured: to count page-fault time the stacks cannot see.

A first touch of fresh memory faults inside whatever code touched it (a fill or
copy kernel): a stack sample cannot tell the fault from the kernel's own work.
The kernel counts each thread's minor faults (``stat`` field 10), so the time is
the count times the cost of one fault, measured here once: map fresh anonymous
memory and touch one byte per page, best of three.
"""

from __future__ import annotations

import mmap
import time
from functools import lru_cache

PAGES = 4096                 # 16 MiB of 4 KiB pages: a few milliseconds


@lru_cache(maxsize=1)
def fault_cost_s() -> float | None:
    """Seconds one minor fault (first touch of a fresh page) takes here, or None when it cannot be measured."""
    page = mmap.PAGESIZE
    best = None
    try:
        for _ in range(3):
            with mmap.mmap(-1, PAGES * page, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS) as m:
                t0 = time.perf_counter()
                for i in range(0, PAGES * page, page):
                    m[i] = 1                  # first touch: a fault per page
                t1 = time.perf_counter()
                for i in range(0, PAGES * page, page):
                    m[i] = 2                  # the same loop on mapped pages: the loop's own cost
                t2 = time.perf_counter()
            cost = max(0.0, (t1 - t0) - (t2 - t1))
            best = cost if best is None else min(best, cost)
    except (OSError, ValueError, AttributeError):
        return None
    return best / PAGES if best else None
