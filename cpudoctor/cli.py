"""The ``cpudoctor`` command: subcommands for headless machines, the window otherwise."""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path

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


def opens_window(argv: list[str]) -> bool:
    """True when ``argv`` is for the window: nothing, a saved report to open, or window options.

    ``cpudoctor`` is one program for both (the standalone app has one executable), so
    ``cpudoctor report.json`` and ``cpudoctor --page topology`` open the window the way
    ``cpudoctor-gui`` does, while ``cpudoctor report ...`` stays the command.
    """
    if not argv:
        return True
    first = argv[0]
    if first.replace("-", "_") in COMMANDS or first in ("-h", "--help", "--version"):
        return False
    if first.startswith("-"):
        from cpudoctor.gui.app import build_parser as gui_parser     # argparse only: no Qt is imported

        window_options = {s for a in gui_parser()._actions for s in a.option_strings} - {"-h", "--help", "--version"}
        return first.split("=", 1)[0] in window_options
    return Path(first).is_file()


def main(argv: list[str] | None = None) -> int:
    from cpudoctor.probes.child.own import run_hidden_entry

    argv = sys.argv[1:] if argv is None else list(argv)
    # `--run-module M` / `--run-script F`: how the standalone app runs its own children (no -m there).
    hidden = run_hidden_entry(argv)
    if hidden is not None:
        return hidden
    if opens_window(argv):
        from cpudoctor.gui.app import main as gui_main

        return gui_main(argv)
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra:
        # argparse reports leftovers from the top parser ("see cpudoctor --help"); name the subcommand instead.
        _innermost(parser, args).error(f"unrecognized arguments: {' '.join(extra)}")
    if args.command is None:            # only options the window does not know, e.g. `cpudoctor --bogus`
        parser.error("choose a command, or run cpudoctor with no arguments for the window")
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
