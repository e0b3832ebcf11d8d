"""``cpudoctor doctor``: every check in one screen, flutter-doctor style.

One line per check with a mark ([✓] fine, [!] worth fixing, [✗] broken),
grouped by category, the why and the fix indented under each problem, and a
closing summary line (:mod:`cpudoctor.render.doctor`). The report comes from
the same pipeline as ``cpudoctor report``, with the same ``--root``,
``--from-report`` and ``--fast``, so both commands find the same things.
Exit code 0 when nothing is an error, 1 when something is, 2 on bad usage or
an unreadable report — so scripts and CI can gate on it.
"""

from __future__ import annotations

import argparse

from cpudoctor.commands import CliError, add_shell_option, add_source_options, emit, output_format, source_from
from cpudoctor.argtypes import output_file
from cpudoctor.render.doctor import FORMATS


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "doctor",
        help="check this machine (or a saved report) and say what to fix",
        description=("Run every advisor rule and print one line per check, grouped, with the fix under each "
                     "problem. Exit code: 0 no error, 1 an error was found, 2 bad usage or unreadable report."),
    )
    add_source_options(p)
    p.add_argument("--format", choices=FORMATS, default=None,
                   help="output format (default: from the -o file name's ending, else text)")
    p.add_argument("--only", metavar="CODES", help="comma-separated rule codes, symbols or categories, e.g. ISA001,threads")
    p.add_argument("--list-rules", action="store_true", help="print the rule registry and exit")
    p.add_argument("-v", "--verbose", action="store_true", help="also show the details of passed checks and suggestions")
    p.add_argument("-o", "--output", metavar="FILE", type=output_file,
                   help="write to FILE instead of stdout")
    add_shell_option(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from cpudoctor import advisor, doctor_run
    from cpudoctor.model import ReportError
    from cpudoctor.render import doctor as page

    args.format = output_format(args.output, args.format, FORMATS)
    if args.list_rules:
        from cpudoctor.advisor.process_rules import process_rules

        emit(page.render_rules(advisor.registry(), args.format, process_rules()), args.output)
        return 0
    only = _only(args.only)
    source = source_from(args)
    ascii_only = not (bool(args.output) and args.output != "-") and not doctor_run.can_print()   # files are UTF-8
    try:
        done = doctor_run.run(source, fmt=args.format, verbose=args.verbose, fast=args.fast, only=only,
                              ascii_only=ascii_only, shell=args.shell)
    except ReportError as exc:
        raise CliError(f"--from-report: {exc}") from None
    emit(done.text, args.output)
    return done.exit_code


def _only(value: str | None) -> set[str] | None:
    from cpudoctor.advisor import UnknownRuleError, resolve_only

    if value is None:
        return None
    items = [c for c in value.split(",") if c.strip()]
    if not items:
        raise CliError("--only: give at least one rule code, e.g. --only ISA001,THR002")
    try:
        return resolve_only(items)
    except UnknownRuleError as exc:
        raise CliError(f"--only: {exc}") from None
