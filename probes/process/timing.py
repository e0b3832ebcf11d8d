"""Sample where a process tree's time goes over a window: stacks (py-spy) and thread states (/proc) together.

Used by ``cpudoctor inspect PID`` (a window of N seconds on a running job) and
``cpudoctor run`` (the whole life of a job it started). When py-spy may not
attach, the thread states are still sampled and the breakdown records why its
stacks are missing (the sampler's own words, and the facts that decide access:
:func:`cpudoctor.probes.process.attach.access_facts`).
"""

from __future__ import annotations

import os
from pathlib import Path

from cpudoctor.model.breakdown import TimeBreakdown
from cpudoctor.probes.process.attach import access_facts, may_trace
from cpudoctor.probes.process.breakdown import build_breakdown
from cpudoctor.probes.process.stacks import DEFAULT_RATE, StackSampler
from cpudoctor.probes.process.threadstates import DEFAULT_RATE as STATE_RATE, TreeSampler
from cpudoctor.kits.rooted import is_live_root


class TimeSampler:
    """:meth:`start` both samplers, :meth:`stop` them and get the :class:`TimeBreakdown`."""

    def __init__(self, pid: int, root: Path = Path("/"), rate: int = DEFAULT_RATE, state_rate: float = STATE_RATE,
                 duration: float | None = None, stacks: bool = True, observer: str = "inspect"):
        self.pid = pid
        self.root = Path(root)
        self.observer = observer
        self.stacks = StackSampler(pid, rate=rate, duration=duration) if stacks and is_live_root(root) else None
        self.states = TreeSampler(pid, root=self.root, rate=state_rate, observers=self._observers)
        self._refused = False

    def _observers(self) -> list[int]:
        pids = [os.getpid()]
        sampler = self.stacks.sampler_pid if self.stacks is not None else None
        if sampler is not None:
            pids.append(sampler)
        return pids

    def start(self) -> None:
        self._refused = self.stacks is not None and may_trace(self.pid) is False
        if self.stacks is not None and not self._refused:
            self.stacks.start()
        self.states.start()

    def stop(self) -> TimeBreakdown:
        states = self.states.stop()
        from cpudoctor.probes.process.stacks import StackRecord

        if self._refused:
            record = StackRecord(error="permission denied", error_kind="denied")
        elif self.stacks is not None:
            record = self.stacks.stop()
        else:
            record = StackRecord(error="stacks are not sampled from a captured /proc tree", error_kind="failed")
        bd = build_breakdown(record, states)
        bd.observer = self.observer
        if record.error_kind == "denied":
            bd.stack_access = access_facts(self.pid, self.root)
        return bd
