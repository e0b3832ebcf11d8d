"""The job's memory, judged: killed or close to its limit, stalled on memory, workers copying the dataset, growth.

Evidence rules like the others (:data:`cpudoctor.advisor.evidence_rules.EVIDENCE_RULES`, codes EVID030 and up,
docs/evidence_rules.md), over the job's :class:`~cpudoctor.model.memory.JobMemory` as the process sampler
recorded it (``run``, ``inspect``, the Inspector). Every ``why`` quotes the job's numbers. Swapping is the
process rule PROC007's.

When the job's own state says what its training holds (its probe: :class:`~cpudoctor.model.memory.TrainingMemory`),
the why names each part and the largest, and the fix of a job over its limit (EVID030, EVID035) is computed
here with ``fit``'s planner (:mod:`cpudoctor.advisor.fit`, the estimator ``fit --from-run`` uses): the largest
batch that fits and the gradient accumulation that keeps the update, or, when the model's own state leaves no
room for any batch, the strategy that shrinks it. Without it, the fix names the strategies in the order ``fit``
ranks them and the ``cpudoctor fit`` command that sizes them for the model.
"""

from __future__ import annotations

import math
from typing import Any

from cpudoctor.advisor.evidence_rules import Evidence, evidence_rule
from cpudoctor.advisor.fit import JobShape, budget, plan_training, training_parts
from cpudoctor.advisor.fit_strategies import accumulation_snippet, shared_dataset_snippet
from cpudoctor.kits.format import percent, size
from cpudoctor.kits.plural import plural
from cpudoctor.model import Finding
from cpudoctor.model.fit import FitPlan
from cpudoctor.model.memory import JobMemory, MemoryPressure, TrainingMemory

NEAR_LIMIT = 0.85            # the job's peak at this share of its cgroup limit is close to it
PSI_SOME = 0.10              # some of the job's tasks stalled on memory this share of the window ...
PSI_FULL = 0.05              # ... or all of them this share
PSI_MIN_WINDOW_S = 2.0
WORKERS_TOTAL = 256 << 20    # the DataLoader workers hold this much of their own together ...
WORKER_EACH = 128 << 20      # ... and this much each, on average
WORKER_GROWING = 1 << 20     # bytes per second: a worker still copying what it reads
GROWTH_MIN = 64 << 20        # the trainer grew this much over the part of the window judged ...
GROWTH_SHARE = 0.05          # ... and this share of its memory
GROWTH_FIT = 0.6             # ... along a line this straight (R²)
SIGKILL_EXIT = 137           # the shell's 128 + 9: what the OOM killer leaves


def _finding(severity: str, title: str, why: str, fix: str, snippet: str = "", evidence: dict[str, Any] | None = None,
             lang: str = "bash") -> Finding:
    ev = {k: v for k, v in (evidence or {}).items() if v is not None}
    return Finding(code="", symbol="", category="", severity=severity, title=title, why=why, fix=fix,
                   snippet=snippet, snippet_lang=lang, evidence=ev, fields_used=sorted(ev))


def _killed(mem: JobMemory) -> bool:
    return mem.exit_code in (SIGKILL_EXIT, -9)


def _held(mem: JobMemory) -> int | None:
    """The most the job was seen to hold: the trainer's peak with its workers' own memory, or its VmHWM."""
    seen = [v for v in (mem.peak_total_bytes, mem.peak_rss_bytes) if v]
    return max(seen) if seen else None


def _workers_line(mem: JobMemory) -> str:
    own = sum(w.uss_bytes or 0 for w in mem.workers)
    return f" and its {plural(len(mem.workers), 'DataLoader worker')} {size(own)} of their own" if own else ""


def _fit_command(mem: JobMemory, limit: int | None) -> str:
    batch = mem.training.batch_size if mem.training and mem.training.batch_size else "N"
    memory = f" --memory {max(1, math.floor(limit / 2**20))}M" if limit else ""
    return ("# the largest batch that fits and what each strategy saves, measured on your model\n"
            f"# (MODULE:CALLABLE builds it, e.g. train:build_model; N: the job's batch size):\n"
            f"cpudoctor fit --model MODULE:CALLABLE --batch {batch}{memory}")


def _parts(t: TrainingMemory) -> list[tuple[str, int]]:
    """What the training holds by its probe's count, part by part (the activations at its batch), known parts only."""
    params = None if t.param_bytes is None else t.param_bytes + (t.buffer_bytes or 0)
    acts = t.activation_bytes_per_sample * t.batch_size if t.activation_bytes_per_sample and t.batch_size else None
    return [(n, b) for n, b in (("parameters", params), ("gradients", t.grad_bytes),
                                 ("optimizer state", t.optimizer_state_bytes), ("activations", acts)) if b is not None]


def _parts_sentence(mem: JobMemory) -> str:
    """The why's sentence on what the job's probe counted, and which part is the largest ("" when nothing)."""
    t = mem.training
    parts = _parts(t) if t is not None and t.source == "probe" else []
    if not parts:
        return ""
    words = ", ".join(f"{name} {size(b)}" + (f" ({t.optimizer})" if name == "optimizer state" and t.optimizer else "")
                      + (f" at batch {t.batch_size} ({size(t.activation_bytes_per_sample)} per sample)"
                         if name == "activations" else "") for name, b in parts)
    text = f" The job's probe counted what its training holds: {words}"
    total = sum(b for _, b in parts)
    if len(parts) >= 2 and total:
        name, most = max(parts, key=lambda nb: nb[1])
        text += f"; of these the largest is the {name} ({percent(most / total, fraction=True)})"
    if not any(name == "activations" for name, _ in parts):
        text += "; its activations were not counted" + (" (checkpointing or other saved-tensor hooks keep them)"
                                                         if t.activations_unknown == "hooks" else "")
    return text + "."


def _plan(mem: JobMemory, limit: int) -> FitPlan | None:
    """``fit``'s plan for the job's own sizes (its probe) under ``limit``: the same estimator ``fit --from-run`` uses."""
    t = mem.training
    if t is None or not t.batch_size:
        return None
    return plan_training(t, JobShape(batch=t.batch_size, workers=t.workers or 0, dataset_bytes=t.dataset_bytes),
                         budget(None, None, given=limit), source="probe")


STATE_FIXES = {"optimizer": "an optimizer with smaller state", "bf16-weights": "bf16 weights",
               "offload": "parameters and optimizer state offloaded with DeepSpeed ZeRO-Offload/Infinity"}


def _sized_fix(mem: JobMemory, limit: int) -> tuple[str, str, str] | None:
    """With the job's own sizes (its probe): (fix, snippet, its language) as ``fit`` plans it under ``limit``: the
    batch that fits and the accumulation that keeps the update when the activations are what grows; when the
    model's own state (parameters, gradients, optimizer state) leaves no room for any batch, the strategy that
    shrinks that state. None when the sizes are not known or the batch fits."""
    t = mem.training
    plan = _plan(mem, limit)
    if t is None or plan is None:
        return None
    b = plan.largest_batch
    if t.activation_bytes_per_sample and b and b < t.batch_size:
        steps = math.ceil(t.batch_size / b)
        micro = math.ceil(t.batch_size / steps)
        return (f"Train batch {t.batch_size} as {steps} steps of {micro} with gradient accumulation (the same "
                f"update): fit's estimate is about {size(plan.total_bytes)} at batch {t.batch_size}, and batch {b} "
                f"is the largest that fits the {size(limit)} limit with its margin.",
                accumulation_snippet(micro, steps), "python")
    state = sum(bytes_ for name, bytes_ in _parts(t) if name != "activations")
    acts = t.activation_bytes_per_sample * t.batch_size if t.activation_bytes_per_sample else None
    if (b == 0 or (acts is None and state >= 0.5 * limit)) and state:
        best = next((s for s in plan.strategies if s.id in STATE_FIXES), None)
        if best is not None:
            saves = f" (saves {size(best.saves_bytes)})" if best.saves_bytes else ""
            return (f"The model's own state, {size(state)} of parameters, gradients and optimizer state, leaves no "
                    f"room for a batch under the {size(limit)} limit: a smaller batch cannot make it fit. Use "
                    f"{STATE_FIXES[best.id]}{saves}; `cpudoctor fit --from-run run.json` ranks the others.",
                    best.snippet, best.snippet_lang)
    return None


STRATEGIES = ("a smaller batch with gradient accumulation (the same update), activation checkpointing of the "
              "model's repeated blocks, fewer DataLoader workers or a dataset in tensors they share, bf16 autocast "
              "where the CPU computes bf16; `cpudoctor fit` sizes each for your model")


# --- the rules ---------------------------------------------------------------------------------------------


@evidence_rule("EVID030", "memory-limit", category="memory", severity="error",
               title="The job was killed at, or runs close to, its cgroup's memory limit")
def memory_limit(ev: Evidence) -> list[Finding]:
    """
    What it checks:
        The memory limit of the job's cgroup (``memory.max``, cgroup v1 ``memory.limit_in_bytes``: a
        container's ``--memory``, a systemd unit's ``MemoryMax``, a pod's limit) against the most the job was
        seen to hold (its peak resident memory with its DataLoader workers' own), and the cgroup's events:
        an OOM kill during the window, throttling at ``memory.high``.

    Why it matters:
        Over its cgroup's limit the kernel kills the job with SIGKILL (exit code 137), without a Python
        traceback, often hours into a run; close to it, every allocation first makes the kernel reclaim
        memory (page cache, swap), and steps slow down. The machine may have plenty free: the limit is
        what counts.

    Fix:
        Need less memory (a smaller batch with gradient accumulation, activation checkpointing, fewer
        workers), sized with ``cpudoctor fit --model MODULE:CALLABLE --batch N --memory LIMIT``; or raise
        the limit (``docker run --memory``, ``systemd-run -p MemoryMax=``, the pod's ``limits.memory``).
        When ``run``'s probe counted the job's parameters, gradients, optimizer state and activations, the
        finding names the largest part and fit's planner sizes the fix: the batch that fits with the
        gradient accumulation that keeps the update, or, when the model's own state leaves no room for any
        batch, the strategy that shrinks that state.
    """
    mem = ev.memory
    cg = mem.cgroup if mem is not None else None
    if mem is None or cg is None or not cg.limit_bytes:
        return []
    limit = cg.limit_bytes
    held = _held(mem)
    killed = _killed(mem) and cg.events_in_window.get("oom_kill", 0) > 0
    high = cg.events_in_window.get("high", 0)
    near = held is not None and held >= NEAR_LIMIT * limit
    if not (killed or near or high):
        return []
    evidence = {"limit_bytes": limit, "limit_at": cg.limit_at, "held_bytes": held, "peak_rss_bytes": mem.peak_rss_bytes,
                "cgroup_peak_bytes": cg.peak_bytes, "events_in_window": dict(cg.events_in_window) or None,
                "exit_code": mem.exit_code}
    sized = _sized_fix(mem, limit)
    fix = sized[0] if sized else f"Need less memory: {STRATEGIES}; or raise the limit."
    snippet = sized[1] if sized else _fit_command(mem, limit)
    lang = sized[2] if sized else "bash"
    counted = _parts_sentence(mem)
    if counted:
        evidence["training"] = {name: b for name, b in _parts(mem.training)}
    where = f" (set at {cg.limit_at})" if cg.limit_at else ""
    if killed:
        why = (f"The job ended with SIGKILL (exit code {mem.exit_code}) and its cgroup counted "
               f"{plural(cg.events_in_window['oom_kill'], 'OOM kill')} while it ran: it needed more than the "
               f"{size(limit)} its cgroup allows{where}. Before it was killed its process held "
               f"{size(mem.peak_rss_bytes)} at most (resident, libraries the cgroup does not charge included)"
               f"{_workers_line(mem)}. Nothing of this reaches Python: no traceback, no exception.{counted}")
        return [_finding("error", f"Killed at its cgroup's {size(limit)} memory limit (OOM, exit code 137)", why, fix,
                         snippet, evidence, lang)]
    parts = []
    if near:
        share = percent(held / limit, fraction=True)
        parts.append(f"the job held up to {size(held)} ({share} of the {size(limit)} its cgroup allows{where})")
    if high:
        parts.append(f"the kernel throttled it {plural(high, 'time')} over memory.high "
                     f"({size(cg.high_bytes)})")
    why = ("; ".join(parts).capitalize() + ". Over the limit the kernel kills it (SIGKILL, exit code 137, no "
           "traceback); close to it, allocations wait while the kernel reclaims memory." + counted)
    plan = _plan(mem, limit) if counted else None
    if plan is not None and plan.largest_batch and not sized and mem.training.activation_bytes_per_sample:
        why += (f" fit's estimate for batch {mem.training.batch_size} is {size(plan.total_bytes)}; the largest batch "
                f"that fits the limit with its margin is {plan.largest_batch}.")
    return [_finding("warning", f"Close to its cgroup's memory limit: {size(held)} of {size(limit)}", why, fix, snippet,
                     evidence, lang)]


def _pressure(mem: JobMemory) -> MemoryPressure | None:
    """The job's own cgroup's pressure when the kernel keeps it, else the machine's."""
    if mem.cgroup is not None and mem.cgroup.pressure is not None and mem.cgroup.version == 2:
        return mem.cgroup.pressure
    return mem.system.pressure if mem.system is not None else None


@evidence_rule("EVID031", "memory-pressure", category="memory", severity="warning",
               title="The job stalls waiting for memory")
def memory_pressure(ev: Evidence) -> list[Finding]:
    """
    What it checks:
        Pressure stall information (PSI, Linux 4.20+) over the window: the share of time some (or all) of
        the job's tasks waited for memory, from its cgroup's ``memory.pressure`` (cgroup v2) or the
        machine's ``/proc/pressure/memory``: at least 10 % (some) or 5 % (all).

    Why it matters:
        A task stalls on memory when the kernel must reclaim pages before it can allocate, or read a page
        back from swap or from a dropped file: time the CPUs could have trained. It shows before any OOM
        kill and before swap fills.

    Fix:
        Give the job room: need less memory (``cpudoctor fit`` ranks the ways for the model), stop other
        memory users, or raise its limit.
    """
    mem = ev.memory
    if mem is None or not mem.window_s or mem.window_s < PSI_MIN_WINDOW_S:
        return []
    p = _pressure(mem)
    if p is None:
        return []
    some = p.some_share if p.some_share is not None else (p.some_avg10 or 0) / 100
    full = p.full_share if p.full_share is not None else (p.full_avg10 or 0) / 100
    if some < PSI_SOME and full < PSI_FULL:
        return []
    whose = "its cgroup's" if p.source != "/proc/pressure/memory" else "the machine's"
    why = (f"For {percent(some, fraction=True)} of the {mem.window_s:g} s watched some of the tasks waited for memory, "
           f"and for {percent(full, fraction=True)} all of them ({whose} pressure stall information, {p.source}). "
           "The kernel had to reclaim memory (drop page cache, swap out) before it could allocate.")
    available = mem.system.available_bytes if mem.system is not None else None
    if available is not None:
        why += f" {size(available)} was available at the end."
    fix = f"Give the job room: stop other memory users or need less: {STRATEGIES}."
    return [_finding("warning", f"The job stalls on memory {percent(some, fraction=True)} of the time", why, fix,
                     _fit_command(mem, mem.limit[0]),
                     {"some_share": round(some, 4), "full_share": round(full, 4), "source": p.source,
                      "window_s": mem.window_s})]


@evidence_rule("EVID032", "workers-copy-dataset", category="memory", severity="warning",
               title="DataLoader workers each hold their own copy of the data")
def workers_copy_dataset(ev: Evidence) -> list[Finding]:
    """
    What it checks:
        The unique memory (USS: pages no other process maps, from ``smaps_rollup``) of the job's child
        processes, its DataLoader workers: at least 256 MiB together and 128 MiB each on average, and
        whether it was still growing.

    Why it matters:
        A forked worker shares the trainer's memory until it writes to a page. Reading a Python object
        writes its reference count, so a worker reading a dataset held as Python objects (lists, dicts,
        strings: PyTorch issue 13246) copies every page it reads, and by the end of an epoch each worker
        holds a copy of the dataset: N workers, N + 1 copies. Workers started with ``spawn`` build their own
        copy from the start. The RSS of each looks the same either way; only the unique memory shows it.

    Fix:
        Keep the samples in NumPy arrays or tensors (one buffer: indexing it writes nothing to the data's
        pages), or memory-map them from a file; call ``gc.freeze()`` before the DataLoader starts its
        workers; or use fewer workers.
    """
    mem = ev.memory
    if mem is None:
        return []
    workers = [w for w in mem.workers if w.uss_bytes is not None]
    live = [w for w in workers if not w.exited_in_window] or workers
    if not live:
        return []
    own = sum(w.uss_bytes for w in live)
    each = own / len(live)
    if own < WORKERS_TOTAL or each < WORKER_EACH:
        return []
    growing = [w for w in live if (w.uss_growth_bytes_per_s or 0) >= WORKER_GROWING and (w.read_s or 0) > 0]
    rate = sum(w.uss_growth_bytes_per_s for w in growing) / len(growing) if growing else None
    trainer = mem.job
    why = (f"The job's {plural(len(live), 'DataLoader worker')} hold {size(own)} of their own (unique) memory, "
           f"{size(each)} each on average" + (f", beside the trainer's {size(trainer.uss_bytes)}"
                                            if trainer is not None and trainer.uss_bytes else "") + ". ")
    if rate is not None:
        first = sum(w.uss_first_bytes or 0 for w in growing) / len(growing)
        why += (f"Each grew from {size(first)} by about {size(rate)}/s while watched: copy-on-access, every "
                "Python object a worker reads has its reference count written, and the page it sits on is "
                "copied into the worker.")
    else:
        why += ("That is a copy of data per worker: Python objects read since the fork (their pages copied), or "
                "the dataset built again in each worker (the spawn start method).")
    fix = ("Keep the samples in one NumPy array or tensor (or memory-map them) instead of Python objects, and call "
           "gc.freeze() before the DataLoader starts; or use fewer workers.")
    return [_finding("warning", f"{plural(len(live), 'DataLoader worker')} hold {size(own)} of their own: copies of "
                     "the data", why, fix, shared_dataset_snippet(),
                     {"workers": len(live), "workers_uss_bytes": own, "growth_bytes_per_s": round(rate, 1)
                      if rate is not None else None}, "python")]


@evidence_rule("EVID033", "memory-grows", category="memory", severity="warning",
               title="The job's memory keeps growing")
def memory_grows(ev: Evidence) -> list[Finding]:
    """
    What it checks:
        The trainer's resident memory over the later half of the window (its start-up, loading and first
        steps left out; with the job's probe, only growth over 5+ steps after its first 5 optimizer steps): a rise
        of at least 64 MiB and 5 % of its memory, along a straight line (R² 0.6+); and, when its DataLoader
        starts new workers each epoch, the rise from one epoch to the next.

    Why it matters:
        A training step needs the same memory every time: memory that keeps growing is something kept
        from each step (a loss or output tensor with its autograd graph, ``retain_graph=True``, a list of
        batches, a cache in the dataset). It ends in swapping or an OOM kill, hours in.

    Fix:
        Keep numbers, not tensors (``loss.item()``, ``.detach()``), drop ``retain_graph=True``, bound
        caches; ``tracemalloc`` names the lines whose Python objects are kept.
    """
    mem = ev.memory
    if mem is None or mem.growth_bytes_per_s is None or not mem.growth_window_s:
        return []
    if _growth_before_training(ev, mem):
        return []
    rise = mem.growth_bytes_per_s * mem.growth_window_s
    base = mem.rss_bytes or 0
    if rise < max(GROWTH_MIN, GROWTH_SHARE * base) or (mem.growth_fit or 0) < GROWTH_FIT:
        return []
    rate = mem.growth_bytes_per_s
    why = (f"The trainer's resident memory grew {size(rise)} in the last {mem.growth_window_s:g} s watched, about "
           f"{size(rate)}/s, to {size(mem.rss_bytes)}")
    if mem.growth_per_epoch_bytes and mem.worker_generations >= 2:
        why += f", and {size(mem.growth_per_epoch_bytes)} from one epoch to the next"
    why += ". A training step needs the same memory every time: this is memory kept from each step."
    room, what = _room(mem)
    if room and rate > 0:
        why += f" At this rate it takes {what} ({size(room)} left) in about {room / rate / 60:.0f} min."
    if not mem.growth_still_rising:
        why += " (It had levelled off by the end: a cache that filled, or data still loading, grows like this too.)"
    fix = ("Keep numbers, not tensors: loss.item() or .detach() for what the loop keeps; no retain_graph=True; "
           "bound any cache the dataset or the loop fills.")
    snippet = ("running_loss += loss.item()          # a float: the step's graph is freed\n"
               "outputs.append(out.detach())          # a tensor without its graph\n"
               "loss.backward()                       # no retain_graph=True\n"
               "# what holds the memory, by line:\n"
               "import tracemalloc; tracemalloc.start()\n"
               "print(tracemalloc.take_snapshot().statistics(\"lineno\")[:10])")
    return [_finding("warning", f"The job's memory grows {size(rate)}/s", why, fix, snippet,
                     {"growth_bytes_per_s": rate, "growth_window_s": mem.growth_window_s, "rss_bytes": mem.rss_bytes,
                      "growth_fit": mem.growth_fit, "growth_per_epoch_bytes": mem.growth_per_epoch_bytes},
                     "python")]


SETTLE_STEPS = 5          # the first steps still allocate (the allocator's pools, optimizer state, oneDNN's caches)


def _growth_before_training(ev: Evidence, mem: JobMemory) -> bool:
    """Whether the growth may hold the job's start-up rather than memory kept from each step, by what its probe saw.

    The later half of a short window on a busy machine can hold `import torch`, the model's build and the first
    steps (a healthy job beside two busy loops, and a convolution at 1.6 steps/s, grew "like a leak" there). With
    the probe, the growth counts only when it began after the job's first ``SETTLE_STEPS`` optimizer steps (forward
    calls for a job that never steps) and spans at least as many more; a job whose probe saw neither a step nor a
    forward call did not run its loop in the window at all. Without a probe the window's later half stands.
    """
    state = ev.state
    if state is None or not state.loaded:
        return False
    if state.steps == 0 and state.forwards == 0:
        return True
    if not mem.window_s or mem.growth_window_s is None:
        return False
    began = mem.window_s - mem.growth_window_s          # both in seconds from the job's start (the probe's: its import)
    counts = [(p.t_s, p.steps if state.steps else p.forwards) for p in state.progress]
    if not counts:
        return state.first_step_s is not None and began < state.first_step_s
    settled = next((t for t, n in counts if n >= SETTLE_STEPS), None)
    if settled is None or began < settled:
        return True
    at_start = max((n for t, n in counts if t <= began), default=0)
    return counts[-1][1] - at_start < SETTLE_STEPS


def _room(mem: JobMemory) -> tuple[int | None, str]:
    """How much more the job can take, and what runs out: its cgroup's limit, or the memory available."""
    limit, kind = mem.limit
    held = _held(mem)
    if kind == "cgroup" and limit and held and limit > held:
        return limit - held, "the rest of its cgroup's limit"
    available = mem.system.available_bytes if mem.system is not None else None
    if available:
        return available, "the WSL2 VM's available memory" if kind == "wsl2" else "the machine's available memory"
    return None, ""


def _need(mem: JobMemory) -> int | None:
    """What the job needs, as far as the window shows: its training's sizes when known, else what it held."""
    held = _held(mem)
    t = mem.training
    if t is not None and t.batch_size and t.activation_bytes_per_sample:
        parts = training_parts(t, JobShape(batch=t.batch_size, workers=t.workers or 0, dataset_bytes=t.dataset_bytes))
        return max(sum(p.bytes for p in parts), held or 0)
    return held


@evidence_rule("EVID034", "wsl2-memory-cap", category="memory", severity="error",
               title="WSL2's memory cap is below what the job needs")
def wsl2_memory_cap(ev: Evidence) -> list[Finding]:
    """
    What it checks:
        Under WSL2: the VM's memory (its ``MemTotal``, capped by ``.wslconfig``) against what the job
        needs: killed by the OOM killer, holding 85 % of it, or reading pages back from swap. WSL1 has no
        VM and no cap (it ignores ``.wslconfig``): not checked there.

    Why it matters:
        WSL2 is a Hyper-V VM that gets half of Windows' memory by default (8 GB on older builds). A job
        that would fit in the PC's RAM is killed or swaps inside the VM.

    Fix:
        Raise the cap in ``%UserProfile%\\.wslconfig`` (``[wsl2]`` ``memory=``), then ``wsl --shutdown``;
        or need less memory (``cpudoctor fit``).
    """
    mem = ev.memory
    sysmem = mem.system if mem is not None else None
    if sysmem is None or sysmem.wsl != 2 or not sysmem.total_bytes:
        return []
    total = sysmem.total_bytes
    need = _need(mem)
    killed = _killed(mem) and (sysmem.oom_kills_in_window or 0) > 0
    swapping = (sysmem.swap_in_per_s or 0) >= 100
    near = need is not None and need >= NEAR_LIMIT * total
    if not (killed or swapping or near):
        return []
    want = max(need or 0, total) * 1.25 if (killed or swapping) else (need or total) * 1.25
    gib = max(int(total / 2**30) + 1, math.ceil(want / 2**30))
    parts = [f"the WSL2 VM has {size(total)} (its .wslconfig cap)"]
    if killed:
        parts.append(f"the kernel's OOM killer ended the job (exit code {mem.exit_code}) after it held "
                     f"{size(_held(mem))}")
    elif near:
        parts.append(f"the job needs {size(need)}, {percent(need / total, fraction=True)} of it")
    if swapping:
        parts.append(f"{sysmem.swap_in_per_s:g} pages a second came back from swap")
    why = ("; ".join(parts).capitalize() + ". WSL2 gets half of Windows' memory by default, whatever the PC has."
           + _parts_sentence(mem))
    snippet = ("# %UserProfile%\\.wslconfig on Windows:\n[wsl2]\n"
               f"memory={gib}GB\n# then, in PowerShell: wsl --shutdown")
    return [_finding("error" if killed else "warning", f"WSL2's {size(total)} memory cap is below what the job needs",
                     why, f"Give the VM {gib} GB in .wslconfig (if Windows has it), then restart WSL; or need less "
                     "memory (cpudoctor fit).", snippet,
                     {"wsl_total_bytes": total, "need_bytes": need, "oom_kills": sysmem.oom_kills_in_window,
                      "swap_in_per_s": sysmem.swap_in_per_s}, "ini")]


@evidence_rule("EVID035", "out-of-memory", category="memory", severity="error",
               title="The kernel's OOM killer ended the job: the machine ran out of memory")
def out_of_memory(ev: Evidence) -> list[Finding]:
    """
    What it checks:
        A job that ended with SIGKILL (exit code 137) while the kernel counted an OOM kill on the machine
        (``/proc/vmstat`` ``oom_kill``), with no cgroup limit that killed it (EVID030) and outside WSL2
        (EVID034).

    Why it matters:
        When the machine runs out of memory and swap, the kernel kills the process with the most memory:
        the training job, without a traceback. It comes back at the same step each time.

    Fix:
        Need less memory (``cpudoctor fit`` sizes the batch for the memory here and ranks the strategies;
        with ``run``'s probe's counts, the finding sizes it as EVID030 does), stop other memory users; swap
        or zram only as a last resort.
    """
    mem = ev.memory
    if mem is None or not _killed(mem) or mem.system is None or not mem.system.oom_kills_in_window:
        return []
    if mem.cgroup is not None and mem.cgroup.events_in_window.get("oom_kill"):
        return []                     # its cgroup's limit killed it: EVID030
    if mem.system.wsl == 2:
        return []                     # the VM's cap: EVID034
    total = mem.system.total_bytes
    why = (f"The job ended with SIGKILL (exit code {mem.exit_code}) while the kernel's OOM killer killed "
           f"{plural(mem.system.oom_kills_in_window, 'process', 'processes')} on the machine: it held "
           f"{size(_held(mem))} at most{_workers_line(mem)}" + (f" of {size(total)}" if total else "") + "."
           + _parts_sentence(mem))
    sized = _sized_fix(mem, total) if total else None
    fix = sized[0] if sized else f"Need less memory: {STRATEGIES}; or stop other memory users."
    return [_finding("error", "Killed by the OOM killer: the machine ran out of memory", why, fix,
                     sized[1] if sized else _fit_command(mem, total),
                     {"held_bytes": _held(mem), "total_bytes": total, "oom_kills": mem.system.oom_kills_in_window,
                      "exit_code": mem.exit_code}, sized[2] if sized else "bash")]
