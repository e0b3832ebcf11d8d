"""How much of the CPUs a measurement used went to other programs, and to the hypervisor (steal).

A benchmark on a shared machine measures the machine's load as much as the
setting under test. So every measured window records, for the CPUs the job
may run on: the busy time the kernel counted on them (``/proc/stat``), minus
the CPU time of this job's own process tree (``/proc/self/stat`` and its
children), which leaves what other programs took; and the steal time, which
a VM's hypervisor gave to other guests. Both as a share of the capacity
(wall time x CPUs).

Linux only; elsewhere :meth:`CpuMeter.start` returns None and the figures are
unknown. Standard library only, Python 3.8+ (this runs inside the job).
"""

from __future__ import annotations

import os
import time
from typing import Dict, List, Optional, Tuple

try:
    _TICK = float(os.sysconf("SC_CLK_TCK"))
except (AttributeError, ValueError, OSError):   # not POSIX
    _TICK = 100.0


def _cpu_ticks(cpus: List[int], stat_text: str) -> Optional[Tuple[float, float]]:
    """(busy, steal) clock ticks summed over ``cpus`` from /proc/stat text; None when a CPU is missing."""
    wanted = {f"cpu{c}" for c in cpus}
    busy = steal = 0.0
    found = 0
    for line in stat_text.splitlines():
        parts = line.split()
        if not parts or parts[0] not in wanted:
            continue
        values = [float(v) for v in parts[1:]]
        values += [0.0] * (8 - len(values))
        user, nice, system, _idle, _iowait, irq, softirq, st = values[:8]
        # guest time is already inside user/nice, so it is not added again
        busy += user + nice + system + irq + softirq
        steal += st
        found += 1
    return (busy, steal) if found == len(wanted) else None


def _process_ticks(pid: str) -> float:
    """utime + stime (+ waited-for children) of one process, in clock ticks; 0 when it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            text = fh.read()
    except OSError:
        return 0.0
    # the command name may hold spaces and parentheses: the fields start after the last ')'
    fields = text[text.rfind(")") + 2:].split()
    try:
        return sum(float(fields[i]) for i in (11, 12, 13, 14))   # utime stime cutime cstime
    except (IndexError, ValueError):
        return 0.0


def _children(pid: str) -> List[str]:
    kids: List[str] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return kids
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/children") as fh:
                kids += fh.read().split()
        except OSError:
            continue
    return kids


def tree_ticks(pid: Optional[int] = None) -> float:
    """CPU time of a process and all its live descendants, in clock ticks."""
    todo = [str(pid or os.getpid())]
    seen = set()
    total = 0.0
    while todo:
        p = todo.pop()
        if p in seen:
            continue
        seen.add(p)
        total += _process_ticks(p)
        todo += _children(p)
    return total


def _read_stat() -> Optional[str]:
    try:
        with open("/proc/stat") as fh:
            return fh.read()
    except OSError:
        return None


class Snapshot:
    __slots__ = ("wall", "busy", "steal", "own")

    def __init__(self, wall: float, busy: float, steal: float, own: float):
        self.wall, self.busy, self.steal, self.own = wall, busy, steal, own


class CpuMeter:
    """Interference on ``cpus`` (default: the CPUs this process may run on) between two snapshots."""

    def __init__(self, cpus: Optional[List[int]] = None, pid: Optional[int] = None):
        if cpus is None:
            cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
        self.cpus = list(cpus)
        self.pid = pid

    def snapshot(self) -> Optional[Snapshot]:
        text = _read_stat() if self.cpus else None
        ticks = _cpu_ticks(self.cpus, text) if text else None
        if ticks is None:
            return None
        return Snapshot(time.monotonic(), ticks[0], ticks[1], tree_ticks(self.pid))

    def start(self) -> Optional[Snapshot]:
        return self.snapshot()

    def since(self, start: Optional[Snapshot]) -> Optional[Dict[str, object]]:
        """The interference since ``start``: shares of the capacity and seconds; None when unknown."""
        end = self.snapshot()
        if start is None or end is None:
            return None
        return interference(start, end, self.cpus)


def interference(start: Snapshot, end: Snapshot, cpus: List[int]) -> Dict[str, object]:
    wall = max(end.wall - start.wall, 1e-9)
    capacity = wall * len(cpus)
    busy = max(0.0, end.busy - start.busy) / _TICK
    steal = max(0.0, end.steal - start.steal) / _TICK
    own = max(0.0, end.own - start.own) / _TICK
    other = max(0.0, busy - own)
    return {
        "cpus": list(cpus),
        "wall_s": round(wall, 4),
        "own_cpu_s": round(own, 3),
        "other_cpu_s": round(other, 3),
        "steal_s": round(steal, 3),
        # Tick counting is coarse (10 ms): a share is never reported above 1.
        "other_share": round(min(1.0, other / capacity), 4),
        "steal_share": round(min(1.0, steal / capacity), 4),
    }
