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
        from cpudoctor.kits.escape import one_line

        self.exit(2, f"{self.prog}: error: {one_line(message)} (see {self.prog} --help)\n")


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The whole command line; with ``command`` (``compare``), only that subcommand's parser.

    ``cpudoctor compare A B`` needs only compare's options: registering all nine
    subcommands imports what each of them uses (about a third of a second).
    """
    parser = _Parser(
        prog="cpudoctor",
        description="Is this CPU set up well for deep learning? With no command, opens the window.",
    )
    parser.add_argument("--version", action="version", version=f"cpudoctor {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name in COMMANDS if command is None else (command,):
        importlib.import_module(f"cpudoctor.commands.{name}").register(sub)
    return parser


def command_of(argv: list[str]) -> str | None:
    """The subcommand ``argv`` starts with (its module's name), or None (``--help``, a typo)."""
    name = argv[0].replace("-", "_") if argv else ""
    return name if name in COMMANDS else None


def _innermost(parser: argparse.ArgumentParser, args: argparse.Namespace) -> argparse.ArgumentParser:
    """The (sub)parser of the command that was given: `bench train` -> the train parser."""
    for dest in ("command", "job"):
        name = getattr(args, dest, None)
        action = next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)
        if name is None or action is None or name not in action.choices:
            break
        parser = action.choices[name]
    return parser


def _reopen_closed_std_fds() -> bool:
    """Give closed fds 0-2 /dev/null (as daemons do); True when stdout (fd 1) was closed.

    Without this, the first file CPU Doctor opens would become fd 1, and
    anything printed (or a child's inherited stdout) would land in it.
    """
    import os

    stdout_closed = False
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            try:
                got = os.open(os.devnull, os.O_RDWR)
            except OSError:
                continue
            if got != fd:
                os.dup2(got, fd)
                os.close(got)
            stdout_closed = stdout_closed or fd == 1
    return stdout_closed


def _silence_stdout() -> None:
    """After a failed write, point fd 1 at /dev/null so the interpreter's final flush cannot fail again."""
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno() if sys.stdout is not None else 1)
        os.close(devnull)
    except (OSError, ValueError):
        pass


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
    import cpudoctor.commands as commands
    from cpudoctor.kits.child.own import run_hidden_entry

    stdout_closed = _reopen_closed_std_fds()   # first: the next file opened must not become fd 1
    argv = sys.argv[1:] if argv is None else list(argv)
    # `--run-module M` / `--run-script F`: how the standalone app runs its own children (no -m there).
    hidden = run_hidden_entry(argv)
    if hidden is not None:
        return hidden
    if opens_window(argv):
        from cpudoctor.gui.app import main as gui_main

        return gui_main(argv)
    if stdout_closed or sys.stdout is None:
        commands.STDOUT_CLOSED = True
    parser = build_parser(command_of(argv))
    args, extra = parser.parse_known_args(argv)
    if extra:
        # argparse reports leftovers from the top parser ("see cpudoctor --help"); name the subcommand instead.
        _innermost(parser, args).error(f"unrecognized arguments: {' '.join(extra)}")
    if args.command is None:            # only options the window does not know, e.g. `cpudoctor --bogus`
        parser.error("choose a command, or run cpudoctor with no arguments for the window")
    try:
        code = int(args.func(args) or 0)
        if sys.stdout is not None:
            sys.stdout.flush()
        return code
    except CliError as exc:
        _error(args.command, str(exc))
        return exc.code
    except ValueError as exc:
        from cpudoctor.knowledge.datafile import KnowledgeError

        if not isinstance(exc, KnowledgeError):
            raise
        _error(args.command, str(exc))      # a damaged installation: one line naming the file, not a traceback
        return 1
    except KeyboardInterrupt:
        _error(args.command, "interrupted", prefix="")
        return 130
    except BrokenPipeError:
        _silence_stdout()                    # the reader went away (| head): not an error
        return 0
    except OSError as exc:
        if exc.filename is not None:         # a file no check caught: still one line, exit 1 (I/O)
            _error(args.command, f"{exc.strerror or exc}: {str(exc.filename)[:200]}")
            return 1
        from cpudoctor.commands import output_failed

        _silence_stdout()
        _error(args.command, output_failed(exc))
        return 1


def _error(command: str, message: str, prefix: str = "error: ") -> None:
    """The one line on stderr (which may itself be closed or full: then nothing is said)."""
    from cpudoctor.kits.escape import one_line

    try:
        print(f"cpudoctor {command}: {prefix}{one_line(message)}", file=sys.stderr)
    except (OSError, ValueError, AttributeError):
        pass


if __name__ == "__main__":
    raise SystemExit(main())
