"""``cpudoctor doctor``: every check in one screen, flutter-doctor style.

One line per check with a mark ([✓] fine, [!] worth fixing, [✗] broken),
grouped by category, the why and the fix indented under each problem, and a
closing summary line. Exit code 0 when nothing is an error, 1 when something
is, 2 on bad usage or an unreadable report — so scripts and CI can gate on it.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from cpudoctor import docs_url
from cpudoctor.commands import CliError, emit, root_arg

FORMATS = ("text", "json", "md")

# (category mark, finding mark) per severity; ASCII twins for terminals that cannot encode them.
_MARKS = {"ok": "✓", "info": "•", "warning": "!", "error": "✗"}
_ASCII_MARKS = {"ok": "+", "info": "i", "warning": "!", "error": "x"}
_MD_MARKS = {"ok": "✅", "info": "ℹ️", "warning": "⚠️", "error": "❌"}


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "doctor",
        help="check this machine (or a saved report) and say what to fix",
        description=("Run every advisor rule and print one line per check, grouped, with the fix under each "
                     "problem. Exit code: 0 no error, 1 an error was found, 2 bad usage or unreadable report."),
    )
    src = p.add_mutually_exclusive_group()
    src.add_argument("--root", metavar="DIR", help="diagnose a captured /proc+/sys tree instead of this machine")
    src.add_argument("--from-report", metavar="FILE", help="diagnose a saved JSON report (e.g. from another machine)")
    p.add_argument("--format", choices=FORMATS, default="text", help="output format (default: text)")
    p.add_argument("--only", metavar="CODES", help="comma-separated rule codes, symbols or categories, e.g. ISA001,threads")
    p.add_argument("--list-rules", action="store_true", help="print the rule registry and exit")
    p.add_argument("-v", "--verbose", action="store_true", help="also show the details of passed checks and suggestions")
    p.add_argument("--no-software", action="store_true", help="skip the software stack (no child processes)")
    p.add_argument("-o", "--output", metavar="FILE", help="write to FILE instead of stdout")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from cpudoctor import advisor
    from cpudoctor.advisor.engine import UnknownRuleError, resolve_only

    if args.list_rules:
        emit(render_rules(advisor.registry(), args.format), args.output)
        return 0
    only = None
    if args.only is not None:
        items = [c for c in args.only.split(",") if c.strip()]
        if not items:
            raise CliError("--only: give at least one rule code, e.g. --only ISA001,THR002")
        try:
            only = resolve_only(items)
        except UnknownRuleError as exc:
            raise CliError(f"--only: {exc}") from None
    report, label = _load(args)
    findings = advisor.diagnose(report, only=only)
    if args.format == "json":
        text = render_json(report, findings, label)
    elif args.format == "md":
        text = render_md(report, findings, label, verbose=args.verbose)
    else:
        text = render_text(report, findings, label, verbose=args.verbose, ascii_only=not _can_encode(args.output))
    emit(text, args.output)
    return 1 if any(f.severity == "error" for f in findings) else 0


def _load(args: argparse.Namespace):
    from cpudoctor.report import Report, ReportError

    if args.from_report:
        try:
            return Report.load(args.from_report), f"saved report {Path(args.from_report).name}"
        except ReportError as exc:
            raise CliError(f"--from-report: {exc}") from None
    from cpudoctor.collect import collect_report

    root = root_arg(args.root)
    live = root.resolve() == Path("/")
    if not live:
        from cpudoctor.commands import check_tree

        check_tree(root, args.root)   # a wrong folder must not read as "No issues found!"
    report = collect_report(root, software=live and not args.no_software, children=True)
    return report, ("this machine" if live else f"captured tree {root}")


def _can_encode(output: str | None) -> bool:
    if output and output != "-":
        return True  # files are written as UTF-8
    enc = getattr(sys.stdout, "encoding", None) or "ascii"
    try:
        "✓✗•".encode(enc)
    except (UnicodeEncodeError, LookupError):
        return False
    return True


# ---------------------------------------------------------------- shared

def _machine_line(report) -> str:
    cpu, topo = report.cpu, report.topology
    parts = [cpu.brand or "unknown CPU"]
    if cpu.microarchitecture:
        parts.append(f"({cpu.microarchitecture})")
    counts = []
    if topo.cores:
        counts.append(f"{topo.cores} core{'' if topo.cores == 1 else 's'}")
    if topo.logical_cpus:
        counts.append(f"{topo.logical_cpus} thread{'' if topo.logical_cpus == 1 else 's'}")
    if counts:
        parts.append("· " + ", ".join(counts))
    sw = report.software
    if sw is not None and sw.os.system:
        parts.append(f"· {sw.os.distro or sw.os.system}")
    return " ".join(parts)


def _grouped(findings):
    from cpudoctor.advisor.engine import CATEGORIES, SEVERITY_RANK

    groups: dict[str, list] = {}
    for f in findings:
        groups.setdefault(f.category, []).append(f)
    order = {c: i for i, c in enumerate(CATEGORIES)}
    out = []
    for cat in sorted(groups, key=lambda c: order.get(c, 99)):
        items = sorted(groups[cat], key=lambda f: (-SEVERITY_RANK[f.severity], f.code))
        out.append((cat, CATEGORIES.get(cat, cat), items))
    return out


def summary_line(findings) -> str:
    from cpudoctor.advisor.engine import worst

    bad = [cat for cat, _, items in _grouped(findings) if worst(items) in ("warning", "error")]
    n_err = sum(1 for f in findings if f.severity == "error")
    n_warn = sum(1 for f in findings if f.severity == "warning")
    n_info = sum(1 for f in findings if f.severity == "info")
    counts = ", ".join(p for p in (
        f"{n_err} error{'s' if n_err != 1 else ''}" if n_err else "",
        f"{n_warn} warning{'s' if n_warn != 1 else ''}" if n_warn else "",
        f"{n_info} suggestion{'s' if n_info != 1 else ''}" if n_info else "",
    ) if p)
    if not bad:
        return "No issues found!" + (f" ({counts})" if counts else "")
    return f"Doctor found issues in {len(bad)} categor{'ies' if len(bad) != 1 else 'y'} ({counts})."


# ---------------------------------------------------------------- text

def render_text(report, findings, label: str, *, verbose: bool = False, ascii_only: bool = False) -> str:
    from cpudoctor.advisor.engine import worst

    marks = _ASCII_MARKS if ascii_only else _MARKS
    lines = [f"CPU Doctor — {label}: {_machine_line(report)}", ""]
    if not findings:
        lines.append("No rule had enough facts to check anything (is the report empty?).")
    for _cat, title, items in _grouped(findings):
        w = worst(items)
        cat_mark = marks["ok"] if w in ("ok", "info") else marks[w]
        lines.append(f"[{cat_mark}] {title}")
        for f in items:
            lines.append(f"    {marks[f.severity]} {f.title} ({f.code})")
            detailed = f.severity in ("warning", "error") or (verbose and f.severity == "info")
            if detailed:
                lines += _indent_wrapped(f.why, 8)
                if f.fix:
                    lines += _indent_wrapped("Fix: " + f.fix, 8)
                if f.snippet:
                    lines += ["          " + s for s in f.snippet.splitlines()]
            elif f.severity == "info" and f.fix:
                lines += _indent_wrapped(f.fix, 8)
            if verbose and f.evidence:
                ev = ", ".join(f"{k}={_evidence_value(v)}" for k, v in f.evidence.items())
                lines += _indent_wrapped("Evidence: " + ev, 8)
    lines += ["", summary_line(findings)]
    if any(f.severity in ("warning", "error") for f in findings):
        lines.append("Run `cpudoctor explain CODE` for the full story of a check.")
    text = "\n".join(lines) + "\n"
    if ascii_only:
        text = text.replace("—", "-").replace("·", "-")
        text = text.encode("ascii", "replace").decode("ascii")
    return text


def _evidence_value(value) -> str:
    """Report values as a reader says them: unknown (not None), yes/no (not True/False)."""
    if value is None:
        return "unknown"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)


def _indent_wrapped(text: str, indent: int, width: int = 100) -> list[str]:
    import textwrap

    pad = " " * indent
    return textwrap.wrap(text, width=width, initial_indent=pad, subsequent_indent=pad,
                         break_on_hyphens=False, break_long_words=False) if text else []


# ---------------------------------------------------------------- json / md

def render_json(report, findings, label: str) -> str:
    from cpudoctor.serde import to_data

    n_err = sum(1 for f in findings if f.severity == "error")
    data = {
        "source": label,
        "machine": _machine_line(report),
        "summary": summary_line(findings),
        "exit_code": 1 if n_err else 0,
        "counts": {s: sum(1 for f in findings if f.severity == s) for s in ("ok", "info", "warning", "error")},
        "findings": [to_data(f) for f in findings],
    }
    return json.dumps(data, indent=2, ensure_ascii=False)


def render_md(report, findings, label: str, *, verbose: bool = False) -> str:
    from cpudoctor.advisor.engine import worst

    lines = [f"## CPU Doctor — {label}", "", f"**{_machine_line(report)}**", ""]
    for _cat, title, items in _grouped(findings):
        lines.append(f"### {_MD_MARKS[worst(items) if worst(items) != 'info' else 'ok']} {title}")
        lines.append("")
        for f in items:
            lines.append(f"- {_MD_MARKS[f.severity]} **{f.title}** (`{f.code}` [{f.symbol}]({docs_url(f.docs)}))")
            if f.severity in ("warning", "error", "info") and (f.severity != "info" or verbose or f.snippet):
                if f.why:
                    lines.append(f"  {f.why}")
                if f.fix:
                    lines.append(f"  **Fix:** {f.fix}")
                if f.snippet:
                    lines += ["", f"  ```{f.snippet_lang}", *[f"  {s}" for s in f.snippet.splitlines()], "  ```"]
        lines.append("")
    lines.append(f"_{summary_line(findings)}_")
    return "\n".join(lines) + "\n"


def render_rules(rules, fmt: str) -> str:
    """The registry as a table (text), JSON list, or Markdown table."""
    from cpudoctor.advisor.engine import CATEGORIES

    if fmt == "json":
        return json.dumps([{"code": r.code, "symbol": r.symbol, "category": r.category, "severity": r.severity,
                            "title": r.title, "docs": r.docs_anchor} for r in rules], indent=2)
    if fmt == "md":
        rows = ["| Code | Symbol | Category | Worst | Title |", "|---|---|---|---|---|"]
        rows += [f"| [{r.code}]({docs_url(r.docs_anchor)}) | `{r.symbol}` | {CATEGORIES[r.category]} | {r.severity} | {r.title} |" for r in rules]
        return "\n".join(rows) + "\n"
    w_sym = max(len(r.symbol) for r in rules)
    w_cat = max(len(r.category) for r in rules)
    lines = [f"{'CODE':<9}{'SYMBOL':<{w_sym + 2}}{'CATEGORY':<{w_cat + 2}}{'WORST':<9}TITLE"]
    lines += [f"{r.code:<9}{r.symbol:<{w_sym + 2}}{r.category:<{w_cat + 2}}{r.severity:<9}{r.title}" for r in rules]
    from cpudoctor.advisor.process_rules import process_rules

    procs = process_rules()
    lines.append(f"\n{len(rules)} rules. `cpudoctor explain CODE` prints one in full.")
    if procs:   # judged on a running process, not a report, but `explain` knows them too
        lines.append(f"{len(procs)} more ({procs[0].code}-{procs[-1].code}) check a running job: `cpudoctor inspect PID`.")
    return "\n".join(lines) + "\n"
