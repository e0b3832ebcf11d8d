"""``cpudoctor inspect [PID]``: why is this running training job slow?

Samples the process for ``--seconds``, prints its threads (CPU%, the core and
CCX/NUMA node each last ran on, migrations), affinity and cgroup quota, the
thread environment (whitelisted), native libraries, children and memory, then
the process findings with the command to relaunch it. ``--list`` shows the
processes to choose from: Python ones and busy ones (``--all`` for every process).

Exit codes: 0 done; 2 no such PID, the process exited during the window (the
partial figures are still printed), or it belongs to another user and its
environment/libraries could not be read.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from cpudoctor.commands import CliError, emit, output_format, root_arg
from cpudoctor.argtypes import output_file



def register(subparsers) -> None:
    p = subparsers.add_parser(
        "inspect",
        help="inspect a running training process: threads, cores, libraries, env, findings",
        description="Sample a running process (your training job) and explain why it is slow.",
    )
    p.add_argument("pid", nargs="?", type=_pid, help="process ID (see --list)")
    p.add_argument("--seconds", "-s", type=_seconds, default=12.0, metavar="N",
                   help="sampling window in seconds (default 12: enough stack samples at the default 3 Hz; 0.2-120)")
    p.add_argument("--format", "-f", choices=("text", "json"), default=None,
                   help="text or json (default: from the -o file name's ending, else text)")
    p.add_argument("--list", action="store_true",
                   help="list processes to inspect and exit: Python ones and busy ones (--all: every process)")
    p.add_argument("--all", action="store_true", help="with --list: every process, idle ones too")
    p.add_argument("--no-stacks", dest="stacks", action="store_false",
                   help="do not sample stacks (no time breakdown; nothing attaches to the process)")
    p.add_argument("--output", "-o", metavar="FILE", type=output_file,
                   help="write to FILE instead of stdout")
    p.add_argument("--root", metavar="DIR", help=argparse.SUPPRESS)   # a captured or fake /proc tree
    p.set_defaults(func=run)


def _pid(value: str) -> int:
    try:
        pid = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a process ID (a whole number, see --list)") from None
    if pid <= 0:
        raise argparse.ArgumentTypeError(f"{value!r} is not a process ID (must be positive)")
    return pid


def _seconds(value: str) -> float:
    try:
        s = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a number of seconds") from None
    if not 0.2 <= s <= 120:
        raise argparse.ArgumentTypeError(f"{value} s is out of range: give 0.2 to 120 seconds")
    return s


def run(args: argparse.Namespace) -> int:
    args.format = output_format(args.output, args.format, ("text", "json"))
    root = root_arg(args.root) if args.root else Path("/")
    if args.list:
        from cpudoctor.probes.process.inspect import BUSY_PERCENT, candidates, list_processes

        entries, left_out = candidates(list_processes(root, interval=0.4, exclude_self=True), args.all)
        from cpudoctor.render.inspect import render_list

        emit(_list_json(entries) if args.format == "json" else render_list(entries, left_out, BUSY_PERCENT),
             args.output)
        return 0
    if args.all:
        raise CliError("--all goes with --list (it lists every process, idle ones too)")
    if args.pid is None:
        raise CliError("give a process ID, or --list to see the candidates")
    from cpudoctor.jobrun import Machine, inspect_job
    from cpudoctor.pipeline import Source
    from cpudoctor.probes.process.inspect import InspectError
    from cpudoctor.render.inspect import inspect_error_text

    machine = Machine.of_source(Source.tree(root))        # the CPU of the tree the process lives in
    try:
        insp, findings = inspect_job(args.pid, seconds=args.seconds, machine=machine, root=root, stacks=args.stacks)
    except InspectError as exc:
        raise CliError(inspect_error_text(exc)) from None
    if args.format == "json":
        from cpudoctor.render.inspect import render_json

        text = render_json(insp, findings)
    else:
        from cpudoctor.render.inspect import render_text

        text = render_text(insp, findings)
    emit(text, args.output)
    if insp.status == "exited":
        raise CliError(f"process {insp.pid} exited {insp.window_s:.1f} s into the window: "
                       f"the figures cover only that part")
    if insp.access_limited:
        from cpudoctor.render.inspect import denied_hint

        raise CliError(f"the environment and libraries of process {insp.pid} could not be read: "
                       f"{denied_hint(insp.pid, insp.uid, f'cpudoctor inspect {insp.pid}')}")
    return 0


def _list_json(entries) -> str:
    from cpudoctor.model.serde import to_data

    from cpudoctor.model.report import json_text

    return json_text(to_data(entries))
