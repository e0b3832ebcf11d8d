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
    RuleSet,
    UnknownRuleError,
    run_rules,
    worst,
)
from cpudoctor.model import Finding, Report

__all__ = ["CATEGORIES", "REDIRECTS", "SEVERITIES", "Rule", "UnknownRuleError", "diagnose", "find_rule", "registry", "worst"]


def diagnose(report: Report, *, only: set[str] | None = None) -> list[Finding]:
    """Run every rule (or only the given codes, symbols or category names) over ``report``.

    Pure: reads the report, never the machine, so a report saved elsewhere
    gives the same findings here. Findings come in category order, then code;
    their snippets are written for the report's OS (PowerShell for a Windows
    machine: :func:`cpudoctor.advisor.snippets.localize`).
    """
    from cpudoctor.advisor.snippets import localize

    return localize(run_rules(report, only), report)


def registry() -> list[Rule]:
    """Every report rule, in the order doctor shows them."""
    return REPORT_RULES.all()


def find_rule(code: str) -> tuple[RuleSet, Rule]:
    """The rule set and rule of ``code`` (a code, old code or symbol): report rules, then process rules, then
    evidence rules.

    Process rules (PROC0xx) judge a job's process and evidence rules (EVID0xx) what it did, both in one
    diagnosis of the job (``cpudoctor run``, ``inspect``, the Inspector: :mod:`cpudoctor.jobrun`).
    Raises UnknownRuleError (a KeyError) with the known codes when nothing
    matches; :func:`cpudoctor.render.rules.explain_text` words the answer.
    """
    try:
        return REPORT_RULES, REPORT_RULES.resolve(code)
    except UnknownRuleError as exc:
        from cpudoctor.advisor.process_rules import PROCESS_RULES  # the job side's rules: only when needed

        try:
            return PROCESS_RULES, PROCESS_RULES.resolve(code)
        except UnknownRuleError:
            pass
        from cpudoctor.advisor.evidence_rules import EVIDENCE_RULES

        try:
            return EVIDENCE_RULES, EVIDENCE_RULES.resolve(code)
        except UnknownRuleError:
            raise exc from None
