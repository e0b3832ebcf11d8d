"""What the fit planner and its strategies share: the job's shape, the knowledge file, and the step's memory as a
function of the batch size (:class:`StepLine`)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from cpudoctor.knowledge import TRAINING_MEMORY
from cpudoctor.model.fit import StepPoint

MAX_BATCH = 1 << 20
WORKSPACE = 1.5      # a step's rise per sample over the saved tensors' (ResNet-18: 4.2-5.1 MiB over 3.5)


@dataclass
class JobShape:
    """What the job does besides the model: its batch size, DataLoader workers and data held in memory."""

    batch: int
    workers: int = 0
    dataset_bytes: int | None = None          # the dataset held in the trainer's memory
    worker_bytes: int | None = None           # each worker's own memory (measured in a run; else typical)
    workers_copy_dataset: bool = False        # each worker holds its own copy (Python objects, spawn)


def knowledge() -> dict:
    return TRAINING_MEMORY.data


def optimizer_states(name: str | None) -> int | None:
    entry = knowledge()["optimizers"].get((name or "").lower())
    return None if entry is None else int(entry["states"])


# --- the step's memory as a function of the batch size --------------------------------------------------------


class StepLine:
    """The peak a step adds at a batch size, from measured points: measured, interpolated or on a straight line."""

    def __init__(self, points: list[StepPoint], per_sample: float | None = None):
        """``per_sample``: the rise per sample to extend a single point with (the saved tensors' count with the
        workspace's usual share), since one point cannot tell the step's fixed part from its per-sample part."""
        self.per_sample = per_sample
        by_batch: dict[int, StepPoint] = {}
        for p in points:
            if p.peak_delta_bytes is not None and p.peak_delta_bytes >= 0:
                by_batch[p.batch] = p
        self.points = [by_batch[b] for b in sorted(by_batch)]

    def __bool__(self) -> bool:
        return bool(self.points)

    def _pair(self, batch: int) -> tuple[StepPoint, StepPoint] | None:
        pts = self.points
        if len(pts) < 2:
            return None
        for a, b in zip(pts, pts[1:]):
            if a.batch <= batch <= b.batch:
                return a, b
        return (pts[-2], pts[-1]) if batch > pts[-1].batch else (pts[0], pts[1])

    def delta(self, batch: int) -> int | None:
        if not self.points:
            return None
        exact = next((p for p in self.points if p.batch == batch), None)
        if exact is not None:
            return exact.peak_delta_bytes
        pair = self._pair(batch)
        if pair is None:
            p = self.points[0]
            if self.per_sample is not None:
                return max(0, int(p.peak_delta_bytes + self.per_sample * (batch - p.batch)))
            return int(p.peak_delta_bytes * batch / p.batch)
        a, b = pair
        slope = (b.peak_delta_bytes - a.peak_delta_bytes) / (b.batch - a.batch)
        return max(0, int(b.peak_delta_bytes + max(0.0, slope) * (batch - b.batch)))

    def slope(self) -> float | None:
        """Bytes per sample at the largest batches measured."""
        if len(self.points) < 2:
            return self.per_sample
        a, b = self.points[-2], self.points[-1]
        return max(0.0, (b.peak_delta_bytes - a.peak_delta_bytes) / (b.batch - a.batch))

    def largest(self, room: int) -> int | None:
        """The largest batch whose step adds at most ``room`` (0 when not even one sample does; None: unknown)."""
        if not self.points:
            return None
        if self.delta(1) is not None and self.delta(1) > room:
            return 0
        lo, hi = 1, MAX_BATCH
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if self.delta(mid) <= room:
                lo = mid
            else:
                hi = mid - 1
        return lo

    def seconds_per_sample(self, batch: int) -> float | None:
        """Step time per sample at the measured batch nearest to ``batch`` (None: no times)."""
        timed = [p for p in self.points if p.step_s]
        if not timed:
            return None
        p = min(timed, key=lambda p: abs(math.log(p.batch / batch)))
        return p.step_s / p.batch




def step_line(points: list[StepPoint], saved_per_sample: int | None) -> StepLine:
    """The line through measured points, a single one extended by the saved tensors' count."""
    return StepLine(points, saved_per_sample * WORKSPACE if saved_per_sample else None)
