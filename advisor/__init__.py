"""Advisor: pure functions of a Report that return findings, and snippet generators.

Never imports Qt or torch.
"""

from __future__ import annotations

from cpudoctor.advisor.engine import (
    CATEGORIES,
    REDIRECTS,
    SEVERITIES,
    Rule,
    UnknownRuleError,
    resolve,
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
    """Every rule, in the order doctor shows them."""
    from cpudoctor.advisor.engine import registry as _registry

    return _registry()


def explain(code: str) -> str:
    """The documentation of a rule (by code, old code or symbol) as plain text.

    Raises UnknownRuleError (a KeyError) with the known codes when nothing matches.
    """
    try:
        r = resolve(code)
    except UnknownRuleError:
        # Process rules (PROC0xx) judge a running process, not a report, and
        # live in their own registry; `cpudoctor explain` covers both.
        from cpudoctor.advisor.process_rules import explain_text

        text = explain_text(code)
        if text is None:
            raise
        return text + "\n"
    sections = r.sections()
    head = f"{r.code} ({r.symbol}) — {r.title}"
    lines = [head, "=" * len(head), f"Category: {CATEGORIES.get(r.category, r.category)}   Worst severity: {r.severity}"]
    if code.strip().upper() != r.code and code.strip().lower() != r.symbol:
        lines.append(f"({code.strip().upper()} was renamed to {r.code}.)")
    for name in ("What it checks", "Why it matters", "Fix"):
        lines += ["", f"{name}:", *_wrap(sections.get(name, ""))]
    lines += ["", f"Docs: {r.docs_anchor}"]
    return "\n".join(lines) + "\n"


def _wrap(text: str, width: int = 88) -> list[str]:
    import textwrap

    return textwrap.wrap(text, width=width, initial_indent="  ", subsequent_indent="  ", break_on_hyphens=False, break_long_words=False) or ["  -"]
