"""How several PyTorch jobs on the same CPUs should share them: PROC014's plan, one relaunch per job of yours.

The plan is computed here so the words and the commands cannot disagree: the
finding's text is made from the same :class:`Share` objects the commands are.

* Whose jobs: only the inspected job's owner's jobs get a relaunch command.
  Jobs of other users, and jobs a CPU Doctor started (its lab jobs carry its
  child token), are counted (their threads compete) but never relaunched:
  the first are not the user's to restart, the second end on their own or
  from CPU Doctor's window.
* Which CPUs: every CPU the user's jobs may run on (the union of their
  affinities, one CPU per physical core), minus the CPUs the jobs that stay
  keep busy when enough remain. A job pinned to CPU 0 keeps CPU 0; the other
  jobs get the rest, never the same CPU.
* How many threads: as many as the CPUs of the job's share, never more than
  its cgroup quota allows (a 0.5-CPU quota gives 1 thread). With more jobs
  than CPUs each job gets 1 thread and the jobs take turns on the CPUs; the
  text says so instead of promising each job a CPU of its own.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from cpudoctor.kits.cpulist import format_cpulist


@dataclass
class Job:
    """One job on the shared CPUs, as the plan sees it."""

    pid: int
    role: str                      # this | yours | other user | unknown owner | cpu doctor
    allowed: list[int]             # the CPUs it may use now
    threads_asked: int             # OMP_NUM_THREADS, else PyTorch's default (its usable CPUs)
    limit: int | None = None       # the most threads it should run (its cgroup quota), None = no limit known

    @property
    def relaunched(self) -> bool:
        return self.role in ("this", "yours")


@dataclass
class Share:
    job: Job
    cpus: list[int] = field(default_factory=list)
    threads: int = 1


@dataclass
class SplitPlan:
    shares: list[Share]            # the user's jobs, this job first
    staying: list[Job]             # counted, not relaunched: other users' jobs and CPU Doctor's own
    pool: list[int]                # the CPUs the shares were cut from
    crowded: bool                  # more of the user's jobs than CPUs: jobs share CPUs, 1 thread each
    avoided: list[int] = field(default_factory=list)   # CPUs left to the jobs that stay
    fair_share: int | None = None  # jobs that stay share the pool too: each job's fair share of threads

    @property
    def uniform(self) -> Share | None:
        """The one share size when every job got the same CPUs count and threads; None when they differ."""
        sizes = {(len(s.cpus), s.threads) for s in self.shares}
        return self.shares[0] if len(sizes) == 1 else None

    def per_cpu(self) -> int:
        """The most of the user's jobs that share one CPU."""
        counts: dict[int, int] = {}
        for s in self.shares:
            for cpu in s.cpus:
                counts[cpu] = counts.get(cpu, 0) + 1
        return max(counts.values(), default=0)


def quota_threads(quota: float | None) -> int | None:
    """The threads a cgroup CPU quota pays for: 0.5 CPU -> 1, 2.5 -> 2 (never 0)."""
    return max(1, math.floor(quota + 1e-9)) if quota else None


def plan_split(jobs: list[Job], cores_first) -> SplitPlan:
    """Shares of the CPUs for the user's jobs (``jobs[0]`` is the inspected one).

    ``cores_first(cpus)`` keeps one CPU per physical core (the inspector's
    ``Context.physical_first``): OpenMP threads on SMT siblings share one core's
    vector units.
    """
    mine = [j for j in jobs if j.relaunched]
    staying = [j for j in jobs if not j.relaunched]
    pool = cores_first(sorted({c for j in mine for c in j.allowed}))
    taken = {c for j in staying for c in j.allowed}
    free = [c for c in pool if c not in taken]
    avoided = []
    if free and len(free) >= len(mine) and len(free) < len(pool):
        avoided = [c for c in pool if c in taken]
        pool = free
    crowded = len(pool) < len(mine)
    slices: list[list[int]]
    if crowded:
        slices = [[pool[k % len(pool)]] for k in range(len(mine))] if pool else [[] for _ in mine]
    else:
        size = len(pool) // len(mine)
        slices = [pool[k * size:(k + 1) * size] for k in range(len(mine))]
    shares = _assign(mine, slices)
    # Jobs that stay on the same CPUs keep their threads: the user's jobs take a fair share of the rest.
    sharing = [j for j in staying if set(j.allowed) & set(pool)]
    fair = max(1, len(pool) // (len(mine) + len(sharing))) if sharing and not crowded else None
    for s in shares:
        s.threads = max(1, min(len(s.cpus) or 1, s.job.limit or len(s.cpus) or 1, fair or len(s.cpus) or 1))
    return SplitPlan(shares, staying, pool, crowded, avoided, fair)


def _assign(mine: list[Job], slices: list[list[int]]) -> list[Share]:
    """Each job the slice it already overlaps most (a job pinned to CPU 0 keeps CPU 0); ties in order."""
    left = list(range(len(slices)))
    chosen: dict[int, list[int]] = {}
    # Jobs already confined to few CPUs choose first: they have the least room to move.
    for idx in sorted(range(len(mine)), key=lambda i: (len(mine[i].allowed) or 1 << 30, i)):
        allowed = set(mine[idx].allowed)
        best = max(left, key=lambda k: (len(allowed & set(slices[k])), -k))
        chosen[idx] = slices[best]
        left.remove(best)
    return [Share(job, chosen[i]) for i, job in enumerate(mine)]


def cpus_text(cpus: list[int]) -> str:
    return f"CPU {cpus[0]}" if len(cpus) == 1 else f"CPUs {format_cpulist(cpus)}"
