"""Settings of the lab jobs, validated in the parent before a child is started.

Plain dataclasses without torch, so the GUI form and the CLI can check what a
person typed and say what is wrong before paying for a child process.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields
from typing import Any

# A run longer than a day is a typo (or ``nan``); CPU numbers stop below the kernel's limit.
MAX_SECONDS = 86400.0
MAX_CPUS = 65536

MODELS = {
    "simplecnn": "SimpleCNN (conv 1->32 3x3, ReLU, 2x2 max-pool, linear 5408->10)",
    "lenet5": "LeNet-5 (~60k parameters)",
    "resnet18": "ResNet-18 for 28x28 (~11M parameters)",
}
OPTIMIZERS = ("adam", "sgd")
DTYPES = ("fp32", "bf16")
DATASETS = ("synthetic", "mnist")


class SettingsError(ValueError):
    """A setting is out of range; the message names it and says what is allowed."""


def _check_int(name: str, value: Any, lo: int, hi: int | None = None, allow_none: bool = False) -> int | None:
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        try:
            value = int(value)
        except (TypeError, ValueError, OverflowError):
            raise SettingsError(f"{name} must be a whole number, not {value!r}") from None
    if value < lo or (hi is not None and value > hi):
        rng = f">= {lo}" if hi is None else f"between {lo} and {hi}"
        raise SettingsError(f"{name} must be {rng}, not {value}")
    return value


def _check_seconds(name: str, value: Any, hi: float) -> float:
    """A finite number of seconds in (0, hi]: ``nan`` would make a job run forever."""
    try:
        value = float(value)
    except (TypeError, ValueError):
        raise SettingsError(f"{name} must be a number, not {value!r}") from None
    if not (math.isfinite(value) and 0 < value <= hi):
        raise SettingsError(f"{name} must be more than 0 and at most {hi:g}, not {value:g}")
    return value


def _check_choice(name: str, value: Any, choices) -> str:
    value = str(value).lower()
    if value not in choices:
        raise SettingsError(f"{name} must be one of {', '.join(choices)}, not {value!r}")
    return value


@dataclass
class TrainSettings:
    """One micro-training run. ``threads=None`` keeps PyTorch's own default."""

    model: str = "simplecnn"
    data: str = "synthetic"
    mnist_dir: str | None = None
    batch_size: int = 64
    optimizer: str = "adam"
    lr: float | None = None                # None: 1e-3 for Adam, 0.05 for SGD
    dtype: str = "fp32"
    channels_last: bool = False
    compile: bool = False
    threads: int | None = None             # intra-op threads; None = PyTorch default
    interop_threads: int | None = None     # None = PyTorch default
    steps: int | None = None               # stop after this many steps ...
    seconds: float | None = 20.0           # ... or after this long (whichever comes first)
    warmup_steps: int = 3                  # not counted in samples/s
    cpus: list[int] | None = None          # pin the child to these CPUs (sched_setaffinity)
    seed: int = 0
    progress_interval: float = 0.25        # seconds between progress messages
    eval_samples: int = 1000

    def validate(self) -> "TrainSettings":
        self.model = _check_choice("model", self.model, MODELS)
        self.data = _check_choice("data", self.data, DATASETS)
        if self.data == "mnist" and not self.mnist_dir:
            raise SettingsError("data 'mnist' needs the folder that holds the MNIST IDX files (mnist_dir)")
        self.batch_size = _check_int("batch size", self.batch_size, 1, 65536)
        self.optimizer = _check_choice("optimizer", self.optimizer, OPTIMIZERS)
        self.dtype = _check_choice("dtype", self.dtype, DTYPES)
        self.threads = _check_int("threads", self.threads, 1, 4096, allow_none=True)
        self.interop_threads = _check_int("inter-op threads", self.interop_threads, 1, 4096, allow_none=True)
        self.steps = _check_int("steps", self.steps, 1, allow_none=True)
        self.warmup_steps = _check_int("warm-up steps", self.warmup_steps, 0)
        self.eval_samples = _check_int("eval samples", self.eval_samples, 0)
        if self.seconds is not None:
            try:
                self.seconds = float(self.seconds)
            except (TypeError, ValueError):
                raise SettingsError(f"seconds must be a number, not {self.seconds!r}") from None
            if not (math.isfinite(self.seconds) and 0 < self.seconds <= MAX_SECONDS):
                raise SettingsError(f"seconds must be more than 0 and at most {MAX_SECONDS:g}, not {self.seconds:g}")
        if self.steps is None and self.seconds is None:
            raise SettingsError("give steps or seconds (or both), so the run ends")
        if self.lr is not None and not (math.isfinite(float(self.lr)) and 0 < float(self.lr) < 10):
            raise SettingsError(f"learning rate must be between 0 and 10, not {self.lr}")
        if self.cpus is not None:
            if not self.cpus:
                raise SettingsError("the CPU set to pin to is empty")
            self.cpus = sorted({_check_int("cpu", c, 0, MAX_CPUS - 1) for c in self.cpus})
        self.channels_last = bool(self.channels_last)
        self.compile = bool(self.compile)
        return self

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "TrainSettings":
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise SettingsError(f"unknown training setting(s): {', '.join(unknown)}; known: {', '.join(sorted(known))}")
        return cls(**data).validate()


@dataclass
class GemmSettings:
    size: int = 4096
    backends: list[str] = field(default_factory=lambda: ["torch-fp32", "torch-bf16", "numpy-fp32", "numpy-fp64"])
    threads: list[int] | None = None       # None: 1 and all usable CPUs
    min_seconds: float = 1.0               # time each point at least this long
    clock_mhz: float | None = None         # override the clock used for the peak

    BACKENDS = ("torch-fp32", "torch-bf16", "numpy-fp32", "numpy-fp64")

    def validate(self) -> "GemmSettings":
        self.size = _check_int("size", self.size, 16, 32768)
        if not self.backends:
            raise SettingsError("choose at least one GEMM backend")
        for b in self.backends:
            _check_choice("backend", b, self.BACKENDS)
        if self.threads is not None:
            self.threads = sorted({_check_int("threads", t, 1, 4096) for t in self.threads})
        self.min_seconds = _check_seconds("min_seconds", self.min_seconds, 3600)
        if self.clock_mhz is not None:
            self.clock_mhz = float(self.clock_mhz)
            if not (math.isfinite(self.clock_mhz) and 0 < self.clock_mhz <= 100_000):
                raise SettingsError(f"clock must be more than 0 and at most 100000 MHz, not {self.clock_mhz:g}")
        return self

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "GemmSettings":
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise SettingsError(f"unknown GEMM setting(s): {', '.join(unknown)}")
        return cls(**data).validate()


@dataclass
class QuantSettings:
    hidden: int = 1024                      # MLP 784 -> hidden -> hidden -> 10
    batches: list[int] = field(default_factory=lambda: [1, 64])
    threads: int | None = None
    min_seconds: float = 1.0

    def validate(self) -> "QuantSettings":
        self.hidden = _check_int("hidden size", self.hidden, 8, 65536)
        if not self.batches:
            raise SettingsError("give at least one batch size")
        self.batches = [_check_int("batch", b, 1, 65536) for b in self.batches]
        self.threads = _check_int("threads", self.threads, 1, 4096, allow_none=True)
        self.min_seconds = _check_seconds("min_seconds", self.min_seconds, 3600)
        return self

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "QuantSettings":
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise SettingsError(f"unknown quantisation setting(s): {', '.join(unknown)}")
        return cls(**data).validate()
