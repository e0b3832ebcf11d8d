"""The ``cpudoctor`` command: subcommands for headless machines, the window otherwise."""

from __future__ import annotations

import argparse
import importlib
import sys

from cpudoctor import __version__
from cpudoctor.commands import COMMANDS, CliError


class _Parser(argparse.ArgumentParser):
    """argparse that reports bad usage as one line and exit code 2 (no usage dump)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="cpudoctor",
        description="Is this CPU set up well for deep learning? With no command, opens the window.",
    )
    parser.add_argument("--version", action="version", version=f"cpudoctor {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name in COMMANDS:
        importlib.import_module(f"cpudoctor.commands.{name}").register(sub)
    return parser


def _innermost(parser: argparse.ArgumentParser, args: argparse.Namespace) -> argparse.ArgumentParser:
    """The (sub)parser of the command that was given: `bench train` -> the train parser."""
    for dest in ("command", "job"):
        name = getattr(args, dest, None)
        action = next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)
        if name is None or action is None or name not in action.choices:
            break
        parser = action.choices[name]
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra:
        # argparse reports leftovers from the top parser ("see cpudoctor --help"); name the subcommand instead.
        _innermost(parser, args).error(f"unrecognized arguments: {' '.join(extra)}")
    if args.command is None:
        from cpudoctor.gui.app import main as gui_main

        return gui_main([])
    try:
        return int(args.func(args) or 0)
    except CliError as exc:
        print(f"cpudoctor {args.command}: error: {exc}", file=sys.stderr)
        return exc.code
    except KeyboardInterrupt:
        print(f"cpudoctor {args.command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    raise SystemExit(main())
