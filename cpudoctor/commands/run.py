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
FORMATS = ("text", "json", "md", "html", "pdf")


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "run",
        help="run a training command and explain, from what it did, why it is slow",
        description="Run COMMAND, pass its output and exit code through, and print where its time went "
                    "and what to change (to stderr, or -o FILE).",
        usage="cpudoctor run [--seconds N] [--python PATH|ENV] [--no-probe] [--roof REPORT|none] [--plot FILE.svg] "
              "[--format text|json|md|html|pdf] [-o FILE] -- COMMAND [ARGS...]",
    )
    p.add_argument("--seconds", "-s", type=_seconds, metavar="N",
                   help="stop the job after N seconds (SIGINT, then SIGTERM) and report; default: until it exits")
    p.add_argument("--python", metavar="PATH|ENV",
                   help="run a leading `python` (or a .py script) with this environment's interpreter "
                        "(a path, an environment folder or a name from `cpudoctor envs`)")
    p.add_argument("--format", "-f", choices=FORMATS, default=None,
                   help="text, json, md, html or pdf (default: from the -o file name's ending, else text)")
    p.add_argument("--output", "-o", metavar="FILE", type=output_file,
                   help="write the report to FILE instead of stderr")
    p.add_argument("--no-probe", action="store_true",
                   help="do not load CPU Doctor's probe into a Python job (it reads the job's torch and Python state "
                        "from inside: thread settings and the line that set them, modes, dtypes, DataLoaders, steps)")
    p.add_argument("--roof", metavar="REPORT|none",
                   help="hold the job's kernels against the measured roofs of this saved report (`cpudoctor bench "
                        "roofline --into REPORT`); default: the window's kept roofline run, else a quick measurement "
                        "after the job; `none`: count their rates without a roof")
    p.add_argument("--plot", metavar="FILE.svg|png", type=output_file,
                   help="draw the job's kernels on the roofline picture into FILE (SVG or PNG)")
    p.add_argument("--verbose-windows", type=_windows, metavar="on=S,every=S[,first=S]",
                   help="keep the libraries' verbose lines on for S seconds of every S (e.g. on=2,every=10,first=5) to "
                        "bound what watching costs; takes effect through the job's probe (Python jobs), else they "
                        "stay on all along")
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


_WINDOWS_RE = re.compile(r"^on=(\d+(?:\.\d+)?),every=(\d+(?:\.\d+)?)(?:,first=\d+(?:\.\d+)?)?$")


def _windows(value: str) -> str:
    m = _WINDOWS_RE.match(value.replace(" ", ""))
    if not m or not 0.2 <= float(m.group(1)) < float(m.group(2)) <= 86400:
        raise argparse.ArgumentTypeError(f"{value!r}: give on=S,every=S[,first=S] with 0.2 <= on < every, "
                                         "e.g. on=2,every=10,first=5")
    return value.replace(" ", "")


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
    if args.format == "pdf" and (not args.output or args.output == "-"):
        raise CliError("a PDF is written to a file: add -o FILE.pdf")
    if args.output and args.output != "-":          # the job runs once: where its diagnosis goes is checked first
        from cpudoctor.fileio import WriteError, check_writable

        try:
            check_writable(args.output)
        except WriteError as exc:
            raise CliError(str(exc.strerror or exc), code=exc.exit_code) from None
    if args.plot:                                   # the picture too: checked before the job, never after it
        from cpudoctor.fileio import WriteError, check_writable, same_file

        if args.output and args.output != "-" and same_file(args.plot, args.output):
            raise CliError(f"--plot and -o name the same file ({args.plot}): the picture would replace the diagnosis; "
                           "give each its own name")
        try:
            check_writable(args.plot, "--plot", pipes=False)
        except WriteError as exc:
            raise CliError(str(exc.strerror or exc), code=exc.exit_code) from None
    python = None
    if args.python:
        python, _why = python_choice(args.python)
        python = python or sys.executable
    argv = command_line(argv, python)
    roof = _roof_choice(args.roof, argv, python)
    from cpudoctor.jobrun import run_job
    from cpudoctor.render.run_report import RENDERERS

    obs, findings = run_job(argv, seconds=args.seconds, rate=args.rate, roof=roof, probe=not args.no_probe,
                            verbose_windows=args.verbose_windows, display=shlex.join(
                            args.argv[1:] if args.argv and args.argv[0] == "--" else args.argv))
    text = RENDERERS[args.format](obs, findings)
    if args.output:
        from cpudoctor.commands import emit

        emit(text, args.output)
    else:
        _to_stderr(text)
    if args.plot:
        _plot(args.plot, obs, roof)
    if obs.ended_by == "failed":
        raise CliError(obs.error or "the command could not be started", code=obs.exit_code or 127)
    return obs.exit_code if obs.exit_code is not None else 1


def _roof_choice(value: str | None, argv: list[str], python: str | None):
    """``--roof``: a saved report (read now, so a bad file is one line before the job runs), ``none``, or auto."""
    from cpudoctor.jobrun import RoofChoice

    job_python = python or (argv[0] if _PYTHON_RE.match(os.path.basename(argv[0])) else None)
    if value is None:
        return RoofChoice(python=job_python, notify=lambda text: _to_stderr(f"cpudoctor run: {text}\n"))
    if value.strip().lower() == "none":
        return RoofChoice(hold=False)
    from pathlib import Path

    from cpudoctor.lab.job_roofs import from_report
    from cpudoctor.model.report import ReportError

    path = Path(value).expanduser()
    try:
        found = from_report(path)
    except (ReportError, OSError) as exc:
        raise CliError(f"--roof {value}: {exc}") from None
    if found is None:
        raise CliError(f"--roof {value}: the report holds no roofline run; measure one with "
                       f"`cpudoctor bench roofline --into {value}`")
    return RoofChoice(report=path, measure=False, python=job_python)


def _plot(path: str, obs, roof) -> None:
    """The job's kernels on the roofline picture (beside the saved report's lab points when --roof named one)."""
    from cpudoctor.render.achieved import picture
    from cpudoctor.render.svg_roofline import render_svg

    if obs.achieved is None or not obs.achieved.points:
        print(f"cpudoctor run: no kernel's FLOPs were counted, so no picture was written to {path}", file=sys.stderr)
        return
    runs = []
    if roof is not None and roof.report is not None:
        from cpudoctor.report_file import load_report

        runs = list(load_report(roof.report).benchmarks)
    from cpudoctor.render.pdf import write_picture

    try:
        write_picture(render_svg(picture(obs.achieved, runs)), path)
    except (OSError, RuntimeError) as exc:
        raise CliError(f"--plot {path}: {getattr(exc, 'strerror', None) or exc}") from None
    print(f"cpudoctor run: the job's kernels on the roofline are in {path}", file=sys.stderr)


def _to_stderr(text: str) -> None:
    from cpudoctor.kits.escape import terminal_safe

    try:
        sys.stderr.write(terminal_safe(text))
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
