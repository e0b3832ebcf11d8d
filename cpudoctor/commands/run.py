"""``cpudoctor run [options] -- COMMAND [ARGS]``: run a job and say, from evidence, why it is slow.

The job's stdout, stderr and exit code pass through unchanged; the diagnosis goes
to stderr (or ``-o FILE``), never into the job's stdout. While it runs, its
stacks and thread states are sampled, oneDNN's verbose profile and PyTorch's
recompilation log are switched on (and their lines kept out of the job's
output), and the CPUs of every process it forks are recorded. At the end (the
job exits, Ctrl-C, or ``--seconds`` passed: SIGINT, then SIGTERM) the report
says where the time went and what to change.

Exit code: the job's (128 + signal when a signal ended it); 2 for bad usage,
127 when the command does not exist.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import sys

from cpudoctor.argtypes import output_file
from cpudoctor.commands import CliError, output_format, python_choice

_PYTHON_RE = re.compile(r"^python(\d+(\.\d+)?)?$")
FORMATS = ("text", "json", "md", "html")


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "run",
        help="run a training command and explain, from what it did, why it is slow",
        description="Run COMMAND, pass its output and exit code through, and print where its time went "
                    "and what to change (to stderr, or -o FILE).",
        usage="cpudoctor run [--seconds N] [--python PATH|ENV] [--no-probe] [--format text|json|md|html] [-o FILE] "
              "-- COMMAND [ARGS...]",
    )
    p.add_argument("--seconds", "-s", type=_seconds, metavar="N",
                   help="stop the job after N seconds (SIGINT, then SIGTERM) and report; default: until it exits")
    p.add_argument("--python", metavar="PATH|ENV",
                   help="run a leading `python` (or a .py script) with this environment's interpreter "
                        "(a path, an environment folder or a name from `cpudoctor envs`)")
    p.add_argument("--format", "-f", choices=FORMATS, default=None,
                   help="text, json, md or html (default: from the -o file name's ending, else text)")
    p.add_argument("--output", "-o", metavar="FILE", type=output_file,
                   help="write the report to FILE instead of stderr")
    p.add_argument("--no-probe", action="store_true",
                   help="do not load CPU Doctor's probe into a Python job (it reads the job's torch and Python state "
                        "from inside: thread settings and the line that set them, modes, dtypes, DataLoaders, steps)")
    p.add_argument("--rate", type=_rate, metavar="HZ", help=argparse.SUPPRESS)
    p.add_argument("argv", nargs=argparse.REMAINDER, metavar="COMMAND", help="the command to run, after --")
    p.set_defaults(func=run)


def _seconds(value: str) -> float:
    try:
        s = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a number of seconds") from None
    if not 1 <= s <= 7 * 24 * 3600:
        raise argparse.ArgumentTypeError(f"{value} s is out of range: give 1 second to 7 days")
    return s


def _rate(value: str) -> int:
    if not value.isdigit() or not 1 <= int(value) <= 500:
        raise argparse.ArgumentTypeError(f"{value!r}: give 1 to 500 samples a second")
    return int(value)


def command_line(argv: list[str], python: str | None) -> list[str]:
    """``argv`` with a leading ``python``/``python3.11`` (or a bare ``train.py``) run by ``python``."""
    if not python:
        return argv
    first = os.path.basename(argv[0])
    if _PYTHON_RE.match(first):
        return [python, *argv[1:]]
    if argv[0].endswith(".py"):
        return [python, *argv]
    raise CliError(f"--python runs a leading `python` or a .py script; {argv[0]!r} is neither "
                   "(drop --python, or start the command with python)")


def run(args: argparse.Namespace) -> int:
    argv = list(args.argv or [])
    if argv and argv[0] == "--":
        argv = argv[1:]
    if not argv:
        raise CliError("give the command to run after --, e.g. cpudoctor run -- python train.py")
    args.format = output_format(args.output, args.format, FORMATS)     # before the command runs
    python = None
    if args.python:
        python, _why = python_choice(args.python)
        python = python or sys.executable
    argv = command_line(argv, python)
    from cpudoctor.jobrun import run_job
    from cpudoctor.render.run_report import RENDERERS

    obs, findings = run_job(argv, seconds=args.seconds, rate=args.rate, probe=not args.no_probe, display=shlex.join(args.argv[1:] if
                            args.argv and args.argv[0] == "--" else args.argv))
    text = RENDERERS[args.format](obs, findings)
    if args.output:
        from cpudoctor.commands import emit

        emit(text, args.output)
    else:
        _to_stderr(text)
    if obs.ended_by == "failed":
        raise CliError(obs.error or "the command could not be started", code=obs.exit_code or 127)
    return obs.exit_code if obs.exit_code is not None else 1


def _to_stderr(text: str) -> None:
    from cpudoctor.kits.escape import terminal_safe

    try:
        sys.stderr.write(terminal_safe(text))
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
