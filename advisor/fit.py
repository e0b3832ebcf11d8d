"""Will a training step fit: the memory it needs at a batch size, against what the job may use, and what to do.

Input: what is known of the training (a :class:`~cpudoctor.model.fit.ModelMeasurement` from ``fit``'s child,
or a :class:`~cpudoctor.model.memory.TrainingMemory` from the job's probe or from a parameter count), what
the job does besides (:class:`JobShape`: batch, DataLoader workers, an in-memory dataset) and the memory it may
use (:class:`~cpudoctor.model.fit.MemoryBudget`, made by :func:`budget`). Output: a
:class:`~cpudoctor.model.fit.FitPlan`, with the need part by part, the largest batch that fits and the
strategies (:mod:`cpudoctor.advisor.fit_strategies`) ranked.

How the need is estimated from a measurement: the peak a step adds over the resident memory before it was
measured at a few batch sizes (each after the allocator gave its free memory back and the peak was reset),
so the need at batch ``B`` is the measured resident memory before a step plus that rise at ``B``: measured
directly when ``B`` was run, else on the straight line through the two nearest measured batch sizes (the
rise per sample falls slowly with the batch: ResNet-18 5.1 MiB per sample from 32 to 128, 4.2 from 128 to
256, so a line through smaller batches errs on the side of too much). Parts the child cannot see (the job's
dataset, its DataLoader workers) are added as given, or as typical figures (knowledge) named as such.
"""

from __future__ import annotations

from cpudoctor.advisor.fit_basis import JobShape, StepLine, knowledge, optimizer_states, step_line
from cpudoctor.advisor.fit_strategies import strategies
from cpudoctor.model.fit import FitPlan, MemoryBudget, ModelMeasurement, NeedPart
from cpudoctor.model.memory import CgroupMemory, SystemMemory, TrainingMemory

__all__ = ["JobShape", "StepLine", "budget", "knowledge", "optimizer_states", "plan_measured", "plan_training"]


# --- the budget ---------------------------------------------------------------------------------------


def budget(system: SystemMemory | None, cgroup: CgroupMemory | None, *, given: int | None = None,
           native_bf16: bool | None = None) -> MemoryBudget:
    """What a job started here may use: the least of the memory available, the room its cgroup leaves and a limit
    the user gave (``--memory``); under WSL2 the VM's total is its cap."""
    out = MemoryBudget(native_bf16=native_bf16, given_bytes=given)
    options: list[tuple[int, str]] = []
    if system is not None:
        out.available_bytes, out.total_bytes = system.available_bytes, system.total_bytes
        out.swap_free_bytes, out.wsl = system.swap_free_bytes, system.wsl
        if system.available_bytes is not None:
            options.append((system.available_bytes, "wsl2" if system.wsl == 2 else "available"))
    if cgroup is not None and cgroup.limit_bytes:
        used = max(0, (cgroup.current_bytes or 0) - (cgroup.file_bytes or 0))
        out.cgroup_limit_bytes, out.cgroup_used_bytes, out.cgroup_path = cgroup.limit_bytes, used, cgroup.path
        options.append((max(0, cgroup.limit_bytes - used), "cgroup"))
    if given is not None:
        options = [(given, "given")]       # a limit given for another machine or a pod replaces this machine's
    if options:
        out.usable_bytes, out.binding = min(options)
    else:
        out.notes.append("no memory figures here (no /proc/meminfo): give the limit with --memory")
    return out


# --- the need -----------------------------------------------------------------------------------------------


def _extras(shape: JobShape) -> list[NeedPart]:
    parts = []
    if shape.dataset_bytes:
        parts.append(NeedPart("dataset", shape.dataset_bytes, "given"))
    if shape.workers:
        each = shape.worker_bytes
        how = "given"
        if each is None:
            each, how = int(knowledge()["worker_bytes"]["value"]), "assumed"
        if shape.workers_copy_dataset and shape.dataset_bytes:
            each += shape.dataset_bytes
        parts.append(NeedPart("workers", each * shape.workers, how))
    return parts


def measured_parts(m: ModelMeasurement, line: StepLine, shape: JobShape) -> list[NeedPart]:
    """The need at ``shape.batch`` from a measurement: exact sizes, the counted activations, the rest measured."""
    delta = line.delta(shape.batch) or 0
    model = (m.param_bytes or 0) + (m.buffer_bytes or 0)
    states = m.optimizer_state_bytes or 0
    framework = max(0, (m.base_bytes or 0) - model - states)
    grads = min(m.grad_bytes or 0, delta)
    saved = (m.saved_bytes_per_sample or 0) * shape.batch + (m.saved_fixed_bytes or 0)
    activations = min(saved, delta - grads)
    workspace = max(0, delta - grads - activations)
    parts = [NeedPart("framework", framework, "measured"), NeedPart("parameters", model, "counted"),
             NeedPart("optimizer", states, "counted"), NeedPart("gradients", grads, "counted"),
             NeedPart("activations", activations, "counted"), NeedPart("workspace", workspace, "measured")]
    return parts + _extras(shape)


WORKSPACE_SHARE = 0.3     # without a measured step: the step's workspace beside the saved activations (ResNet-18: 0.2-0.4)


def training_parts(t: TrainingMemory, shape: JobShape) -> list[NeedPart]:
    """The need from the job's own account of its training (its probe), or a parameter count and an optimizer."""
    k = knowledge()
    params = (t.param_bytes if t.param_bytes is not None else 4 * (t.parameters or 0)) + (t.buffer_bytes or 0)
    grads = t.grad_bytes if t.grad_bytes is not None else params
    states = t.optimizer_state_bytes
    how_states = "counted" if t.source == "probe" else "given"
    if states is None:
        n = optimizer_states(t.optimizer)
        states, how_states = (n or 0) * (t.param_bytes or 4 * (t.parameters or 0)), "computed"
    source = "counted" if t.source == "probe" else "computed"        # the probe counted them in the job
    parts = [NeedPart("framework", int(k["framework_bytes"]["value"]), "assumed"),
             NeedPart("parameters", params, source), NeedPart("optimizer", states, how_states),
             NeedPart("gradients", grads, source)]
    if t.activation_bytes_per_sample is not None:
        act = t.activation_bytes_per_sample * shape.batch
        parts += [NeedPart("activations", act, "counted" if t.source == "probe" else "given"),
                  NeedPart("workspace", int(act * WORKSPACE_SHARE), "assumed")]
    return parts + _extras(shape)


def _fixed(parts: list[NeedPart]) -> int:
    """The need that does not grow with the batch."""
    return sum(p.bytes for p in parts if p.part not in ("activations", "workspace", "gradients"))


def plan_measured(m: ModelMeasurement, shape: JobShape, budget_: MemoryBudget) -> FitPlan:
    line = step_line(m.points, m.saved_bytes_per_sample)
    plan = FitPlan(batch=shape.batch, budget=budget_, margin=float(knowledge()["margin"]["value"]), source="measured",
                   measurement=m)
    if not line:
        plan.notes.append("no training step could be measured: the need is the model's state only")
    plan.parts = measured_parts(m, line, shape)
    plan.total_bytes = sum(p.bytes for p in plan.parts)
    room = plan.room_bytes
    if room is not None:
        plan.fits = plan.total_bytes <= room
        fixed = (m.base_bytes or 0) + sum(p.bytes for p in _extras(shape))
        plan.largest_batch = line.largest(room - fixed) if room > fixed else 0
        ck = StepLine(m.checkpoint_points)
        if len(ck.points) >= 2 and room > fixed:
            plan.largest_batch_checkpointed = ck.largest(room - fixed)
    if line and shape.batch > line.points[-1].batch:
        plan.notes.append(f"batch {shape.batch} was not run here: its step is extrapolated from batch "
                          f"{line.points[-2].batch if len(line.points) > 1 else line.points[-1].batch} and "
                          f"{line.points[-1].batch}")
    plan.strategies = strategies(plan, shape, line)
    return plan


def plan_training(t: TrainingMemory, shape: JobShape, budget_: MemoryBudget, source: str = "parameters") -> FitPlan:
    """A plan from sizes alone (no measured step): the job's probe, a saved run, or --params."""
    plan = FitPlan(batch=shape.batch, budget=budget_, margin=float(knowledge()["margin"]["value"]), source=source)
    plan.parts = training_parts(t, shape)
    plan.total_bytes = sum(p.bytes for p in plan.parts)
    room = plan.room_bytes
    if room is not None:
        plan.fits = plan.total_bytes <= room
        per_sample = t.activation_bytes_per_sample
        if per_sample:
            grads = next(p.bytes for p in plan.parts if p.part == "gradients")
            free = room - _fixed(plan.parts) - grads
            plan.largest_batch = max(0, int(free / (per_sample * (1 + WORKSPACE_SHARE)))) if free > 0 else 0
    if t.activation_bytes_per_sample is None:
        plan.notes.append("activations unknown: measure the model (--model MODULE:CALLABLE) to count them and to "
                          "size the batch")
    plan.strategies = strategies(plan, shape, None, training=t)
    return plan


VARIANTS = ("plain", "checkpoint", "bf16")


def need_at(m: ModelMeasurement, batch: int, variant: str = "plain", extra: int = 0,
            up_to: int | None = None) -> int | None:
    """The peak resident memory of a training step at ``batch`` from a measurement: the memory before a step plus
    the step's rise on the ``variant``'s line, plus ``extra`` (a dataset, workers). ``up_to``: use only the batches
    measured up to it (how well a small measurement extrapolates)."""
    points = {"plain": m.points, "checkpoint": m.checkpoint_points, "bf16": m.bf16_points}[variant]
    if up_to is not None:
        points = [p for p in points if p.batch <= up_to]
    line = step_line(points, m.saved_bytes_per_sample) if variant == "plain" else StepLine(points)
    delta = line.delta(batch) if len(line.points) >= (1 if variant == "plain" else 2) else None
    if delta is None or m.base_bytes is None:
        return None
    return m.base_bytes + delta + extra
