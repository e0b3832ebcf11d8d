"""``cpudoctor envs``: the Python environments on this machine, the likely training one first.

CPU Doctor describes one environment at a time (``--python NAME|PATH`` on
report, doctor and bench); this command shows which there are, found without
importing anything in them.
"""

from __future__ import annotations

import argparse

from cpudoctor.commands import emit, output_format
from cpudoctor.argtypes import output_file

FORMATS = ("text", "json")


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "envs",
        help="list the Python environments (conda, venv, pyenv, system) and their torch/numpy",
        description=("List the Python environments on this machine without importing anything in them: conda "
                     "envs, the active and working-folder venvs, ~/.virtualenvs, pyenv and system Pythons. The "
                     "first is the one CPU Doctor describes by default; pick another with --python NAME|PATH."),
    )
    p.add_argument("--format", choices=FORMATS, default=None,
                   help="output format (default: from the -o file name's ending, else text)")
    p.add_argument("--no-conda", action="store_true",
                   help="do not run `conda env list` (conda's own folders and environments.txt are still read)")
    p.add_argument("-o", "--output", metavar="FILE", type=output_file,
                   help="write to FILE instead of stdout")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from cpudoctor.probes.software.envs import discover
    from cpudoctor.render.envs import render_json, render_text

    fmt = output_format(args.output, args.format, FORMATS)
    envs = discover(run_conda=not args.no_conda)
    emit(render_json(envs) if fmt == "json" else render_text(envs), args.output)
    return 0
