"""The order findings are read in: the worst severity first, then what can change training speed most.

Within one severity, a rule's relevance (``relevance`` in
resources/advisor_knowledge.json: high, medium or low) decides, then the
category order of the report, then the code. So a missing AVX-512 kernel or
an unpinned NUMA job comes before "try the zentorch plug-in" (whose gains
depend on the CPU), which comes before "running in a container".
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import lru_cache

from cpudoctor.advisor.engine import CATEGORIES, SEVERITY_RANK
from cpudoctor.report import Finding
from cpudoctor.resources import load_json

RELEVANCE_ORDER = ("high", "medium", "low")


@lru_cache(maxsize=1)
def _relevance_table() -> dict[str, str]:
    table = load_json("advisor_knowledge.json").get("relevance", {})
    return {code: level for level in ("high", "low") for code in table.get(level, [])}


def relevance(code: str) -> str:
    """``high`` | ``medium`` | ``low`` for a rule code (unknown codes are medium)."""
    return _relevance_table().get(code, "medium")


def rank_key(finding: Finding) -> tuple:
    category = list(CATEGORIES).index(finding.category) if finding.category in CATEGORIES else len(CATEGORIES)
    return (-SEVERITY_RANK.get(finding.severity, 0), RELEVANCE_ORDER.index(relevance(finding.code)), category,
            finding.code)


def ranked(findings: Iterable[Finding]) -> list[Finding]:
    """``findings`` in reading order (a new list)."""
    return sorted(findings, key=rank_key)
