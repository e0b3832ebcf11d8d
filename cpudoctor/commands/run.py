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
              "[--verify [--budget S] [--metric REGEX] [--yes] [--into REPORT]] "
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
    p.add_argument("--verify", action="store_true",
                   help="after the diagnosis, measure each fix that can be applied from outside the script on the job "
                        "itself: the job runs again, unchanged and with the fix, in interleaved windows, and the "
                        "report "
                        "ranks the findings by the measured effect")
    p.add_argument("--budget", type=_budget, metavar="S", default=None,
                   help=f"seconds --verify may take (default {DEFAULT_BUDGET_S:g})")
    p.add_argument("--metric", metavar="REGEX",
                   help="--verify measures the rate the job prints (its first group, or the first number matched: "
                        "e.g. '([0-9.]+)it/s' for tqdm) instead of the steps its probe counts")
    p.add_argument("--yes", "-y", action="store_true",
                   help="--verify runs the job several times: do not ask first when it writes files in its folder")
    p.add_argument("--into", metavar="REPORT",
                   help="add the --verify measurements to a saved report (cpudoctor report -o REPORT), where compare "
                        "and doctor --from-report show them")
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


DEFAULT_BUDGET_S = 180.0


def _budget(value: str) -> float:
    try:
        s = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a number of seconds") from None
    if not 20 <= s <= 24 * 3600:
        raise argparse.ArgumentTypeError(f"{value} s is out of range: give 20 seconds to 24 hours")
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
    _check_verify_options(args)
    into = None
    if args.into:
        from cpudoctor.commands.into import open_target

        into = open_target(args.into)
    python = None
    if args.python:
        python, _why = python_choice(args.python)
        python = python or sys.executable
    argv = command_line(argv, python)
    roof = _roof_choice(args.roof, argv, python)
    from cpudoctor.jobrun import run_job_watched
    from cpudoctor.render.run_report import RENDERERS

    obs, findings, writes = run_job_watched(argv, seconds=args.seconds, rate=args.rate, roof=roof,
                                            probe=not args.no_probe,
                                            verbose_windows=args.verbose_windows, watch_writes=args.verify,
                                            display=shlex.join(args.argv[1:] if args.argv and args.argv[0] == "--"
                                                               else args.argv))
    refused = ""
    if args.verify:
        findings, refused = _verify(args, argv, obs, findings, writes)
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
    if into is not None and obs.verification is not None and obs.verification.windows:
        from cpudoctor.commands.into import add_run
        from cpudoctor.verify import bench_run

        add_run(into, bench_run(obs.verification))
        _to_stderr(f"cpudoctor run: the verification was added to {args.into}\n")
    if refused:
        raise CliError(refused, code=2)
    return obs.exit_code if obs.exit_code is not None else 1


def _check_verify_options(args: argparse.Namespace) -> None:
    """--budget, --metric, --yes and --into belong to --verify: said before the job runs, never after it."""
    if not args.verify:
        given = [flag for flag, value in (("--budget", args.budget), ("--metric", args.metric), ("--yes", args.yes),
                                          ("--into", args.into)) if value]
        if given:
            raise CliError(f"{', '.join(given)} {'goes' if len(given) == 1 else 'go'} with --verify: add --verify, "
                           f"or drop {'it' if len(given) == 1 else 'them'}")
        return
    if args.no_probe and not args.metric:
        raise CliError("--verify reads the job's rate through its probe: drop --no-probe, or give --metric REGEX for "
                       "a rate the job prints")
    if args.metric:
        from cpudoctor.lab.job_rate import compile_metric

        try:
            compile_metric(args.metric)
        except ValueError as exc:
            raise CliError(str(exc)) from None


def _verify(args: argparse.Namespace, argv: list[str], obs, findings, writes: list[str]):
    """Measure the diagnosis's fixes on the job (``--verify``); (the findings ranked by their measured effect,
    why the verification was refused: "" when it was not)."""
    import signal

    from cpudoctor.model.verification import Verification
    from cpudoctor.probes.process.observe import STOP_SIGNALS
    from cpudoctor.verify import Stopper, VerifyOptions, real_window, rank_findings, verify_job

    budget = args.budget or DEFAULT_BUDGET_S
    if obs.ended_by in ("failed", "interrupt", "terminated", "stopped"):
        obs.verification = Verification(command=obs.command, budget_s=budget, skipped="the job did not run to its end "
                                         "(stopped, or it could not start): nothing was verified")
        return findings, ""
    refused: list[str] = []

    def confirm(files: list[str]) -> str:
        """Before the job runs again: a job that writes files in its folder is asked about (--yes: not asked)."""
        if args.yes:
            return ""
        shown = ", ".join(files[:5]) + (f" and {len(files) - 5} more" if len(files) > 5 else "")
        warning = (f"the job held files open for writing in its folder ({shown}); --verify runs it several more "
                   "times, and each run writes them again")
        if not _interactive():
            refused.append(f"not verified: {warning}. Add --yes to verify it anyway")
            return refused[-1]
        if _ask(f"cpudoctor run: {warning}. Verify anyway? [y/N] "):
            return ""
        return f"not verified: {warning}; you said no"

    stopper = Stopper()
    previous = {}
    for name in STOP_SIGNALS:
        signum = getattr(signal, name, None)
        try:
            previous[signum] = signal.signal(signum, lambda *_a: stopper.stop())
        except (OSError, ValueError, TypeError):
            continue
    try:
        from cpudoctor.jobrun import Machine

        ver = verify_job(argv, findings, obs.state, options=VerifyOptions(budget_s=budget, metric_regex=args.metric),
                         topology=Machine.of_source().topology, command=obs.command, writes=writes,
                         run_window=real_window(argv, stopper=stopper, probe=not args.no_probe),
                         should_stop=stopper, confirm=confirm,
                         on_progress=lambda text: _to_stderr(f"cpudoctor run: verify (at most {budget:g} s, Ctrl-C "
                                                             f"stops it): {text}\n"))
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    obs.verification = ver
    return rank_findings(findings, ver), refused[0] if refused else ""


def _interactive() -> bool:
    try:
        return sys.stdin is not None and sys.stdin.isatty() and sys.stderr.isatty()
    except (OSError, ValueError, AttributeError):
        return False


def _ask(question: str) -> bool:
    _to_stderr(question)
    try:
        answer = sys.stdin.readline()
    except (OSError, ValueError, KeyboardInterrupt):
        return False
    return answer.strip().lower() in ("y", "yes")


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
