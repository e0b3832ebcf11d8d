"""Will a training fit in memory: the measured model, the memory it may use, and the plan ``fit`` makes.

:class:`ModelMeasurement` is what ``fit``'s child measured of one model (lab/jobs/fit.py);
:class:`MemoryBudget` what the job may really use here (available memory, a cgroup's limit, WSL2's cap);
:class:`FitPlan` the advisor's answer (:mod:`cpudoctor.advisor.fit`): the memory a step needs, part by part,
against the budget, the largest batch that fits, and the strategies ranked. Render words it
(:mod:`cpudoctor.render.fit`). Plain data; ``None`` means unknown.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class StepPoint:
    """The peak resident memory a few training steps at one batch size added, over what was resident before."""

    batch: int
    peak_delta_bytes: int
    step_s: float | None = None


@dataclass
class ModelMeasurement:
    """One model measured in the training environment by ``fit``'s child."""

    model: str
    input: str = ""                           # one sample's shape and dtype, as measured
    torch: str | None = None
    python: str | None = None
    threads: int | None = None
    optimizer: str = "adam"
    framework_bytes: int | None = None        # the child's RSS after importing torch and its first operation
    base_bytes: int | None = None             # ... with the model, its optimizer state, before a step
    parameters: int | None = None
    param_bytes: int | None = None
    buffer_bytes: int | None = None
    grad_bytes: int | None = None
    optimizer_state_bytes: int | None = None
    trainable_bytes: int | None = None        # the parameters the optimizer updates
    factored_state_bytes: int | None = None   # what Adafactor's factored state would take for them
    saved_bytes_per_sample: int | None = None     # autograd's saved tensors, per sample
    saved_fixed_bytes: int | None = None
    points: list[StepPoint] = field(default_factory=list)              # plain fp32 steps
    checkpoint_block: str | None = None       # the repeated block class checkpointing wraps (None: no blocks)
    checkpoint_blocks: int = 0
    checkpoint_points: list[StepPoint] = field(default_factory=list)
    bf16_points: list[StepPoint] = field(default_factory=list)
    peak_reset: bool = True                   # the peak could be reset before each batch (Linux)
    seconds: float | None = None
    notes: list[str] = field(default_factory=list)


@dataclass
class MemoryBudget:
    """What a job may use here, and what sets it."""

    usable_bytes: int | None = None           # the smallest of the limits below
    binding: str = ""                         # given | cgroup | available | wsl2
    available_bytes: int | None = None        # MemAvailable
    total_bytes: int | None = None            # MemTotal (WSL2: the VM's cap)
    cgroup_limit_bytes: int | None = None
    cgroup_used_bytes: int | None = None      # what the cgroup already holds (CPU Doctor's own share included)
    cgroup_path: str | None = None
    given_bytes: int | None = None            # --memory: a limit given by the user (another machine, a pod)
    swap_free_bytes: int | None = None
    wsl: int | None = None
    native_bf16: bool | None = None           # the CPU computes bf16 itself (AVX512_BF16, AMX, Arm BF16)
    notes: list[str] = field(default_factory=list)


@dataclass
class NeedPart:
    """One part of the memory a training step needs: ``measured``, ``counted`` (exact), ``given`` or ``assumed``."""

    part: str                                 # framework | parameters | optimizer | gradients | activations |
                                              # workspace | dataset | workers
    bytes: int
    how: str = "measured"


@dataclass
class Strategy:
    """One way to need less memory (or to have more), at the job's batch size."""

    id: str                                   # checkpointing | accumulation | optimizer | autocast | bf16-weights |
                                              # mmap-data | shared-dataset | offload | raise-limit | swap
    saves_bytes: int | None = None            # at the job's batch size (None: depends on the job, see detail)
    total_bytes: int | None = None            # the need with it applied
    fits: bool | None = None
    speed_cost: float | None = None           # extra time per sample (0.3: 30 % slower; negative: faster)
    measured: bool = False                    # the bytes measured on this model here (else computed or typical)
    speed_measured: bool = False              # the speed cost measured here (else a typical figure)
    applicable: bool = True
    detail: dict[str, object] = field(default_factory=dict)   # figures the words need (batch, accumulation, ...)
    snippet: str = ""
    snippet_lang: str = "python"


@dataclass
class FitPlan:
    """The memory one training step needs at ``batch`` against the budget, and what to do."""

    batch: int | None = None
    parts: list[NeedPart] = field(default_factory=list)
    total_bytes: int | None = None
    budget: MemoryBudget = field(default_factory=MemoryBudget)
    margin: float = 0.1                       # kept free of the budget (other processes, fragmentation)
    fits: bool | None = None
    largest_batch: int | None = None          # the largest batch that fits as the job is
    largest_batch_checkpointed: int | None = None
    strategies: list[Strategy] = field(default_factory=list)
    source: str = ""                          # measured | run | parameters
    measurement: ModelMeasurement | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def room_bytes(self) -> int | None:
        """What the step may take: the budget less the margin."""
        if self.budget.usable_bytes is None:
            return None
        return int(self.budget.usable_bytes * (1 - self.margin))
