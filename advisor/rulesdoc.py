"""Render docs/rules.md from the registry, so the docs can never drift from the code.

    python -m cpudoctor.advisor.rulesdoc > docs/rules.md

A test compares the file with this output.
"""

from __future__ import annotations

from cpudoctor.advisor.engine import CATEGORIES, REDIRECTS, registry


def render_rules_md() -> str:
    rules = registry()
    lines = [
        "# Advisor rules",
        "",
        "Generated from the rule registry by `python -m cpudoctor.advisor.rulesdoc`; do not edit by hand.",
        "Every check `cpudoctor doctor` runs, with its stable code. Codes are never reused; renamed codes",
        "are listed at the end and still work with `--only` and `cpudoctor explain`.",
        "",
        "| Code | Symbol | Category | Worst severity | Title |",
        "|---|---|---|---|---|",
    ]
    lines += [f"| [{r.code}](#{r.code.lower()}) | `{r.symbol}` | {CATEGORIES[r.category]} | {r.severity} | {r.title} |"
              for r in rules]
    current = None
    for r in rules:
        if r.category != current:
            current = r.category
            lines += ["", f"## {CATEGORIES[r.category]}"]
        sections = r.sections()
        lines += [
            "",
            f'<a id="{r.code.lower()}"></a>',
            f"### {r.code} `{r.symbol}`: {r.title}",
            "",
            f"Worst severity: **{r.severity}**",
            "",
            f"**What it checks.** {sections['What it checks']}",
            "",
            f"**Why it matters.** {sections['Why it matters']}",
            "",
            f"**Fix.** {sections['Fix']}",
        ]
    lines += ["", "## Renamed codes", ""]
    if REDIRECTS:
        lines += [f"- `{old}` is now [{new}](#{new.lower()})" for old, new in sorted(REDIRECTS.items())]
    else:
        lines.append("None yet.")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    import sys

    sys.stdout.write(render_rules_md())
