"""``cpudoctor fit`` and the window's Memory fit panel: will this training fit, and how to make it.

One path for both surfaces: :func:`run_fit` takes a :class:`FitRequest` and returns the advisor's
:class:`~cpudoctor.model.fit.FitPlan`. The need comes from one of three sources, best first:

* **a measured model** (``--model MODULE:CALLABLE`` or a lab model): ``fit``'s child builds it in the chosen
  Python environment (torch never runs in CPU Doctor's process, :mod:`cpudoctor.lab.fit`) and measures a few
  training steps;
* **a saved run** (``--from-run run.json``, ``cpudoctor run --format json``): what the job's own probe said of
  its training, when it said it, else the memory the run saw it use (its peak, its workers), its cgroup limit
  and the machine's memory;
* **sizes** (``--params N --optimizer adam``): parameters, gradients and optimizer state computed, the rest
  typical figures named as such.

The budget is this machine's (available memory, the cgroup of the shell ``fit`` runs in, WSL2's cap), the
run's, or ``--memory``. Nothing here writes words: :mod:`cpudoctor.render.fit` does.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cpudoctor.model.fit import FitPlan, MemoryBudget, NeedPart
from cpudoctor.model.memory import JobMemory, TrainingMemory


class FitInputError(ValueError):
    """The request cannot be answered as given: the message says what to give instead."""


@dataclass
class FitRequest:
    batch: int | None = None
    model: str | None = None               # module:callable, or a lab model's name
    path: str | None = None                # the folder the module is imported from (default: the current one)
    input: list[int] | None = None         # one sample's shape
    input_dtype: str = "float32"
    vocab: int = 1000
    params: int | None = None
    optimizer: str = "adam"
    from_run: str | None = None
    workers: int = 0
    dataset_bytes: int | None = None
    worker_bytes: int | None = None
    workers_copy_dataset: bool = False
    memory_bytes: int | None = None        # a limit given for another machine or a pod
    threads: int | None = None
    python: str | None = None
    checkpoint: bool = True
    bf16: bool | None = None               # None: measure bf16 autocast where the CPU computes bf16 natively
    seconds: float = 60.0


@dataclass
class FitOutcome:
    plan: FitPlan
    request: FitRequest
    run_memory: JobMemory | None = None    # the saved run's memory, when the plan came from one
    notes: list[str] = field(default_factory=list)


def native_bf16(root: Path = Path("/")) -> bool | None:
    """Whether this CPU computes bf16 itself (from the CPU probe; None when unknown)."""
    try:
        from cpudoctor.lab.native import native_support
        from cpudoctor.probes import probe_cpu

        return native_support(probe_cpu(root)).bf16
    except Exception:  # noqa: BLE001 - a failing CPU probe costs the bf16 advice its certainty, nothing more
        return None


def budget_here(given: int | None = None, root: Path = Path("/"), native: bool | None = None) -> MemoryBudget:
    from cpudoctor.advisor.fit import budget
    from cpudoctor.probes.process.memory import memory_here

    system, cgroup = memory_here(root)
    return budget(system, cgroup, given=given, native_bf16=native)


def read_run(path: str) -> dict[str, Any]:
    """A saved ``cpudoctor run --format json``: bounded read, the run's kind checked."""
    from cpudoctor.model.report import ReportError
    from cpudoctor.report_file import parse, read_report_text

    try:
        data = parse(read_report_text(path))
    except (OSError, ReportError) as exc:
        raise FitInputError(f"cannot read {path}: {exc}") from None
    if not isinstance(data, dict) or data.get("kind") != "cpudoctor-run":
        raise FitInputError(f"{path} is not a saved run (write one with cpudoctor run --format json -o run.json "
                            "-- python train.py)")
    return data


def run_memory(data: dict[str, Any]) -> JobMemory | None:
    """The saved run's memory, with what the job's probe counted of its training (kept in the memory, or read from
    the run's probe state when the memory was saved without it)."""
    from cpudoctor.model.evidence import training_of
    from cpudoctor.model.jobstate import JobState
    from cpudoctor.model.serde import SchemaError, from_data

    raw = data.get("memory")
    if raw is None:
        return None
    try:
        mem = from_data(JobMemory, raw)
    except SchemaError as exc:
        raise FitInputError(f"the run's memory facts are damaged: {exc}") from None
    if mem.training is None and isinstance(data.get("state"), dict):
        try:
            mem.with_training(training_of(from_data(JobState, data["state"])))
        except SchemaError:
            pass                  # the probe's state damaged: the run's memory alone, as for a run without it
    return mem


def _shape(req: FitRequest, batch: int, mem: JobMemory | None = None):
    from cpudoctor.advisor.fit import JobShape

    shape = JobShape(batch=batch, workers=req.workers, dataset_bytes=req.dataset_bytes, worker_bytes=req.worker_bytes,
                     workers_copy_dataset=req.workers_copy_dataset)
    if mem is not None and mem.workers and not req.workers:
        shape.workers = len([w for w in mem.workers if not w.exited_in_window] or mem.workers)
        shape.worker_bytes = max((w.uss_bytes or 0) for w in mem.workers) or None
    return shape


def _run_budget(mem: JobMemory, given: int | None, native: bool | None) -> MemoryBudget:
    from cpudoctor.advisor.fit import budget

    return budget(mem.system, mem.cgroup, given=given, native_bf16=native)


def run_fit(req: FitRequest, *, root: Path = Path("/"), stop: threading.Event | None = None,
            on_progress: Callable[[dict[str, Any]], None] | None = None) -> FitOutcome:
    """The plan for ``req`` (the child's measurement when a model is given: seconds to a minute)."""
    from cpudoctor.advisor.fit import plan_measured, plan_training

    native = native_bf16(root)
    mem = None
    notes: list[str] = []
    if req.from_run:
        mem = run_memory(read_run(req.from_run))
        if mem is None:
            raise FitInputError(f"{req.from_run} holds no memory facts (a run saved by an older CPU Doctor, or one "
                                "whose process could not be sampled): run it again with this version")
    budget_ = _run_budget(mem, req.memory_bytes, native) if mem is not None else budget_here(req.memory_bytes, root,
                                                                                               native)
    if req.model:
        from cpudoctor.lab.fit import FitError, measure

        batch = req.batch or (mem.training.batch_size if mem is not None and mem.training else None) or 64
        settings = {"model": req.model, "path": req.path or os.getcwd(), "input": req.input,
                    "input_dtype": req.input_dtype, "vocab": req.vocab, "optimizer": req.optimizer,
                    "target_batch": batch, "threads": req.threads, "checkpoint": req.checkpoint,
                    "bf16": bool(native) if req.bf16 is None else req.bf16, "seconds": req.seconds,
                    "budget_bytes": _measure_budget(budget_ if req.memory_bytes is None and mem is None
                                                    else budget_here(None, root, native))}
        try:
            _outcome, measured = measure(settings, python=req.python, stop=stop, on_progress=on_progress)
        except FitError as exc:
            raise FitInputError(f"the model could not be measured: {exc}") from None
        plan = plan_measured(measured, _shape(req, batch, mem), budget_)
    elif mem is not None and mem.training is not None:
        t = mem.training
        plan = plan_training(t, _shape(req, req.batch or t.batch_size or 1, mem), budget_,
                             source="probe" if t.source == "probe" else "run")
    elif mem is not None:
        plan = plan_from_run(mem, req, budget_)
    elif req.params:
        t = TrainingMemory(source="given", parameters=req.params, param_bytes=4 * req.params,
                           optimizer=req.optimizer)
        plan = plan_training(t, _shape(req, req.batch or 1), budget_, source="parameters")
    else:
        raise FitInputError("say what to fit: --model MODULE:CALLABLE (measured), --from-run run.json, or "
                            "--params N with --optimizer")
    return FitOutcome(plan, req, mem, notes)


def _measure_budget(b: MemoryBudget) -> int | None:
    """What the child may take for its measurement: half of what is usable on this machine (a limit given for
    another one does not bound what can be measured here); the rest is extrapolated."""
    return int(b.usable_bytes * 0.5) if b.usable_bytes else None


def plan_from_run(mem: JobMemory, req: FitRequest, budget_: MemoryBudget) -> FitPlan:
    """A run without its training's sizes: the memory it was seen to use against its limit."""
    from cpudoctor.advisor.fit import knowledge
    from cpudoctor.advisor.fit_strategies import rank, raise_limit, shared_dataset, swap

    plan = FitPlan(batch=req.batch, budget=budget_, margin=float(knowledge()["margin"]["value"]), source="run")
    job_peak = mem.peak_rss_bytes or mem.rss_bytes or 0
    plan.parts.append(NeedPart("trainer", job_peak, "measured"))
    workers = [w for w in mem.workers if not w.exited_in_window] or mem.workers
    if workers:
        plan.parts.append(NeedPart("workers", sum(w.uss_bytes or 0 for w in workers), "measured"))
    plan.total_bytes = sum(p.bytes for p in plan.parts)
    room = plan.room_bytes
    killed = mem.exit_code in (137, -9) and bool((mem.cgroup and mem.cgroup.events_in_window.get("oom_kill"))
                                                 or (mem.system and mem.system.oom_kills_in_window))
    plan.fits = False if killed else (plan.total_bytes <= room if room is not None else None)
    if killed:
        plan.notes.append("the run was killed for memory: it needs more than it reached")
    plan.notes.append("the run does not say what its training holds: measure the model (--model MODULE:CALLABLE "
                      "--batch N) for the largest batch and what each strategy saves")
    shape = _shape(req, req.batch or 1, mem)
    shape.workers_copy_dataset = bool(workers) and any((w.uss_bytes or 0) > 128 * 2**20 for w in workers)
    plan.strategies = rank([s for s in (shared_dataset(plan, shape), raise_limit(plan), swap(plan)) if s is not None])
    return plan


# --- the lab's check: fit's estimate against a measured training run -------------------------------------------


@dataclass
class CheckRow:
    """One training run against fit's estimate for it."""

    model: str
    batch: int
    checkpoint: bool
    estimate_bytes: int | None = None          # from the batches measured, up to this one when it was measured
    estimate_small_bytes: int | None = None    # from batches up to a quarter of it only (the extrapolation alone)
    measured_bytes: int | None = None          # the training process's peak resident memory
    error: str = ""

    @property
    def error_share(self) -> float | None:
        if self.estimate_bytes is None or not self.measured_bytes:
            return None
        return self.estimate_bytes / self.measured_bytes - 1


def lab_data_bytes(batch: int) -> int:
    """The lab's synthetic training data (lab/jobs/train.py: max(8192, 16 x batch) 28x28 fp32 images, int64 labels)."""
    return max(8192, batch * 16) * (28 * 28 * 4 + 8)


def lab_train_peak(model: str, batch: int, checkpoint: bool, *, python: str | None = None, steps: int = 3,
                   stop: threading.Event | None = None) -> int:
    """The peak resident memory of the lab's training job (lab/jobs/train.py) at ``batch``: its own loop and data,
    no census and no evaluation, so the peak is the training's."""
    from cpudoctor.lab.runner import job_command, run_job

    settings = {"model": model, "batch_size": batch, "checkpoint": checkpoint, "steps": steps, "warmup_steps": 1,
                "seconds": 3600.0, "census": False, "eval_samples": 0}
    outcome = run_job("train", settings, stop_event=stop or threading.Event(),
                      argv=job_command("train", settings, python))
    if outcome.result is None or outcome.result.get("max_rss_mib") is None:
        raise FitInputError(f"the training run of {model} at batch {batch} failed: {outcome.message}")
    return int(float(outcome.result["max_rss_mib"]) * 2**20)


def lab_check(model: str, batches: list[int], *, checkpoint: bool = True, python: str | None = None,
              seconds: float = 600.0, path: str | None = None,
              train_peak: Callable[[int, bool], int] | None = None, data_bytes: Callable[[int], int] | None = None,
              stop: threading.Event | None = None,
              on_row: Callable[[CheckRow], None] | None = None) -> list[CheckRow]:
    """Train ``model`` at each of ``batches`` (and checkpointed) and hold each run's peak against fit's estimate.

    A lab model is trained by the lab's training job; another one by ``train_peak(batch, checkpoint)``. fit
    measures the model once, up to the largest batch (the estimates for smaller ones are then from measured
    points, the ``small`` column from those up to a quarter of the batch only).
    """
    from cpudoctor.advisor.fit import need_at
    from cpudoctor.lab.fit import FitError, measure

    batches = sorted(set(batches))
    lab = train_peak is None
    if lab:
        train_peak = lambda b, ck: lab_train_peak(model, b, ck, python=python, stop=stop)  # noqa: E731
        data_bytes = data_bytes or lab_data_bytes
    settings = {"model": model, "path": path or os.getcwd(), "optimizer": "adam", "checkpoint": checkpoint,
                "bf16": False, "seconds": seconds, "batches": _check_batches(batches), "checkpoint_batches": batches}
    try:
        _outcome, m = measure(settings, python=python, stop=stop)
    except FitError as exc:
        raise FitInputError(f"the model could not be measured: {exc}") from None
    rows = []
    for ck in ((False, True) if checkpoint and m.checkpoint_block else (False,)):
        for b in batches:
            extra = data_bytes(b) if data_bytes else 0
            variant = "checkpoint" if ck else "plain"
            row = CheckRow(model, b, ck, need_at(m, b, variant, extra), need_at(m, b, variant, extra, up_to=b // 4))
            try:
                row.measured_bytes = train_peak(b, ck)
            except FitInputError as exc:
                row.error = str(exc)
            rows.append(row)
            if on_row is not None:
                on_row(row)
            if stop is not None and stop.is_set():
                return rows
    return rows


def _check_batches(batches: list[int]) -> list[int]:
    """What fit measures for a check: a doubling series from 2 to the largest batch, and each batch checked."""
    series, n = set(batches), 2
    while n < max(batches):
        series.add(n)
        n *= 2
    return sorted(series)
