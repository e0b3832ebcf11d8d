"""The order findings are read in, on every surface: worst first, then what can change training speed most.

Within one severity, a rule's relevance (``relevance`` in
resources/advisor_knowledge.json: high, medium or low) decides, then the
category order of the report, then the code. So a missing AVX-512 kernel or
an unpinned NUMA job comes before "try the zentorch plug-in" (whose gains
depend on the CPU), which comes before "running in a container". The doctor
page, the exports and the window all sort with :func:`finding_order`.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import lru_cache
from typing import Protocol

from cpudoctor.model import CATEGORIES, SEVERITY_RANK, Finding

__all__ = ["RELEVANCE_LEVELS", "finding_order", "ranked", "relevance"]

RELEVANCE_LEVELS = ("high", "medium", "low")


class _Ranked(Protocol):
    code: str
    severity: str
    category: str


@lru_cache(maxsize=1)
def _relevance_table() -> dict[str, str]:
    from cpudoctor.knowledge import ADVISOR_KNOWLEDGE

    table = ADVISOR_KNOWLEDGE.data["relevance"]
    return {code: level for level in RELEVANCE_LEVELS for code in table.get(level, [])}


def relevance(code: str) -> str:
    """``high`` | ``medium`` | ``low``: how much a rule's problem can change training speed (unknown: medium).

    Knowledge, so it lives in resources/advisor_knowledge.json; used to order findings."""
    return _relevance_table().get(code, "medium")


def severity_order(key: str) -> int:
    """Sort key, worst first (errors, warnings, suggestions, passed); an unknown severity sorts as a suggestion."""
    return -SEVERITY_RANK.get(key, SEVERITY_RANK["info"])


def category_order(category: str) -> int:
    """Sort key of a category: the report model's order, unknown categories last."""
    return CATEGORIES.index(category) if category in CATEGORIES else len(CATEGORIES)


# A finding whose effect was measured on this machine (evidence ``measured_effect``: 20.0 = 20x) from this
# factor on comes before every finding of its severity whose effect is only expected.
MEASURED_FIRST = 1.5


def measured_effect(f: _Ranked) -> float:
    """The speed factor a finding's fix was measured to bring here (0: not measured)."""
    evidence = getattr(f, "evidence", None)
    value = evidence.get("measured_effect") if isinstance(evidence, dict) else None
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0 else 0.0


def finding_order(f: _Ranked) -> tuple:
    """The one reading order of findings, on every surface: the worst severity first, then what changes
    training speed most: a measured effect (biggest first) before the rules' expected relevance (a missing
    AVX-512 kernel before "try the zentorch plug-in"), then the category's order, then the code."""
    effect = measured_effect(f)
    level = -1 if effect >= MEASURED_FIRST else RELEVANCE_LEVELS.index(relevance(f.code))
    return (severity_order(f.severity), level, -effect, category_order(f.category), f.code)


def ranked(findings: Iterable[Finding]) -> list[Finding]:
    """``findings`` in reading order (a new list)."""
    return sorted(findings, key=finding_order)
