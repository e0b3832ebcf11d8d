"""``cpudoctor report``: everything CPU Doctor knows about a machine, as text, Markdown or JSON.

The report goes through the same export path as the GUI (redacted unless
``--include-identifying``), so what a person pastes into a bug tracker never
differs between the two. Bad usage, an unreadable ``--root`` or an output that
cannot be written is one line on stderr and exit code 2.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from cpudoctor.commands import CliError, emit, root_arg

_ALIASES = {"markdown": "md", "txt": "text", "htm": "html"}


def _formats() -> tuple[str, ...]:
    from cpudoctor.render import FORMATS

    return tuple(FORMATS)


def _format(value: str) -> str:
    value = value.strip().lower()
    return _ALIASES.get(value, value)


def register(subparsers) -> None:
    formats = _formats()
    p = subparsers.add_parser(
        "report",
        help="print the CPU, topology and software report (text, Markdown or JSON)",
        description=("Probe this machine (or a captured /proc+/sys tree with --root) and print the report. "
                     "Identifying details (host and user names, home paths, serials) are replaced by placeholders "
                     "unless --include-identifying is given."),
    )
    p.add_argument("--root", metavar="DIR", help="read a captured tree (the folder holding proc/ and sys/) instead of this machine")
    p.add_argument("--format", type=_format, choices=formats, default=None,
                   help=f"output format: {', '.join(formats)} (default: from the -o file name, else text)")
    p.add_argument("-o", "--output", metavar="FILE", help="write to FILE (atomically) instead of stdout")
    p.add_argument("--fast", action="store_true",
                   help="no child processes: skip the torch/BLAS facts and the CPUID cross-check (well under a second)")
    p.add_argument("--no-findings", action="store_true", help="leave out the advisor's findings")
    p.add_argument("--include-identifying", action="store_true",
                   help="keep host name, user name and paths (default: replaced by placeholders)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    fmt = args.format or _format_from_output(args.output)
    if fmt == "pdf" and (not args.output or args.output == "-") and sys.stdout.isatty():
        raise CliError("a PDF is binary and would garble the terminal; give -o FILE.pdf (or pipe it)")
    root = root_arg(args.root)
    live = _is_live(root)
    if not live:
        _check_tree(root, args.root)
    report = build(root, fast=args.fast, findings=not args.no_findings)
    emit(_render(report, fmt, args.include_identifying), args.output)
    return 0


def build(root: Path, fast: bool = False, findings: bool = True):
    """Collect the report; on the live machine (and not ``fast``) also cross-check CPUID in a child."""
    from cpudoctor.collect import collect_report

    live = _is_live(root)
    report = collect_report(root, software=True, children=not fast)
    if live and not fast and report.cpu.arch in ("x86_64", "i686"):
        from cpudoctor.probes.cpu.cpuid_check import cross_check

        report.cpu.notes.extend(cross_check(report.cpu))
    if findings:
        try:
            from cpudoctor import advisor

            report.findings = advisor.diagnose(report)
        except Exception as exc:  # noqa: BLE001 - a broken rule must not cost the user the whole report
            report.notes.append(f"the advisor failed ({type(exc).__name__}: {exc}); findings are missing")
    return report


def _render(report, fmt: str, include_identifying: bool) -> bytes:
    from cpudoctor.export import FORMATS as EXPORT_FORMATS
    from cpudoctor.export import ExportError, render_export

    if fmt in EXPORT_FORMATS:
        try:
            return render_export(report, fmt, include_identifying=include_identifying)
        except ExportError as exc:
            raise CliError(str(exc)) from None
    from cpudoctor.render import render

    out = render(report, fmt)
    return out if isinstance(out, bytes) else out.encode("utf-8")


def _format_from_output(output: str | None) -> str:
    if not output or output == "-":
        return "text"
    from cpudoctor.export import format_for_path

    fmt = format_for_path(output, default="text")
    return fmt if fmt in _formats() else "text"


def _check_tree(root: Path, given: str | None) -> None:
    from cpudoctor.commands import check_tree

    check_tree(root, given)


def _is_live(root: Path) -> bool:
    try:
        return root.resolve() == Path("/")
    except OSError:
        return False
