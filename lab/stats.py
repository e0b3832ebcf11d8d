"""A measured figure with its spread, and when two figures can be told apart.

Benchmarks on a shared machine scatter; one number per setting invites
ranking noise. Every figure the lab reports is a median with a spread (the
range for up to four samples, the interquartile range beyond), and two
settings are ranked only when their spreads do not overlap, or called equal
when their medians are within a tolerance and both spreads are tight.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Iterable


@dataclass(frozen=True)
class Figure:
    """The median of ``n`` samples and the spread around it (lo..hi)."""

    median: float
    lo: float
    hi: float
    n: int

    @property
    def relative_spread(self) -> float:
        """(hi - lo) / median: 0.08 means the samples spread over 8 % of the figure."""
        return (self.hi - self.lo) / self.median if self.median else float("inf")

    def above(self, other: "Figure") -> bool:
        """This figure is higher than ``other`` beyond both spreads."""
        return self.lo > other.hi

    def to_fields(self, name: str) -> dict[str, float | int]:
        """``{name: median, name_lo: lo, name_hi: hi, name_n: n}`` for a result or a table row."""
        return {name: round(self.median, 3), f"{name}_lo": round(self.lo, 3), f"{name}_hi": round(self.hi, 3),
                f"{name}_n": self.n}


def summarize(values: Iterable[float | None], whole_range: bool = False) -> Figure | None:
    """The figure of some samples (None and non-positive ones skipped); None when there are none.

    ``whole_range``: the spread is min..max however many samples, for windows of
    one run, whose time-weighted mean (the run's figure) then always lies inside it.
    """
    xs = sorted(float(v) for v in values if isinstance(v, (int, float)) and v > 0)
    if not xs:
        return None
    med = statistics.median(xs)
    if len(xs) <= 4 or whole_range:
        return Figure(med, xs[0], xs[-1], len(xs))
    q1, _, q3 = statistics.quantiles(xs, n=4, method="inclusive")
    return Figure(med, q1, q3, len(xs))


def tied(a: Figure, b: Figure, tolerance: float, precise: float) -> bool:
    """Equal for practical purposes: medians within ``tolerance`` and both spreads within ``precise``."""
    top = max(a.median, b.median)
    return (abs(a.median - b.median) <= tolerance * top
            and a.relative_spread <= precise and b.relative_spread <= precise)
