"""``cpudoctor bench train|gemm|sweep|quant``: the training lab's jobs from a terminal.

Each job runs in a child process (torch is never imported here); a progress
bar goes to stderr, the figures to stdout (``--json`` for the full result).
Ctrl-C stops the job in stages and still prints what was measured.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from cpudoctor.commands import CliError, emit
from cpudoctor.commands.argtypes import int_list, integer, number
from cpudoctor.probes._fs import MAX_CPUS

# Bounds shared with lab/settings.py (which checks the same again for the window's jobs).
_THREADS = integer(1, 4096, "a thread count")
_SECONDS = number(0.1, 86400, "a number of seconds")

EXIT_FAILED = 1
EXIT_CANCELLED = 130


def register(subparsers) -> None:
    p = subparsers.add_parser("bench", help="measure training speed, GEMM, int8 inference; sweep thread settings",
                              description="Training lab jobs in a child process, with a progress bar on stderr.")
    jobs = p.add_subparsers(dest="job", metavar="JOB", parser_class=type(p))
    jobs.required = True

    def common(sp):
        sp.add_argument("--json", action="store_true", help="print the full result as JSON")
        sp.add_argument("-o", "--output", metavar="FILE", help="write the output to FILE instead of stdout")
        sp.add_argument("--quiet", action="store_true", help="no progress bar")

    def training(sp, seconds: float, per_variant: bool = False):
        sp.add_argument("--model", default="simplecnn", choices=("simplecnn", "lenet5", "resnet18"),
                        help="model to train (default simplecnn; resnet18 has ~11M parameters)")
        sp.add_argument("--data", default="synthetic", choices=("synthetic", "mnist"),
                        help="synthetic MNIST-shaped images (default) or real MNIST from --mnist-dir")
        sp.add_argument("--mnist-dir", metavar="DIR", help="folder with the MNIST IDX files (gz or not)")
        sp.add_argument("--batch-size", type=integer(1, 65536), default=64, help="samples per step (default 64)")
        sp.add_argument("--optimizer", default="adam", choices=("adam", "sgd"), help="optimizer (default adam)")
        sp.add_argument("--dtype", default="fp32", choices=("fp32", "bf16"),
                        help="fp32 (default) or bf16 autocast (no GradScaler; fast only with AVX512_BF16/AMX)")
        sp.add_argument("--channels-last", action="store_true", help="NHWC memory format for the convolutions")
        sp.add_argument("--compile", action="store_true", help="torch.compile the model (needs a C compiler)")
        sp.add_argument("--seconds", type=_SECONDS, default=seconds,
                        help=f"run length{' of each variant' if per_variant else ''} (default {seconds:g})")

    t = jobs.add_parser("train", help="micro-training run: samples/s, loss and accuracy")
    training(t, 20.0)
    t.add_argument("--steps", type=integer(1, 10**9), help="stop after this many steps (before --seconds if shorter)")
    t.add_argument("--threads", type=_THREADS, help="intra-op threads (default: PyTorch's own choice)")
    t.add_argument("--interop-threads", type=_THREADS, help="inter-op threads (default: PyTorch's own choice)")
    t.add_argument("--cpus", type=int_list(0, MAX_CPUS - 1, MAX_CPUS, "CPU numbers"),
                   help="pin to these CPUs, e.g. 0-7 or 0,2,4")
    common(t)

    s = jobs.add_parser("sweep", help="training at 1..N threads and pinning variants; recommends the best")
    training(s, 8.0, per_variant=True)
    common(s)

    g = jobs.add_parser("gemm", help="matmul GFLOP/s vs the theoretical peak")
    g.add_argument("--size", type=integer(16, 32768), default=4096, help="n of the n x n matrices (default 4096)")
    g.add_argument("--backend", action="append", choices=("torch-fp32", "torch-bf16", "numpy-fp32", "numpy-fp64"),
                   help="repeat to choose several (default: all four)")
    g.add_argument("--threads", type=int_list(1, 4096, 64, "thread counts"),
                   help="thread counts, e.g. 1,2,4 (default: 1 and all usable CPUs)")
    g.add_argument("--min-seconds", type=number(0.01, 3600), default=1.0,
                   help="time each point at least this long (default 1)")
    g.add_argument("--clock-mhz", type=number(1, 100_000, "a clock in MHz"),
                   help="clock for the peak (default: boost, base or /proc/cpuinfo clock)")
    common(g)

    q = jobs.add_parser("quant", help="dynamic int8 vs fp32 MLP inference latency")
    q.add_argument("--hidden", type=integer(8, 65536), default=1024, help="hidden width of the MLP (default 1024)")
    q.add_argument("--batches", type=int_list(1, 65536, 64, "batch sizes"), default=[1, 64],
                   help="batch sizes (default 1,64)")
    q.add_argument("--threads", type=_THREADS, help="intra-op threads (default: PyTorch's own choice)")
    q.add_argument("--min-seconds", type=number(0.01, 3600), default=1.0,
                   help="time each latency at least this long (default 1)")
    common(q)
    p.set_defaults(func=run)


def job_args(args: argparse.Namespace) -> dict[str, Any]:
    """The child's settings, validated here so bad input is one line and exit code 2."""
    from cpudoctor.lab.settings import GemmSettings, QuantSettings, SettingsError, TrainSettings

    try:
        if args.job in ("train", "sweep"):
            train = TrainSettings(
                model=args.model, data=args.data, mnist_dir=args.mnist_dir, batch_size=args.batch_size,
                optimizer=args.optimizer, dtype=args.dtype, channels_last=args.channels_last, compile=args.compile,
                seconds=args.seconds,
            )
            if args.job == "train":
                train.steps = args.steps
                train.threads = args.threads
                train.interop_threads = args.interop_threads
                train.cpus = args.cpus
                return train.validate().to_dict()
            train.validate()
            keep = ("model", "data", "mnist_dir", "batch_size", "optimizer", "dtype", "channels_last", "compile")
            return {"seconds": args.seconds, "train": {k: getattr(train, k) for k in keep}}
        if args.job == "gemm":
            return GemmSettings(size=args.size, backends=args.backend or list(GemmSettings.BACKENDS),
                                threads=args.threads, min_seconds=args.min_seconds,
                                clock_mhz=args.clock_mhz).validate().to_dict()
        return QuantSettings(hidden=args.hidden, batches=args.batches, threads=args.threads,
                             min_seconds=args.min_seconds).validate().to_dict()
    except SettingsError as exc:
        raise CliError(str(exc)) from None


def _check_machine_fit(args: argparse.Namespace) -> list[str]:
    """Refuse what the child could only fail at (CPUs we may not run on, a missing MNIST folder);
    return warnings for settings that run but measure the wrong thing (more threads than CPUs)."""
    import os
    from pathlib import Path

    from cpudoctor.probes._fs import format_cpulist

    mnist = getattr(args, "mnist_dir", None)
    if getattr(args, "data", None) == "mnist" and mnist and not Path(mnist).expanduser().is_dir():
        raise CliError(f"--mnist-dir {mnist}: no such folder (give the folder with the MNIST IDX files)")
    try:
        allowed = sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return []
    cpus = getattr(args, "cpus", None)
    if cpus:
        outside = sorted(set(cpus) - set(allowed))
        if outside:
            raise CliError(f"--cpus {format_cpulist(cpus)}: CPUs {format_cpulist(outside)} are not usable here "
                           f"(this process may run on {format_cpulist(allowed)})")
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
            line = f"\r{self.title} [{bar:<24}] {frac:4.0%} {text}"
            pad = max(0, self._width - len(line))
            self._width = len(line)
            self.stream.write(line + " " * pad)
            self.stream.flush()
        elif time.monotonic() - self._last_plain > 2.0:
            self._last_plain = time.monotonic()
            self.stream.write(f"{self.title}: {frac:.0%} {text}\n")
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
        text = f"step {data.get('step')}  loss {data.get('loss', 0):.3f}  acc {data.get('accuracy', 0):.0%}"
        return (max(fracs) if fracs else None), text + (f"  {sps:,.0f} samples/s" if sps else "")
    frac = data.get("step", 0) / data["total"] if data.get("total") else None
    if job == "gemm":
        return frac, f"{data.get('backend')} x{data.get('threads')}: {data.get('gflops', 0):,.1f} GFLOP/s"
    if job == "sweep":
        sps = data.get("samples_per_s")
        return frac, f"{data.get('variant')}: " + (f"{sps:,.0f} samples/s" if sps else data.get("status", ""))
    return frac, f"batch {data.get('batch')}: int8 {data.get('int8_ms')} ms vs fp32 {data.get('fp32_ms')} ms"


def run(args: argparse.Namespace) -> int:
    from cpudoctor.lab import protocol
    from cpudoctor.lab.runner import Job, job_command

    settings = job_args(args)
    for warning in _check_machine_fit(args):
        print(f"cpudoctor bench {args.job}: warning: {warning}", file=sys.stderr)
    bar = ProgressBar(f"bench {args.job}", enabled=not args.quiet)

    def on_message(msg: protocol.Message) -> None:
        if msg.type == protocol.PROGRESS:
            bar.update(*_progress_text(args.job, msg.data, settings))
        elif msg.type == protocol.LOG and not args.quiet:
            bar.close()
            print(msg.text, file=sys.stderr)

    job = Job(job_command(args.job, settings), on_message, what=f"the {args.job} job").start()
    try:
        outcome = job.wait()
    except KeyboardInterrupt:
        bar.close()
        print(f"cpudoctor bench {args.job}: stopping ...", file=sys.stderr)
        outcome = job.stop()
    bar.close()
    if args.json:
        emit(json.dumps({"job": args.job, "status": outcome.status, "message": outcome.message,
                         "result": outcome.result, "progress": outcome.progress}, indent=2), args.output)
    else:
        text = format_outcome(args.job, outcome)
        if text:
            emit(text, args.output)
    if outcome.status in ("error", "crashed"):
        print(f"cpudoctor bench {args.job}: {outcome.message}", file=sys.stderr)
        return EXIT_FAILED
    return EXIT_CANCELLED if outcome.status == "cancelled" else 0


# ------------------------------------------------------------------ text output

def _num(v: Any, fmt: str = ",.0f") -> str:
    return "-" if v is None else format(v, fmt)


def _cpus(cpus) -> str:
    """A CPU list the way taskset and the kernel write it: 0-7,16-23."""
    from cpudoctor.probes._fs import format_cpulist

    return format_cpulist(list(cpus)) if isinstance(cpus, (list, tuple)) else str(cpus)


def format_outcome(job: str, outcome) -> str:
    r = outcome.result
    lines: list[str] = []
    if outcome.status == "cancelled":
        lines.append("Cancelled: partial results.")
    if r is None:
        if outcome.progress:
            last = outcome.progress[-1]
            lines.append("Last progress: " + ", ".join(f"{k} {v}" for k, v in last.items()))
        return "\n".join(lines)
    if job == "train":
        s = r.get("settings", {})
        lines.append(f"{s.get('model')} {s.get('dtype')}, batch {s.get('batch_size')}, {r.get('threads')} thread{'s' if r.get('threads') != 1 else ''}"
                     + (f", CPUs {_cpus(s.get('cpus'))}" if s.get("cpus") else "")
                     + (", channels_last" if s.get("channels_last") else "") + (", compiled" if s.get("compile") else ""))
        if r.get("samples_per_s") is None and r.get("steps") is not None:
            warm = s.get("warmup_steps")
            lines.append(f"  throughput  not measured: all {r.get('steps')} steps were warm-up"
                         + (f" (the first {warm} are not timed)" if warm else "") + "; run more steps or seconds")
        else:
            lines.append(f"  throughput  {_num(r.get('samples_per_s'))} samples/s ({r.get('steps')} steps in "
                         f"{r.get('elapsed')} s)")
        lines.append(f"  loss        {_num(r.get('initial_loss'), '.3f')} -> {_num(r.get('final_loss'), '.3f')}")
        acc = r.get("eval_accuracy")
        lines.append(f"  accuracy    train {_num(r.get('train_accuracy'), '.1%')}"
                     + (f", held-out {acc:.1%}" if acc is not None else ""))
        if r.get("compile_s") is not None:
            lines.append(f"  compile     {r['compile_s']} s")
    elif job == "gemm":
        lines.append(f"{'backend':<12} {'threads':>7} {'GFLOP/s':>10} {'peak':>10} {'of peak':>8}")
        for p in r.get("points", []):
            util = f"{p['utilisation']:.0%}" if p.get("utilisation") is not None else "-"
            lines.append(f"{p['backend']:<12} {p['threads']:>7} {p['gflops']:>10,.1f} {_num(p.get('peak_gflops'), ',.1f'):>10} {util:>8}")
        m = r.get("machine", {})
        lines.append(f"size {r.get('size')}; micro-architecture {m.get('microarchitecture') or 'unknown'}, "
                     f"{m.get('physical_cores')} physical cores")
        lines += [f"note: {n}" for n in r.get("peak_notes", [])]
    elif job == "quant":
        lines.append(f"{'batch':>5} {'fp32 ms':>10} {'int8 ms':>10} {'speed-up':>9}")
        for p in r.get("points", []):
            lines.append(f"{p['batch']:>5} {p['fp32_ms']:>10.3f} {p['int8_ms']:>10.3f} {_num(p.get('speedup'), '.2f'):>8}x")
        lines.append(f"{r.get('vnni_note')}; engine {r.get('engine')}; top-1 agreement {_num(r.get('top1_agreement'), '.1%')}")
    elif job == "sweep":
        pts = r.get("points", [])
        best = max((p["samples_per_s"] for p in pts if p.get("samples_per_s")), default=None)
        lines.append(f"{'variant':<44} {'threads':>7} {'samples/s':>10} {'vs best':>8}")
        for p in pts:
            sps = p.get("samples_per_s")
            rel = f"{sps / best:.0%}" if sps and best else p.get("status", "")
            lines.append(f"{p['variant'][:44]:<44} {_num(p.get('threads_used') or p.get('threads'), 'd'):>7} {_num(sps):>10} {rel:>8}")
        rec = r.get("recommendation")
        if rec:
            lines.append(f"Recommended: {rec['variant']} -> torch.set_num_threads({rec['threads']})"
                         + (f", pinned to CPUs {_cpus(rec['cpus'])}" if rec.get("cpus") else ""))
            if rec.get("default_samples_per_s"):
                lines.append(f"  {rec['samples_per_s'] / rec['default_samples_per_s']:.2f}x the PyTorch defaults")
        lines += [f"failed: {f}" for f in r.get("failures", [])]
        lines += [f"note: {n}" for n in r.get("notes", [])]
    return "\n".join(lines)
