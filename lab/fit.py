"""``fit``'s child from the parent's side: run it in the training environment and read what it measured.

The child (lab/jobs/fit.py) builds the model in the Python environment the user trains in (torch never
runs in CPU Doctor's process) and sends each measured batch as it goes; :func:`read_measurement` turns
its result (or, when it was cut short, the batches it had sent) into a
:class:`~cpudoctor.model.fit.ModelMeasurement`.
"""

from __future__ import annotations

import threading
from typing import Any, Callable

from cpudoctor.lab.runner import JobOutcome, job_command, run_job
from cpudoctor.model.fit import ModelMeasurement, StepPoint


class FitError(Exception):
    """The model could not be measured: the child's own words, or how it ended."""


def measure(settings: dict[str, Any], *, python: str | None = None, stop: threading.Event | None = None,
            on_progress: Callable[[dict[str, Any]], None] | None = None) -> tuple[JobOutcome, ModelMeasurement]:
    """Run the measurement; raises :class:`FitError` when nothing could be measured."""
    from cpudoctor.lab import protocol

    def on_message(msg: protocol.Message) -> None:
        if msg.type == protocol.PROGRESS and on_progress is not None:
            on_progress(msg.data)

    from cpudoctor.lab.jobs._settings import FitSettings, SettingsError

    try:
        checked = FitSettings.from_dict(dict(settings)).to_dict()
    except SettingsError as exc:
        raise FitError(str(exc)) from None
    outcome = run_job("fit", checked, on_message, stop_event=stop or threading.Event(),
                      argv=job_command("fit", checked, python))
    return outcome, read_measurement(outcome, checked)


def _points(items: list[dict[str, Any]], variant: str | None = None) -> list[StepPoint]:
    out = []
    for p in items or []:
        if variant is not None and p.get("variant") != variant:
            continue
        if isinstance(p.get("batch"), int) and isinstance(p.get("peak_delta_bytes"), int):
            step = p.get("step_s")
            out.append(StepPoint(p["batch"], p["peak_delta_bytes"], float(step) if isinstance(step, (int, float))
                                 else None))
    return out


def read_measurement(outcome: JobOutcome, settings: dict[str, Any]) -> ModelMeasurement:
    """The child's result as a measurement; a child cut short keeps the batches it reported."""
    res = outcome.result
    cut = ""
    if res is None:
        why = outcome.error.get("message") if outcome.error else outcome.message
        sizes = next((p for p in outcome.progress if p.get("phase") == "model"), None)
        if sizes is None or not _points(outcome.progress, "plain"):
            raise FitError(why or "the measurement ended without a result")
        res, cut = dict(sizes), why or "it ended without a result"

    def num(key: str) -> int | None:
        v = res.get(key)
        return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None

    ck = res.get("checkpoint") or {}
    m = ModelMeasurement(
        model=str(res.get("model") or settings.get("model")), input=str(res.get("input") or ""),
        torch=res.get("torch"), python=res.get("python"), threads=num("threads"),
        optimizer=str(res.get("optimizer") or settings.get("optimizer") or "adam"),
        framework_bytes=num("framework_bytes"), base_bytes=num("base_bytes"), parameters=num("parameters"),
        param_bytes=num("param_bytes"), buffer_bytes=num("buffer_bytes"), grad_bytes=num("grad_bytes"),
        optimizer_state_bytes=num("optimizer_state_bytes"), trainable_bytes=num("trainable_bytes"),
        factored_state_bytes=num("factored_state_bytes"), saved_bytes_per_sample=num("saved_bytes_per_sample"),
        saved_fixed_bytes=num("saved_fixed_bytes"), points=_points(res.get("points") or []),
        checkpoint_block=ck.get("block") if isinstance(ck.get("block"), str) else None,
        checkpoint_blocks=int(ck.get("blocks") or 0), checkpoint_points=_points(ck.get("points") or []),
        bf16_points=_points((res.get("bf16") or {}).get("points") or []),
        peak_reset=bool(res.get("peak_reset", True)), seconds=res.get("seconds"),
        notes=[str(n) for n in res.get("notes") or []])
    if not m.points:                     # a result without points: the progress lines it sent still count
        m.points = _points(outcome.progress, "plain")
        m.checkpoint_points = m.checkpoint_points or _points(outcome.progress, "checkpoint")
        m.bf16_points = m.bf16_points or _points(outcome.progress, "bf16")
    if cut:
        m.notes.append(f"the measurement was cut short ({cut}): the batches measured before are used")
    return m
