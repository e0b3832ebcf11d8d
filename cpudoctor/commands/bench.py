"""``cpudoctor bench train|gemm|sweep|quant|roofline|infer``: the training lab's jobs from a terminal.

Each job runs in a child process (torch is never imported here); the sweep's
orchestrator runs here and starts its training workers. A progress bar goes
to stderr, the figures to stdout (``--json`` for the full result).
``--into report.json`` adds the result to a saved report, where ``doctor
--from-report`` and ``compare`` see it. Output paths are checked before the
run, so a typo never throws a measurement away. Ctrl-C stops the job in
stages and still prints what was measured; pressing it again changes nothing.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

from cpudoctor.commands import CliError, emit, output_format
from cpudoctor.argtypes import file_name, int_list, integer, number, output_file
from cpudoctor.kits.cpulist import MAX_CPUS
from cpudoctor.kits.format import percent

# Bounds shared with lab/settings.py (which checks the same again for the window's jobs).
_THREADS = integer(1, 4096, "a thread count")
_SECONDS = number(0.1, 86400, "a number of seconds")

EXIT_FAILED = 1
EXIT_CANCELLED = 130


def register(subparsers) -> None:
    p = subparsers.add_parser("bench", help="measure training speed, GEMM, int8 and inference latency, roofs; sweep "
                                            "thread settings",
                              description="Training lab jobs in a child process, with a progress bar on stderr.")
    jobs = p.add_subparsers(dest="job", metavar="JOB", parser_class=type(p))
    jobs.required = True

    def common(sp):
        sp.add_argument("--json", action="store_true", help="print the full result as JSON")
        sp.add_argument("-o", "--output", metavar="FILE", type=output_file,
                        help="write the output to FILE instead of stdout")
        sp.add_argument("--into", metavar="REPORT", type=file_name("the saved report's file name"),
                        help="add the result to this saved JSON report (made by cpudoctor report -o FILE.json)")
        sp.add_argument("--quiet", action="store_true", help="no progress bar")
        sp.add_argument("--python", metavar="PATH|ENV",
                        help="run the job in this Python environment: an interpreter, an environment folder or a "
                             "name from `cpudoctor envs` (default: the one you most likely train in)")

    def training(sp):
        sp.add_argument("--model", default="simplecnn", choices=("simplecnn", "lenet5", "resnet18"),
                        help="model to train (default simplecnn; resnet18 has ~11M parameters)")
        sp.add_argument("--data", default="synthetic", choices=("synthetic", "mnist"),
                        help="synthetic MNIST-shaped images (default) or real MNIST from --mnist-dir")
        sp.add_argument("--mnist-dir", metavar="DIR", help="folder with the MNIST IDX files (gz or not)")
        sp.add_argument("--batch-size", type=integer(1, 65536), default=64, help="samples per step (default 64)")
        sp.add_argument("--optimizer", default="adam", choices=("adam", "sgd"), help="optimizer (default adam)")
        sp.add_argument("--dtype", default="fp32", choices=("fp32", "bf16"),
                        help="fp32 (default) or bf16 autocast, always measured against fp32 in the same job")
        sp.add_argument("--channels-last", action="store_true", help="NHWC memory format for the convolutions")
        sp.add_argument("--compile", action="store_true", help="torch.compile the model (needs a C compiler)")

    t = jobs.add_parser("train", help="micro-training run: samples/s, loss and accuracy")
    training(t)
    t.add_argument("--seconds", type=_SECONDS, default=20.0,
                   help="the whole job ends within this many seconds, start-up included (default 20)")
    t.add_argument("--steps", type=integer(1, 10**9), help="stop after this many steps (before --seconds if shorter)")
    t.add_argument("--threads", type=_THREADS, help="intra-op threads (default: PyTorch's own choice)")
    t.add_argument("--interop-threads", type=_THREADS, help="inter-op threads (default: PyTorch's own choice)")
    t.add_argument("--cpus", type=int_list(0, MAX_CPUS - 1, MAX_CPUS, "CPU numbers"),
                   help="pin to these CPUs, e.g. 0-7 or 0,2,4")
    common(t)

    s = jobs.add_parser("sweep", help="training at 1..N threads and pinning variants; recommends the best")
    training(s)
    s.add_argument("--budget", type=number(5, 86400, "a number of seconds"), default=45.0,
                   help="the whole sweep ends within this many seconds, start-up included (default 45)")
    s.add_argument("--segment", type=number(0.1, 600, "a number of seconds"), default=1.0,
                   help="seconds of one measured segment; variants take turns (default 1)")
    common(s)

    g = jobs.add_parser("gemm", help="matmul GFLOP/s vs the theoretical peak")
    g.add_argument("--size", type=integer(16, 32768), help="n of the n x n matrices (default: one multiply takes "
                                                            "~0.25 s, at most 4096; a path this CPU emulates is measured at 512)")
    g.add_argument("--backend", action="append", choices=("torch-fp32", "torch-bf16", "numpy-fp32", "numpy-fp64"),
                   help="repeat to choose several (default: all four)")
    g.add_argument("--threads", type=int_list(1, 4096, 64, "thread counts"),
                   help="thread counts, e.g. 1,2,4 (default: 1 and all usable CPUs)")
    g.add_argument("--min-seconds", type=number(0.01, 3600), default=0.75,
                   help="time each point at least this long, backends in turn (default 0.75)")
    g.add_argument("--clock-mhz", type=number(1, 100_000, "a clock in MHz"),
                   help="clock for the peak (default: boost, base or /proc/cpuinfo clock)")
    common(g)

    q = jobs.add_parser("quant", help="dynamic int8 vs fp32 MLP inference latency, measured in the same job")
    q.add_argument("--hidden", type=integer(8, 65536), help="hidden width of the MLP (default 1024; 256 without VNNI)")
    q.add_argument("--batches", type=int_list(1, 65536, 64, "batch sizes"), default=[1, 64],
                   help="batch sizes (default 1,64)")
    q.add_argument("--threads", type=_THREADS, help="intra-op threads (default: PyTorch's own choice)")
    q.add_argument("--min-seconds", type=number(0.01, 3600), default=1.0,
                   help="time each batch size at least this long (default 1)")
    q.add_argument("--api", default="auto", choices=("auto", "torchao", "torch.ao"),
                   help="quantisation API (default auto: torchao when installed, else torch.ao.quantization)")
    common(q)

    r = jobs.add_parser("roofline", help="measured compute roofs per dtype and memory bandwidth per NUMA node, "
                                         "beside the nominal peak")
    r.add_argument("--dtype", action="append", choices=("fp32", "bf16", "int8", "fp64"),
                   help="repeat to choose several (default: fp32, plus bf16 and int8 where this CPU has them)")
    r.add_argument("--threads", type=int_list(1, 4096, 64, "thread counts"),
                   help="thread counts for the compute roofs (default: all usable CPUs and 1)")
    r.add_argument("--budget", type=number(5, 3600, "a number of seconds"), default=45.0,
                   help="the measurements end within this many seconds; what does not fit is skipped (default 45, "
                        "so a run with its start-up ends within a minute)")
    r.add_argument("--no-memory", action="store_true", help="compute roofs only")
    r.add_argument("--clock-mhz", type=number(1, 100_000, "a clock in MHz"),
                   help="clock for the nominal peak (default: boost, base or /proc/cpuinfo clock)")
    r.add_argument("--plot", metavar="FILE.svg|png", type=file_name("the picture's file name (.svg or .png)"),
                   help="draw the roofline picture into FILE (SVG or PNG)")
    common(r)
    _infer_parser(jobs, common)
    p.set_defaults(func=run)


def _infer_parser(jobs, common) -> None:
    from cpudoctor.lab.jobs._settings import INFER_MODELS, INT8_APIS

    i = jobs.add_parser("infer", help="inference latency (p50/p90/p99) and throughput of a model's variants: "
                                      "threads, inference_mode, channels_last, bf16, int8, torch.compile, ONNX Runtime, "
                                      "allocators, OpenMP wait policy; recommends the fastest that stays accurate",
                        description="Measures each variant that applies in interleaved rounds, checks its outputs "
                                    "against fp32, and recommends the fastest variant within the accuracy limit that "
                                    "is distinguishable from the runner-up (or says inconclusive, and why).")
    src = i.add_mutually_exclusive_group()
    src.add_argument("--model", choices=tuple(INFER_MODELS), default=None,
                     help="a built-in model (default resnet18): " + "; ".join(f"{k}: {v}" for k, v in INFER_MODELS.items()))
    src.add_argument("--module", metavar="MODULE:CALLABLE",
                     help="your model: a callable returning the model, or (model, example input); a module name "
                          "importable from here, or path/to/file.py:callable")
    src.add_argument("--torchscript", metavar="FILE", help="a TorchScript file (give --input-shape)")
    src.add_argument("--onnx", metavar="FILE", help="an ONNX file, run in ONNX Runtime")
    i.add_argument("--input-shape", type=int_list(1, 1 << 20, 8, "dimensions"), metavar="D1,D2,...",
                   help="one sample's dimensions without the batch, e.g. 3,224,224 (when the model does not say)")
    i.add_argument("--batch", type=int_list(1, 4096, 16, "batch sizes"), default=[1],
                   help="batch sizes, e.g. 1,8 (default 1: latency; larger ones give throughput)")
    i.add_argument("--budget", type=number(5, 86400, "a number of seconds"), default=60.0,
                   help="the whole run ends within this many seconds, start-up included (default 60)")
    i.add_argument("--max-error", type=number(0, 10, "a relative error"), default=0.05,
                   help="the largest output error against fp32 (relative to fp32's largest output) a variant may "
                        "have and still be recommended (default 0.05)")
    i.add_argument("--int8-api", choices=INT8_APIS, default="auto",
                   help="dynamic int8 API (default auto: torchao when installed, else torch.ao.quantization, "
                        "deprecated)")
    common(i)


def job_args(args: argparse.Namespace) -> dict[str, Any]:
    """The job's settings, validated here so bad input is one line and exit code 2."""
    from cpudoctor.lab.settings import (SWEEP_TRAIN_KEYS, GemmSettings, QuantSettings, SettingsError, SweepSettings,
                                        TrainSettings)

    try:
        if args.job == "infer":
            return _infer_args(args)
        if args.job in ("train", "sweep"):
            train = TrainSettings(
                model=args.model, data=args.data, mnist_dir=args.mnist_dir, batch_size=args.batch_size,
                optimizer=args.optimizer, dtype=args.dtype, channels_last=args.channels_last, compile=args.compile,
            )
            if args.job == "train":
                train.seconds = args.seconds
                train.steps = args.steps
                train.threads = args.threads
                train.interop_threads = args.interop_threads
                train.cpus = args.cpus
                return train.validate().to_dict()
            train.validate()
            sweep = SweepSettings(train={k: getattr(train, k) for k in SWEEP_TRAIN_KEYS}, budget_s=args.budget,
                                  segment_s=args.segment)
            return sweep.validate().to_dict()
        if args.job == "gemm":
            return GemmSettings(size=args.size, backends=args.backend or list(GemmSettings.BACKENDS),
                                threads=args.threads, min_seconds=args.min_seconds,
                                clock_mhz=args.clock_mhz).validate().to_dict()
        if args.job == "roofline":
            from cpudoctor.lab.jobs._settings import RooflineSettings

            return RooflineSettings(dtypes=args.dtype, threads=args.threads, budget_s=args.budget,
                                    memory=not args.no_memory).validate().to_dict()
        return QuantSettings(hidden=args.hidden, batches=args.batches, threads=args.threads,
                             min_seconds=args.min_seconds, api=args.api).validate().to_dict()
    except SettingsError as exc:
        raise CliError(str(exc)) from None


def _infer_args(args: argparse.Namespace) -> dict[str, Any]:
    import os

    from cpudoctor.lab.settings import InferSettings

    source, target = "model", None
    for name in ("module", "torchscript", "onnx"):
        if getattr(args, name, None):
            source, target = name, getattr(args, name)
    return InferSettings(source=source, model=args.model or "resnet18", target=target, input_shape=args.input_shape,
                         batches=args.batch, budget_s=args.budget, max_error=args.max_error, int8_api=args.int8_api,
                         cwd=os.getcwd()).validate().to_dict()


def _check_machine_fit(args: argparse.Namespace) -> list[str]:
    """Refuse what the child could only fail at (CPUs we may not run on, a missing MNIST folder);
    return warnings for settings that run but measure the wrong thing (more threads than CPUs)."""
    import os

    from cpudoctor.lab.settings import SettingsError, check_cpus, check_mnist_dir
    from cpudoctor.kits.cpulist import format_cpulist

    try:
        check_mnist_dir(getattr(args, "data", None), getattr(args, "mnist_dir", None))
    except SettingsError as exc:
        raise CliError(f"--mnist-dir {exc}") from None
    try:
        allowed = sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return []
    cpus = getattr(args, "cpus", None)
    try:
        check_cpus(cpus, allowed)
    except SettingsError as exc:
        raise CliError(f"--cpus {format_cpulist(cpus)}: {exc}") from None
    warnings = []
    usable = len(cpus) if cpus else len(allowed)
    for name in ("threads", "interop_threads"):
        value = getattr(args, name, None)
        counts = value if isinstance(value, list) else [value]     # gemm takes a list: --threads 1,2,64
        over = [n for n in counts if isinstance(n, int) and n > usable]
        if over:
            shown = ",".join(map(str, over))
            warnings.append(f"--{name.replace('_', '-')} {shown} is more than the {usable} usable CPUs: the run "
                            "measures oversubscription, not this machine's speed")
    return warnings


def _check_outputs(args: argparse.Namespace):
    """``-o``, ``--plot`` and ``--into`` checked before the run (a measurement is never thrown away at its end);
    the saved report is read (and validated) now."""
    from cpudoctor.fileio import WriteError, check_writable, same_file
    from cpudoctor.lab.settings import SettingsError, check_output_path

    if args.output is not None and args.output != "-":
        try:
            check_output_path(args.output, "-o")
        except SettingsError as exc:
            raise CliError(str(exc)) from None
        args.json = output_format(args.output, "json" if args.json else None, ("text", "json"), "--json") == "json"
    plot = getattr(args, "plot", None)
    if plot is not None:
        if Path(plot).suffix.lower() not in (".svg", ".png"):
            raise CliError(f"--plot {plot}: the picture is written as SVG or PNG; name the file .svg or .png")
        try:
            check_output_path(plot, "--plot")
            check_writable(plot, "--plot", pipes=False)
        except SettingsError as exc:
            raise CliError(str(exc)) from None
        except WriteError as exc:
            raise CliError(str(exc.strerror or exc)) from None
    # Two outputs naming one file (after links): the later write would destroy the earlier (-o R --into R
    # overwrote the report with the figures, then refused to merge into it).
    named = [(flag, value) for flag, value in (("-o", args.output), ("--plot", plot), ("--into", args.into))
             if value not in (None, "-")]
    for i, (flag, value) in enumerate(named):
        for other, other_value in named[i + 1:]:
            if same_file(value, other_value):
                raise CliError(f"{flag} {value} and {other} {other_value} name the same file, and one would "
                               f"overwrite the other; give {flag} another name")
    if args.into is None:
        return None
    from cpudoctor.commands.into import open_target

    return open_target(args.into)


class ProgressBar:
    """One self-rewriting line on a terminal; occasional plain lines when stderr is a file."""

    def __init__(self, title: str, enabled: bool = True, stream=None):
        self.stream = stream or sys.stderr
        self.title = title
        self.enabled = enabled
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self._last_plain = 0.0
        self._width = 0

    def update(self, fraction: float | None, text: str) -> None:
        if not self.enabled:
            return
        frac = min(max(fraction or 0.0, 0.0), 1.0)
        if self.tty:
            bar = "#" * int(frac * 24)
            line = f"\r{self.title} [{bar:<24}] {percent(frac, fraction=True):>5} {text}"
            pad = max(0, self._width - len(line))
            self._width = len(line)
            self.stream.write(line + " " * pad)
            self.stream.flush()
        elif time.monotonic() - self._last_plain > 2.0:
            self._last_plain = time.monotonic()
            self.stream.write(f"{self.title}: {percent(frac, fraction=True)} {text}\n")
            self.stream.flush()

    def close(self) -> None:
        if self.enabled and self.tty and self._width:
            self.stream.write("\r" + " " * self._width + "\r")
            self.stream.flush()


def _progress_text(job: str, data: dict[str, Any], settings: dict[str, Any]) -> tuple[float | None, str]:
    if job == "train":
        steps, seconds = settings.get("steps"), settings.get("seconds")
        fracs = [data.get("step", 0) / steps] if steps else []
        if seconds:
            fracs.append(data.get("elapsed", 0) / seconds)
        sps = data.get("samples_per_s")
        text = f"step {data.get('step')}  loss {data.get('loss') or 0:.3f}  acc {percent(data.get('accuracy') or 0, fraction=True)}"
        return (max(fracs) if fracs else None), text + (f"  {sps:,.0f} samples/s" if sps else "")
    if job == "sweep":
        frac = data.get("elapsed", 0) / data["budget_s"] if data.get("budget_s") else None
        if data.get("phase") == "plan":
            return frac, f"starting {len(data.get('variants') or [])} training workers"
        sps = data.get("segment_samples_per_s")
        return frac, f"round {data.get('round')}: {data.get('variant')}: " + (f"{sps:,.0f} samples/s" if sps else "-")
    if job == "infer":
        from cpudoctor.render.infer import progress_line

        frac = data.get("elapsed", 0) / data["budget_s"] if data.get("budget_s") else None
        return frac, progress_line(data)
    frac = data.get("step", 0) / data["total"] if data.get("total") else None
    if job == "roofline":
        from cpudoctor.render.lab import roofline_progress

        return frac, roofline_progress(data)
    if job == "gemm":
        if data.get("phase") == "partial":
            done = ", ".join(f"{b} {g:,.0f}" for b, g in (data.get("gflops_so_far") or {}).items())
            return frac, f"x{data.get('threads')}: {done} GFLOP/s so far"
        return frac, f"{data.get('backend')} x{data.get('threads')}: {data.get('gflops', 0):,.1f} GFLOP/s"
    return frac, f"batch {data.get('batch')}: int8 {data.get('int8_ms')} ms vs fp32 {data.get('fp32_ms')} ms"


class CtrlC:
    """Ctrl-C sets a stop event instead of raising: the job stops in stages and what it measured is kept.

    A second press only says that stopping is under way; nothing is lost.
    """

    def __init__(self, job: str):
        self.job = job
        self.event = threading.Event()
        self.presses = 0
        self._old = None

    def __enter__(self) -> "CtrlC":
        if threading.current_thread() is threading.main_thread():
            self._old = signal.signal(signal.SIGINT, self._pressed)
        return self

    def _pressed(self, signum, frame) -> None:  # noqa: ANN001 - signal API
        self.presses += 1
        self.event.set()
        if self.presses == 1:
            print(f"\ncpudoctor bench {self.job}: stopping ... (what was measured is kept)", file=sys.stderr)
        else:
            print(f"cpudoctor bench {self.job}: still stopping; the partial result follows", file=sys.stderr)

    def __exit__(self, *exc: Any) -> None:
        if self._old is not None:
            signal.signal(signal.SIGINT, self._old)


def run(args: argparse.Namespace) -> int:
    from cpudoctor.lab import session

    settings = job_args(args)
    if args.job in ("sweep", "infer"):
        from cpudoctor.kits.clock import process_started

        settings["started"] = process_started()     # --budget counts this command's start-up too
    for warning in _check_machine_fit(args):
        print(f"cpudoctor bench {args.job}: warning: {warning}", file=sys.stderr)
    into = _check_outputs(args)
    bar = ProgressBar(f"bench {args.job}", enabled=not args.quiet)

    def on_log(text: str) -> None:
        if not args.quiet:
            bar.close()
            print(text, file=sys.stderr)

    python, environment = _environment(args)
    if not args.quiet:
        print(f"cpudoctor bench {args.job}: in {environment}", file=sys.stderr)
    context = session.context_for(args.job, clock_mhz=getattr(args, "clock_mhz", None))
    with CtrlC(args.job) as ctrl_c:
        outcome, result = session.run(args.job, settings, context=context, stop=ctrl_c.event, on_log=on_log,
                                      python=python,
                                      on_progress=lambda d: bar.update(*_progress_text(args.job, d, settings)))
        # the handler stays until the result is written: a second press while the partial result is printed
        # (or added to --into) must not turn into a KeyboardInterrupt that loses it
        bar.close()
        findings = evidence_findings(result, context.flags)
        if args.json:
            from cpudoctor.model.serde import to_data

            raw = dict(outcome.result, **result.json_extra()) if outcome.result is not None else None
            emit(json.dumps({"job": args.job, "environment": environment, "status": outcome.status,
                             "message": outcome.message,
                             "result": raw, "progress": outcome.progress,
                             "bench_run": to_data(result.bench_run()),
                             "recommendation": to_data(result.recommendation()),
                             "findings": to_data(findings)}, indent=2), args.output)
        else:
            from cpudoctor.render.lab import findings_text, outcome_text

            text = "\n".join(t for t in (outcome_text(result), findings_text(findings)) if t)
            if text:
                emit(text, args.output)
        earlier = _runs_in(into) if into is not None and getattr(args, "plot", None) is not None else []
        if into is not None:
            _add_to_report(into, result)
        if getattr(args, "plot", None) is not None:
            _plot(args.plot, earlier + [result.bench_run()])
        if outcome.status in ("error", "crashed"):
            print(f"cpudoctor bench {args.job}: {outcome.message}", file=sys.stderr)
            return EXIT_FAILED
        return EXIT_CANCELLED if outcome.status == "cancelled" else 0


def evidence_findings(result, flags: list[str] | None) -> list:
    """The job rules' findings from what this run itself showed (the kernels it ran), judged against the CPU the
    lab compared them with (its context's flags), through the job pipeline."""
    from cpudoctor.jobrun import Machine, diagnose_lab_run
    from cpudoctor.model import CpuInfo

    if not result.kernels or not flags:
        return []
    return diagnose_lab_run(result.bench_run(), Machine(CpuInfo(flags=list(flags))))


def _plot(path: str, runs: list) -> None:
    """The roofline picture of ``runs`` (a roofline run, and the report's GEMM and training runs) into ``path``."""
    from cpudoctor.render.roofline import picture_from_runs
    from cpudoctor.render.svg_roofline import render_svg

    picture = picture_from_runs(runs)
    if picture is None or not picture.compute:
        print(f"cpudoctor bench roofline: nothing measured, so no picture was written to {path}", file=sys.stderr)
        return
    from cpudoctor.render.pdf import write_picture

    try:
        write_picture(render_svg(picture), path)
    except (OSError, RuntimeError) as exc:
        raise CliError(f"--plot {path}: {getattr(exc, 'strerror', None) or exc}") from None
    print(f"cpudoctor bench roofline: the roofline picture is in {path}", file=sys.stderr)


def _environment(args: argparse.Namespace) -> tuple[str | None, str]:
    """(interpreter to run the job in, None for CPU Doctor's own; the environment in words), before any job
    starts: a bad --python is one line and exit 2, like every other argument."""
    from cpudoctor.commands import python_choice
    from cpudoctor.probes.software.envs import describe
    from cpudoctor.render.software import environment_words

    python, chosen_by = python_choice(args.python)
    info = describe(Path(python or sys.executable), cache=True).record(chosen_by)
    info.own = python is None
    return python, environment_words(info)


def _runs_in(into) -> list:
    """The saved report's runs as they are now (the picture draws them beside this run); none when it
    cannot be read any more (deleted or damaged meanwhile: adding says so)."""
    from cpudoctor.model import ReportError
    from cpudoctor.report_file import load_report

    try:
        return list(load_report(into.path).benchmarks)
    except (ReportError, OSError):
        return []


def _add_to_report(into, result) -> None:
    """The run (and a conclusive sweep's recommendation) merged into the saved report as it is at the end
    (:mod:`cpudoctor.commands.into`: locked, re-read, unknown fields kept); "added" only once it is on disk."""
    from cpudoctor.commands.into import add_run

    path = into.given
    if not result.has_result and result.status in ("error", "crashed"):
        print(f"cpudoctor bench: nothing measured, so nothing was added to {path}", file=sys.stderr)
        return
    rec = result.recommendation() if result.kind == "sweep" else None
    add_run(into, result.bench_run(), rec)
    added = f"added the {result.kind} run" + (" and its recommendation" if rec is not None else "")
    if result.kind == "sweep" and rec is None:
        added += " (its verdict is inconclusive, so the report's recommendation is unchanged)"
    print(f"cpudoctor bench {result.kind}: {added} to {path}", file=sys.stderr)


def format_outcome(job: str, outcome, settings: dict[str, Any] | None = None) -> str:
    """The text ``cpudoctor bench`` prints for an outcome (read once, like every other surface)."""
    from cpudoctor.lab.results import read_outcome
    from cpudoctor.render.lab import outcome_text

    return outcome_text(read_outcome(job, outcome, settings))
