"""``cpudoctor explain CODE``: what a check looks at, why it matters, how to fix it."""

from __future__ import annotations

import argparse

from cpudoctor.commands import CliError, emit


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "explain",
        help="explain one advisor check (e.g. cpudoctor explain ISA001)",
        description="Print a rule's documentation: what it checks, why it matters, and the fix.",
    )
    p.add_argument("code", metavar="CODE", help="a rule code (ISA001), symbol (avx512-not-usable) or a renamed code")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from cpudoctor.advisor.engine import UnknownRuleError
    from cpudoctor.render.rules import explain_text

    try:
        text = explain_text(args.code)
    except UnknownRuleError as exc:
        raise CliError(str(exc)) from None
    emit(text, None)
    return 0
