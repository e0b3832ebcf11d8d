"""What a job is set to, read from inside it: the job-state probe's plain data.

``cpudoctor run`` loads a small probe into a Python job at start
(:mod:`cpudoctor.probes.process.jobprobe` and its in-job half,
``probes/child/scripts/job_probe.py``). It records the calls that set the job's
global state with the file and line that made them, the DataLoaders it built,
its optimizer steps and forward calls, the model's parameters and FLOPs, and
samples of the modes the driving thread ran under, and what its training holds
(parameters, gradients, optimizer state, the activations of one forward pass). The rules judge it
(:mod:`cpudoctor.advisor.state_rules`); render words it. ``None`` means not seen.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# Where a thread count can be set from inside the job, and what can set its binding.
THREAD_CALLS = ("torch.set_num_threads",)
INTEROP_CALLS = ("torch.set_num_interop_threads",)
THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")
BINDING_VARS = ("OMP_PROC_BIND", "OMP_PLACES", "GOMP_CPU_AFFINITY", "KMP_AFFINITY")


@dataclass
class CodeLine:
    """The code that made a call: its file and line; when that is a library's, the user's line that led there."""

    file: str
    line: int
    function: str = ""
    library: str | None = None          # torch, numpy, lightning, python (the standard library); None: the user's
    user_file: str | None = None
    user_line: int | None = None
    via_file: str | None = None         # the user's own function made it: the user's line that called the function
    via_line: int | None = None

    @property
    def in_user_code(self) -> bool:
        return self.library is None

    def user_place(self) -> tuple[str, int] | None:
        """The user's own file and line behind the call (the call's own line when the user made it)."""
        if self.library is None:
            return self.file, self.line
        if self.user_file and self.user_line:
            return self.user_file, self.user_line
        return None


@dataclass
class SettingCall:
    """One call that set global state: ``torch.set_num_threads``, an ``os.environ`` write, ``sched_setaffinity``."""

    name: str                           # torch.set_num_threads | os.environ | os.sched_setaffinity | ...
    value: str | None = None            # as the job passed it (an environment variable's value; None: unset)
    key: str | None = None              # the variable of an os.environ write; the PID of sched_setaffinity
    at: CodeLine | None = None
    after_torch: bool = False           # made after `import torch` finished
    failed: bool = False                # the call raised (its error went to the job)
    t_s: float | None = None            # seconds after the probe started

    @property
    def label(self) -> str:
        return f"{self.key}" if self.name == "os.environ" else self.name


@dataclass
class LoaderInfo:
    """One ``DataLoader`` the job built."""

    num_workers: int | None = None
    batch_size: int | None = None
    pin_memory: bool | None = None
    persistent_workers: bool | None = None
    prefetch_factor: int | None = None
    context: str | None = None          # fork | spawn | forkserver; None: the platform's default
    worker_init: bool = False
    usable_cpus: int | None = None      # the CPUs the job could use when it built the loader
    at: CodeLine | None = None


@dataclass
class ModelInfo:
    """The outermost module the job ran (the one with the most parameters)."""

    name: str = ""
    parameters: int = 0
    trainable: int = 0
    tensors: int = 0
    dtypes: dict[str, int] = field(default_factory=dict)     # parameter dtype -> elements
    compiled: bool = False
    input_dtypes: list[str] = field(default_factory=list)
    input_shapes: list[list[int]] = field(default_factory=list)
    called_at: CodeLine | None = None   # where the loop calls the model (its first outermost call)
    forward_flops: int | None = None    # one forward pass, counted with PyTorch's formulas
    flops_ops: int | None = None        # the operators counted
    flops_grad: bool | None = None      # the forward pass that was counted built an autograd graph

    @property
    def main_dtype(self) -> str | None:
        return max(self.dtypes, key=self.dtypes.get) if self.dtypes else None


@dataclass
class ForwardMemory:
    """The activations autograd saved in one forward pass of the model, read from the graph it built (the probe's
    ``_MemoryCount``: each storage once, the module's parameters and buffers left out), and the module's sizes."""

    module: str = ""
    parameters: int = 0
    param_bytes: int = 0
    buffer_bytes: int = 0
    batch: int | None = None             # the first dimension of the pass's first tensor input (else its output)
    saved_bytes: int = 0
    saved_tensors: int = 0
    nodes: int = 0                       # the graph's nodes walked
    complete: bool = True                # False: the walk stopped at its bound (the count is a lower bound)
    hooked: int = 0                      # saved values packed by saved-tensor hooks (checkpointing): theirs, not counted
    chosen: bool = False                 # the pass was the chosen model's (else the first module with parameters)

    @property
    def bytes_per_sample(self) -> int | None:
        if not self.batch or not self.complete or self.hooked:
            return None
        return -(-self.saved_bytes // self.batch)


@dataclass
class StepMemory:
    """One optimizer at its first step: its parameters, their gradients and its state (created by that step)."""

    optimizer: str = ""
    parameters: int = 0
    param_bytes: int = 0
    grad_bytes: int = 0
    state_bytes: int = 0
    state_tensors: int = 0


@dataclass
class ModeSample:
    """The modes the driving thread ran under at one moment (read on it: several are thread-local)."""

    t_s: float = 0.0
    at_exit: bool = False
    main_thread: bool | None = None
    grad: bool | None = None
    inference: bool | None = None
    autocast: str | None = None          # the dtype autocast computes in; None: off
    anomaly: bool | None = None
    anomaly_nan: bool | None = None
    profiler: bool | None = None
    trace: str | None = None             # sys.gettrace(): a debugger or coverage left on
    profile: str | None = None           # sys.getprofile()
    monitoring: list[str] = field(default_factory=list)   # sys.monitoring tools (Python 3.12+)
    threads: int | None = None           # torch.get_num_threads()
    interop: int | None = None
    dtype: str | None = None             # torch.get_default_dtype()
    deterministic: bool | None = None
    matmul: str | None = None            # torch.get_float32_matmul_precision()
    mkldnn: bool | None = None           # torch.backends.mkldnn.enabled
    function_modes: list[str] = field(default_factory=list)
    dispatch_modes: list[str] = field(default_factory=list)
    device: str | None = None
    affinity: str | None = None          # the job's CPUs then (a cpulist)
    tracemalloc: bool = False


@dataclass
class Progress:
    """Optimizer steps, outermost forward calls and DataLoader batches counted by a moment (``t_s``, seconds after
    the probe started; the line is written on the driving thread right after a step, a forward call or a batch)."""

    t_s: float
    steps: int = 0
    forwards: int = 0
    backwards: int = 0
    last_step_s: float | None = None     # when the last of ``steps`` ended (the exact end of the counted steps)
    batches: int = 0                     # batches the job's DataLoaders handed it
    samples: int = 0                     # the samples in them (each batch's size as its sampler said)
    at_exit: bool = False                # written at the job's exit (``t_s`` is the exit, not a step)


@dataclass
class Latency:
    """Percentiles of the model's recent calls, in milliseconds (the probe keeps the last 2,048)."""

    n: int = 0
    p50_ms: float | None = None
    p90_ms: float | None = None
    p99_ms: float | None = None
    mean_ms: float | None = None


@dataclass
class RepeatedCall:
    """One place in the code that loads, builds or compiles a model, and how often it did."""

    name: str                            # torch.load | torch.jit.load | Module.load_state_dict | model built |
                                         # torch.compile | torch.jit.script | torch.jit.trace
    kind: str                            # load | build | compile
    calls: int = 0
    after: int = 0                       # calls made after the model first ran (inside the loop)
    seconds: float = 0.0                 # the calls' own time (a build: not timed; torch.compile compiles later,
                                         # at the first call of what it returns)
    forwards_first: int | None = None    # the model's calls counted when the first of ``after`` came
    at: CodeLine | None = None


@dataclass
class Serving:
    """What a loop that calls its model pays per call (per request, for a server): the model's forward
    durations, the intervals between the starts of its calls, and the places that load, build or compile a
    model with their counts."""

    calls: int = 0                       # the model's calls timed
    forward: Latency | None = None
    interval: Latency | None = None
    sites: list[RepeatedCall] = field(default_factory=list)

    def repeated(self, kind: str) -> list[RepeatedCall]:
        """The sites of ``kind`` called inside the loop, most calls first."""
        return sorted((s for s in self.sites if s.kind == kind and s.after), key=lambda s: -s.after)


@dataclass
class PythonFlags:
    dev_mode: bool = False
    optimize: int = 0
    debug_build: bool = False
    x_options: list[str] = field(default_factory=list)
    malloc: str | None = None            # PYTHONMALLOC
    tracemalloc: bool = False


@dataclass
class JobState:
    """What the job's own probe reported (``loaded`` False: it did not, and ``why_not`` says why)."""

    loaded: bool = False
    why_not: str = ""                    # off | not_python | not_loaded (the job's Python did not load it) | unreadable
    pid: int | None = None
    python: str | None = None
    torch_version: str | None = None
    torch_at_s: float | None = None      # when `import torch` finished
    flags: PythonFlags = field(default_factory=PythonFlags)
    affinity_start: list[int] | None = None
    affinity_after_torch: list[int] | None = None
    calls: list[SettingCall] = field(default_factory=list)
    loaders: list[LoaderInfo] = field(default_factory=list)
    optimizers: list[str] = field(default_factory=list)
    optimizer_at: CodeLine | None = None
    model: ModelInfo | None = None
    serving: Serving | None = None       # the model's call latencies and the loads, builds, compiles in its loop
    samples: list[ModeSample] = field(default_factory=list)
    progress: list[Progress] = field(default_factory=list)
    steps: int = 0
    forwards: int = 0
    backwards: int = 0                   # backward passes (Tensor.backward, torch.autograd.grad)
    batches: int = 0                     # DataLoader batches the job drew
    samples_drawn: int = 0               # the samples in them
    first_step_s: float | None = None
    last_step_s: float | None = None
    duration_s: float | None = None      # the probe's last line, in seconds after it started
    exited: bool = False                 # the probe wrote its last line at the job's exit
    forward_memory: ForwardMemory | None = None   # the activations of one counted forward pass
    step_memory: list[StepMemory] = field(default_factory=list)   # each optimizer at its first step
    other_pids: list[int] = field(default_factory=list)   # other Python processes of the job that loaded it
    bad_lines: int = 0                   # lines that were not the probe's (garbage, cut, too long)
    truncated: bool = False              # the file was longer than CPU Doctor reads

    # -- reading it ------------------------------------------------------------------------------

    def loop_samples(self) -> list[ModeSample]:
        """Samples taken while the job ran its steps (the one at exit only when there is no other)."""
        running = [s for s in self.samples if not s.at_exit]
        return running or list(self.samples)

    def latest(self) -> ModeSample | None:
        samples = self.loop_samples()
        return samples[-1] if samples else None

    def calls_to(self, *names: str, key: str | None = None) -> list[SettingCall]:
        return [c for c in self.calls if c.name in names and (key is None or c.key == key) and not c.failed]

    def last_call(self, *names: str, key: str | None = None) -> SettingCall | None:
        found = self.calls_to(*names, key=key)
        return found[-1] if found else None

    def env_writes(self, *keys: str) -> list[SettingCall]:
        return [c for c in self.calls if c.name == "os.environ" and c.key in keys]

    def inference_loop(self, minimum: int) -> bool:
        """The job called its model at least ``minimum`` times and never trained (no backward pass, no step)."""
        return self.loaded and self.forwards >= minimum and not self.steps and not self.backwards

    def request_batch(self) -> int | None:
        """The batch its model was called with: the first input's first dimension, else a DataLoader's batch size."""
        model = self.model
        if model is not None and model.input_shapes and model.input_shapes[0]:
            return model.input_shapes[0][0]
        sizes = [x.batch_size for x in self.loaders if x.batch_size is not None]
        return sizes[0] if sizes else None

    def step_rate(self) -> float | None:
        """Optimizer steps per second between the first and the last step seen."""
        if self.steps < 2 or self.first_step_s is None or self.last_step_s is None:
            return None
        span = self.last_step_s - self.first_step_s
        return (self.steps - 1) / span if span > 0 else None
