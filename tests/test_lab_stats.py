"""Figures with spreads: the median, the spread, when two settings are told apart or called equal."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cpudoctor.lab.stats import Figure, summarize, tied


def test_small_samples_spread_over_their_range_larger_over_the_quartiles():
    assert summarize([3.0, 1.0, 2.0]) == Figure(2.0, 1.0, 3.0, 3)
    fig = summarize([1, 2, 3, 4, 100])
    assert fig.median == 3 and fig.lo == 2 and fig.hi == 4 and fig.n == 5     # one outlier does not widen it
    assert summarize([1, 2, 3, 4, 100], whole_range=True).hi == 100
    assert summarize([None, 0, -1]) is None


def test_separation_and_ties():
    a, b = Figure(1000, 990, 1010, 3), Figure(700, 690, 720, 3)
    assert a.above(b) and not b.above(a)
    assert tied(Figure(1000, 995, 1005, 3), Figure(1020, 1015, 1025, 3), 0.03, 0.10)
    assert not tied(Figure(1000, 700, 1300, 3), Figure(1020, 1015, 1025, 3), 0.03, 0.10)   # too noisy to call
    assert Figure(100, 95, 105, 3).relative_spread == pytest.approx(0.10)
    assert Figure(100, 95, 105, 3).to_fields("x") == {"x": 100, "x_lo": 95, "x_hi": 105, "x_n": 3}


@given(st.lists(st.tuples(st.floats(1, 1e4), st.floats(0.01, 10)), min_size=1, max_size=40))
def test_a_runs_time_weighted_rate_lies_within_its_windows_range(windows):
    """train.py's figure is samples/seconds over all windows; the whole-range spread always holds it."""
    samples = [rate * secs for rate, secs in windows]
    overall = sum(samples) / sum(secs for _, secs in windows)
    fig = summarize([rate for rate, _ in windows], whole_range=True)
    assert fig.lo * (1 - 1e-9) <= overall <= fig.hi * (1 + 1e-9)
