"""``cpudoctor compare A.json B.json``: what differs between two saved reports.

Before/after a fix on one machine, or machine A against machine B: first the
Python environments the two reports describe (and what changed in them), then
chip, flags, topology, software, findings (new / fixed / no longer applies /
changed severity) and benchmark figures with ratios. Exit 0 when compared
(whether or not they differ), 2 for a missing, corrupt, foreign or
other-schema file.
"""

from __future__ import annotations

from cpudoctor.commands import CliError, emit, output_format
from cpudoctor.argtypes import output_file

FORMATS = ("text", "md", "json")


def register(subparsers) -> None:
    from cpudoctor.privacy import KEPT_WHEN_INCLUDED

    p = subparsers.add_parser("compare", help="compare two saved JSON reports (before/after, machine A vs B)",
                              description="Show what differs between two saved CPU Doctor JSON reports.")
    p.add_argument("a", metavar="A.json", help="first report (e.g. before)")
    p.add_argument("b", metavar="B.json", help="second report (e.g. after)")
    p.add_argument("--format", "-f", choices=FORMATS, default=None,
                   help="text, md or json (default: from the -o file name's ending, else text)")
    p.add_argument("--output", "-o", metavar="FILE", type=output_file,
                   help="write to FILE instead of stdout")
    p.add_argument("--include-identifying", action="store_true",
                   help=f"keep {KEPT_WHEN_INCLUDED} (default: replaced by placeholders)")
    p.set_defaults(func=run)


def run(args) -> int:
    from cpudoctor.compare import RENDERERS, compare_files
    from cpudoctor.model import ReportError

    args.format = output_format(args.output, args.format, FORMATS)
    try:
        result = compare_files(args.a, args.b, include_identifying=args.include_identifying)
    except ReportError as exc:
        raise CliError(str(exc)) from None
    emit(RENDERERS[args.format](result), args.output)
    return 0
