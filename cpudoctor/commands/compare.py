"""``cpudoctor compare A.json B.json``: what differs between two saved reports.

Before/after a fix on one machine, or machine A against machine B: chip,
flags, topology, software, thread environment, findings (new / resolved /
changed severity) and benchmark figures with ratios. Exit 0 when compared
(whether or not they differ), 2 for a missing, corrupt, foreign or
other-schema file.
"""

from __future__ import annotations

from cpudoctor.report_file import load_report
from cpudoctor.commands import CliError, emit


def register(subparsers) -> None:
    p = subparsers.add_parser("compare", help="compare two saved JSON reports (before/after, machine A vs B)",
                              description="Show what differs between two saved CPU Doctor JSON reports.")
    p.add_argument("a", metavar="A.json", help="first report (e.g. before)")
    p.add_argument("b", metavar="B.json", help="second report (e.g. after)")
    p.add_argument("--format", "-f", choices=("text", "md", "json"), default="text")
    p.add_argument("--output", "-o", metavar="FILE", help="write to FILE instead of stdout")
    p.add_argument("--include-identifying", action="store_true",
                   help="keep host names, user names and home paths (default: replaced by placeholders)")
    p.set_defaults(func=run)


def run(args) -> int:
    from cpudoctor.compare import RENDERERS, compare
    from cpudoctor.privacy import redact_report
    from cpudoctor.model import ReportError

    reports = []
    for name in (args.a, args.b):
        try:
            report = load_report(name)
        except ReportError as exc:
            raise CliError(f"{name}: {exc}") from None
        reports.append(redact_report(report, include_identifying=args.include_identifying))
    emit(RENDERERS[args.format](compare(*reports)), args.output)
    return 0
