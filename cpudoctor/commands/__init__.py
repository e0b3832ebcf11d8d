"""CLI subcommands, one module each.

Each module has ``register(subparsers)`` which adds its parser and sets
``func=run``; ``run(args) -> int`` returns the exit code. Errors meant for the
user are raised as :class:`CliError` and printed as one line, exit code 2.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cpudoctor.pipeline import Source
    from cpudoctor.model import Report

# Order is the order of `cpudoctor --help`.
COMMANDS: tuple[str, ...] = ("report", "inspect", "run", "fit", "doctor", "explain", "envs", "compare", "capture",
                             "install_desktop", "bench")


class CliError(Exception):
    """Bad usage or input: printed as one line, exit code ``code`` (default 2)."""

    def __init__(self, message: str, code: int = 2):
        super().__init__(message)
        self.code = code


def add_source_options(p: argparse.ArgumentParser) -> None:
    """``--root`` / ``--from-report`` and ``--fast``: the same options, meaning the same thing, on every command
    that builds a report (``report``, ``doctor``)."""
    src = p.add_mutually_exclusive_group()
    src.add_argument("--root", metavar="DIR",
                     help="read a captured /proc+/sys tree (the folder holding proc/ and sys/) instead of this machine")
    src.add_argument("--from-report", metavar="FILE",
                     help="a saved JSON report (e.g. from another machine), diagnosed with this CPU Doctor's rules")
    p.add_argument("--python", metavar="PATH|ENV",
                   help="the Python environment to describe: an interpreter, an environment folder or a name from "
                        "`cpudoctor envs` (default: the one you most likely train in)")
    p.add_argument("--fast", action="store_true",
                   help="no child processes: skip the PyTorch/BLAS facts, import checks and CPUID cross-check "
                        "(well under a second)")
    # The old name of --fast on `doctor`; kept so scripts that use it keep working.
    p.add_argument("--no-software", dest="fast", action="store_true", help=argparse.SUPPRESS)


SHELL_CHOICES = ("bash", "zsh", "fish", "powershell", "cmd")


def add_shell_option(p: argparse.ArgumentParser) -> None:
    """``--shell``: the shell the findings' commands are written for, the same on ``report`` and ``doctor``."""
    p.add_argument("--shell", choices=SHELL_CHOICES, default=None,
                   help="write the fixes' commands for this shell (default: your shell; PowerShell on Windows "
                        "and for a Windows machine's report)")


def source_from(args: argparse.Namespace) -> "Source":
    """The :class:`~cpudoctor.pipeline.Source` that ``--root`` / ``--from-report`` name (this machine by default)."""
    from cpudoctor.pipeline import Source

    python = getattr(args, "python", None)
    if getattr(args, "from_report", None):
        if python:
            raise CliError("--python describes an environment on this machine; a saved report already says which "
                           "environment it describes")
        return Source.saved(Path(args.from_report).expanduser())
    root = root_arg(args.root)
    source = Source.tree(root)
    if not source.live:
        if python:
            raise CliError("--python describes an environment on this machine, not in a captured tree")
        check_tree(root, args.root)    # a wrong folder must not read as "No issues found!"
        return source
    from cpudoctor.pipeline import chosen_source
    from cpudoctor.probes.software.envs import EnvError

    try:   # --fast: the default environment is decided without running any interpreter
        return chosen_source(python, fast=bool(getattr(args, "fast", False)))
    except EnvError as exc:
        raise CliError(str(exc)) from None


def python_choice(choice: str | None) -> tuple[str | None, str]:
    """(interpreter to run in or None for CPU Doctor's own, how it was chosen); a bad ``--python`` is exit 2."""
    from cpudoctor.pipeline import environment_python
    from cpudoctor.probes.software.envs import EnvError, training_environment

    try:
        env, chosen_by = training_environment(choice)
    except EnvError as exc:
        raise CliError(str(exc)) from None
    return environment_python(env), chosen_by


def build(source: "Source", *, fast: bool = False, findings: bool = True, only: set[str] | None = None) -> "Report":
    """The diagnosed report of ``source``; an unreadable saved report is a one-line error (exit 2)."""
    from cpudoctor.pipeline import build_report
    from cpudoctor.model import ReportError

    try:
        return build_report(source, children=not fast, findings=findings, only=only)
    except ReportError as exc:
        raise CliError(f"--from-report: {exc}") from None


def root_arg(value: str | None) -> Path:
    """Validate ``--root DIR``: it must be a readable folder (an empty ``--root ""`` is not ``/``)."""
    if value is not None and not value.strip():
        raise CliError('--root "": an empty name; give the folder that holds proc/ and sys/ '
                       "(leave --root out for this machine)")
    import stat

    root = Path(value or "/").expanduser()
    try:
        if not root.exists():
            raise CliError(f"--root {value}: no such folder")
        mode = os.stat(root).st_mode
        if not stat.S_ISDIR(mode):
            # Only a regular file may be an archive: opening a FIFO blocks, /dev/zero never ends (issue 29).
            hint = _archive_hint(root) if stat.S_ISREG(mode) else None
            kind = ("" if stat.S_ISREG(mode) else " (a named pipe)" if stat.S_ISFIFO(mode)
                    else " (a device)" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else " (a socket)")
            raise CliError(f"--root {value}: " + (hint or f"not a folder{kind}; give the folder that holds proc/ "
                                                          "and sys/"))
        next(iter(root.iterdir()), None)
    except OSError as exc:
        raise CliError(f"--root {value}: cannot read it ({exc.strerror or exc})") from None
    return root


def check_tree(root: Path, given: str | None) -> None:
    """A captured tree must hold proc/cpuinfo or sys/devices/system/cpu (Linux), windows/ or macos/,
    else it is the wrong folder."""
    from cpudoctor.kits.rooted import under
    from cpudoctor.probes.platforms import MACOS_DIR, WINDOWS_DIR

    def holds(d: Path) -> bool:
        return (under(d, "proc/cpuinfo").exists() or under(d, "sys/devices/system/cpu").is_dir()
                or under(d, WINDOWS_DIR).is_dir() or under(d, MACOS_DIR).is_dir())

    if holds(root):
        return
    try:
        inner = sorted(d for d in root.iterdir() if d.is_dir() and holds(d))
    except OSError:
        inner = []
    if len(inner) == 1:   # the folder a capture tarball was unpacked into, one level too high
        raise CliError(f"--root {given}: no proc/ or sys/ here, but {inner[0]} has them; use --root {inner[0]}")
    raise CliError(f"--root {given}: no proc/cpuinfo or sys/devices/system/cpu there; "
                   "give the folder that holds the captured proc/ and sys/ (windows/ or macos/ for a capture "
                   "of a Windows PC or a Mac)")


def _archive_hint(path: Path) -> str | None:
    """For a `cpudoctor capture` tarball given as --root: the command that unpacks it."""
    import tarfile

    try:
        with tarfile.open(path) as tar:
            first = next((m.name for m in tar), "")
    except (OSError, tarfile.TarError):
        return None
    top = first.split("/", 1)[0] or "the unpacked folder"
    return f"a tar archive, not a folder; unpack it first: tar xf {path} && use --root {top}"


# File name endings that mean plain text whatever a command writes (none at all, a log).
TEXT_SUFFIXES = frozenset({"", ".txt", ".text", ".log", ".out"})


def output_format(output: str | None, given: str | None, choices: "tuple[str, ...] | list[str]",
                  choose: str = "--format") -> str:
    """The format a command writes: ``--format`` when given, else the one the ``-o`` file's name asks for.

    No suffix (or ``.txt``, ``.log``) is text; a suffix naming a format the command writes picks it
    (``-o page.md``); any other (``-o x.docx``, or ``.pdf`` where no PDF is written) is refused rather than
    silently written as text under a name that promises something else.
    """
    from pathlib import Path

    from cpudoctor.render import FORMATS, format_of_suffix

    if given is not None:
        return given
    default = "text" if "text" in choices else choices[0]
    if not output or output == "-":
        return default
    suffix = Path(output).suffix.lower()
    if suffix in TEXT_SUFFIXES:
        return default
    fmt = format_of_suffix(output)
    if fmt in choices:
        return fmt
    if fmt:
        label = FORMATS[fmt].label
        what = f"{'an' if label[0] in 'AEHIOU' else 'a'} {label} ({suffix})"
    else:
        what = f"a '{suffix}' file"
    names = ", ".join(f"{c} ({FORMATS[c].suffix})" if c in FORMATS else c for c in choices)
    raise CliError(f"-o {output}: this command cannot write {what}; it writes {names}: name the file with one of "
                   f"those endings, or choose with {choose}")


def emit(text: str | bytes, output: str | None) -> None:
    """Print to stdout, or write atomically to ``output`` (CliError on failure).

    Text has its control characters stripped, for the terminal and for a file
    alike (:func:`cpudoctor.kits.escape.terminal_safe`, the one sanitiser of
    every text sink: a brand string from a captured tree could carry ANSI/OSC
    escape sequences or a bidi override); bytes (a PDF) are written as they
    are. A closed stdout or a full disk is one line and exit code 1, never a
    traceback.
    """
    import sys

    from cpudoctor.fileio import WriteError, atomic_write
    from cpudoctor.kits.escape import terminal_safe

    if output == "":
        raise CliError('-o "": an empty name; give a file name (or - for stdout)')
    if isinstance(text, str):
        text = terminal_safe(text)
    if output is None or output == "-":
        if STDOUT_CLOSED or sys.stdout is None:
            raise CliError("standard output is closed (>&-): give -o FILE to write the output somewhere", code=1)
        try:
            if isinstance(text, bytes):
                sys.stdout.buffer.write(text)
            else:
                sys.stdout.write(text if text.endswith("\n") else text + "\n")
            sys.stdout.flush()
        except BrokenPipeError:
            raise
        except OSError as exc:
            raise CliError(output_failed(exc), code=1) from None
        return
    try:
        atomic_write(output, text)
    except WriteError as exc:
        raise CliError(str(exc.strerror or exc), code=exc.exit_code) from None


# Set by cli.main when the process started with file descriptor 1 closed (``>&-``).
STDOUT_CLOSED = False


def output_failed(exc: OSError) -> str:
    """One line for a failed write to stdout (``> /dev/full``: no space left on device)."""
    import errno as _errno

    why = exc.strerror or str(exc)
    hint = "free some disk space" if exc.errno in (_errno.ENOSPC, _errno.EDQUOT) else "check where stdout goes"
    return f"cannot write the output to stdout: {why} ({hint}, or give -o FILE)"
