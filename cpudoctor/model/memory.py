"""A training job's memory, as facts: what each of its processes holds, how it changes, what limits it.

The process probe (:mod:`cpudoctor.probes.process.memory`) fills :class:`JobMemory`
while ``run``, ``inspect`` or the Inspector watch a job; the memory rules
(:mod:`cpudoctor.advisor.memory_rules`) judge it and render words it. ``None``
means unknown (a file the kernel does not have, or refused); ``notes`` say why.

Memory is counted the way the kernel counts it, per process, so nothing is
counted twice: ``rss`` counts every resident page a process maps, shared ones too
(a forked DataLoader worker's RSS includes the pages it still shares with the
trainer); ``uss`` counts only the pages no other process maps (what its exit would
free); ``pss`` adds to that each shared page divided by the number of processes
sharing it, so the PSS of the trainer and its workers add up to what they hold
together. :class:`TrainingMemory` is what the job's own state says its training
holds (parameters, gradients, optimizer state, activations), from the job's probe
(issue 34's job state) or from ``cpudoctor fit``'s measurement of the model.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class ProcessMemory:
    """One process of the job (the trainer or a DataLoader worker) at the end of the window."""

    pid: int
    role: str = "job"                          # job | worker
    name: str = ""
    rss_bytes: int | None = None               # VmRSS: every resident page it maps, shared ones too
    peak_rss_bytes: int | None = None          # VmHWM: the most it held resident since it started
    uss_bytes: int | None = None               # Private_Clean + Private_Dirty: the pages only it maps
    pss_bytes: int | None = None               # its own pages plus its share of the shared ones
    shared_bytes: int | None = None            # Shared_Clean + Shared_Dirty
    anon_bytes: int | None = None              # RssAnon: heap, tensors, Python objects
    file_bytes: int | None = None              # RssFile: mapped files (libraries, memory-mapped data)
    shmem_bytes: int | None = None             # RssShmem: shared memory (tensors passed between processes)
    swap_bytes: int | None = None              # VmSwap: its pages in swap
    swap_pss_bytes: int | None = None          # SwapPss: its share of them
    uss_first_bytes: int | None = None         # USS at its first reading in the window
    uss_growth_bytes_per_s: float | None = None    # slope of its USS over the time it was read
    read_s: float | None = None                # seconds between its first and last USS reading
    major_faults: int | None = None            # pages it read back from disk or swap during the window
    started_in_window: bool = False            # a worker that started while the job was watched
    exited_in_window: bool = False


@dataclass
class MemoryPressure:
    """Pressure stall information (PSI): the share of time tasks stalled waiting for memory."""

    source: str = ""                           # /proc/pressure/memory, or the cgroup's memory.pressure
    some_avg10: float | None = None            # % of the last 10 s some task stalled (the kernel's average)
    full_avg10: float | None = None            # % of the last 10 s every non-idle task stalled
    some_avg60: float | None = None
    full_avg60: float | None = None
    some_share: float | None = None            # share (0-1) of the window some task stalled, from the totals
    full_share: float | None = None


@dataclass
class CgroupMemory:
    """The memory controller of the job's cgroup: its limits, use and events."""

    path: str | None = None                    # the job's cgroup, as /proc/PID/cgroup names it
    version: int | None = None                 # 1 or 2
    limit_bytes: int | None = None             # memory.max / memory.limit_in_bytes, the tightest on the way up
    limit_at: str | None = None                # the cgroup that sets it
    high_bytes: int | None = None              # memory.high (v2): over it the kernel throttles and reclaims
    swap_limit_bytes: int | None = None        # memory.swap.max (v2), memsw minus the limit (v1)
    current_bytes: int | None = None           # memory.current / memory.usage_in_bytes at the end
    peak_bytes: int | None = None              # memory.peak / memory.max_usage_in_bytes
    file_bytes: int | None = None              # the page cache in current_bytes (memory.stat): dropped before a kill
    events: dict[str, int] = field(default_factory=dict)            # memory.events totals (v1: oom_kill, failcnt)
    events_in_window: dict[str, int] = field(default_factory=dict)  # how much each rose while the job was watched
    pressure: MemoryPressure | None = None     # the cgroup's memory.pressure (v2)


@dataclass
class SystemMemory:
    """The machine's (or the VM's, or WSL2's) memory around the job."""

    total_bytes: int | None = None             # MemTotal: under WSL2 the VM's cap (.wslconfig memory=)
    available_bytes: int | None = None         # MemAvailable at the end of the window
    swap_total_bytes: int | None = None
    swap_free_bytes: int | None = None
    wsl: int | None = None                     # 1 or 2 under WSL, else None
    swap_in_per_s: float | None = None         # pages read back from swap per second, the whole machine
    swap_out_per_s: float | None = None
    oom_kills_in_window: int | None = None     # the kernel's OOM kills on the machine during the window
    pressure: MemoryPressure | None = None     # /proc/pressure/memory


@dataclass
class MemorySample:
    """The job's memory at one moment (seconds into the window), for plots and the growth figures."""

    t: float
    rss_bytes: int                             # the trainer's RSS
    workers_uss_bytes: int | None = None       # its workers' unique memory together, when read
    uss_bytes: int | None = None               # the trainer's USS, when read
    swap_bytes: int = 0                        # the trainer's and its workers' swap


@dataclass
class TrainingMemory:
    """What the job's training holds by its own account: from its probe (issue 34) or ``fit``'s child.

    The job's probe fills it from inside the job (the JobState of issue 34, through
    :func:`cpudoctor.model.memory.JobMemory.with_training`); ``cpudoctor fit`` fills it from a
    measured step of the model. Activation bytes are those autograd saved for the backward pass
    of one sample, as a measured step counted them.
    """

    source: str = ""                           # probe | fit | given
    parameters: int | None = None
    param_bytes: int | None = None
    buffer_bytes: int | None = None            # BatchNorm statistics and other buffers
    grad_bytes: int | None = None
    optimizer: str | None = None               # adam, adamw, sgd, ...
    optimizer_state_bytes: int | None = None
    activation_bytes_per_sample: int | None = None
    batch_size: int | None = None
    workers: int | None = None                 # DataLoader workers
    dataset_bytes: int | None = None           # the dataset held in memory, when known
    activations_unknown: str | None = None     # why the probe's count is not used: hooks (checkpointing) | incomplete


@dataclass
class JobMemory:
    """The memory of one job (its process and its workers) over the window it was watched."""

    rss_bytes: int | None = None               # the trainer's RSS at the end
    swap_bytes: int | None = None              # the trainer's swap at the end
    major_faults_per_s: float | None = None    # the trainer's and its workers' major faults per second
    processes: list[ProcessMemory] = field(default_factory=list)
    total_rss_bytes: int | None = None         # RSS summed: counts shared pages once per process
    total_pss_bytes: int | None = None         # PSS summed: what the job holds, shared pages counted once
    total_uss_bytes: int | None = None
    total_swap_bytes: int | None = None
    peak_rss_bytes: int | None = None          # the trainer's VmHWM (its peak since it started)
    peak_total_bytes: int | None = None        # the most the trainer and its workers held together in a sample
    window_s: float | None = None
    samples: list[MemorySample] = field(default_factory=list)   # thinned to a few hundred
    growth_bytes_per_s: float | None = None    # the trainer's RSS slope over the part of the window judged
    growth_window_s: float | None = None       # how long that part was
    growth_fit: float | None = None            # how straight that rise was (R², 1: a straight line)
    growth_still_rising: bool | None = None    # its last quarter rose too (no plateau reached)
    worker_generations: int = 0                # sets of workers seen start: a new set per epoch without persistent_workers
    growth_per_epoch_bytes: int | None = None  # the trainer's RSS rise from one worker generation's start to the next
    system: SystemMemory | None = None
    cgroup: CgroupMemory | None = None
    training: TrainingMemory | None = None     # what the job's own state says (probe), when known
    exit_code: int | None = None               # the job's, when it ended while watched (137: SIGKILL, often the OOM killer)
    notes: list[str] = field(default_factory=list)

    @property
    def workers(self) -> list[ProcessMemory]:
        return [p for p in self.processes if p.role == "worker"]

    @property
    def job(self) -> ProcessMemory | None:
        return next((p for p in self.processes if p.role == "job"), None)

    def with_training(self, training: TrainingMemory | None) -> "JobMemory":
        """This memory with the job's own account of its training attached (the probe's hook)."""
        self.training = training
        return self

    @property
    def limit(self) -> tuple[int | None, str]:
        """The tightest memory limit on the job and what sets it: ``cgroup``, ``wsl2`` or ``machine``."""
        options: list[tuple[int, str]] = []
        if self.cgroup is not None and self.cgroup.limit_bytes:
            options.append((self.cgroup.limit_bytes, "cgroup"))
        if self.system is not None and self.system.total_bytes:
            options.append((self.system.total_bytes, "wsl2" if self.system.wsl == 2 else "machine"))
        if not options:
            return None, ""
        return min(options)
