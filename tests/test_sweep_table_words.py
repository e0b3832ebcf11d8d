"""The sweep's table says every name in full.

Issue 26: a variant that ran the same setting as another showed "= PyTorch defau" (cut to 15 characters).
"""

from __future__ import annotations

from cpudoctor.lab.results import read_outcome
from cpudoctor.lab.runner import JobOutcome
from cpudoctor.render.lab import outcome_text

LONG = "2 threads pinned to CCX 0 and CCX 1 (CPUs 0-7,16-23, one per core)"


def test_same_setting_and_long_names_are_never_cut():
    points = [
        {"variant": "PyTorch defaults", "threads": None, "threads_used": 2, "samples_per_s": 1000.0,
         "samples_per_s_lo": 990.0, "samples_per_s_hi": 1010.0, "samples_per_s_n": 3, "segments": 3},
        {"variant": "2 threads", "threads": 2, "threads_used": 2, "same_as": "PyTorch defaults", "segments": 0},
        {"variant": LONG, "threads": 2, "threads_used": 2, "samples_per_s": 900.0, "samples_per_s_lo": 880.0,
         "samples_per_s_hi": 910.0, "samples_per_s_n": 3, "segments": 3},
    ]
    out = JobOutcome(status="ok", result={"points": points, "verdict": "inconclusive", "reason": "inconclusive: x",
                                          "rounds": 3, "budget_s": 45})
    text = outcome_text(read_outcome("sweep", out, {}))
    assert "same setting as PyTorch defaults: measured there" in text and "= PyTorch defau" not in text
    assert LONG in text
    rows = [ln for ln in text.splitlines() if ln.startswith(("PyTorch defaults ", LONG))]
    assert len(rows) == 2 and rows[0].index("1,000") + 5 == rows[1].index(" 900 ") + 4     # columns still line up
