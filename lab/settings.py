"""Settings of the lab jobs, validated in the parent before a child is started.

The schema of each child job (fields, defaults, ranges) is
:mod:`cpudoctor.lab.jobs._settings`, shared with the child so both ends agree;
this module adds what only the parent knows: the sweep's own settings, and
checks against this machine and the file system (CPUs this process may use,
an MNIST folder, an output path) that must fail before a run, not after it.
No torch here: the GUI form and the CLI check what a person typed.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from cpudoctor.lab.jobs._settings import (DATASETS, DTYPES, GEMM_BACKENDS, MODELS, OPTIMIZERS, QUANT_APIS,
                                          SMOOTHING_STEPS, GemmSettings, QuantSettings, SettingsError,
                                          TrainSettings)

__all__ = ["DATASETS", "DTYPES", "GEMM_BACKENDS", "MODELS", "OPTIMIZERS", "QUANT_APIS", "SMOOTHING_STEPS",
           "GemmSettings", "QuantSettings", "SettingsError", "SweepSettings", "TrainSettings", "SWEEP_TRAIN_KEYS",
           "check_cpus", "check_output_path", "check_mnist_dir", "InferSettings"]

# What a sweep passes on to every training worker; threads, CPUs and run length are the sweep's to choose.
SWEEP_TRAIN_KEYS = ("model", "data", "mnist_dir", "batch_size", "optimizer", "dtype", "channels_last", "compile")


@dataclass
class SweepSettings:
    """The thread sweep: variants measured in interleaved segments until they separate or the budget ends."""

    train: dict[str, Any] = field(default_factory=dict)   # SWEEP_TRAIN_KEYS of TrainSettings
    budget_s: float = 45.0          # the whole sweep, start-up included, ends within this
    segment_s: float = 1.0          # one measured segment of one variant
    min_rounds: int = 3             # every variant measured at least this often before a decision
    max_variants: int | None = None
    quiet_limit: float = 0.10       # above this share of the CPUs taken by other programs: inconclusive
    python: str | None = None       # the interpreter the training workers run in (default: this one)

    def validate(self) -> "SweepSettings":
        unknown = sorted(set(self.train) - set(SWEEP_TRAIN_KEYS))
        if unknown:
            raise SettingsError(f"the sweep chooses {', '.join(unknown)} itself; leave them out")
        TrainSettings.from_dict({**self.train, "seconds": 1.0})          # the same checks as a training run
        self.budget_s = _positive("budget", self.budget_s)
        self.segment_s = _positive("segment length", self.segment_s)
        if self.segment_s * 2 > self.budget_s:
            raise SettingsError(f"the budget ({self.budget_s:g} s) must hold at least two segments of "
                                f"{self.segment_s:g} s")
        if isinstance(self.min_rounds, bool) or not isinstance(self.min_rounds, int) or self.min_rounds < 1:
            raise SettingsError(f"min_rounds must be a whole number >= 1, not {self.min_rounds!r}")
        if self.max_variants is not None and (not isinstance(self.max_variants, int) or self.max_variants < 1):
            raise SettingsError(f"max_variants must be a whole number >= 1, not {self.max_variants!r}")
        if not 0 < float(self.quiet_limit) < 1:
            raise SettingsError(f"quiet_limit is a share of the CPUs, between 0 and 1, not {self.quiet_limit}")
        return self

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "SweepSettings":
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise SettingsError(f"unknown sweep setting(s): {', '.join(unknown)}; known: {', '.join(sorted(known))}")
        return cls(**data).validate()


def _positive(name: str, value: Any) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise SettingsError(f"{name} must be a number of seconds, not {value!r}") from None
    if number <= 0:
        raise SettingsError(f"{name} must be more than 0 seconds, not {number:g}")
    return number


def check_cpus(cpus: list[int] | None, allowed: list[int] | None = None) -> None:
    """Refuse CPUs this process may not run on (the child could only fail at pinning to them)."""
    from cpudoctor.kits.cpulist import format_cpulist

    if not cpus:
        return
    if allowed is None:
        try:
            allowed = sorted(os.sched_getaffinity(0))
        except (AttributeError, OSError):
            return
    outside = sorted(set(cpus) - set(allowed))
    if outside:
        raise SettingsError(f"CPUs {format_cpulist(outside)} are not usable here (this process may run on "
                            f"{format_cpulist(allowed)})")


def check_mnist_dir(data: str | None, mnist_dir: str | None) -> None:
    if data == "mnist" and mnist_dir and not Path(mnist_dir).expanduser().is_dir():
        raise SettingsError(f"{mnist_dir}: no such folder (give the folder with the MNIST IDX files)")


def check_output_path(path: str | Path, what: str = "output") -> Path:
    """A file the run's result will be written to: its folder must exist and be writable, and it is no folder.

    Checked before the run, so a typo never throws a finished measurement away.
    """
    target = Path(path).expanduser()
    folder = target.parent if str(target.parent) else Path(".")
    if target.is_dir():
        raise SettingsError(f"{what} {path}: that is a folder; give a file name")
    if not folder.is_dir():
        raise SettingsError(f"{what} {path}: the folder {folder} does not exist; create it or choose another")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise SettingsError(f"{what} {path}: cannot write in {folder}; choose a folder you can write to")
    if target.exists() and not os.access(target, os.W_OK):
        raise SettingsError(f"{what} {path}: the file is read-only")
    return target


@dataclass
class InferSettings:
    """``bench infer``: a model's inference variants, prepared in workers and measured in interleaved segments.

    ``budget_s`` counts from the command's start (start-up and preparation included); ``max_error`` is the
    largest output error a variant may have against fp32 and still be recommended, relative to the largest
    magnitude of fp32's outputs (bf16 typically stays under 1 %).
    """

    source: str = "model"                  # model | module | torchscript | onnx
    model: str | None = "resnet18"
    target: str | None = None              # module:callable, or the model file
    input_shape: list[int] | None = None
    batches: list[int] = field(default_factory=lambda: [1])
    budget_s: float = 60.0
    max_error: float = 0.05
    int8_api: str = "auto"
    min_rounds: int = 3
    quiet_limit: float = 0.10
    native_bf16: bool | None = None        # from the parent's CPU probe
    python: str | None = None              # the interpreter the workers run in (default: this one)
    cwd: str | None = None                 # where a module or a model file is looked up

    def validate(self) -> "InferSettings":
        from cpudoctor.lab.jobs._settings import InferWorkerSettings

        worker = InferWorkerSettings(source=self.source, model=self.model, target=self.target, cwd=self.cwd,
                                     input_shape=self.input_shape, batches=self.batches,
                                     int8_api=self.int8_api).validate()     # the same checks as a worker's
        self.source, self.model, self.input_shape, self.batches = (worker.source, worker.model, worker.input_shape,
                                                                   worker.batches)
        self.int8_api = worker.int8_api
        if self.source != "model":
            self.model = None
        self.budget_s = _positive("budget", self.budget_s)
        if self.budget_s < 5:
            raise SettingsError(f"the budget must be at least 5 s (start-up included), not {self.budget_s:g}")
        try:
            self.max_error = float(self.max_error)
        except (TypeError, ValueError):
            raise SettingsError(f"the accuracy limit must be a number, not {self.max_error!r}") from None
        if not 0 <= self.max_error <= 10:
            raise SettingsError(f"the accuracy limit is a relative error between 0 and 10, not {self.max_error:g}")
        if isinstance(self.min_rounds, bool) or not isinstance(self.min_rounds, int) or self.min_rounds < 1:
            raise SettingsError(f"min_rounds must be a whole number >= 1, not {self.min_rounds!r}")
        if not 0 < float(self.quiet_limit) < 1:
            raise SettingsError(f"quiet_limit is a share of the CPUs, between 0 and 1, not {self.quiet_limit}")
        return self

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "InferSettings":
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise SettingsError(f"unknown inference setting(s): {', '.join(unknown)}; known: {', '.join(sorted(known))}")
        return cls(**data).validate()
