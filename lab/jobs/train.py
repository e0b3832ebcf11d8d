"""Micro-training job: ``python -I train.py --json-args '{...}' [--control stdin]``.

Trains one model for a number of steps or seconds with the given thread,
dtype, layout and compile settings, streaming progress as JSON lines (see
:mod:`_jobkit`). Pinning happens here, in the child, before torch is imported,
so every OpenMP thread torch starts inherits the CPU set.

One set of metric definitions, used by the progress lines and the result alike
(so a plot's last point and a table's figure are the same number):

* ``samples_per_s``: samples of the measured steps (after warm-up) / their
  seconds, cumulative; in the run's own dtype;
* ``loss`` / ``accuracy``: mean over the last ``smoothing_steps`` (20) steps;
* ``eval_accuracy``: held-out samples at the end (a different figure, named so).

A bf16 run also trains fp32 in the same job, in alternating windows of about
half a second (ABAB...), so the bf16/fp32 ratio is measured under the same
conditions; ``reference_samples_per_s`` is the fp32 figure. When the run ends
before fp32 got a step, the result says so (``reference.not_measured``): no
ratio is claimed that was not measured.

``seconds`` is the whole job's budget, counted from the start of the process
(:class:`Budget`): start-up, warm-up, training and the held-out evaluation fit
inside it; ``ended_by`` says whether the budget, the step limit or a stop
ended the run.

With ``serve`` the job is a sweep worker: it warms up, says ``ready``, then
measures one segment per ``measure SECONDS`` command until told to stop.
"""

from __future__ import annotations

import os
import sys
import time
from collections import deque
from typing import Any, Dict, List, Optional, Tuple

if __package__:
    from . import _cpumeter, _jobkit, _libreports, _opprofile
    from ._settings import SMOOTHING_STEPS, TrainSettings, pin_cpus
else:  # a standalone script: ``python -I`` leaves the script's folder off sys.path
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import _cpumeter
    import _jobkit
    import _libreports
    import _opprofile
    from _settings import SMOOTHING_STEPS, TrainSettings, pin_cpus

WINDOW_S = 0.5        # length of one window; a bf16 run alternates bf16 and fp32 windows
EVAL_CHUNK = 256      # held-out samples per forward pass


class CompileError(_jobkit.JobError):
    """torch.compile could not build or run the model (often: no C compiler)."""

    kind = "compile"
    exit_code = 3


def _load_data(s: TrainSettings):
    _jobkit.require("numpy")                       # the data is numpy; say so plainly when it is missing
    if __package__:
        from . import data
    else:
        import data
    if s.data == "mnist":
        train = data.load_mnist(s.mnist_dir, "train")
        try:
            test = data.load_mnist(s.mnist_dir, "test", limit=s.eval_samples or None)
        except data.DataError:
            test = None
        return train, test
    n = max(8192, s.batch_size * 16)
    test = data.synthetic(s.eval_samples, seed=s.seed + 10_000) if s.eval_samples else None
    return data.synthetic(n, seed=s.seed), test


def _max_rss_mib() -> Optional[float]:
    try:
        import resource
    except ImportError:      # Windows
        return None
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


class Trainer:
    """The model, optimizer and data of one run; :meth:`step` trains one batch in fp32 or bf16."""

    def __init__(self, s: TrainSettings, train, test):
        t_import = time.perf_counter()
        torch = _jobkit.require("torch")          # after pinning, on purpose
        import torch.nn.functional as functional  # noqa: PLC0415

        if __package__:
            from . import _checkpointing
            from .models import build_model, count_parameters
        else:
            import _checkpointing
            from models import build_model, count_parameters
        self.import_s = time.perf_counter() - t_import
        self.torch = torch
        self.functional = functional
        self.s = s
        # Inter-op threads can only be set before any inter-op work starts: do it first.
        if s.interop_threads is not None:
            torch.set_num_interop_threads(s.interop_threads)
        if s.threads is not None:
            torch.set_num_threads(s.threads)
        torch.manual_seed(s.seed)
        self.test = test
        self.x_all = torch.from_numpy(train.images)
        self.y_all = torch.from_numpy(train.labels)
        self.model = build_model(s.model)
        self.parameters = count_parameters(self.model)
        self.checkpointed: Tuple[Optional[str], int] = (None, 0)
        if s.checkpoint:
            self.checkpointed = _checkpointing.checkpoint_blocks(self.model, torch)
        self.fmt = torch.channels_last if s.channels_last else torch.contiguous_format
        if s.channels_last:
            self.model = self.model.to(memory_format=torch.channels_last)
        lr = s.lr if s.lr is not None else (1e-3 if s.optimizer == "adam" else 0.05)
        params = self.model.parameters()
        self.opt = torch.optim.Adam(params, lr=lr) if s.optimizer == "adam" else torch.optim.SGD(params, lr=lr, momentum=0.9)
        self.step_model = self.model
        if s.compile:
            try:
                self.step_model = torch.compile(self.model)
            except Exception as exc:  # noqa: BLE001 - any failure is reported, not raised
                raise CompileError(f"torch.compile is not available here: {type(exc).__name__}: {exc}") from None
        self.compile_s: Optional[float] = None
        self.model.train()
        self.n = len(train)
        self.gen = torch.Generator().manual_seed(s.seed)
        self.order = torch.randperm(self.n, generator=self.gen)
        self.pos = 0
        self.steps = 0

    def _batch(self):
        if self.pos + self.s.batch_size > self.n:
            self.order = self.torch.randperm(self.n, generator=self.gen)
            self.pos = 0
        idx = self.order[self.pos:self.pos + self.s.batch_size]
        self.pos += self.s.batch_size
        return self.x_all[idx].contiguous(memory_format=self.fmt), self.y_all[idx]

    def step(self, dtype: str, counted: bool = True) -> Tuple[float, int, int]:
        """One optimizer step on the next batch; (loss, correct predictions, samples).

        ``counted=False``: a census step (kernels, profile), not one of the run's steps."""
        torch, F = self.torch, self.functional
        x, y = self._batch()
        t0 = time.perf_counter()
        try:
            self.opt.zero_grad(set_to_none=True)
            if dtype == "bf16":
                # bf16 has fp32's exponent range: no GradScaler (that is for fp16).
                with torch.autocast("cpu", dtype=torch.bfloat16):
                    out = self.step_model(x)
                    loss = F.cross_entropy(out, y)
            else:
                out = self.step_model(x)
                loss = F.cross_entropy(out, y)
            loss.backward()
            self.opt.step()
        except Exception as exc:  # noqa: BLE001
            if self.s.compile and self.compile_s is None:
                first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
                raise CompileError(f"torch.compile failed: {type(exc).__name__}: {first}") from None
            raise
        if self.s.compile and self.compile_s is None:
            self.compile_s = time.perf_counter() - t0
        self.steps += 1 if counted else 0
        return float(loss.detach()), int((out.argmax(1) == y).sum()), len(y)

    def evaluate(self, dtype: str, deadline: Optional[float] = None) -> Tuple[Optional[float], int]:
        """Accuracy on the held-out samples and how many were evaluated: chunks stop at ``deadline``."""
        if self.test is None:
            return None, 0
        torch = self.torch
        self.model.eval()
        x = torch.from_numpy(self.test.images).contiguous(memory_format=self.fmt)
        y = torch.from_numpy(self.test.labels)
        correct = done = 0
        with torch.no_grad():
            for i in range(0, len(y), EVAL_CHUNK):
                if deadline is not None and time.perf_counter() >= deadline:
                    break
                if dtype == "bf16":
                    with torch.autocast("cpu", dtype=torch.bfloat16):
                        out = self.model(x[i:i + EVAL_CHUNK])
                else:
                    out = self.model(x[i:i + EVAL_CHUNK])
                correct += int((out.argmax(1) == y[i:i + EVAL_CHUNK]).sum())
                done += len(out)
        self.model.train()
        return (correct / done if done else None), done

    def facts(self, cpus: Optional[List[int]]) -> Dict[str, Any]:
        torch = self.torch
        try:
            capability = torch.backends.cpu.get_cpu_capability()
        except Exception:  # noqa: BLE001 - older torch
            capability = None
        return {"threads": torch.get_num_threads(), "interop_threads": torch.get_num_interop_threads(),
                "cpus": cpus, "torch": torch.__version__, "cpu_capability": capability,
                "import_s": round(self.import_s, 3), "parameters": self.parameters,
                "checkpointed": {"block": self.checkpointed[0], "blocks": self.checkpointed[1]}}


class Meter:
    """Samples and seconds per dtype, and the rate of each window (its spread)."""

    def __init__(self) -> None:
        self.samples: Dict[str, int] = {}
        self.seconds: Dict[str, float] = {}
        self.windows: Dict[str, List[float]] = {}

    def add(self, dtype: str, samples: int, seconds: float) -> None:
        self.samples[dtype] = self.samples.get(dtype, 0) + samples
        self.seconds[dtype] = self.seconds.get(dtype, 0.0) + seconds

    def close_window(self, dtype: str, samples: int, seconds: float) -> None:
        if samples and seconds > 0:
            self.windows.setdefault(dtype, []).append(round(samples / seconds, 2))

    def rate(self, dtype: str) -> Optional[float]:
        secs = self.seconds.get(dtype, 0.0)
        return self.samples[dtype] / secs if secs > 0 and self.samples.get(dtype) else None


class Budget:
    """The run's time budget: ``seconds`` counted from the start of the process, start-up included.

    ``--seconds 15`` means the job ends within 15 s of the user's time: importing torch, loading data,
    warming up, training and the held-out evaluation all count. A step is only started when the
    latest step of its kind still fits before the deadline (less what is kept for the evaluation).
    """

    def __init__(self, seconds: Optional[float], age: Optional[float] = None):
        now = time.perf_counter()
        self.seconds = seconds
        self.started = now - (_jobkit.process_age() if age is None else age)
        self.deadline = None if seconds is None else self.started + seconds
        self.reserve = 0.0          # seconds kept for the held-out evaluation

    def used(self) -> float:
        return time.perf_counter() - self.started

    def fits(self, step_s: float, reserve: bool = True) -> bool:
        if self.deadline is None:
            return True
        return time.perf_counter() + step_s <= self.deadline - (self.reserve if reserve else 0.0)

    def eval_deadline(self) -> Optional[float]:
        return self.deadline

    def hard_deadline(self) -> Optional[float]:
        """Past this the job is stopped mid-step with what it measured: the budget plus a little slack for a
        last step that was predicted to fit (5 %, at least a second)."""
        return None if self.deadline is None else self.deadline + max(1.0, 0.05 * (self.seconds or 0))


def _warm_up(tr: Trainer, s: TrainSettings, dtypes: List[str], stop: _jobkit.StopFlag, budget: Budget,
             record) -> Dict[str, float]:
    """Untimed steps per dtype (the first ones allocate, pick kernels, compile); the last step's seconds of each.

    Within the budget: one step per dtype while one fits, more only within a quarter of what is left.
    """
    last: Dict[str, float] = {}
    share_end = None if budget.deadline is None else time.perf_counter() + 0.25 * (budget.deadline - time.perf_counter())
    for dtype in dtypes:
        for i in range(s.warmup_steps):
            if stop.is_set() or (s.steps is not None and tr.steps >= s.steps):
                return last
            guess = last.get(dtype, max(last.values(), default=0.0))
            if not budget.fits(guess) or (i > 0 and share_end is not None and time.perf_counter() + guess > share_end):
                break
            t0 = time.perf_counter()
            record(tr.step(dtype))
            last[dtype] = time.perf_counter() - t0
    return last


def _eval_reserve(s: TrainSettings, tr: Trainer, last: Dict[str, float]) -> float:
    """Seconds to keep for the held-out evaluation: forward passes cost about a third of a training step."""
    if tr.test is None or not s.eval_samples or s.seconds is None or s.dtype not in last:
        return 0.0
    estimate = s.eval_samples / s.batch_size * last[s.dtype] / 3
    return min(estimate, 0.2 * s.seconds)


def _not_measured(budget: Budget, ended_by: str, dtype: str, cut_off: str = "") -> str:
    """Why ``dtype`` has no figure, in a few words for the result."""
    if ended_by == "budget":
        during = f" during {cut_off}," if cut_off else ""
        return (f"the {budget.seconds:g} s budget (start-up included) ended{during} before a {dtype} step was "
                "measured")
    if ended_by == "cancelled":
        return f"the run was stopped before a {dtype} step was measured"
    return f"the step limit was reached before a {dtype} step was measured"


class TrainingRun:
    """One measured training run: warm-up, alternating windows, the held-out evaluation, and its result.

    The result can be made at any moment (:meth:`result`): at the end, and by the budget's hard stop
    (:class:`_jobkit.Deadline`) when a step or the start-up runs past it, which sends what was measured
    so far and ends the process.
    """

    def __init__(self, s: TrainSettings, budget: Budget, cpus: Optional[List[int]]):
        self.s, self.budget, self.cpus = s, budget, cpus
        self.tr: Optional[Trainer] = None
        self.dtypes = [s.dtype] + (["fp32"] if s.compares_fp32 else [])
        self.recent: deque = deque(maxlen=SMOOTHING_STEPS)      # (loss, correct, samples) of the last steps
        self.losses: List[float] = []
        self.meter = Meter()
        self.last: Dict[str, float] = {}                         # the latest step's seconds per dtype
        self.start: Optional[float] = None
        self.startup_s = self.warmup_s = None
        self.eval: Tuple[Optional[float], int] = (None, 0)
        self.cpu_meter = self.cpu_start = None
        self.evidence: Dict[str, Any] = {}                       # the census: kernels that ran, operators
        self.phase = "start-up (starting Python, importing torch, loading the data)"   # what a hard stop cuts off

    def record(self, step: Tuple[float, int, int]) -> None:
        self.losses.append(step[0])
        self.recent.append(step)

    def progress(self, now: float) -> None:
        fields = {"step": self.tr.steps, "elapsed": round(now - self.start, 3), "dtype": self.s.dtype,
                  "loss": _mean(r[0] for r in self.recent), "accuracy": _accuracy(self.recent),
                  "samples_per_s": self.meter.rate(self.s.dtype)}
        if len(self.dtypes) > 1:
            fields["reference_samples_per_s"] = self.meter.rate("fp32")
        _jobkit.progress(**fields)

    def run(self, tr: Trainer, stop: _jobkit.StopFlag) -> Dict[str, Any]:
        """Train until steps/seconds run out or the parent says stop; the result holds what was measured."""
        self.tr, self.start = tr, time.perf_counter()
        self.startup_s = self.budget.used()
        self.phase = "a warm-up step"
        self.last = _warm_up(tr, self.s, self.dtypes, stop, self.budget, self.record)
        self.warmup_s = time.perf_counter() - self.start
        self.budget.reserve = _eval_reserve(self.s, tr, self.last)
        # which kernels ran and the operators' FLOP: a step per dtype and two profiled, when they fit the budget
        if self.budget.fits(sum(self.last.values()) + 2 * self.last.get(self.s.dtype, 0.0)):
            self.phase = "the kernel census"
            self.evidence = census(tr, self.dtypes, stop, operators=True)
        self.cpu_meter = _cpumeter.CpuMeter(self.cpus)
        self.cpu_start = self.cpu_meter.start()
        self.phase = "a training step"
        ended_by = self._measure(stop)
        self.progress(time.perf_counter())         # the last point of the plots is the result's figure
        if ended_by != "cancelled":
            self.phase = "the held-out evaluation"
            self.eval = tr.evaluate(self.s.dtype, self.budget.eval_deadline())
        return self.result(ended_by)

    def _measure(self, stop: _jobkit.StopFlag) -> str:
        """Steps in alternating windows until the step limit, the budget or a stop; what ended them."""
        s, tr, dtypes = self.s, self.tr, self.dtypes
        window = {"dtype": dtypes[0], "samples": 0, "seconds": 0.0, "began": time.perf_counter(), "steps": 0}
        last_report = time.perf_counter()
        # A run limited by steps that may end inside its first window still measures every dtype: windows also
        # end after a share of the steps (on a fast CPU, 15 steps take less than one WINDOW_S).
        window_steps = max(1, s.steps // (2 * len(dtypes))) if s.steps is not None and len(dtypes) > 1 else None
        ended_by = "steps"
        while True:
            if stop.is_set():
                ended_by = "cancelled"
                break
            if s.steps is not None and tr.steps >= s.steps:
                break
            if not self.budget.fits(self.last.get(window["dtype"], 0.0)):
                ended_by = "budget"
                break
            t0 = time.perf_counter()
            step = tr.step(window["dtype"])
            dt = time.perf_counter() - t0
            self.last[window["dtype"]] = dt
            self.record(step)
            self.meter.add(window["dtype"], step[2], dt)
            window["samples"] += step[2]
            window["seconds"] += dt
            window["steps"] += 1
            now = time.perf_counter()
            if now - window["began"] >= WINDOW_S or (window_steps is not None and window["steps"] >= window_steps):
                self.meter.close_window(window["dtype"], window["samples"], window["seconds"])
                nxt = dtypes[(dtypes.index(window["dtype"]) + 1) % len(dtypes)]
                window = {"dtype": nxt, "samples": 0, "seconds": 0.0, "began": now, "steps": 0}
            if now - last_report >= s.progress_interval:
                self.progress(now)
                last_report = now
        self.meter.close_window(window["dtype"], window["samples"], window["seconds"])
        return ended_by

    def result(self, ended_by: str, cut_off: str = "") -> Dict[str, Any]:
        """What was measured, with what the time went to and what ended the run (``cut_off``: what the budget's
        hard stop interrupted)."""
        s, tr, meter = self.s, self.tr, self.meter
        head = self.losses[: max(1, min(10, len(self.losses) // 4))]
        steps = tr.steps if tr is not None else 0
        res: Dict[str, Any] = {
            "status": "cancelled" if ended_by == "cancelled" else "ok", "steps": steps,
            "samples": steps * s.batch_size, "dtype": s.dtype,
            "samples_per_s": meter.rate(s.dtype), "window_rates": list(meter.windows.get(s.dtype, [])),
            "initial_loss": _mean(head) if self.losses else None, "final_loss": _mean(r[0] for r in self.recent),
            "train_accuracy": _accuracy(self.recent), "smoothing_steps": SMOOTHING_STEPS,
            "eval_accuracy": self.eval[0], "eval_samples_done": self.eval[1],
            "elapsed": round(time.perf_counter() - self.start, 3) if self.start is not None else 0.0,
            "compile_s": round(tr.compile_s, 3) if tr is not None and tr.compile_s is not None else None,
            "interference": self.cpu_meter.since(self.cpu_start) if self.cpu_meter is not None else None,
            "max_rss_mib": _max_rss_mib(), "settings": s.to_dict(),
            # the budget, start-up included: what the time went to, and what ended the run
            "budget_s": s.seconds, "startup_s": round(self.startup_s if self.startup_s is not None
                                                      else self.budget.used(), 3),
            "warmup_s": round(self.warmup_s, 3) if self.warmup_s is not None else None,
            "job_s": round(self.budget.used(), 3), "ended_by": ended_by, "cut_off": cut_off or None,
        }
        if not meter.samples.get(s.dtype):
            res["not_measured"] = _not_measured(self.budget, ended_by, s.dtype, cut_off)
        if len(self.dtypes) > 1:
            res["reference"] = {"dtype": "fp32", "samples_per_s": meter.rate("fp32"),
                                "window_rates": list(meter.windows.get("fp32", []))}
            if not meter.samples.get("fp32"):
                res["reference"]["not_measured"] = _not_measured(self.budget, ended_by, "fp32", cut_off)
        res.update(self.evidence)
        if tr is not None:
            res.update(tr.facts(self.cpus))
        else:
            res.update(threads=s.threads, interop_threads=s.interop_threads, cpus=self.cpus)
        return res

    def cut_off(self) -> Dict[str, Any]:
        """The result the budget's hard stop sends: the run is past its budget inside one long step (or start-up)."""
        return self.result("budget", cut_off=self.phase)


def train(tr: Trainer, s: TrainSettings, stop: _jobkit.StopFlag, cpus: Optional[List[int]],
          budget: Optional[Budget] = None) -> Dict[str, Any]:
    """Train until steps/seconds run out or the parent says stop; the result holds what was measured."""
    return TrainingRun(s, budget or Budget(s.seconds), cpus).run(tr, stop)


def serve(tr: Trainer, s: TrainSettings, stop: _jobkit.StopFlag, cpus: Optional[List[int]]) -> Dict[str, Any]:
    """A sweep worker: warm up once, then one measured segment per ``measure SECONDS`` command."""
    for _ in range(max(1, s.warmup_steps)):
        if stop.is_set():
            break
        tr.step(s.dtype)
    _jobkit.progress(phase="ready", **tr.facts(cpus), **census(tr, [s.dtype], stop, operators=False))
    cpu_meter = _cpumeter.CpuMeter(cpus)
    segments = 0
    while True:
        command = stop.next_command()
        if command is None:
            break
        word, _, value = command.partition(" ")
        if word != _jobkit.MEASURE_COMMAND:
            _jobkit.log(f"unknown command {command!r} ignored")
            continue
        try:
            seconds = max(0.01, float(value))
        except ValueError:
            _jobkit.log(f"'measure' needs seconds, not {value!r}")
            continue
        cpu_start = cpu_meter.start()
        samples, busy, steps = 0, 0.0, 0
        began = time.perf_counter()
        while (time.perf_counter() - began < seconds or steps == 0) and not stop.is_set():
            t0 = time.perf_counter()
            _loss, _correct, n = tr.step(s.dtype)
            busy += time.perf_counter() - t0
            samples += n
            steps += 1
        if stop.is_set():
            break
        segments += 1
        _jobkit.progress(phase="segment", segment=segments, steps=steps, samples=samples, seconds=round(busy, 4),
                         samples_per_s=samples / busy if busy > 0 else None,
                         interference=cpu_meter.since(cpu_start))
    return {"status": "ok", "segments": segments, "steps": tr.steps, "max_rss_mib": _max_rss_mib(),
            "settings": s.to_dict(), **tr.facts(cpus)}


def _mean(values) -> Optional[float]:
    values = list(values)
    return sum(values) / len(values) if values else None


def _accuracy(recent) -> Optional[float]:
    total = sum(r[2] for r in recent)
    return sum(r[1] for r in recent) / total if total else None


def run(args: Dict[str, Any], stop: _jobkit.StopFlag) -> Dict[str, Any]:
    s = TrainSettings.from_dict(args)
    cpus = pin_cpus(s.cpus)
    if s.serve:
        return serve(Trainer(s, *_load_data(s)), s, stop, cpus)
    budget = Budget(s.seconds)
    measured = TrainingRun(s, budget, cpus)
    # The budget's backstop: a step (or torch's import) that runs past it is cut off with what was measured.
    hard = _jobkit.Deadline(budget.hard_deadline(), measured.cut_off) if budget.deadline is not None else None
    train_data, test_data = _load_data(s)      # before torch: a wrong MNIST folder costs no torch import
    tr = Trainer(s, train_data, test_data)
    res = measured.run(tr, stop)
    if hard is not None and not hard.finish():
        raise SystemExit(0)                    # the hard stop sent the result already (never reached: it exits)
    return res


def census(tr: Trainer, dtypes: List[str], stop: _jobkit.StopFlag, operators: bool) -> Dict[str, Any]:
    """After warm-up, unmeasured: one step per dtype with the libraries' verbose reports on (which kernels
    ran), and two under PyTorch's profiler (each operator's FLOP, bytes and time, for the roofline picture)."""
    if not tr.s.census or stop.is_set():
        return {}
    kit = _libreports.Census(tr.torch)
    for dtype in dtypes:
        if not stop.is_set():
            kit.run(lambda d=dtype: tr.step(d, counted=False))
    out: Dict[str, Any] = {"library_reports": kit.report()}
    if operators and not stop.is_set():
        ops, notes = _opprofile.profile_operators(tr.torch, lambda: tr.step(tr.s.dtype, counted=False))
        out["operators"] = ops
        out["library_reports"]["notes"] += notes
    return out


if __name__ == "__main__":
    _jobkit.exit_job(_jobkit.job_main(run))
