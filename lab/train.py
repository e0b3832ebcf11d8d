"""Micro-training job: ``python -m cpudoctor.lab.train --json-args '{...}' [--control stdin]``.

Runs one model for a number of steps or seconds with the given thread,
dtype, layout and compile settings, streaming progress as JSON lines (see
:mod:`cpudoctor.lab.protocol`). Pinning happens here, in the child, before
torch is imported, so every OpenMP thread torch starts inherits the CPU set.
"""

from __future__ import annotations

import os
import resource
import sys
import time
import warnings
from collections import deque
from typing import Any

from cpudoctor.lab import protocol
from cpudoctor.lab.settings import SettingsError, TrainSettings


def _pin(cpus: list[int] | None) -> list[int] | None:
    """Pin this process to ``cpus`` (Linux only); returns the CPU set in force."""
    if cpus is None:
        return sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    if not hasattr(os, "sched_setaffinity"):
        raise SettingsError("pinning to a CPU set needs Linux (os.sched_setaffinity is missing here)")
    try:
        os.sched_setaffinity(0, cpus)
    except OSError as exc:
        raise SettingsError(f"cannot pin to CPUs {cpus}: {exc.strerror} (are they online and allowed?)") from None
    return sorted(os.sched_getaffinity(0))


def _load_data(s: TrainSettings):
    from cpudoctor.lab import data

    if s.data == "mnist":
        train = data.load_mnist(s.mnist_dir, "train")
        try:
            test = data.load_mnist(s.mnist_dir, "test", limit=s.eval_samples or None)
        except data.DataError:
            test = None
        return train, test
    n = max(8192, s.batch_size * 16)
    return data.synthetic(n, seed=s.seed), (data.synthetic(s.eval_samples, seed=s.seed + 10_000) if s.eval_samples else None)


def run(s: TrainSettings, stop: protocol.StopFlag) -> dict[str, Any]:
    cpus = _pin(s.cpus)
    t_import = time.perf_counter()
    import torch  # noqa: E402  (after pinning, on purpose)
    import torch.nn.functional as F

    from cpudoctor.lab.models import build_model, count_parameters

    import_s = time.perf_counter() - t_import
    # Inter-op threads can only be set before any inter-op work starts: do it first.
    if s.interop_threads is not None:
        torch.set_num_interop_threads(s.interop_threads)
    if s.threads is not None:
        torch.set_num_threads(s.threads)
    torch.manual_seed(s.seed)

    train, test = _load_data(s)
    x_all = torch.from_numpy(train.images)
    y_all = torch.from_numpy(train.labels)
    model = build_model(s.model)
    params = count_parameters(model)
    fmt = torch.channels_last if s.channels_last else torch.contiguous_format
    if s.channels_last:
        model = model.to(memory_format=torch.channels_last)
    lr = s.lr if s.lr is not None else (1e-3 if s.optimizer == "adam" else 0.05)
    if s.optimizer == "adam":
        opt = torch.optim.Adam(model.parameters(), lr=lr)
    else:
        opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    step_model = model
    if s.compile:
        try:
            step_model = torch.compile(model)
        except Exception as exc:  # noqa: BLE001 - any failure is reported, not raised
            raise CompileError(f"torch.compile is not available here: {type(exc).__name__}: {exc}") from None
    dtype = torch.bfloat16 if s.dtype == "bf16" else None

    def one_step(x: torch.Tensor, y: torch.Tensor) -> tuple[float, int]:
        opt.zero_grad(set_to_none=True)
        if dtype is not None:
            # bf16 has fp32's exponent range: no GradScaler (that is for fp16).
            with torch.autocast("cpu", dtype=dtype):
                out = step_model(x)
                loss = F.cross_entropy(out, y)
        else:
            out = step_model(x)
            loss = F.cross_entropy(out, y)
        loss.backward()
        opt.step()
        correct = int((out.argmax(1) == y).sum())
        return float(loss.detach()), correct

    model.train()
    n = len(train)
    gen = torch.Generator().manual_seed(s.seed)
    order = torch.randperm(n, generator=gen)
    pos = 0
    step = 0
    losses: list[float] = []
    window = deque(maxlen=20)                    # (loss, correct, batch) for the running figures
    start = time.perf_counter()
    budget_start = start
    measure_start: float | None = None
    measured_samples = 0
    last_report = start
    report_samples = 0
    compile_s = None
    status = "ok"
    while True:
        if stop.is_set():
            status = "cancelled"
            break
        if s.steps is not None and step >= s.steps:
            break
        now = time.perf_counter()
        if s.seconds is not None and now - budget_start >= s.seconds and step > s.warmup_steps:
            break
        if pos + s.batch_size > n:
            order = torch.randperm(n, generator=gen)
            pos = 0
        idx = order[pos:pos + s.batch_size]
        pos += s.batch_size
        x = x_all[idx].contiguous(memory_format=fmt)
        y = y_all[idx]
        t0 = time.perf_counter()
        try:
            loss, correct = one_step(x, y)
        except Exception as exc:  # noqa: BLE001
            if s.compile and step == 0:
                raise CompileError(f"torch.compile failed: {type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}") from None
            raise
        if s.compile and step == 0:
            compile_s = time.perf_counter() - t0
            budget_start = time.perf_counter()     # the run length counts training, not compiling
        step += 1
        losses.append(loss)
        window.append((loss, correct, len(y)))
        if step == s.warmup_steps:
            measure_start = time.perf_counter()
            last_report, report_samples = measure_start, 0
        elif step > s.warmup_steps:
            measured_samples += len(y)
            report_samples += len(y)
        now = time.perf_counter()
        if now - last_report >= s.progress_interval or (s.steps is not None and step == s.steps):
            dt = now - last_report
            protocol.progress(
                step=step,
                loss=sum(w[0] for w in window) / len(window),
                accuracy=sum(w[1] for w in window) / max(1, sum(w[2] for w in window)),
                samples_per_s=(report_samples / dt) if (dt > 0 and report_samples) else None,
                elapsed=round(now - start, 3),
            )
            last_report, report_samples = now, 0
    elapsed = time.perf_counter() - start
    measured_s = (time.perf_counter() - measure_start) if measure_start is not None else 0.0
    eval_acc = _evaluate(torch, model, test, fmt, dtype) if (test is not None and status == "ok") else None
    head = losses[: max(1, min(10, len(losses) // 4))]
    tail = losses[-max(1, min(20, len(losses) // 4)):]
    return {
        "status": status,
        "steps": step,
        "samples": step * s.batch_size,
        "samples_per_s": (measured_samples / measured_s) if measured_s > 0 and measured_samples else None,
        "initial_loss": sum(head) / len(head) if losses else None,
        "final_loss": sum(tail) / len(tail) if losses else None,
        "train_accuracy": (sum(w[1] for w in window) / max(1, sum(w[2] for w in window))) if window else None,
        "eval_accuracy": eval_acc,
        "elapsed": round(elapsed, 3),
        "import_s": round(import_s, 3),
        "compile_s": round(compile_s, 3) if compile_s is not None else None,
        "parameters": params,
        "threads": torch.get_num_threads(),
        "interop_threads": torch.get_num_interop_threads(),
        "cpus": cpus,
        "torch": torch.__version__,
        "cpu_capability": _cpu_capability(torch),
        "max_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "settings": s.to_dict(),
    }


def _evaluate(torch, model, test, fmt, dtype) -> float:
    model.eval()
    x = torch.from_numpy(test.images).contiguous(memory_format=fmt)
    y = torch.from_numpy(test.labels)
    correct = 0
    with torch.no_grad():
        for i in range(0, len(y), 256):
            if dtype is not None:
                with torch.autocast("cpu", dtype=dtype):
                    out = model(x[i:i + 256])
            else:
                out = model(x[i:i + 256])
            correct += int((out.argmax(1) == y[i:i + 256]).sum())
    model.train()
    return correct / max(1, len(y))


def _cpu_capability(torch) -> str | None:
    try:
        return torch.backends.cpu.get_cpu_capability()
    except Exception:  # noqa: BLE001 - older torch
        return None


class CompileError(RuntimeError):
    """torch.compile could not build or run the model (often: no C compiler)."""


def main(argv: list[str] | None = None) -> int:
    args, stop = protocol.parse_job_argv(argv)
    try:
        settings = TrainSettings.from_dict(args)
    except (SettingsError, TypeError) as exc:
        protocol.error(str(exc), kind="settings")
        return 2
    warnings.filterwarnings("ignore")
    try:
        res = run(settings, stop)
    except SettingsError as exc:
        protocol.error(str(exc), kind="settings")
        return 2
    except CompileError as exc:
        protocol.error(str(exc), kind="compile")
        return 3
    except Exception as exc:  # noqa: BLE001 - data errors and the like: one clear line
        from cpudoctor.lab.data import DataError

        kind = "data" if isinstance(exc, DataError) else "error"
        protocol.error(f"{type(exc).__name__}: {exc}" if kind == "error" else str(exc), kind=kind)
        return 1
    protocol.result(**res)
    return 0


if __name__ == "__main__":
    sys.exit(main())
