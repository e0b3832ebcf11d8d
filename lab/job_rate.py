"""A job's progress rate over one measured window: useful work per second, without changing the script.

``run --verify`` runs the user's job several times and needs one figure per run
that says how fast it went. In the order tried:

1. optimizer steps per second, counted by the job's probe (a global step hook);
2. else forward calls of the outermost module per second (inference, or a loop
   with no optimizer the probe saw);
3. else DataLoader samples per second (the batches its loaders handed it);
4. ``--metric REGEX`` instead: the last rates the script prints itself (tqdm's
   ``it/s``, a logged ``samples/s``), the regex's first group (or the first
   number it matched).

Each rate leaves out the job's start: the probe's counts are taken from its
first progress line after ``warmup_s`` past the first unit of work (the first
step compiles, allocates and creates oneDNN's primitives) to its last; a printed
metric keeps its values after the same time. Standard library and the model only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from cpudoctor.model.jobstate import JobState, Progress

WARMUP_S = 1.0          # after the first unit of work, left out of the rate
MIN_UNITS = 3           # fewer counted units than this in a window is no rate
METRICS = ("steps", "forwards", "samples", "output")
UNITS = {"steps": "optimizer steps/s", "forwards": "forward calls/s", "samples": "samples/s",
         "output": "the job's printed rate"}


@dataclass(frozen=True)
class WindowRate:
    """One window's rate (None: not measurable, ``why`` says why) and what it counted."""

    rate: float | None
    metric: str                    # steps | forwards | samples | output
    units: int = 0                 # the counted units (steps, calls, samples, printed values)
    seconds: float = 0.0           # the span they cover
    why: str = ""


def choose_metric(state: JobState | None, regex: str | None = None) -> str | None:
    """Which measure a job's windows use: ``output`` with --metric, else the first the probe counted (None:
    none; the job cannot be verified without --metric)."""
    if regex:
        return "output"
    if state is None or not state.loaded:
        return None
    if state.steps >= MIN_UNITS:
        return "steps"
    if state.forwards >= MIN_UNITS:
        return "forwards"
    if state.samples_drawn >= MIN_UNITS:
        return "samples"
    return None


def _count(p: Progress, metric: str) -> int:
    return {"steps": p.steps, "forwards": p.forwards, "samples": p.samples}[metric]


def _time(p: Progress, metric: str) -> float:
    # steps carry the time of the last one; the other counts are written on the driving thread just after one
    # (the line at exit is not such a moment: it is skipped for them)
    return p.last_step_s if metric == "steps" and p.last_step_s is not None else p.t_s


def probe_rate(state: JobState | None, metric: str, warmup_s: float = WARMUP_S) -> WindowRate:
    """``metric`` per second from the probe's progress lines, after ``warmup_s`` past the first counted unit."""
    if state is None or not state.loaded:
        return WindowRate(None, metric, why="the job's probe was not loaded")
    points = [p for p in state.progress if _count(p, metric) > 0 and (metric == "steps" or not p.at_exit)]
    if not points:
        return WindowRate(None, metric, why=f"the probe counted no {UNITS[metric].split('/')[0]}")
    start_t = _time(points[0], metric) + warmup_s
    after = [p for p in points if _time(p, metric) >= start_t]
    if len(after) < 2:
        return WindowRate(None, metric, why="the window ended before the job passed its warm-up")
    first, last = after[0], after[-1]
    units = _count(last, metric) - _count(first, metric)
    span = _time(last, metric) - _time(first, metric)
    if units < MIN_UNITS or span <= 0:
        return WindowRate(None, metric, units=max(units, 0), seconds=max(span, 0.0),
                          why=f"only {max(units, 0)} counted after the warm-up")
    return WindowRate(units / span, metric, units=units, seconds=round(span, 3))


_NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")


def compile_metric(regex: str) -> re.Pattern[str]:
    """``--metric``'s pattern (ValueError with the reason when it is not a usable one)."""
    try:
        pattern = re.compile(regex)
    except re.error as exc:
        raise ValueError(f"--metric {regex!r} is not a regular expression: {exc}") from None
    if pattern.groups > 1 and "rate" not in pattern.groupindex:
        raise ValueError(f"--metric {regex!r} has {pattern.groups} groups: give one, or name it (?P<rate>...)")
    return pattern


def printed_values(lines: list[tuple[float, str]], pattern: re.Pattern[str]) -> list[tuple[float, float]]:
    """(seconds after the window's start, value) for every match of ``pattern`` in the job's output lines (a
    progress bar's ``\\r`` updates count one by one)."""
    out: list[tuple[float, float]] = []
    group = "rate" if "rate" in pattern.groupindex else (1 if pattern.groups else 0)
    for t, text in lines:
        for part in text.replace("\r", "\n").split("\n"):
            for m in pattern.finditer(part):
                found = m.group(group) or ""
                number = _NUMBER.search(found.replace(",", ""))
                if number is None:
                    continue
                try:
                    value = float(number.group())
                except ValueError:
                    continue
                if value > 0 and value == value and value != float("inf"):
                    out.append((t, value))
    return out


def output_rate(lines: list[tuple[float, str]], pattern: re.Pattern[str], warmup_s: float) -> WindowRate:
    """The job's own printed rate: the median of the values printed after ``warmup_s`` (all of them when only
    earlier ones were printed: a job that prints its rate once, at its end)."""
    import statistics

    values = printed_values(lines, pattern)
    if not values:
        return WindowRate(None, "output", why=f"its output never matched --metric {pattern.pattern!r}")
    late = [v for t, v in values if t >= warmup_s] or [v for _t, v in values]
    return WindowRate(statistics.median(late), "output", units=len(late))
