"""Advisor: pure functions of a Report that return findings, and snippet generators.

Never imports Qt or torch.
"""

from __future__ import annotations

from cpudoctor.advisor.engine import (
    CATEGORIES,
    REDIRECTS,
    REPORT_RULES,
    SEVERITIES,
    Rule,
    UnknownRuleError,
    run_rules,
    worst,
)
from cpudoctor.report import Finding, Report

__all__ = ["CATEGORIES", "REDIRECTS", "SEVERITIES", "Rule", "UnknownRuleError", "diagnose", "explain", "registry", "worst"]


def diagnose(report: Report, *, only: set[str] | None = None) -> list[Finding]:
    """Run every rule (or only the given codes, symbols or category names) over ``report``.

    Pure: reads the report, never the machine, so a report saved elsewhere
    gives the same findings here. Findings come in category order, then code.
    """
    return run_rules(report, only)


def registry() -> list[Rule]:
    """Every report rule, in the order doctor shows them."""
    return REPORT_RULES.all()


def explain(code: str) -> str:
    """The documentation of a rule (by code, old code or symbol) as plain text.

    Covers the report rules and the process rules (PROC0xx, which judge a
    running process in `cpudoctor inspect`). Raises UnknownRuleError (a
    KeyError) with the known codes when nothing matches.
    """
    try:
        return REPORT_RULES.explain(code)
    except UnknownRuleError as exc:
        from cpudoctor.advisor.process_rules import PROCESS_RULES  # probes.inspect: only when needed

        try:
            return PROCESS_RULES.explain(code)
        except UnknownRuleError:
            pass
        from cpudoctor.advisor.evidence_rules import EVIDENCE_RULES

        try:
            return EVIDENCE_RULES.explain(code)
        except UnknownRuleError:
            raise exc from None
