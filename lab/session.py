"""Run one lab job from Python (the CLI, the benchmarks) and get its typed result.

The child jobs run through :class:`cpudoctor.lab.runner.Job`; the sweep's
orchestrator runs in this process (it starts the training workers itself).
The parent facts a child cannot know (native bf16/int8, the machine's peak)
come from the CPU and Topology probes here, once, and go into the job's
settings and into the reading of its outcome (:func:`cpudoctor.lab.results.read_outcome`).
A stop event (Ctrl-C, a test) ends any job in stages and keeps what it measured.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any, Callable

from cpudoctor.lab import protocol
from cpudoctor.lab.native import native_support
from cpudoctor.lab.peak import MachinePeak
from cpudoctor.lab.results import Context, LabResult, read_outcome
from cpudoctor.lab.roofline import available_memory, machine_args
from cpudoctor.lab.runner import JobOutcome, job_command, run_job
from cpudoctor.model import utc_now_iso


def context_for(job: str, root: Path = Path("/"), clock_mhz: float | None = None, cpu=None, topology=None) -> Context:
    """The parent's facts for ``job`` on the machine under ``root`` (probed unless given)."""
    from cpudoctor.probes import probe_cpu, probe_topology

    cpu = cpu if cpu is not None else probe_cpu(root)
    peak, machine = None, {}
    if job in ("gemm", "roofline"):
        topology = topology if topology is not None else probe_topology(root)
        peak = MachinePeak.from_probe(cpu, topology, root=root, clock_mhz=clock_mhz)
        machine = machine_args(topology, available_bytes=available_memory())
    return Context(native=native_support(cpu), peak=peak, started_at=utc_now_iso(), flags=list(cpu.flags or []),
                   machine=machine)


def job_args(job: str, settings: dict[str, Any], context: Context) -> dict[str, Any]:
    """The child's settings plus what the parent knows about the CPU (native paths, caches, NUMA nodes)."""
    known = dict(context.native.job_args(job)) if context.native is not None else {}
    if job == "gemm":
        known["cache_bytes"] = context.machine.get("cache_bytes")
    elif job == "roofline":
        known.update(context.machine)
    extra = {k: v for k, v in known.items() if settings.get(k) is None and v is not None}
    return {**settings, **extra}


def run(job: str, settings: dict[str, Any], *, context: Context | None = None,
        on_progress: Callable[[dict[str, Any]], None] | None = None,
        on_log: Callable[[str], None] | None = None, stop: threading.Event | None = None,
        python: str | None = None, root: Path = Path("/")) -> tuple[JobOutcome, LabResult]:
    """Run ``job`` to its end (or until ``stop`` is set) and read its outcome once."""
    context = context or context_for(job, root)
    stop = stop or threading.Event()
    if job == "sweep":
        outcome = _run_sweep(settings, on_progress, stop, python, root)
    elif job == "infer":
        outcome = _run_infer(job_args(job, settings, context), on_progress, stop, python, root)
    else:
        outcome = _run_child(job, job_args(job, settings, context), on_progress, on_log, stop, python)
    return outcome, read_outcome(job, outcome, settings, context)


def _run_child(job: str, args: dict[str, Any], on_progress, on_log, stop: threading.Event,
               python: str | None) -> JobOutcome:
    def on_message(msg: protocol.Message) -> None:
        if msg.type == protocol.PROGRESS and on_progress is not None:
            on_progress(msg.data)
        elif msg.type == protocol.LOG and on_log is not None:
            on_log(msg.text)

    return run_job(job, args, on_message, stop_event=stop, argv=job_command(job, args, python))


def _run_sweep(settings: dict[str, Any], on_progress, stop: threading.Event, python: str | None,
               root: Path) -> JobOutcome:
    from cpudoctor.lab.settings import SweepSettings
    from cpudoctor.lab.sweep import run_sweep
    from cpudoctor.probes import probe_topology

    args = dict(settings)
    allowed = args.pop("allowed_cpus", None)
    started = args.pop("started", None)          # monotonic: when the caller's budget began (the CLI's start)
    if python:
        args["python"] = python
    progress: list[dict[str, Any]] = []

    def seen(data: dict[str, Any]) -> None:
        progress.append(data)
        if on_progress is not None:
            on_progress(data)

    result = run_sweep(SweepSettings.from_dict(args), probe_topology(root), allowed, on_progress=seen, stop=stop,
                       started=started)
    status = "cancelled" if result.get("status") == "cancelled" else "ok"
    return JobOutcome(status=status, result=result, progress=progress,
                      elapsed=float(result.get("elapsed") or 0.0))


def _run_infer(settings: dict[str, Any], on_progress, stop: threading.Event, python: str | None,
               root: Path) -> JobOutcome:
    """The inference lab's orchestrator, in this process (it starts its workers itself), like the sweep."""
    from cpudoctor.lab.infer import run_infer
    from cpudoctor.lab.settings import InferSettings
    from cpudoctor.probes import probe_topology

    args = dict(settings)
    allowed = args.pop("allowed_cpus", None)
    started = args.pop("started", None)
    progress: list[dict[str, Any]] = []

    def seen(data: dict[str, Any]) -> None:
        progress.append(data)
        if on_progress is not None:
            on_progress(data)

    result = run_infer(InferSettings.from_dict(args), probe_topology(root), allowed, on_progress=seen, stop=stop,
                       started=started, python=python)
    status = "cancelled" if result.get("status") == "cancelled" else "ok"
    outcome = JobOutcome(status=status, result=result, progress=progress, elapsed=float(result.get("elapsed") or 0.0))
    measured = any(v.get("points") for v in result.get("variants") or [])
    if result.get("main_worker") and not measured and status == "ok":
        from cpudoctor.kits.child.exitstatus import ExitDiagnosis

        why = f"the model could not be prepared: {result['main_worker']}"
        outcome.status, outcome.error, outcome.diagnosis = "error", {"message": why}, ExitDiagnosis("error", message=why)
    return outcome
