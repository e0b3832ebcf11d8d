"""Render the rule pages from the registries, so the docs can never drift from the code.

    python -m cpudoctor.advisor.rulesdoc > docs/rules.md
    python -m cpudoctor.advisor.rulesdoc process > docs/process_rules.md

One renderer serves every :class:`~cpudoctor.advisor.engine.RuleSet`; tests
compare both files with its output.
"""

from __future__ import annotations

from cpudoctor.advisor.engine import CATEGORIES, REPORT_RULES, RuleSet
from cpudoctor.render.words import severity

_RULES_INTRO = """\
Generated from the rule registry by `python -m cpudoctor.advisor.rulesdoc`; do not edit by hand.
Every check `cpudoctor doctor` runs, with its stable code. Codes are never reused; renamed codes
are listed at the end and still work with `--only` and `cpudoctor explain`."""

_PROCESS_INTRO = """\
Generated from the registry by `python -m cpudoctor.advisor.rulesdoc process`; do not edit by hand.
Checks run on one running process (the Inspector page and `cpudoctor inspect PID`), with stable
codes. Each fix comes with the command to relaunch the job (pinning + thread variables)."""

_EVIDENCE_INTRO = """\
Generated from the registry by `python -m cpudoctor.advisor.rulesdoc evidence`; do not edit by hand.
Checks that judge what a job did, from measured evidence: its time breakdown (sampled stacks and
thread states), the kernels oneDNN ran and PyTorch's recompilations (`cpudoctor run -- COMMAND`,
`cpudoctor inspect PID`, the Inspector). Each finding quotes the run's own numbers; the rules that
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
    if rules.redirects:
        lines += [f"- `{old}` is now [{new}](#{new.lower()})" for old, new in sorted(rules.redirects.items())]
    else:
        lines.append("None yet.")
    return "\n".join(lines) + "\n"


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


if __name__ == "__main__":
    import sys

    pages = {"rules": render_rules_md, "process": render_process_rules_md, "evidence": render_evidence_rules_md}
    page = sys.argv[1] if len(sys.argv) > 1 else "rules"
    if page not in pages:
        sys.exit(f"usage: python -m cpudoctor.advisor.rulesdoc [{'|'.join(pages)}]")
    sys.stdout.write(pages[page]())
