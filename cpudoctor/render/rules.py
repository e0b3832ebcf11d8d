"""The rules' documentation in words: the rule pages and ``cpudoctor explain``, from the registries.

    python -m cpudoctor.render.rules > docs/rules.md
    python -m cpudoctor.render.rules process > docs/process_rules.md
    python -m cpudoctor.render.rules evidence > docs/evidence_rules.md

One renderer serves every :class:`~cpudoctor.advisor.engine.RuleSet`, so the
docs can never drift from the code; tests compare both files with its output.
"""

from __future__ import annotations

from cpudoctor.advisor.engine import DOC_SECTIONS, REPORT_RULES, RuleSet
from cpudoctor.kits.format import wrap
from cpudoctor.render.words import CATEGORIES, severity

_RULES_INTRO = """\
Generated from the rule registry by `python -m cpudoctor.render.rules`; do not edit by hand.
Every check `cpudoctor doctor` runs, with its stable code. Codes are never reused; renamed codes
are listed at the end and still work with `--only` and `cpudoctor explain`."""

_PROCESS_INTRO = """\
Generated from the registry by `python -m cpudoctor.render.rules process`; do not edit by hand.
Checks run on one running process (the Inspector page and `cpudoctor inspect PID`), with stable
codes. Each fix comes with the command to relaunch the job (pinning + thread variables)."""

_EVIDENCE_INTRO = """\
Generated from the registry by `python -m cpudoctor.render.rules evidence`; do not edit by hand.
Checks that judge what a job did, from measured evidence: its time breakdown (sampled stacks and
thread states), the kernels oneDNN ran and PyTorch's recompilations (`cpudoctor run -- COMMAND`,
`cpudoctor inspect PID`, the Inspector). EVID007 and EVID008 judge the kernels the lab's jobs ran too
(`cpudoctor bench`, and the runs saved in a report, under `cpudoctor doctor`). Each finding quotes the run's own numbers; the rules that
read the breakdown stay silent when it is inconclusive (see docs/time_breakdown.md)."""


def render_md(rules: RuleSet, title: str, intro: str) -> str:
    """One Markdown page for a rule set: a table, then each rule's sections under its anchor.

    Rules of a set ordered by category are grouped under category headings;
    renamed codes are listed at the end, so an old link still finds its rule.
    """
    listed = rules.all()
    lines = [f"# {title}", "", *intro.splitlines(), "",
             "| Code | Symbol | Category | At worst | Title |",
             "|---|---|---|---|---|"]
    lines += [f"| [{r.code}](#{r.code.lower()}) | `{r.symbol}` | {CATEGORIES[r.category]} | {severity(r.severity).name} | {r.title} |"
              for r in listed]
    heading = "###" if rules.group_by_category else "##"
    current = None
    for r in listed:
        if rules.group_by_category and r.category != current:
            current = r.category
            lines += ["", f"## {CATEGORIES[r.category]}"]
        sections = r.sections()
        lines += [
            "",
            f'<a id="{r.code.lower()}"></a>',
            f"{heading} {r.code} `{r.symbol}`: {r.title}",
            "",
            f"At worst: **{severity(r.severity).name}**",
            "",
            f"**What it checks.** {sections['What it checks']}",
            "",
            f"**Why it matters.** {sections['Why it matters']}",
            "",
            f"**Fix.** {sections['Fix']}",
        ]
    lines += ["", "## Renamed codes", ""]
    renamed = {**_moved_into(rules), **rules.redirects}
    if renamed:
        # each old code keeps an anchor, so a link saved with an old finding still lands on its new name
        lines += [f'- <a id="{old.lower()}"></a>`{old}` is now [{new}]({_anchor(rules, new)})'
                  for old, new in sorted(renamed.items())]
    else:
        lines.append("None yet.")
    return "\n".join(lines) + "\n"


def _moved_into(rules: RuleSet) -> dict[str, str]:
    """Old codes of the other rule sets whose rules live in ``rules`` now (ISA010 -> EVID007)."""
    codes = {r.code for r in rules.all()}
    others = [s for s in _rule_sets() if s is not rules]
    return {old: new for s in others for old, new in s.redirects.items() if new in codes}


def _rule_sets() -> list[RuleSet]:
    from cpudoctor.advisor.evidence_rules import EVIDENCE_RULES
    from cpudoctor.advisor.process_rules import PROCESS_RULES

    return [REPORT_RULES, PROCESS_RULES, EVIDENCE_RULES]


def _anchor(rules: RuleSet, code: str) -> str:
    """The link to ``code``'s section: on this page, or on the page of the rule set it moved to."""
    from cpudoctor.advisor import find_rule

    if any(r.code == code for r in rules.all()):
        return f"#{code.lower()}"
    target = find_rule(code)[1]
    return f"{target.docs_page.rsplit('/', 1)[-1]}#{code.lower()}"


def render_rules_md() -> str:
    """docs/rules.md: the report rules (`cpudoctor doctor`)."""
    return render_md(REPORT_RULES, "Advisor rules", _RULES_INTRO)


def render_process_rules_md() -> str:
    """docs/process_rules.md: the process rules (`cpudoctor inspect`)."""
    from cpudoctor.advisor.process_rules import PROCESS_RULES

    return render_md(PROCESS_RULES, "Process rules (`cpudoctor inspect`)", _PROCESS_INTRO)


def render_evidence_rules_md() -> str:
    """docs/evidence_rules.md: the evidence rules (`cpudoctor run`, `cpudoctor inspect`)."""
    from cpudoctor.advisor.evidence_rules import EVIDENCE_RULES

    return render_md(EVIDENCE_RULES, "Evidence rules (`cpudoctor run`, `cpudoctor inspect`)", _EVIDENCE_INTRO)


def explain_text(code_or_symbol: str, rules: RuleSet | None = None) -> str:
    """``cpudoctor explain`` text of one rule (by code, old code or symbol); UnknownRuleError if none.

    ``rules``: look in that rule set only (default: the report rules, then the process rules).
    """
    from cpudoctor.advisor import find_rule

    if rules is None:
        rules, r = find_rule(code_or_symbol)
    else:
        r = rules.resolve(code_or_symbol)
    asked = code_or_symbol.strip()
    head = f"{r.code} ({r.symbol}) — {r.title}"
    category = CATEGORIES.get(r.category, r.category)
    lines = [head, "=" * len(head), f"Category: {category}   At worst: {severity(r.severity).name}"]
    if rules.scope:
        lines.append(rules.scope)
    if asked.upper() != r.code and asked.lower() != r.symbol:
        lines.append(f"({asked.upper()} was renamed to {r.code}.)")
    sections = r.sections()
    for name in DOC_SECTIONS:
        lines += ["", f"{name}:", *(wrap(sections.get(name, ""), 88, indent=2) or ["  -"])]
    lines += ["", f"Docs: {r.docs_anchor}"]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    import sys

    pages = {"rules": render_rules_md, "process": render_process_rules_md, "evidence": render_evidence_rules_md}
    page = sys.argv[1] if len(sys.argv) > 1 else "rules"
    if page not in pages:
        sys.exit(f"usage: python -m cpudoctor.render.rules [{'|'.join(pages)}]")
    sys.stdout.write(pages[page]())
