"""Where a job's time went: the time breakdown's plain data (samples per category, thread and process).

The probe (:mod:`cpudoctor.probes.process.breakdown`) fills it from sampled
stacks and thread states; whether it may be judged is the advisor's
(:mod:`cpudoctor.advisor.job_verdict`); the categories' names, colours and every
sentence about it are render's (:mod:`cpudoctor.render.breakdown`). Shares add
up to 1 over the counted thread-seconds of each thread, process and the job.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# Category ids (resources/sample_rules.json names and orders them; render says them in words).
COMPUTE, OPENMP, PYTHON, DATA, COMPILE, MEMORY, IO, GIL, OTHER = (
    "compute", "openmp_wait", "python", "data", "compile", "memory", "io_sleep", "gil", "other")
INSTRUMENTATION = "instrumentation"     # the verbose lines CPU Doctor switched on: counted apart, never a share


@dataclass
class Share:
    """One category's part of a breakdown."""

    category: str
    seconds: float                # thread-seconds
    share: float                  # 0..1 of the counted thread-seconds
    samples: int
    libraries: dict[str, float] = field(default_factory=dict)   # compute only: library id -> seconds


@dataclass
class ThreadTime:
    pid: int
    tid: int
    name: str
    role: str                     # driver | python | native
    source: str                   # stacks | states
    samples: int = 0              # counted samples
    idle_samples: int = 0         # blocked samples of a helper thread (not in the shares)
    # of those, a worker loop blocked on its queue of work (a DataLoader worker waiting for its next index):
    # idle for want of requests, not waiting on a disk or the network
    work_wait_samples: int = 0
    seconds: float = 0.0
    shares: list[Share] = field(default_factory=list)


@dataclass
class ProcessTime:
    pid: int
    ppid: int | None
    name: str
    cmdline: str
    role: str                     # main | dataloader_worker | compile_worker | compiler | child
    python: bool
    stacks: bool                  # py-spy sampled its Python threads
    affinity: list[int] | None = None
    max_threads: int | None = None
    thread_vars: dict[str, str] = field(default_factory=dict)
    cpu_percent: float | None = None
    samples: int = 0
    idle_samples: int = 0
    seconds: float = 0.0
    shares: list[Share] = field(default_factory=list)
    threads: list[ThreadTime] = field(default_factory=list)


@dataclass
class TopFrame:
    category: str
    frame: str                    # the leaf that names something: a symbol or a Python function
    seconds: float
    share: float


@dataclass
class StackAccess:
    """What decides whether a stack sampler may attach to a process (read when it was refused)."""

    pid: int
    uid: int | None = None                # the process's owner
    own_uid: int | None = None            # CPU Doctor's effective uid
    ptrace_scope: int | None = None       # kernel.yama.ptrace_scope
    cap_sys_ptrace: bool | None = None    # CPU Doctor holds CAP_SYS_PTRACE


@dataclass
class TimeBreakdown:
    pid: int
    window_s: float = 0.0
    sampler: str = ""             # "py-spy 0.4.3 + /proc", or "/proc only"
    observer: str = "inspect"     # who sampled: inspect (a running process) | run (a job CPU Doctor started)
    stack_rate_hz: int = 0
    state_rate_hz: float = 0.0
    samples: int = 0              # counted samples of the job
    idle_samples: int = 0
    startup_samples: int = 0      # importing modules: start-up, not in the shares
    instrumentation_samples: int = 0   # the libraries writing their verbose lines: the cost of watching, apart
    seconds: float = 0.0
    shares: list[Share] = field(default_factory=list)
    processes: list[ProcessTime] = field(default_factory=list)
    top: list[TopFrame] = field(default_factory=list)
    driver: str = ""              # "pid/tid"
    driver_samples: int = 0
    stacks_error: str | None = None       # what the stack sampler said when it sampled nothing (its own words)
    stacks_error_kind: str | None = None  # denied | not_python | gone | missing | failed
    stack_access: StackAccess | None = None   # the facts behind a refusal (stacks_error_kind "denied")
    job_cpus: float | None = None
    others_cpus: float | None = None
    online_cpus: int | None = None
    runnable_mean: float | None = None    # the job's runnable threads while it ran anything (/proc states)
    runnable_peak: int | None = None
    oversubscribed_share: float | None = None   # of the samples with a child running: more runnable threads
                                                # than CPUs while a child ran 2+ of them
    cpus: int | None = None               # the CPUs the job's first process may use
    reduced_precision: dict[str, float] = field(default_factory=dict)   # f16/bf16 -> seconds in kernels templated on it
    minor_faults: int = 0                 # minor page faults of the stack-sampled threads in the window
    fault_cost_us: float | None = None    # one fault's cost measured here; their time is counted as memory
    # The driving thread's own time: its innermost named native frames and its innermost Python lines of the
    # user's code (the library's line when none), each with its share of the driving thread's samples.
    driver_native: list[TopFrame] = field(default_factory=list)
    driver_python: list[TopFrame] = field(default_factory=list)

    def share(self, category: str) -> float:
        return next((s.share for s in self.shares if s.category == category), 0.0)

    def process(self, pid: int) -> ProcessTime | None:
        return next((p for p in self.processes if p.pid == pid), None)

    def driver_share(self, category: str) -> float:
        """``category``'s share of the driving thread's own samples (0 when it was not sampled)."""
        driver = self.driver_thread()
        return next((s.share for s in driver.shares if s.category == category), 0.0) if driver else 0.0

    def driver_thread(self) -> ThreadTime | None:
        """The thread that drives the job's loop, when it was sampled."""
        for p in self.processes:
            for t in p.threads:
                if t.role == "driver" and t.samples:
                    return t
        return None

    @property
    def stacks_sampled(self) -> bool:
        return any(p.stacks for p in self.processes)
