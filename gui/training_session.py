"""The Training page's logic without its widgets: what a job gets, what its outcome means, which setting is best.

The page shows; this helper decides. Every outcome is read once into a typed
result (:func:`cpudoctor.lab.results.read_outcome`), the same reading the CLI
and ``bench --into`` use, so the page, the terminal and the exports agree. The
live series keep exactly the figures the jobs define (no smoothing of our own),
so a plot's last point is the runs table's number.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cpudoctor.lab.native import native_support
from cpudoctor.lab.peak import MachinePeak
from cpudoctor.lab.results import Context, LabResult, read_outcome
from cpudoctor.lab.roofline import available_memory, machine_args
from cpudoctor.lab.session import job_args
from cpudoctor.model import Report, ThreadRecommendation, utc_now_iso

LIVE_KEYS = ("loss", "accuracy", "samples_per_s", "reference_samples_per_s")


@dataclass
class LiveSeries:
    """A training run's progress lines as plot series (NaN where a figure is not known yet)."""

    steps: list[float] = field(default_factory=list)
    values: dict[str, list[float]] = field(default_factory=lambda: {k: [] for k in LIVE_KEYS})

    def reset(self) -> None:
        self.steps = []
        self.values = {k: [] for k in LIVE_KEYS}

    def add(self, data: dict[str, Any]) -> bool:
        """Add one progress line; False when it is not a training step."""
        step = data.get("step")
        if not isinstance(step, (int, float)):
            return False
        self.steps.append(float(step))
        for k in LIVE_KEYS:
            v = data.get(k)
            self.values[k].append(float(v) if isinstance(v, (int, float)) else math.nan)
        return True

    def top(self, *keys: str) -> float | None:
        """The largest known value of ``keys`` (None when there is none)."""
        values = [v for k in keys for v in self.values[k] if not math.isnan(v)]
        return max(values) if values else None

    def has(self, key: str) -> bool:
        return any(not math.isnan(v) for v in self.values[key])

    def x_range(self) -> tuple[float, float]:
        """Steps from 0 to the last one (at least 10): never negative, never "0.2 steps"."""
        return 0.0, max(10.0, self.steps[-1] if self.steps else 0.0)


@dataclass
class SweepSeries:
    """The latest figure of each sweep variant, grouped as the plot draws them."""

    latest: dict[str, dict[str, Any]] = field(default_factory=dict)

    def add(self, point: dict[str, Any]) -> bool:
        if not point.get("variant") or point.get("phase") not in (None, "segment"):
            return False
        self.latest[point["variant"]] = point
        return True

    def group(self, name: str) -> list[tuple[float, float, float, float]]:
        """(threads, median, lo, hi) of the variants in ``name`` (default, threads, pinning), by threads."""
        out = []
        for p in self.latest.values():
            threads = p.get("threads_used") or p.get("threads")
            sps = p.get("samples_per_s")
            if p.get("group") != name or not threads or not sps:
                continue
            out.append((float(threads), float(sps), float(p.get("samples_per_s_lo") or sps),
                        float(p.get("samples_per_s_hi") or sps)))
        return sorted(out)

    def thread_counts(self) -> list[int]:
        return sorted({int(x) for g in ("default", "threads", "pinning") for x, *_ in self.group(g)})


class LabSession:
    """The state of the lab on the page: the running job, the finished results, the best measured setting."""

    def __init__(self) -> None:
        self.job: str | None = None
        self.settings: dict[str, Any] = {}
        self.started_at: str | None = None
        self.results: list[LabResult] = []
        self.best: ThreadRecommendation | None = None
        self.live = LiveSeries()
        self.sweep = SweepSeries()
        self._context: Context | None = None

    @staticmethod
    def context(report: Report | None, started_at: str | None = None) -> Context:
        """What the parent knows of the CPU shown (native bf16/int8, its peak); the lab measures this machine."""
        if report is None:
            return Context(started_at=started_at)
        peak = MachinePeak.from_probe(report.cpu, report.topology, root=Path("/"))
        return Context(native=native_support(report.cpu), peak=peak, started_at=started_at,
                       flags=list(report.cpu.flags or []),
                       machine=machine_args(report.topology, available_bytes=available_memory()))

    def begin(self, job: str, settings: dict[str, Any], report: Report | None) -> dict[str, Any]:
        """Start bookkeeping for ``job``; returns the child's arguments (settings plus the parent's facts)."""
        from cpudoctor.model.serde import to_data

        self.job = job
        self.settings = dict(settings)
        self.started_at = utc_now_iso()
        if job == "train":
            self.live.reset()
        if job == "sweep":
            self.sweep = SweepSeries()
        self._context = self.context(report, self.started_at)      # read once per job
        args = job_args(job, settings, self._context)
        if job in ("sweep", "infer") and report is not None and report.topology.online_cpus:
            args["topology"] = to_data(report.topology)
        return args

    def progress(self, data: dict[str, Any]) -> str:
        """File one progress line; returns which view changed ("train", "sweep", or "")."""
        if self.job == "train" and self.live.add(data):
            return "train"
        if self.job == "sweep" and self.sweep.add(data):
            return "sweep"
        return ""

    def finish(self, outcome: Any, report: Report | None, job: str | None = None) -> LabResult:
        """The outcome read once; the best setting updated when this run beats it."""
        job = job or self.job or "train"
        result = read_outcome(job, outcome, self.settings, self._context or self.context(report, self.started_at))
        self.results.append(result)
        if job == "sweep":
            for p in result.points:
                self.sweep.add(p)
        self.job = None
        return result

    def preview(self, outcome: Any, report: Report | None) -> LabResult:
        """The running job's figures so far, read like a finished one (the GEMM table fills in live)."""
        return read_outcome(self.job or "train", outcome, self.settings,
                            self._context or self.context(report, self.started_at))

    def consider(self, result: LabResult) -> bool:
        """Take ``result``'s recommendation as the best when it is one; True when the best changed.

        A conclusive sweep wins; a finished, quiet training run wins when it is
        faster than the best so far for the same model (or the model changed).
        An inconclusive sweep never becomes the best.
        """
        rec = result.recommendation()
        if rec is None:
            return False
        if result.kind == "train" and self.best is not None and self.best.model == rec.model \
                and (rec.samples_per_s or 0) <= (self.best.samples_per_s or 0):
            return False
        self.best = rec
        return True
