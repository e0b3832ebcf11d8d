"""``cpudoctor fit``: will this training fit in memory here, what takes the memory, and how to make it fit.

``--model MODULE:CALLABLE`` (or a lab model: simplecnn, lenet5, resnet18) is built and measured in a child
process in the training environment (``--python``; torch never runs in CPU Doctor's process): a few steps at
growing batch sizes, with and without activation checkpointing. ``--from-run run.json`` reads what a
``cpudoctor run`` saw; ``--params N --optimizer adam`` computes from sizes alone. The plan says the memory a
step needs at ``--batch`` part by part, what the job may use here (available memory, its cgroup's limit, WSL2's
cap; ``--memory`` for another machine or a pod), the largest batch that fits and the strategies ranked, each
with its code or command.

Exit code: 0 it fits, 1 it does not, 2 bad usage or a model that could not be measured.
"""

from __future__ import annotations

import argparse
import sys
import threading

from cpudoctor.argtypes import byte_size, int_list, integer, number, output_file, shape
from cpudoctor.commands import CliError, emit, output_format

FORMATS = ("text", "json", "md")
OPTIMIZERS = ("adam", "adamw", "sgd", "sgd-momentum", "rmsprop", "adagrad", "adafactor", "none")


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "fit", help="will a training fit in memory: what a step needs, the largest batch, how to make it fit",
        description="Estimate the memory a training step needs (measured on the model in a child process), "
                    "against what the job may use here, and rank the ways to make it fit.",
        usage="cpudoctor fit (--model MODULE:CALLABLE | --from-run FILE | --params N) [--batch N] [options]")
    src = p.add_argument_group("what to fit (one of)")
    src.add_argument("--model", metavar="MODULE:CALLABLE",
                     help="build the model with this callable (imported from --path, default the current folder; "
                          "it may return (model, make_batch)), or a lab model: simplecnn, lenet5, resnet18")
    src.add_argument("--from-run", metavar="FILE", help="a run saved by `cpudoctor run --format json -o FILE`")
    src.add_argument("--params", type=integer(1, 1 << 48, "a parameter count"), metavar="N",
                     help="a parameter count, with --optimizer (no measurement)")
    p.add_argument("--batch", "-b", type=integer(1, 1 << 20, "a batch size"), metavar="N",
                   help="the batch size to fit (default: the run's, else 64)")
    p.add_argument("--input", type=shape(), metavar="SHAPE",
                   help="one sample's shape for --model, e.g. 3x224x224 (not needed when it returns make_batch)")
    p.add_argument("--input-dtype", default="float32", choices=("float32", "bfloat16", "float16", "int64", "int32"),
                   help="the input's dtype (int64 for token ids, below --vocab)")
    p.add_argument("--vocab", type=integer(1, 1 << 31), default=1000, help="integer inputs are drawn below this")
    p.add_argument("--path", metavar="DIR", help="the folder MODULE is imported from (default: the current one)")
    p.add_argument("--optimizer", default="adam", choices=OPTIMIZERS, help="the job's optimizer (default adam)")
    p.add_argument("--workers", type=integer(0, 1024, "a worker count"), default=0,
                   help="DataLoader workers (each holds its own memory)")
    p.add_argument("--dataset", type=byte_size(what="a dataset size"), metavar="SIZE",
                   help="a dataset held in memory, e.g. 6G")
    p.add_argument("--workers-copy-dataset", action="store_true",
                   help="each worker holds a copy of the dataset (Python objects, or the spawn start method)")
    p.add_argument("--memory", type=byte_size(1 << 20, what="a memory limit"), metavar="SIZE",
                   help="fit into this much instead of what this machine has (another machine, a pod), e.g. 16G")
    p.add_argument("--threads", type=integer(1, 4096, "a thread count"), help="the job's intra-op threads")
    p.add_argument("--python", metavar="PATH|ENV",
                   help="measure in this Python environment (default: the one you most likely train in)")
    p.add_argument("--no-checkpoint", dest="checkpoint", action="store_false",
                   help="do not measure activation checkpointing")
    p.add_argument("--bf16", dest="bf16", action="store_true", default=None,
                   help="also measure bf16 autocast (default: where the CPU computes bf16 natively)")
    p.add_argument("--no-bf16", dest="bf16", action="store_false", help="do not measure bf16 autocast")
    p.add_argument("--seconds", type=number(5, 3600, "a number of seconds"), default=60.0,
                   help="time budget of the measurement (default 60)")
    p.add_argument("--check", type=int_list(1, 1 << 20, 16, "batch sizes"), metavar="B1,B2,...",
                   help="the lab's check: train --model (a lab model) at these batch sizes, with and without "
                        "checkpointing, and print each run's peak against fit's estimate")
    p.add_argument("--format", "-f", choices=FORMATS, default=None,
                   help="text, json or md (default: from the -o file name's ending, else text)")
    p.add_argument("--output", "-o", metavar="FILE", type=output_file, help="write to FILE instead of stdout")
    p.set_defaults(func=run)


def request(args: argparse.Namespace):
    from cpudoctor.fitrun import FitRequest

    given = [name for name in ("model", "from_run", "params") if getattr(args, name)]
    if not given:
        raise CliError("say what to fit: --model MODULE:CALLABLE, --from-run run.json or --params N")
    if args.model and args.params:
        raise CliError("--model measures the model; --params is for when there is none to measure: give one")
    python = None
    if args.model:
        from cpudoctor.commands import python_choice

        python, _why = python_choice(args.python)
    return FitRequest(batch=args.batch, model=args.model, path=args.path, input=args.input,
                      input_dtype=args.input_dtype, vocab=args.vocab, params=args.params, optimizer=args.optimizer,
                      from_run=args.from_run, workers=args.workers, dataset_bytes=args.dataset,
                      workers_copy_dataset=args.workers_copy_dataset, memory_bytes=args.memory, threads=args.threads,
                      python=python, checkpoint=args.checkpoint, bf16=args.bf16, seconds=args.seconds)


def run(args: argparse.Namespace) -> int:
    args.format = output_format(args.output, args.format, FORMATS)
    if args.check:
        return check(args)
    req = request(args)
    from cpudoctor.fitrun import FitInputError, run_fit
    from cpudoctor.render.fit import RENDERERS

    stop = threading.Event()
    if req.model and sys.stderr is not None and sys.stderr.isatty():
        sys.stderr.write(f"measuring {req.model} in a child process (up to {req.seconds:g} s)...\n")
    try:
        outcome = run_fit(req, stop=stop)
    except FitInputError as exc:
        raise CliError(str(exc)) from None
    except KeyboardInterrupt:
        stop.set()
        raise
    emit(RENDERERS[args.format](outcome.plan), args.output)
    return 0 if outcome.plan.fits is not False else 1


def check(args: argparse.Namespace) -> int:
    """``--check``: a lab model trained at each batch size, its peak against fit's estimate."""
    from cpudoctor.commands import python_choice
    from cpudoctor.fitrun import FitInputError, lab_check
    from cpudoctor.lab.jobs._settings import MODELS
    from cpudoctor.render.fit import render_check

    if (args.model or "").lower() not in MODELS:
        raise CliError(f"--check trains a lab model: give --model {' or '.join(MODELS)}")
    python, _why = python_choice(args.python)
    try:
        rows = lab_check(args.model.lower(), args.check, checkpoint=args.checkpoint, python=python,
                         seconds=max(args.seconds, 120.0))
    except FitInputError as exc:
        raise CliError(str(exc)) from None
    if args.format == "json":
        from cpudoctor.model.report import json_text
        from cpudoctor.model.serde import to_data

        text = json_text({"kind": "cpudoctor-fit-check", "rows": to_data(rows)}) + "\n"
    else:
        text = render_check(rows)
    emit(text, args.output)
    return 0 if all(r.error_share is not None and abs(r.error_share) <= 0.15 for r in rows) else 1
