"""The inference lab's pick, measured again in new processes of its own: what a serving script gets.

The interleaved rounds rank the variants inside long-lived workers that hold every variant at once (copies of
the model in other layouts and precisions, ONNX sessions, caches and allocator state the others left). That is
the right place to *rank* them, since a burst of load elsewhere hits each alike, but not to *promise* a latency:
a serving script holds one variant, in a process started for it. So once the rounds are over, the pick of each
batch size is prepared again in :data:`PROCESSES` new workers started the way its own worker was (its
environment, CPU set, preloaded allocator) holding that variant only, and timed in alternating segments of
:data:`SEGMENT_S`. Its figure is the median of those segments' medians, and its spread their whole range
(min to max): latency drifts over seconds on a shared or virtual machine with no other program on its CPUs
(measured here: 1-second medians of one ResNet-18 process went from 18.4 to 22.6 ms and back; 3-second
medians of one transformer process ranged 4.08 to 4.40 ms, fresh processes 4.10 to 4.36 ms), and the spread
must hold the script started next, not only the middle half of what the lab saw.

Nothing here starts a process itself: :func:`check` takes the workers the orchestrator makes
(:class:`cpudoctor.lab.infer.InferWorker` or anything with its methods), so it is testable without a child.
"""

from __future__ import annotations

import statistics
import threading
import time
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Protocol

from cpudoctor.lab.stats import Figure, summarize
from cpudoctor.lab.sweep import interference_share

PROCESSES = 2            # new processes per pick: one more than the lab's, so a process-bound offset shows
SEGMENT_S = 0.6          # per segment: long enough that one segment's median is a serving figure
ROUNDS = 8               # segments per process and pick at most (alternating between the processes): the check
                         # spans about 10 s, because latency drifts over seconds (a shared cache, a host's clock)
                         # and a 4 s check missed the slow spells a script started next met
MIN_SEGMENT_S = 0.1
SETTLE_S = 0.05
SHARE = 0.25             # of the budget the interleaved rounds leave for this check when they would run to the end
MIN_DRIFT_SEGMENTS = 3   # interleaved segments of the pick needed before their extremes say how latency drifts
OFFSET = 0.10            # the fresh figure and the lab's differ by more than this beyond both spreads: said


class Worker(Protocol):
    ready: dict[str, Any] | None
    prepared: dict[str, dict[str, Any]]
    paused: bool

    def start(self) -> Any: ...
    def wait_ready(self, stop: Any, deadline: float) -> bool: ...
    def pause(self) -> bool: ...
    def resume(self) -> None: ...
    def measure(self, variant: str, batch: int, seconds: float, stop: Any, until: float) -> dict[str, Any] | None: ...
    def failure(self) -> str | None: ...
    def request_stop(self) -> None: ...
    def reap(self) -> None: ...

    @property
    def alive(self) -> bool: ...


@dataclass
class Pick:
    """A batch size's pick and the plan of the worker it was measured in (``WorkerPlan``: key, variants, env...)."""

    variant: str
    batch: int
    spec: dict[str, Any]
    plan: Any


@dataclass
class FreshCell:
    """One pick's segments in the new processes: medians per process, and the share others took meanwhile."""

    variant: str
    batch: int
    medians: dict[int, list[float]] = field(default_factory=dict)
    interference: list[dict[str, Any]] = field(default_factory=list)
    calls: int = 0

    @property
    def figure(self) -> Figure | None:
        return summarize([m for ms in self.medians.values() for m in ms], whole_range=True)

    def fields(self, lab_medians: list[float], processes: int, segment_s: float | None) -> dict[str, Any]:
        """The pick's ``fresh`` entry in a decision: its figure, the range to expect, per-process medians, and how
        it compares with the interleaved rounds (``lab_medians``: the pick's segment medians there).

        The level comes from the new processes; the range to expect is theirs, widened by how far the pick's
        latency drifted over the whole run (its interleaved segments' extremes, relative to their median, applied
        to this level): 10 s of new processes see one stretch of a drift that the rounds saw for longer.
        """
        fig = self.figure
        if fig is None:
            return {}
        per_process = [round(statistics.median(ms), 4) for _, ms in sorted(self.medians.items()) if ms]
        out: dict[str, Any] = {**fig.to_fields("latency_ms"), "processes": processes,
                               "measured_processes": len(per_process), "process_ms": per_process,
                               "measured_ms_lo": round(fig.lo, 3), "measured_ms_hi": round(fig.hi, 3),
                               "segment_ms": [round(m, 4) for _, ms in sorted(self.medians.items()) for m in ms],
                               "segments": fig.n, "calls": self.calls, "segment_s": segment_s}
        share = interference_share(self.interference)
        if share is not None:
            out["other_share"] = share["share"]
        lab = summarize(lab_medians)
        if lab is not None and lab.median > 0:
            out["vs_lab"] = round(fig.median / lab.median, 3)
            out["offset"] = _offset(fig, lab)
            extremes = summarize(lab_medians, whole_range=True)
            if extremes is not None and extremes.n >= MIN_DRIFT_SEGMENTS:
                down, up = extremes.lo / extremes.median, extremes.hi / extremes.median
                out.update(drift_lo=round(down, 4), drift_hi=round(up, 4),
                           latency_ms_lo=round(min(fig.lo, fig.median * down), 3),
                           latency_ms_hi=round(max(fig.hi, fig.median * up), 3))
        return out


def _offset(fresh: Figure, lab: Figure) -> str | None:
    """"slower"/"faster" when the new processes ran more than :data:`OFFSET` apart from the lab beyond both spreads."""
    if fresh.lo > lab.hi and fresh.median > lab.median * (1 + OFFSET):
        return "slower"
    if fresh.hi < lab.lo and fresh.median < lab.median * (1 - OFFSET):
        return "faster"
    return None


@dataclass
class Outcome:
    cells: dict[tuple[str, int], FreshCell]
    skipped: dict[tuple[str, int], str]          # why a pick has no fresh figure
    segment_s: float | None = None


def fresh_plan(plan: Any, picks: list[Pick], index: int) -> Any:
    """A copy of the pick's worker plan that prepares only the picked variants (its thread variants stand alone:
    the fresh worker has no 'inference_mode' to be the same as)."""
    specs = {p.variant: {k: v for k, v in p.spec.items() if k != "same_threads_as"} for p in picks}
    return replace(plan, key=f"{plan.key} · fresh {index + 1}", variants=list(specs.values()), deferred=None)


def check(picks: list[Pick], make_worker: Callable[[Any, list[int]], Worker], until: float, stop: Any,
          emit: Callable[[dict[str, Any]], None] = lambda data: None, started: float | None = None,
          processes: int = PROCESSES) -> Outcome:
    """Prepare every pick in ``processes`` new workers each, measure them in alternating segments until ``until``
    (at most :data:`ROUNDS` rounds), and stop the workers. Each pick left without a figure says why."""
    began = time.monotonic() if started is None else started
    out = Outcome({}, {})
    groups: dict[str, list[Pick]] = {}
    for p in picks:
        groups.setdefault(p.plan.key, []).append(p)
    planned: list[tuple[Worker, int, list[Pick]]] = []
    for group in groups.values():
        batches = sorted({p.batch for p in group})
        for i in range(processes):
            planned.append((make_worker(fresh_plan(group[0].plan, group, i), batches), i, group))
    need = len(picks) * processes * (MIN_SEGMENT_S + SETTLE_S) * 2     # two rounds at the shortest
    launched = time.monotonic()
    try:
        for w, _, _ in planned:
            w.start()
        ready_by = until - need
        for w, _, _ in planned:
            if w.wait_ready(stop, ready_by) and w.alive:
                w.pause()                   # the others finish preparing on a quiet machine
        cells: list[tuple[Worker, int, str, int]] = []
        problems: dict[tuple[str, int], list[str]] = {}
        for w, i, group in planned:
            for p in group:
                why = _not_ready(w, p, time.monotonic() - launched)
                if why:
                    problems.setdefault((p.variant, p.batch), []).append(why)
                else:
                    cells.append((w, i, p.variant, p.batch))
        per_pick: dict[tuple[str, int], int] = {}
        for _, _, name, batch in cells:
            per_pick[(name, batch)] = per_pick.get((name, batch), 0) + 1
        for key, whys in problems.items():
            if per_pick.get(key, 0) == 1:    # one process is no check of what a process may get
                out.skipped[key] = f"only one of the {processes} new processes got ready ({whys[0]})"
            elif per_pick.get(key, 0) == 0:
                out.skipped[key] = whys[0]
        cells = [c for c in cells if per_pick[(c[2], c[3])] >= 2]
        if not cells:
            return out
        left = until - time.monotonic()
        segment = min(SEGMENT_S, max(MIN_SEGMENT_S, left / (len(cells) * ROUNDS) - SETTLE_S))
        out.segment_s = round(segment, 3)
        _rounds(cells, segment, until, stop, emit, began, out)
    finally:
        for w, _, _ in planned:
            w.request_stop()
        reapers = [threading.Thread(target=w.reap, daemon=True) for w, _, _ in planned]
        for t in reapers:
            t.start()
        for t in reapers:
            t.join(3.0)
    for p in picks:
        key = (p.variant, p.batch)
        cell = out.cells.get(key)
        if key not in out.skipped and (cell is None or sum(1 for ms in cell.medians.values() if ms) < 2):
            out.skipped[key] = ("stopped before each new process was measured" if stop.is_set()
                                else "the budget ended before each new process was measured")
    return out


def _not_ready(w: Worker, p: Pick, waited: float) -> str | None:
    if w.ready is None:
        failure = w.failure()
        return (f"a new process failed: {failure}" if failure
                else f"a new process was not prepared within the {max(0.0, waited):.0f} s it could have "
                     "(rerun with a larger --budget)")
    data = w.prepared.get(p.variant) or {}
    if data.get("status") != "ok":
        return f"a new process could not prepare it: {data.get('reason') or data.get('status') or 'not prepared'}"
    return None


def _rounds(cells: list[tuple[Worker, int, str, int]], segment: float, until: float, stop: Any,
            emit: Callable[[dict[str, Any]], None], began: float, out: Outcome) -> None:
    for r in range(ROUNDS):
        order = cells if r % 2 == 0 else list(reversed(cells))
        for w, i, name, batch in order:
            if stop.is_set() or time.monotonic() + segment + SETTLE_S > until:
                return
            w.resume()
            seg = w.measure(name, batch, segment, stop, until=until)
            w.pause()
            if not seg or seg.get("error") or not seg.get("median_ms"):
                continue
            cell = out.cells.setdefault((name, batch), FreshCell(name, batch))
            cell.medians.setdefault(i, []).append(float(seg["median_ms"]))
            cell.calls += int(seg.get("calls") or 0)
            cell.interference.append(seg.get("interference") or {})
            emit({"phase": "fresh", "round": r + 1, "process": i + 1, "variant": name, "batch": batch,
                  "elapsed": round(time.monotonic() - began, 3), "segment_median_ms": seg.get("median_ms")})
            stop.wait(SETTLE_S)

