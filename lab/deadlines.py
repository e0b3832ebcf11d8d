"""How long a lab job may take: a start-up deadline and an overall one, from its settings.

A job runs in an interpreter the user chose (``bench --python ENV``, the
window's Environment picker). That interpreter may never start the job (a
wrapper that waits on something, a broken ``sitecustomize``), flood stdout
with text, or start it and then never finish (a deadlocked OpenMP runtime
that ignores ``--seconds``). So every job has two deadlines:

* **start-up**: the job's first protocol line (every job says ``job_started``
  before it imports torch) must come within :data:`STARTUP_S`; plain text
  first counts against it too (:data:`MAX_RAW_LINES`);
* **overall**: what the settings ask for (``--seconds``, a sweep's budget, GEMM points, int8
  batches), estimated pessimistically, plus start-up, plus :data:`GRACE_S`
  for importing torch, building the model, compiling, evaluating.

Both are generous on purpose: their job is to end what would never end, not
to judge speed (a busy machine only makes a job slower). A machine slower
than they allow can raise them: ``CPUDOCTOR_LAB_STARTUP_S`` and
``CPUDOCTOR_LAB_GRACE_S`` (seconds).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Any

STARTUP_S = 60.0           # interpreter start and the job script's own imports (not torch): seconds, even when busy
GRACE_S = 300.0            # import torch, build the model, warm up, evaluate, stop: on top of the measured time
COMPILE_S = 900.0          # torch.compile's first compile on a slow machine
MAX_RAW_LINES = 10_000     # plain-text lines a job may print before its first protocol line
SLOWEST_GFLOPS = 1.0       # a pessimistic speed for what a GEMM or int8 point must compute
MAX_TOTAL_S = 3 * 86400.0  # no estimate beyond three days (the longest run is one day, plus a day's margin)


@dataclass(frozen=True)
class Deadlines:
    """Seconds from the start: until the first protocol line, and until the end (None: no limit)."""

    startup_s: float
    total_s: float | None


def _env_seconds(name: str, default: float) -> float:
    try:
        value = float(os.environ.get(name, ""))
    except ValueError:
        return default
    return value if math.isfinite(value) and value > 0 else default


def startup_s() -> float:
    return _env_seconds("CPUDOCTOR_LAB_STARTUP_S", STARTUP_S)


def grace_s() -> float:
    return _env_seconds("CPUDOCTOR_LAB_GRACE_S", GRACE_S)


def for_job(job: str, settings: dict[str, Any] | None) -> Deadlines:
    """The deadlines of lab job ``job`` run with ``settings`` (an unknown job: start-up only)."""
    settings = settings or {}
    work = _work_s(job, settings)
    start = startup_s()
    if work is None:
        return Deadlines(start, None)
    extra = COMPILE_S if settings.get("compile") else 0.0
    return Deadlines(start, min(MAX_TOTAL_S, start + 2 * work + grace_s() + extra))


def _number(value: Any, default: float) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return default
    return number if math.isfinite(number) and number > 0 else default


def _work_s(job: str, s: dict[str, Any]) -> float | None:
    """Seconds the settings ask the job to measure, pessimistically; None for a job without an estimate."""
    if job == "train":
        seconds = _number(s.get("seconds"), 20.0)
        if s.get("serve"):
            return None                          # a sweep worker: the sweep's own budget ends it
        return seconds * (2 if s.get("dtype") == "bf16" else 1)   # bf16 is measured against fp32 too
    if job == "sweep":
        return _number(s.get("budget_s"), 45.0)  # the sweep ends within its budget, start-up included
    if job == "infer":                           # the orchestrator ends within its budget; its workers with it
        return _number(s.get("budget_s"), 60.0) if "budget_s" in s else None
    if job == "gemm":
        n = _number(s.get("size"), 4096.0)
        points = max(1, len(s.get("backends") or [1, 2, 3, 4])) * max(1, len(s.get("threads") or [1, 2]))
        per_point = max(_number(s.get("min_seconds"), 0.75), 2 * n ** 3 / (SLOWEST_GFLOPS * 1e9))
        return points * (per_point + 5.0)
    if job == "quant":
        hidden = _number(s.get("hidden"), 1024.0)
        batches = [b for b in (s.get("batches") or [1, 64]) if isinstance(b, (int, float))] or [64]
        per_batch = [max(_number(s.get("min_seconds"), 1.0), 6 * b * hidden ** 2 / (SLOWEST_GFLOPS * 1e9))
                     for b in batches]
        return 2 * sum(per_batch) + 10.0 * len(batches)    # int8 and fp32, each timed
    if job == "fit":
        return _number(s.get("seconds"), 60.0)   # the child stops measuring within its budget
    return None
