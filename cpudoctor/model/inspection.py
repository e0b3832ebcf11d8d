"""One running process over a sampling window: its threads, CPUs, libraries, children, memory and peers.

The inspector (:mod:`cpudoctor.probes.process.inspect`) fills it from /proc;
the process rules judge it, render words it. ``None`` means unknown; ``notes``
say what could not be read, and ``denied`` what the kernel refused.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from cpudoctor.model.breakdown import TimeBreakdown
from cpudoctor.model.memory import JobMemory


@dataclass
class ThreadInfo:
    tid: int
    name: str                              # comm, as the program named the thread (15 chars max)
    state: str                             # last state seen: R, S, D, ...; "exited" = ended in the window
    cpu_percent: float | None = None       # over the window, 100 = one CPU
    last_cpu: int | None = None            # stat field 39 at the last sample
    cpus_seen: list[int] = field(default_factory=list)   # every CPU seen at a sample, in order first seen
    migrations: int = 0                    # CPU changes between consecutive samples (lower bound)
    runnable_share: float | None = None    # share of samples in state R (running or waiting for a CPU)
    wait_percent: float | None = None      # run-queue wait over the window (schedstat), 100 = whole window
    l3: int | None = None                  # index into Topology.l3_domains of last_cpu
    numa: int | None = None                # NUMA node id of last_cpu
    core: int | None = None                # index into Topology.core_list of last_cpu


@dataclass
class NativeLib:
    file: str                              # file name only, never the folder
    kind: str                              # openmp | blas | dnn | threads | allocator | framework
    library: str                           # the id resources/native_libs.json gives it: libgomp, mkl, opencv
    runtime: str | None = None             # gomp | iomp | llvm for OpenMP runtimes
    origin: str = ""                       # the Python package that ships it ("torch", "numpy.libs"), "system" or ""


@dataclass
class ChildProcess:
    pid: int
    name: str
    cmdline: str = ""                      # home folders replaced by ~
    threads: int | None = None
    cpu_percent: float | None = None
    rss_bytes: int | None = None
    runnable_mean: float | None = None     # mean threads in state R over the samples
    state: str = "running"                 # running | new (started during the window) | exited (during it)


@dataclass
class PeerJob:
    """Another busy PyTorch process on the same CPUs, seen during the window."""

    pid: int
    name: str
    cmdline: str = ""                      # home folders replaced by ~
    argv: list[str] = field(default_factory=list)   # the same, one entry per argument (hidden ones: <redacted>)
    uid: int | None = None                 # its owner (real uid)
    cpudoctor_child: bool = False          # started by a CPU Doctor (its child token is in the environment)
    threads: int | None = None
    cpu_percent: float | None = None       # over the inspection window, 100 = one CPU
    omp_num_threads: int | None = None     # OMP_NUM_THREADS in its environment; None = unset or unreadable
    env_readable: bool = False
    affinity: list[int] = field(default_factory=list)
    shared_cpus: list[int] = field(default_factory=list)   # CPUs it may use that the inspected job may use too


@dataclass
class ReadProblem:
    """Why a file of the process could not be read: denied (permission), gone (exited, or no such file),
    or unreadable (``detail`` says how)."""

    problem: str
    detail: str = ""


@dataclass
class Inspection:
    """One process over a sampling window. None = unknown; ``notes`` say why."""

    pid: int
    name: str | None = None
    cmdline: str | None = None             # home folders replaced by ~
    argv: list[str] = field(default_factory=list)   # the same, one entry per argument (hidden ones: <redacted>)
    is_python: bool = False
    python: str | None = None              # its interpreter (an environment to diagnose), when Python
    python_found_by: str | None = None     # maps | VIRTUAL_ENV | CONDA_PREFIX | argv[0] | exe
    uid: int | None = None
    status: str = "ok"                     # ok | exited (exited during the window: partial data)
    window_s: float | None = None          # seconds actually covered
    exited_after_s: float | None = None    # the process exited this far into the window (status "exited")
    samples: int = 0
    num_threads: int | None = None
    threads: list[ThreadInfo] = field(default_factory=list)
    cpu_percent: float | None = None       # whole process over the window, 100 = one CPU
    runnable_mean: float | None = None     # mean threads in R (process + children) per sample
    runnable_max: int | None = None
    wait_percent: float | None = None      # sum of threads' run-queue waits, 100 = one thread waiting all the time
    migrations: int | None = None          # over all threads
    affinity: list[int] | None = None      # Cpus_allowed_list
    cgroup_path: str | None = None
    cpu_quota: float | None = None         # CPUs, None = no quota found
    usable_cpus: int | None = None         # min(len(affinity), ceil(quota))
    nice: int | None = None
    env: dict[str, str] = field(default_factory=dict)   # whitelisted thread variables only
    env_readable: bool = False
    env_problem: ReadProblem | None = None
    preload: list[str] = field(default_factory=list)    # LD_PRELOAD file names
    libraries: list[NativeLib] = field(default_factory=list)
    libraries_readable: bool = False
    libraries_problem: ReadProblem | None = None
    peers: list[PeerJob] = field(default_factory=list)   # other busy PyTorch jobs on the same CPUs
    children: list[ChildProcess] = field(default_factory=list)
    children_threads: int | None = None
    children_cpu_percent: float | None = None
    rss_bytes: int | None = None
    swap_bytes: int | None = None
    major_faults: int | None = None        # over the window
    major_faults_per_s: float | None = None
    memory: JobMemory | None = None        # the job's memory in detail: its workers, growth, cgroup, pressure
    topology_known: bool = False
    denied: list[str] = field(default_factory=list)   # what the kernel refused: "environment", "libraries"
    notes: list[str] = field(default_factory=list)
    time: TimeBreakdown | None = None      # where the threads' time went (sampled stacks), when sampled

    @property
    def openmp_runtimes(self) -> list[NativeLib]:
        return [lib for lib in self.libraries if lib.kind == "openmp"]

    @property
    def access_limited(self) -> bool:
        """True when the environment or the libraries were refused (another user's process)."""
        return bool(self.denied)


@dataclass
class ProcessEntry:
    """One process of the picker's list."""

    pid: int
    name: str
    cmdline: str                           # home folders replaced by ~
    is_python: bool
    threads: int | None = None
    cpu_percent: float | None = None       # since the previous snapshot, 100 = one CPU
    rss_bytes: int | None = None
    own: bool = True                       # same user as the caller (inspectable in full)


@dataclass
class ThreadPlace:
    """Where one thread is now (the topology map's live markers)."""

    tid: int
    name: str
    cpu: int | None
    cpu_percent: float | None              # since the previous poll; None on the first
