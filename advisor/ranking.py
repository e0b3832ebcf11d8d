"""The order findings are read in, for the advisor's callers: :func:`cpudoctor.render.words.finding_order`.

Within one severity, a rule's relevance (``relevance`` in
resources/advisor_knowledge.json: high, medium or low) decides, then the
category order of the report, then the code. So a missing AVX-512 kernel or
an unpinned NUMA job comes before "try the zentorch plug-in" (whose gains
depend on the CPU), which comes before "running in a container". The order
itself lives with the words (render/words.py) so the doctor page, the exports
and the window read findings alike.
"""

from __future__ import annotations

from collections.abc import Iterable

from cpudoctor.render.words import RELEVANCE_LEVELS, finding_order, relevance
from cpudoctor.report import Finding

__all__ = ["RELEVANCE_LEVELS", "ranked", "relevance"]


def ranked(findings: Iterable[Finding]) -> list[Finding]:
    """``findings`` in reading order (a new list)."""
    return sorted(findings, key=finding_order)
