"""What every lab job's result shares: the interference record, what the parent knows, the common result.

:mod:`cpudoctor.lab.results` reads each job's outcome into a typed result built
on :class:`LabResult`; the roofline's reader (:mod:`cpudoctor.lab.roofline`)
builds on it too, so both import this module and neither imports the other's
reader back.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from cpudoctor.lab import verdicts as words
from cpudoctor.lab.native import NativeSupport
from cpudoctor.lab.peak import MachinePeak
from cpudoctor.model import BenchRun, ThreadRecommendation

QUIET_LIMIT = 0.10      # above this share of the CPUs taken by other programs a figure is not trusted


@dataclass
class Interference:
    """The share of the measured CPUs that other programs (``other``) and other VMs (``steal``) took."""

    other_share: float = 0.0
    steal_share: float = 0.0

    @property
    def share(self) -> float:
        return self.other_share + self.steal_share

    def quiet(self, limit: float = QUIET_LIMIT) -> bool:
        return self.share <= limit

    @classmethod
    def read(cls, data: dict[str, Any] | None) -> "Interference | None":
        if not isinstance(data, dict) or data.get("other_share") is None:
            return None
        return cls(float(data.get("other_share") or 0), float(data.get("steal_share") or 0))

    @classmethod
    def worst(cls, records: list[dict[str, Any] | None]) -> "Interference | None":
        found = [x for x in (cls.read(r) for r in records) if x is not None]
        return max(found, key=lambda x: x.share) if found else None


@dataclass
class Context:
    """What the parent knows that a child job cannot: the CPU's native paths and the peak."""

    native: NativeSupport | None = None
    peak: MachinePeak | None = None
    started_at: str | None = None
    quiet_limit: float = QUIET_LIMIT
    flags: list[str] | None = None          # the CPU's flags (/proc/cpuinfo): what the kernels are compared with
    machine: dict[str, Any] = field(default_factory=dict)   # L3 size, NUMA nodes, buffer size (gemm, roofline)


@dataclass
class LabResult:
    """Common to every job: how it ended, with which settings, and how quiet the machine was."""

    kind: str
    status: str = "ok"                      # ok | cancelled | crashed | error
    message: str = ""                       # the runner's words for how it ended
    settings: dict[str, Any] = field(default_factory=dict)
    started_at: str | None = None
    interference: Interference | None = None
    quiet_limit: float = QUIET_LIMIT
    has_result: bool = True                 # False: the child died before its result; progress only
    kernels: list[dict[str, Any]] = field(default_factory=list)   # {library, primitive, isa, share, ...}
    kernel_check: dict[str, Any] | None = None                    # which ran below the CPU or emulated, and why

    @property
    def quiet(self) -> bool | None:
        return None if self.interference is None else self.interference.quiet(self.quiet_limit)

    def caveats(self) -> list[str]:
        """Why a figure may not hold: partial, or measured on a busy machine."""
        out = []
        if self.status != "ok":
            out.append(self.message)
        if self.interference is not None and not self.interference.quiet(self.quiet_limit):
            out.append(words.busy_caveat(self.interference.share))
        return [c for c in out if c]

    def metrics(self) -> dict[str, Any]:
        raise NotImplementedError

    def bench_run(self) -> BenchRun:
        metrics = {k: v for k, v in self.metrics().items() if v is not None}
        if self.interference is not None:
            metrics["other_share"] = round(self.interference.share, 4)
            metrics["quiet"] = self.interference.quiet(self.quiet_limit)
        if self.kernels:
            metrics["kernels"] = self.kernels
            if self.kernel_check is not None:
                metrics["kernel_check"] = self.kernel_check
        return BenchRun(kind=self.kind, settings=dict(self.settings), metrics=metrics, status=self.status,
                        started_at=self.started_at, note="; ".join(self.caveats()))

    def recommendation(self) -> ThreadRecommendation | None:
        return None

    def json_extra(self) -> dict[str, Any]:
        """What the parent adds to the child's raw result in ``bench --json``: the kernels, judged."""
        return {"kernels": self.kernels, "kernel_check": self.kernel_check} if self.kernels else {}
