"""Advisor: pure functions of a Report that return findings, and snippet generators.

Never imports Qt or torch.
"""

from __future__ import annotations

from collections.abc import Iterable

from cpudoctor.advisor.engine import (
    CATEGORIES,
    REDIRECTS,
    REPORT_RULES,
    SEVERITIES,
    MovedRuleError,
    Rule,
    RuleSet,
    UnknownRuleError,
    run_rules,
    worst,
)
from cpudoctor.model import Finding, Report

__all__ = ["CATEGORIES", "REDIRECTS", "SEVERITIES", "Rule", "UnknownRuleError", "diagnose", "find_rule", "registry",
           "resolve_only", "worst"]


def diagnose(report: Report, *, only: set[str] | None = None) -> list[Finding]:
    """Run every rule (or only the given codes, symbols or category names) over ``report``.

    The report rules judge the machine; the report's lab runs are jobs, and the job rules that read
    their kernels (EVID007, EVID008: :mod:`cpudoctor.advisor.kernel_rules`) judge the latest of each
    kind against the report's CPU. Pure: reads the report, never the machine, so a report saved
    elsewhere gives the same findings here. Findings come in category order, then code; their
    snippets are written for the report's OS where the commands differ there (macOS cannot pin:
    :func:`cpudoctor.advisor.snippets.localize`), else in bash: the shell a snippet is shown in is
    the finding view's choice (:mod:`cpudoctor.render.finding_view`).
    """
    from cpudoctor.advisor.kernel_rules import report_lab_findings
    from cpudoctor.advisor.snippets import localize

    only = resolve_only(only) if only is not None else None
    found = run_rules(report, None if only is None else only & _report_codes()) + report_lab_findings(report, only)
    order = {c: i for i, c in enumerate(CATEGORIES)}
    return localize(sorted(found, key=lambda f: (order.get(f.category, 99), f.code)), report)


def _report_codes() -> set[str]:
    return {r.code for r in REPORT_RULES.all()}


def resolve_only(items: Iterable[str] | None) -> set[str] | None:
    """``--only``'s codes, symbols, old codes and category names as rule codes: the report rules' and the job
    rules a report's lab runs are judged by (EVID007, EVID008, and their old codes ISA010, PREC003).

    Raises UnknownRuleError (a sentence naming what exists) for a name no rule answers to.
    """
    if items is None:
        return None
    from cpudoctor.advisor.evidence_rules import EVIDENCE_RULES
    from cpudoctor.advisor.kernel_rules import KERNEL_RULES

    out: set[str] = set()
    for item in items:
        item = item.strip()
        if not item:
            continue
        if item.upper() in KERNEL_RULES or item.lower() in {EVIDENCE_RULES.resolve(c).symbol for c in KERNEL_RULES}:
            out.add(EVIDENCE_RULES.resolve(item).code)
            continue
        try:
            out |= REPORT_RULES.resolve_only([item])
        except MovedRuleError as exc:
            out.add(exc.target)
            continue
        if item.lower() in CATEGORIES:
            out.update(c for c in KERNEL_RULES if EVIDENCE_RULES.resolve(c).category == item.lower())
    return out


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
    except MovedRuleError as moved:              # a report rule's old code, merged into a job rule
        return find_rule(moved.target)
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
