"""``cpudoctor report``: everything CPU Doctor knows about a machine, as text, Markdown, JSON, HTML or PDF.

The report is built by the one pipeline every surface uses
(:func:`cpudoctor.pipeline.build_report`) and goes through the same export
path as the GUI (redacted unless ``--include-identifying``), so what a person
pastes into a bug tracker never differs between the two. Bad usage, an
unreadable ``--root`` or ``--from-report``, or an output that cannot be
written is one line on stderr and exit code 2.
"""

from __future__ import annotations

import argparse
import sys

from cpudoctor.commands import CliError, add_shell_option, add_source_options, build, emit, output_format, source_from
from cpudoctor.argtypes import output_file


def register(subparsers) -> None:
    from cpudoctor.privacy import KEPT_WHEN_INCLUDED
    from cpudoctor.render import FORMATS, format_name

    formats = tuple(FORMATS)
    p = subparsers.add_parser(
        "report",
        help="print the CPU, topology and software report (text, Markdown, JSON, HTML or PDF)",
        description=("Probe this machine (or a captured /proc+/sys tree with --root, or re-read a saved report "
                     "with --from-report) and print the report. Identifying details (user names, home paths, "
                     "serials) are replaced by placeholders unless --include-identifying is given; the host name "
                     "is never collected."),
    )
    add_source_options(p)
    p.add_argument("--format", type=format_name, choices=formats, default=None,
                   help=f"output format: {', '.join(formats)} (default: from the -o file name's ending, else text; "
                        "an ending that names no format is refused)")
    p.add_argument("-o", "--output", metavar="FILE", type=output_file,
                   help="write to FILE (atomically) instead of stdout")
    p.add_argument("--no-findings", action="store_true", help="leave out the advisor's findings")
    p.add_argument("--include-identifying", action="store_true",
                   help=f"keep {KEPT_WHEN_INCLUDED} (default: replaced by placeholders)")
    add_shell_option(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from cpudoctor.export import ExportError, render_export

    from cpudoctor.render import FORMATS

    fmt = output_format(args.output, args.format, tuple(FORMATS))
    if fmt == "pdf" and (not args.output or args.output == "-") and sys.stdout.isatty():
        raise CliError("a PDF is binary and would garble the terminal; give -o FILE.pdf (or pipe it)")
    report = build(source_from(args), fast=args.fast, findings=not args.no_findings)
    if args.no_findings:
        report.findings = []          # a saved report's own findings are left out too
    from cpudoctor.advisor.snippets import user_shell

    try:
        data = render_export(report, fmt, include_identifying=args.include_identifying,
                             shell=args.shell or user_shell(report))
    except ExportError as exc:
        raise CliError(str(exc)) from None
    emit(data, args.output)
    return 0
