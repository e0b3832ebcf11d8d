"""What each lab job accepts: defaults and range checks, one schema for both ends.

The parent (:mod:`cpudoctor.lab.settings`) validates what a person typed with
these classes before paying for a child process; the child validates again
what arrived on its command line, so a job started by hand or by another tool
also answers a bad value with one clear line. Plain dataclasses, standard
library only, Python 3.8+ (the file runs in the user's environment).
"""

from __future__ import annotations

import math
import os
import sys
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Dict, List, Optional

if __package__:
    from ._jobkit import JobError
else:  # a standalone script: ``python -I`` leaves the script's folder off sys.path
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from _jobkit import JobError

MODELS = {
    "simplecnn": "SimpleCNN (conv 1->32 3x3, ReLU, 2x2 max-pool, linear 5408->10)",
    "lenet5": "LeNet-5 (~60k parameters)",
    "resnet18": "ResNet-18 for 28x28 (~11M parameters)",
}
OPTIMIZERS = ("adam", "sgd")
DTYPES = ("fp32", "bf16")
DATASETS = ("synthetic", "mnist")
GEMM_BACKENDS = ("torch-fp32", "torch-bf16", "numpy-fp32", "numpy-fp64")
QUANT_APIS = ("auto", "torchao", "torch.ao")
SMOOTHING_STEPS = 20          # loss and accuracy: the mean of the last 20 steps, in the plots and the tables
# A run longer than a day is a typo (or ``nan``); CPU numbers stop below the kernel's limit.
MAX_SECONDS = 86400.0
MAX_CPUS = 65536


class SettingsError(JobError):
    """A setting is out of range; the message names it and says what is allowed."""

    kind = "settings"
    exit_code = 2


def pin_cpus(cpus: Optional[List[int]]) -> Optional[List[int]]:
    """Pin this process to ``cpus`` (Linux only); returns the CPU set in force (the training and inference jobs'
    ``cpus`` setting)."""
    if cpus is None:
        return sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    if not hasattr(os, "sched_setaffinity"):
        raise SettingsError("pinning to a CPU set needs Linux (os.sched_setaffinity is missing here)")
    try:
        os.sched_setaffinity(0, cpus)
    except OSError as exc:
        raise SettingsError(f"cannot pin to CPUs {cpus}: {exc.strerror} (are they online and allowed?)") from None
    return sorted(os.sched_getaffinity(0))


def _check_int(name: str, value: Any, lo: int, hi: Optional[int] = None, allow_none: bool = False) -> Optional[int]:
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        try:
            value = int(value)
        except (TypeError, ValueError, OverflowError):       # OverflowError: int(float("inf"))
            raise SettingsError(f"{name} must be a whole number, not {value!r}") from None
    if value < lo or (hi is not None and value > hi):
        rng = f">= {lo}" if hi is None else f"between {lo} and {hi}"
        raise SettingsError(f"{name} must be {rng}, not {value}")
    return value


def _check_float(name: str, value: Any, lo: float = 0.0, allow_none: bool = False,
                 hi: float = MAX_SECONDS) -> Optional[float]:
    """A finite number in (lo, hi]: ``nan`` or ``inf`` seconds would make a job run forever."""
    if value is None and allow_none:
        return None
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        raise SettingsError(f"{name} must be a number, not {value!r}") from None
    if not (math.isfinite(number) and lo < number <= hi):
        raise SettingsError(f"{name} must be more than {lo:g} and at most {hi:g}, not {number:g}")
    return number


def _check_choice(name: str, value: Any, choices) -> str:
    value = str(value).lower()
    if value not in choices:
        raise SettingsError(f"{name} must be one of {', '.join(choices)}, not {value!r}")
    return value


def _check_bool(value: Any, allow_none: bool = False) -> Optional[bool]:
    return None if (value is None and allow_none) else bool(value)


def _from_dict(cls, data: Dict[str, Any], what: str):
    if not isinstance(data, dict):
        raise SettingsError(f"{what} settings must be a JSON object")
    known = {f.name for f in fields(cls)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise SettingsError(f"unknown {what} setting(s): {', '.join(unknown)}; known: {', '.join(sorted(known))}")
    return cls(**data).validate()


@dataclass
class TrainSettings:
    """One micro-training run. ``threads=None`` keeps PyTorch's own default."""

    model: str = "simplecnn"
    data: str = "synthetic"
    mnist_dir: Optional[str] = None
    batch_size: int = 64
    optimizer: str = "adam"
    lr: Optional[float] = None             # None: 1e-3 for Adam, 0.05 for SGD
    dtype: str = "fp32"
    channels_last: bool = False
    compile: bool = False
    threads: Optional[int] = None          # intra-op threads; None = PyTorch default
    interop_threads: Optional[int] = None  # None = PyTorch default
    steps: Optional[int] = None            # stop after this many steps ...
    seconds: Optional[float] = 20.0        # ... or within this long, start-up included (whichever comes first)
    warmup_steps: int = 3                  # not counted in samples/s
    cpus: Optional[List[int]] = None       # pin the child to these CPUs (sched_setaffinity)
    seed: int = 0
    progress_interval: float = 0.25        # seconds between progress messages
    eval_samples: int = 1000
    # bf16 runs also train fp32 windows in the same job, interleaved, so the ratio is measured
    # under the same conditions (None: on for bf16, off for fp32).
    compare_fp32: Optional[bool] = None
    serve: bool = False                    # a sweep worker: warm up, then measure segments on command
    census: bool = True                    # after warm-up, one unmeasured step per dtype with the libraries'
                                           # verbose reports on (which kernels ran) and two under the profiler
    checkpoint: bool = False               # activation checkpointing of the model's repeated blocks (_checkpointing)

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
        self.seconds = _check_float("seconds", self.seconds, allow_none=True)
        self.progress_interval = _check_float("progress interval", self.progress_interval)
        if self.steps is None and self.seconds is None and not self.serve:
            raise SettingsError("give steps or seconds (or both), so the run ends")
        if self.lr is not None and not (math.isfinite(float(self.lr)) and 0 < float(self.lr) < 10):
            raise SettingsError(f"learning rate must be between 0 and 10, not {self.lr}")
        if self.cpus is not None:
            if not self.cpus:
                raise SettingsError("the CPU set to pin to is empty")
            self.cpus = sorted({_check_int("cpu", c, 0, MAX_CPUS - 1) for c in self.cpus})
        self.channels_last = bool(self.channels_last)
        self.compile = bool(self.compile)
        self.serve = bool(self.serve)
        self.census = bool(self.census)
        self.checkpoint = bool(self.checkpoint)
        self.compare_fp32 = _check_bool(self.compare_fp32, allow_none=True)
        return self

    @property
    def compares_fp32(self) -> bool:
        """Whether this run also measures fp32 (always for bf16, unless switched off)."""
        return self.dtype != "fp32" and self.compare_fp32 is not False and not self.serve

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Dict[str, Any]) -> "TrainSettings":
        return _from_dict(cls, data, "training")


@dataclass
class GemmSettings:
    """Matrix multiply GFLOP/s per backend and thread count; ``size=None`` picks one that fits the time."""

    size: Optional[int] = None             # n of the n x n matrices; None: chosen so one multiply takes ~0.25 s
    backends: List[str] = field(default_factory=lambda: list(GEMM_BACKENDS))
    threads: Optional[List[int]] = None    # None: 1 and all usable CPUs
    min_seconds: float = 0.75              # time each point at least this long (backends interleaved)
    clock_mhz: Optional[float] = None      # the parent's peak: override the clock (the child ignores it)
    native_bf16: Optional[bool] = None     # from the parent's CPU probe; False: bf16 measured small, "emulated"
    emulated_size: int = 512               # n for a path this CPU emulates
    max_size: int = 4096                   # the automatic size never exceeds this
    roof: bool = True                      # also measure the in-cache roof per precision and thread count
    roof_seconds: float = 0.15             # per matrix size of the roof's ladder
    cache_bytes: Optional[int] = None      # the operands of the roof's multiplies fit in this (parent: L3)

    BACKENDS = GEMM_BACKENDS

    def validate(self) -> "GemmSettings":
        self.size = _check_int("size", self.size, 16, 32768, allow_none=True)
        if not self.backends:
            raise SettingsError("choose at least one GEMM backend")
        self.backends = [_check_choice("backend", b, GEMM_BACKENDS) for b in self.backends]
        if self.threads is not None:
            self.threads = sorted({_check_int("threads", t, 1, 4096) for t in self.threads})
        self.min_seconds = _check_float("min_seconds", self.min_seconds, hi=3600)
        self.clock_mhz = _check_float("clock (MHz)", self.clock_mhz, allow_none=True, hi=100_000)
        self.native_bf16 = _check_bool(self.native_bf16, allow_none=True)
        self.emulated_size = _check_int("emulated size", self.emulated_size, 16, 32768)
        self.max_size = _check_int("max size", self.max_size, 16, 32768)
        self.roof = bool(self.roof)
        self.roof_seconds = _check_float("roof seconds", self.roof_seconds, hi=60)
        self.cache_bytes = _check_int("cache bytes", self.cache_bytes, 1, allow_none=True)
        return self

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Dict[str, Any]) -> "GemmSettings":
        return _from_dict(cls, data, "GEMM")


@dataclass
class QuantSettings:
    """Dynamic int8 vs fp32 inference of an MLP, both measured in the same job, interleaved."""

    hidden: Optional[int] = None            # MLP 784 -> hidden -> hidden -> 10; None: 1024, or 256 without VNNI
    batches: List[int] = field(default_factory=lambda: [1, 64])
    threads: Optional[int] = None
    min_seconds: float = 1.0                # per batch size, fp32 and int8 together
    native_int8: Optional[bool] = None      # from the parent's CPU probe (VNNI / AMX-INT8 / Arm dot product)
    api: str = "auto"                       # auto: torchao when installed, else torch.ao.quantization

    def validate(self) -> "QuantSettings":
        self.hidden = _check_int("hidden size", self.hidden, 8, 65536, allow_none=True)
        if not self.batches:
            raise SettingsError("give at least one batch size")
        self.batches = [_check_int("batch", b, 1, 65536) for b in self.batches]
        self.threads = _check_int("threads", self.threads, 1, 4096, allow_none=True)
        self.min_seconds = _check_float("min_seconds", self.min_seconds, hi=3600)
        self.native_int8 = _check_bool(self.native_int8, allow_none=True)
        self.api = _check_choice("quantisation API", self.api, QUANT_APIS)
        return self

    @property
    def hidden_used(self) -> int:
        """The width measured: a path this CPU emulates is measured small (the figure is the ratio)."""
        if self.hidden is not None:
            return self.hidden
        return 256 if self.native_int8 is False else 1024

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Dict[str, Any]) -> "QuantSettings":
        return _from_dict(cls, data, "quantisation")


# The optimizers `fit` can build by name (torch.optim), and the input dtypes it can make.
FIT_OPTIMIZERS = ("adam", "adamw", "sgd", "sgd-momentum", "rmsprop", "adagrad", "adafactor", "none")
FIT_INPUT_DTYPES = ("float32", "bfloat16", "float16", "int64", "int32")
MAX_FIT_BATCH = 1 << 20


@dataclass
class FitSettings:
    """Measure the memory a training step of one model takes, at a few batch sizes (``fit``'s child).

    ``model``: a lab model's name, or ``module:callable`` (imported with ``path`` first on sys.path)
    returning an ``nn.Module``, or ``(module, make_batch)`` where ``make_batch(n)`` returns the inputs
    of a batch of ``n``; without ``make_batch``, ``input`` is one sample's shape (``[3, 224, 224]``),
    of ``input_dtype`` (integers below ``vocab``). ``batches``: the batch sizes measured (None: 1, 2, 4 ...
    up to ``target_batch`` while the next one fits ``budget_bytes`` and ``seconds``).
    """

    model: str = "simplecnn"
    path: Optional[str] = None
    input: Optional[List[int]] = None
    input_dtype: str = "float32"
    vocab: int = 1000
    optimizer: str = "adam"
    batches: Optional[List[int]] = None
    target_batch: Optional[int] = None
    budget_bytes: Optional[int] = None      # the child's own memory for the measurement (the parent: a share of
                                            # what is available); a batch predicted past it is not run
    threads: Optional[int] = None
    checkpoint: bool = True                 # also measure with the repeated blocks checkpointed ...
    checkpoint_batches: Optional[List[int]] = None   # ... at these batches (None: the two largest measured)
    bf16: bool = False                      # also measure under bf16 autocast (where the CPU computes bf16 natively)
    steps: int = 2                          # measured steps per batch size (after one unmeasured step)
    seconds: float = 60.0

    def validate(self) -> "FitSettings":
        if not isinstance(self.model, str) or not self.model.strip() or len(self.model) > 500:
            raise SettingsError("model must be a lab model's name or module:callable")
        if self.model.lower() in MODELS:
            self.model = self.model.lower()
        elif ":" not in self.model:
            raise SettingsError(f"model {self.model!r} is neither a lab model ({', '.join(MODELS)}) nor "
                                "module:callable")
        if self.input is not None:
            if not self.input or len(self.input) > 8:
                raise SettingsError("input is one sample's shape: 1 to 8 sizes, e.g. [3, 224, 224]")
            self.input = [_check_int("input size", n, 1, 1 << 24) for n in self.input]
        self.input_dtype = _check_choice("input dtype", self.input_dtype, FIT_INPUT_DTYPES)
        self.vocab = _check_int("vocab", self.vocab, 1, 1 << 31)
        self.optimizer = _check_choice("optimizer", self.optimizer, FIT_OPTIMIZERS)
        if self.batches is not None:
            if not self.batches:
                raise SettingsError("give at least one batch size to measure")
            self.batches = sorted({_check_int("batch", b, 1, MAX_FIT_BATCH) for b in self.batches})
        self.target_batch = _check_int("target batch", self.target_batch, 1, MAX_FIT_BATCH, allow_none=True)
        self.budget_bytes = _check_int("budget bytes", self.budget_bytes, 1 << 20, allow_none=True)
        self.threads = _check_int("threads", self.threads, 1, 4096, allow_none=True)
        self.checkpoint, self.bf16 = bool(self.checkpoint), bool(self.bf16)
        if self.checkpoint_batches is not None:
            self.checkpoint_batches = sorted({_check_int("batch", b, 1, MAX_FIT_BATCH) for b in self.checkpoint_batches})
        self.steps = _check_int("steps", self.steps, 1, 100)
        self.seconds = _check_float("seconds", self.seconds, hi=3600)
        return self

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Dict[str, Any]) -> "FitSettings":
        return _from_dict(cls, data, "fit")


ROOF_DTYPES = ("fp32", "bf16", "int8", "fp64")
MEMORY_KERNELS = ("read", "copy")


@dataclass
class RooflineSettings:
    """Measured compute roofs (in-cache matmul per dtype, all CPUs and one core) and memory bandwidth per node.

    ``dtypes=None``: fp32, plus bf16 and int8 where the parent's CPU probe says
    they are native (``native_bf16``/``native_int8``). ``nodes``: the NUMA nodes
    to measure, ``[{"node": 0, "cpus": [0, 1]}]``, from the parent's topology
    (None: one "node" of all usable CPUs). Bounded by ``budget_s``: what did not
    fit is skipped and said so.
    """

    dtypes: Optional[List[str]] = None
    threads: Optional[List[int]] = None        # None: all usable CPUs and 1
    sizes: Optional[List[int]] = None          # None: 256..1024, those whose operands fit in ``cache_bytes``
    cache_bytes: Optional[int] = None          # the last-level cache the operands should fit in (parent: L3)
    seconds_per_point: float = 0.3             # each matrix size at each thread count
    memory: bool = True
    nodes: Optional[List[Dict[str, Any]]] = None
    memory_mib: int = 256                      # per buffer (two for copy); the parent picks > 4x the L3
    memory_seconds: float = 0.5                # per memory kernel and node
    operators: bool = True                     # profile a few SimpleCNN steps: the picture's operator points
    native_bf16: Optional[bool] = None
    native_int8: Optional[bool] = None
    budget_s: float = 45.0

    def validate(self) -> "RooflineSettings":
        if self.dtypes is not None:
            if not self.dtypes:
                raise SettingsError("choose at least one dtype")
            self.dtypes = list(dict.fromkeys(_check_choice("dtype", d, ROOF_DTYPES) for d in self.dtypes))
        if self.threads is not None:
            self.threads = sorted({_check_int("threads", t, 1, 4096) for t in self.threads}, reverse=True)
        if self.sizes is not None:
            self.sizes = sorted({_check_int("size", n, 32, 16384) for n in self.sizes})
        self.cache_bytes = _check_int("cache bytes", self.cache_bytes, 1, allow_none=True)
        self.seconds_per_point = _check_float("seconds per point", self.seconds_per_point, hi=60)
        self.memory = bool(self.memory)
        self.memory_mib = _check_int("memory MiB", self.memory_mib, 1, 1 << 20)
        self.memory_seconds = _check_float("memory seconds", self.memory_seconds, hi=600)
        self.operators = bool(self.operators)
        self.native_bf16 = _check_bool(self.native_bf16, allow_none=True)
        self.native_int8 = _check_bool(self.native_int8, allow_none=True)
        self.budget_s = _check_float("budget", self.budget_s, hi=3600)
        if self.nodes is not None:
            nodes = []
            for n in self.nodes:
                if not isinstance(n, dict) or not n.get("cpus"):
                    raise SettingsError("each NUMA node needs its CPUs: {\"node\": 0, \"cpus\": [0, 1]}")
                nodes.append({"node": _check_int("node", n.get("node", 0), 0, MAX_CPUS),
                              "cpus": sorted({_check_int("cpu", c, 0, MAX_CPUS - 1) for c in n["cpus"]})})
            self.nodes = nodes
        return self

    @property
    def dtypes_used(self) -> List[str]:
        """fp32 always; bf16 and int8 where native (unknown: not measured, said so by the parent)."""
        if self.dtypes is not None:
            return list(self.dtypes)
        return ["fp32"] + (["bf16"] if self.native_bf16 else []) + (["int8"] if self.native_int8 else [])

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Dict[str, Any]) -> "RooflineSettings":
        return _from_dict(cls, data, "roofline")


# ----------------------------------------------------------------------------- inference

INFER_MODELS = {
    "resnet18": "ResNet-18 (3x224x224 images, 1000 classes, ~11.7M parameters)",
    "transformer": "transformer encoder (4 layers, width 256, 128 tokens, ~5.3M parameters)",
}
INFER_SOURCES = ("model", "module", "torchscript", "onnx")
INFER_KINDS = ("eager", "inference", "onnxruntime")
ORT_LEVELS = ("disable", "basic", "extended", "all")
INT8_APIS = ("auto", "torchao", "torch.ao")
MAX_BATCH = 4096


def check_variant(spec: Any) -> Dict[str, Any]:
    """One inference variant as the orchestrator describes it to a worker: what to change against plain fp32.

    ``kind``: eager (autograd on, as a naive serving loop runs), inference (``torch.inference_mode``) or
    onnxruntime; on top of it ``threads``, ``channels_last``, ``autocast`` ("bf16"), ``int8``, ``compile``,
    ``ort_threads`` and ``ort_level``. ``same_threads_as``: the variant whose thread count this one repeats when
    the worker's default equals ``threads`` (measured once, under that name).
    """
    if not isinstance(spec, dict) or not isinstance(spec.get("name"), str) or not spec["name"].strip():
        raise SettingsError("each inference variant needs a name: {\"name\": ..., \"kind\": ...}")
    known = {"name", "kind", "group", "effort", "threads", "channels_last", "autocast", "int8", "compile",
             "ort_threads", "ort_level", "same_threads_as"}
    unknown = sorted(set(spec) - known)
    if unknown:
        raise SettingsError(f"unknown inference variant field(s): {', '.join(unknown)}")
    out = dict(spec)
    out["kind"] = _check_choice("variant kind", spec.get("kind", "inference"), INFER_KINDS)
    out["threads"] = _check_int("threads", spec.get("threads"), 1, 4096, allow_none=True)
    out["ort_threads"] = _check_int("ONNX Runtime threads", spec.get("ort_threads"), 1, 4096, allow_none=True)
    out["ort_level"] = _check_choice("graph optimisation level", spec.get("ort_level") or "all", ORT_LEVELS)
    if spec.get("autocast") not in (None, "bf16"):
        raise SettingsError(f"autocast must be bf16 or absent, not {spec.get('autocast')!r}")
    for flag in ("channels_last", "int8", "compile"):
        out[flag] = bool(spec.get(flag))
    out["effort"] = _check_int("effort", spec.get("effort", 0), 0, 100)
    return out


@dataclass
class InferWorkerSettings:
    """One inference worker: a model, its inputs per batch size, and the variants it prepares and measures.

    Variants that need a process of their own (an environment variable read at start-up such as
    ``OMP_WAIT_POLICY``, an allocator preloaded with ``LD_PRELOAD``, a CPU set, ``torch.compile`` that may
    outlast the preparation time) get their own worker; the rest share one. ``source``: a built-in ``model``,
    a ``module`` ("package.module:callable" or "file.py:callable" returning a model, or (model, example input)),
    a ``torchscript`` or an ``onnx`` file (``target``).
    """

    source: str = "model"
    model: Optional[str] = "resnet18"
    target: Optional[str] = None             # module:callable, or the model file
    cwd: Optional[str] = None                # a module is imported from here (as `python -m` would)
    input_shape: Optional[List[int]] = None  # one sample's shape, without the batch dimension
    batches: List[int] = field(default_factory=lambda: [1])
    variants: List[Dict[str, Any]] = field(default_factory=list)
    threads: Optional[int] = None            # this worker's default threads (None: the library's own)
    cpus: Optional[List[int]] = None         # pin the worker to these CPUs before torch starts
    native_bf16: Optional[bool] = None       # from the parent's CPU probe
    int8_api: str = "auto"
    probe_batch: int = 2                     # samples the accuracy check compares
    warmup_s: float = 0.1                    # per variant and batch size, after the first call and one more
    preload: Optional[str] = None            # the allocator this worker was started with (checked in its maps)
    seed: int = 0

    def validate(self) -> "InferWorkerSettings":
        self.source = _check_choice("model source", self.source, INFER_SOURCES)
        if self.source == "model":
            self.model = _check_choice("model", self.model or "resnet18", INFER_MODELS)
        elif not self.target or not str(self.target).strip():
            raise SettingsError(f"a {self.source} model needs its target ("
                                + ("module:callable" if self.source == "module" else "the model file") + ")")
        if self.input_shape is not None:
            if not self.input_shape or len(self.input_shape) > 8:
                raise SettingsError("the input shape is one sample's dimensions, e.g. 3,224,224 (1 to 8 of them)")
            self.input_shape = [_check_int("input dimension", d, 1, 1 << 20) for d in self.input_shape]
        if not self.batches:
            raise SettingsError("give at least one batch size")
        self.batches = list(dict.fromkeys(_check_int("batch", b, 1, MAX_BATCH) for b in self.batches))
        self.variants = [check_variant(v) for v in self.variants]
        names = [v["name"] for v in self.variants]
        if len(set(names)) != len(names):
            raise SettingsError("inference variant names must differ")
        self.threads = _check_int("threads", self.threads, 1, 4096, allow_none=True)
        if self.cpus is not None:
            if not self.cpus:
                raise SettingsError("the CPU set to pin to is empty")
            self.cpus = sorted({_check_int("cpu", c, 0, MAX_CPUS - 1) for c in self.cpus})
        self.native_bf16 = _check_bool(self.native_bf16, allow_none=True)
        self.int8_api = _check_choice("int8 API", self.int8_api, INT8_APIS)
        self.probe_batch = _check_int("probe batch", self.probe_batch, 1, 256)
        self.warmup_s = _check_float("warm-up seconds", self.warmup_s, hi=60)
        self.seed = _check_int("seed", self.seed, 0)
        return self

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Dict[str, Any]) -> "InferWorkerSettings":
        return _from_dict(cls, data, "inference worker")
