"""Rules for one running process: why is this training job slow right now?

Input is an :class:`~cpudoctor.model.inspection.Inspection` (plus the machine's
Topology), wrapped in a :class:`Context`; output is
:class:`~cpudoctor.model.report.Finding` objects with stable codes ``PROC001``...
The rules live in :data:`PROCESS_RULES`, a :class:`~cpudoctor.advisor.engine.RuleSet`
like the report rules': same decorator (:func:`proc_rule`), same docstring
sections (``What it checks`` / ``Why it matters`` / ``Fix``), code rules,
redirects, ``cpudoctor explain`` text and generated docs
(docs/process_rules.md).

Fixes carry the exact command to relaunch the job: the CPU set from the
topology (one CCX, one NUMA node, one thread per core), the pinning prefix
from :mod:`cpudoctor.advisor.pinning` when it is available, and the thread
variables, in front of the process's own (redacted) command line.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from cpudoctor.advisor.code_settings import seen_threads, thread_change, thread_setting
from cpudoctor.advisor.engine import SEVERITY_RANK, RuleSet
from cpudoctor.advisor.job_command import JobCommand, job_command
from cpudoctor.advisor.machine import setting
from cpudoctor.advisor.job_split import Job, SplitPlan, cpus_text, plan_split, quota_threads
from cpudoctor.advisor.pinning import affinity_vars_to_clear
from cpudoctor.advisor.snippets import WORKER_POOL_WORDS, worker_init_snippet, worker_pools
from cpudoctor.advisor.thread_vars import THREAD_VARS, thread_count_env
from cpudoctor.kits.cpulist import format_cpulist
from cpudoctor.model.breakdown import COMPILE
from cpudoctor.model.inspection import Inspection, PeerJob, ThreadInfo
from cpudoctor.model.jobstate import JobState
from cpudoctor.model import Topology
from cpudoctor.kits.plural import plural
from cpudoctor.model import Finding
from cpudoctor.kits.format import percent

# A thread counts as busy at a quarter of a CPU over the window: OpenMP workers
# of a training step sit well above it, idle pools (inter-op, autograd) below.
BUSY_PERCENT = 25.0
# The breakdown's share in torch.compile from which a job with low CPU use is compiling, not waiting on data.
COMPILING = 0.5
# Run-queue wait (sum over threads, 100 = one thread waiting the whole window) from which the
# job is short of CPU rather than idle: 0.3 s of waiting per second.
CONTENTION_WAIT = 30.0

PROCESS_RULES: RuleSet[Context] = RuleSet(
    "process rule", prefix="PROC", docs_page="docs/process_rules.md", group_by_category=False,
    scope="Checks a running job: `cpudoctor inspect PID`, `cpudoctor run` and the Inspector page.",
    crash_hint="the output of `cpudoctor inspect PID --format json`",
)
proc_rule = PROCESS_RULES.rule
process_rules = PROCESS_RULES.all
resolve = PROCESS_RULES.resolve


# --- context shared by the rules ----------------------------------------------------------


@dataclass
class Context:
    insp: Inspection
    topo: Topology | None
    state: JobState | None = None       # the job's own state from its probe (`run` only): where it sets threads
    # relaunch lines that left the thread count to the script's own line -> the count the rule wanted
    counts_left: dict[str, int] = field(default_factory=dict)

    @property
    def usable(self) -> int | None:
        return self.insp.usable_cpus

    def allowed(self) -> list[int]:
        cpus = self.insp.affinity or (self.topo.online_cpus if self.topo else []) or []
        return sorted(cpus)

    def busy_threads(self) -> list[ThreadInfo]:
        return [t for t in self.insp.threads if (t.cpu_percent or 0.0) >= BUSY_PERCENT]

    def env_int(self, name: str) -> int | None:
        try:
            return int(self.insp.env.get(name, "").strip())
        except ValueError:
            return None

    def evidence(self, **values: Any) -> dict[str, Any]:
        return {k: v for k, v in values.items() if v is not None}

    # -- relaunch commands --

    def job_command(self) -> JobCommand:
        """The job's own command, pasteable: hidden arguments become variables that name them."""
        return job_command(self.insp.pid, self.insp.argv, self.insp.cmdline)

    def command(self) -> str:
        return self.job_command().text

    def physical_first(self, cpus: list[int]) -> list[int]:
        """One CPU per physical core among ``cpus`` (the first sibling)."""
        if not self.topo or not self.topo.core_list:
            return sorted(cpus)
        wanted = set(cpus)
        picked = []
        for core in self.topo.core_list:
            inside = sorted(wanted.intersection(core.cpus))
            if inside:
                picked.append(inside[0])
        return sorted(picked) or sorted(cpus)

    def runs_torch(self) -> bool:
        """PyTorch's CPU library is among the process's code (False when its memory map could not be read)."""
        return any(lib.library == "libtorch_cpu" for lib in self.insp.libraries)

    @cached_property
    def competition(self) -> Competition | None:
        """The PyTorch jobs that share this job's CPUs and how they should split them (PROC014's plan), or None
        when this job is not one of several PyTorch jobs asking for more threads than its CPUs; worked out once,
        so every rule that gives this job a thread count gives the same one."""
        return _competition(self)

    def own_share(self, threads: int) -> tuple[list[int] | None, int]:
        """(CPUs, threads) for a relaunch of this job: its share of PROC014's split when other PyTorch jobs
        compete for its CPUs (one answer per job), else ``threads`` on the CPUs it has."""
        comp = self.competition
        if comp is None:
            return None, threads
        share = comp.plan.shares[0]
        return share.cpus, min(threads, share.threads)

    def binding_vars(self) -> list[str]:
        """OpenMP binding variables the relaunch must clear: those in the job's environment, all when unreadable."""
        return affinity_vars_to_clear(self.insp.env if self.insp.env_readable else None)

    def relaunch(self, cpus: list[int] | None, threads: int, numa_node: int | None = None,
                 extra_env: dict[str, str] | None = None, *, other: JobCommand | None = None) -> str:
        """``<pinning prefix> env [-u BINDING...] OMP_NUM_THREADS=n ... <command>`` as one line.

        The CPU set comes from taskset/numactl, never from OpenMP binding
        variables: binding pins the main thread at ``import torch`` and the
        DataLoader workers it forks inherit that one CPU. Binding variables
        the job inherited are cleared (``env -u``) instead of kept. ``other``
        relaunches another job (PROC014) instead of this one: every binding
        variable is cleared, its environment was not read.
        """
        env, counts_unset = thread_count_env(threads, None if other is not None else self.insp.env)
        # the script sets its own count: a variable here would not win (run_process_rules says which line does)
        count_in_script = other is None and thread_setting(self.state) is not None
        if count_in_script:
            env, counts_unset = {}, []
        env.update(extra_env or {})
        binding = affinity_vars_to_clear(None) if other is not None else self.binding_vars()
        unset = " ".join(f"-u {name}" for name in [*binding, *counts_unset] if name not in env)
        assigned = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
        env_part = " ".join(["env", *(x for x in (unset, assigned) if x)]) if unset or assigned else ""
        prefix = launch_prefix(self.topo, cpus, numa_node) if cpus else ""
        command = other.text if other is not None else self.command()
        line = " ".join(p for p in (prefix, env_part, command) if p)
        if count_in_script:
            self.counts_left[line] = threads
        return line


def launch_prefix(topo: Topology | None, cpus: list[int], numa_node: int | None = None) -> str:
    """``numactl``/``taskset`` prefix, from :mod:`cpudoctor.advisor.pinning` when it exists."""
    try:
        from cpudoctor.advisor import pinning  # owned by the topology work
    except ImportError:
        pinning = None
    fn = getattr(pinning, "launch_prefix", None) if pinning is not None else None
    if fn is not None and topo is not None:
        try:
            prefix = fn(topo, cpus, numa_node=numa_node)
        except (TypeError, ValueError):
            prefix = None
        if prefix:
            return str(prefix)
    if numa_node is not None:
        return f"numactl --cpunodebind={numa_node} --membind={numa_node}"
    return f"taskset -c {format_cpulist(cpus)}"


def _finding(severity: str, title: str, why: str, fix: str, snippet: str = "",
             evidence: dict[str, Any] | None = None, lang: str = "bash") -> Finding:
    return Finding(code="", symbol="", category="", severity=severity, title=title, why=why, fix=fix,
                   snippet=snippet, snippet_lang=lang, evidence=evidence or {},
                   fields_used=sorted((evidence or {}).keys()))


def _best_domain(ctx: Context, domains: list[list[int]], n: int) -> int | None:
    """Index of the domain that holds the most busy threads and has room for ``n`` threads."""
    allowed = set(ctx.allowed())
    busy = ctx.busy_threads()
    best, best_score = None, -1
    for i, cpus in enumerate(domains):
        room = len(ctx.physical_first(sorted(set(cpus) & allowed))) if allowed else len(cpus)
        if room < n:
            continue
        score = sum(1 for t in busy if t.last_cpu in cpus)
        if score > best_score:
            best, best_score = i, score
    return best


# --- the rules --------------------------------------------------------------------------------


@proc_rule("PROC001", "oversubscribed", category="threads", severity="error",
           title="More runnable threads than usable CPUs")
def oversubscribed(ctx: Context) -> list[Finding]:
    """
    What it checks:
        The mean number of threads of the process and its children that were runnable (state R)
        at each sample, and the time they spent waiting on a run queue, against the usable CPUs
        (affinity and cgroup quota).

    Why it matters:
        OpenMP and BLAS pools assume one CPU per thread. With more runnable threads than CPUs the
        kernel time-slices them, threads waiting at a barrier spin while the thread they wait for
        is descheduled, and a step can take several times longer than with fewer threads.

    Fix:
        Set OMP_NUM_THREADS (and MKL/OpenBLAS) to the usable CPUs minus the DataLoader workers,
        or call torch.set_num_threads(n) first thing in the script.
    """
    i = ctx.insp
    usable = ctx.usable
    if usable is None or i.runnable_mean is None or not _self_oversubscribed(ctx):
        return []
    wait = i.wait_percent
    active = len(_active_threads(ctx))
    sev = "error" if i.runnable_mean >= 2 * usable or active >= 2 * usable else "warning"
    workers = len(i.children)
    cpus, threads = ctx.own_share(max(1, usable - workers) if workers < usable else 1)
    why = (f"On average {i.runnable_mean:g} threads wanted a CPU (peak {i.runnable_max}; {active} threads ran in the "
           f"window) but only {plural(usable, 'CPU')} are usable")
    if wait is not None:
        why += f"; together they waited {wait / 100:.1f} s per second on run queues"
    why += ". Time-slicing makes OpenMP barriers spin on descheduled threads."
    fix = (f"Relaunch with {plural(threads, 'compute thread')}"
           + (f" on {cpus_text(cpus)}, its share beside the other PyTorch jobs on its CPUs (PROC014)" if cpus else "")
           + (f" (leaving {plural(workers, 'CPU')} for the DataLoader "
              f"{'worker' if workers == 1 else 'workers'})" if workers and not cpus else "")
           + ", or call torch.set_num_threads(" + str(threads) + ") at the top of the script.")
    snippet, lang = ctx.relaunch(cpus, threads), "bash"
    setting = thread_setting(ctx.state)
    if setting is not None:          # the script sets the count itself: a variable outside would not win
        fix, snippet = thread_change(setting, threads)
        lang = "python"
    return [_finding(sev, f"Oversubscribed: {i.runnable_mean:g} runnable threads on {plural(usable, 'usable CPU')}", why, fix,
                     snippet,
                     ctx.evidence(runnable_mean=i.runnable_mean, runnable_max=i.runnable_max, usable_cpus=usable,
                                  wait_percent=wait, num_threads=i.num_threads, active_threads=active,
                                  children=workers, set_at=setting.short_place() if setting else None), lang=lang)]


ACTIVE_PERCENT = 5.0   # a thread that got this much CPU in the window took part in the work
ACTIVE_SHARE = 0.25    # ... or this share of an even split of the CPU the job got (a job starved by others)


def _active_threads(ctx: Context) -> list[ThreadInfo]:
    """The threads that took part in the work: 5 % of a CPU, or, for a job other programs starve (its
    workers get 3 % each on a busy machine), a quarter of an even split of what the job got."""
    threads = ctx.insp.threads
    total = sum(t.cpu_percent or 0.0 for t in threads)
    floor = min(ACTIVE_PERCENT, ACTIVE_SHARE * total / len(threads)) if threads else ACTIVE_PERCENT
    return [t for t in threads if (t.cpu_percent or 0.0) > 0.0 and (t.cpu_percent or 0.0) >= floor]


def _self_oversubscribed(ctx: Context) -> bool:
    """The job itself has more working threads than usable CPUs (PROC001, not others' contention).

    Two signs, either is enough: more runnable threads than CPUs on average, or
    more threads that really ran in the window than CPUs while the job waited
    on run queues. The second matters with libgomp, which stops spinning and
    sleeps at barriers once it sees more threads than CPUs, so an 8-thread job
    on 2 CPUs averages only ~2.3 runnable threads while its 8 threads take turns.
    Real run-queue waiting (schedstat), when known, must confirm either sign.
    """
    i, usable = ctx.insp, ctx.usable
    if usable is None or i.runnable_mean is None:
        return False
    wait = i.wait_percent
    if wait is not None and wait < 50.0:
        return False
    if i.runnable_mean - usable >= 0.5:
        return True
    return wait is not None and len(_active_threads(ctx)) > usable


def _spread(ctx: Context, kind: str) -> list[Finding]:
    topo = ctx.topo
    busy = ctx.busy_threads()
    if topo is None or len(busy) < 2:
        return []
    if kind == "ccx":
        domains = [d.cpus for d in topo.l3_domains]
        ids = list(range(len(domains)))
        ccx = topo.l3_is_ccx()
        name, names = ("CCX (L3 domain)", "CCXs (L3 domains)") if ccx else ("L3 domain", "L3 domains")
    else:
        nodes = [n for n in topo.numa_nodes if n.cpus]
        domains = [n.cpus for n in nodes]
        ids = [n.id for n in nodes]
        name, names = "NUMA node", "NUMA nodes"
    if len(domains) < 2:
        return []
    used: set[int] = set()
    for t in busy:
        for cpu in t.cpus_seen or ([t.last_cpu] if t.last_cpu is not None else []):
            for idx, cpus in enumerate(domains):
                if cpu in cpus:
                    used.add(idx)
    if len(used) < 2:
        return []
    n = len(busy)
    best = _best_domain(ctx, domains, n)
    if best is None:
        return []                      # the job does not fit one domain: spreading is right
    allowed = set(ctx.allowed())
    cpus = ctx.physical_first(sorted(set(domains[best]) & allowed) if allowed else domains[best])
    label = f"{name} {ids[best]}"
    why = (f"{n} busy threads ran on {len(used)} different {names} during the window, yet {n} threads fit "
           f"in {label} alone ({plural(len(cpus), 'core')}). ")
    if kind == "ccx":
        unit = "CCX" if ccx else "L3 domain"
        why += (f"Each {unit} has its own L3: threads that share data across {unit}s pay cross-die latency and "
                "cannot share the cache, and the scheduler keeps moving them.")
    else:
        why += ("Memory lives on the node that first touched it: threads on the other node read it over "
                "the inter-socket/die link at lower bandwidth and higher latency.")
    numa_node = ids[best] if kind == "numa" else None
    fix = f"Pin the job to {label} (CPUs {format_cpulist(cpus)}) with {n} threads bound to cores."
    return [_finding("warning", f"Threads spread over {len(used)} {names} while the job fits one", why, fix,
                     ctx.relaunch(cpus, n, numa_node=numa_node),
                     ctx.evidence(busy_threads=n, domains_used=sorted(ids[u] for u in used),
                                  target=label, target_cpus=format_cpulist(cpus)))]


@proc_rule("PROC002", "spread-over-ccx", category="topology", severity="warning",
           title="Busy threads spread over several CCXs while the job fits one")
def spread_over_ccx(ctx: Context) -> list[Finding]:
    """
    What it checks:
        Which L3 domains (one per CCX on AMD Zen) the busy threads ran on during the window, and
        whether one L3 domain has enough cores for all of them.

    Why it matters:
        On Zen each CCX has its own L3. A small job whose threads are spread over CCXs cannot
        share its working set in one cache and pays cross-CCX latency at every barrier.

    Fix:
        Pin the job to one CCX with taskset (or OMP_PLACES/OMP_PROC_BIND) and as many threads as
        that CCX has cores.
    """
    return _spread(ctx, "ccx")


@proc_rule("PROC003", "spread-over-numa", category="topology", severity="warning",
           title="Busy threads spread over NUMA nodes while the job fits one")
def spread_over_numa(ctx: Context) -> list[Finding]:
    """
    What it checks:
        Which NUMA nodes the busy threads ran on during the window, and whether one node has
        enough cores for all of them.

    Why it matters:
        A thread on the far node reads tensors allocated on the near one through the
        inter-socket link: lower bandwidth, higher latency, and the slowest thread sets the
        pace of every parallel region.

    Fix:
        Bind CPUs and memory to one node with numactl --cpunodebind=N --membind=N.
    """
    return _spread(ctx, "numa")


@proc_rule("PROC004", "smt-siblings-busy", category="topology", severity="warning",
           title="Two busy threads on the SMT siblings of one core")
def smt_siblings_busy(ctx: Context) -> list[Finding]:
    """
    What it checks:
        Whether two busy threads last ran on the two hardware threads of the same physical core
        while the process may use enough cores to give each thread its own.

    Why it matters:
        SMT siblings share one core's vector units; two GEMM threads on one core each run at
        about half speed, and the whole parallel region waits for them.

    Fix:
        Use at most one compute thread per physical core and bind them (OMP_PLACES=cores,
        OMP_PROC_BIND=close), or pin to one CPU per core with taskset.
    """
    topo = ctx.topo
    if topo is None or not topo.core_list or (topo.smt_threads_per_core or 1) < 2:
        return []
    busy = ctx.busy_threads()
    by_core: dict[int, list[ThreadInfo]] = {}
    for t in busy:
        if t.core is not None:
            by_core.setdefault(t.core, []).append(t)
    shared = {c: ts for c, ts in by_core.items() if len({t.last_cpu for t in ts}) >= 2}
    if not shared:
        return []
    allowed = ctx.allowed()
    cores = ctx.physical_first(allowed)
    if len(busy) > len(cores):
        return []                      # more busy threads than cores: siblings are unavoidable
    pairs = [f"core {topo.core_list[c].core_id} (CPUs {format_cpulist([t.last_cpu for t in ts if t.last_cpu is not None])})"
             for c, ts in sorted(shared.items())]
    why = (f"{plural(len(shared), 'core')} ran two busy threads of this job on their SMT "
           f"siblings ({'; '.join(pairs[:4])}) while {plural(len(cores), 'core')} {'is' if len(cores) == 1 else 'are'} usable for {plural(len(busy), 'busy thread')}. "
           "Siblings share one core's FMA units, so both run at about half speed.")
    fix = f"Give each of the {len(busy)} threads its own core: one CPU per core, threads bound to cores."
    return [_finding("warning", "SMT siblings both busy while cores are free", why, fix,
                     ctx.relaunch(cores[:max(len(busy), 1)], len(busy)),
                     ctx.evidence(busy_threads=len(busy), shared_cores=len(shared), usable_cores=len(cores)))]


@proc_rule("PROC005", "two-openmp-runtimes", category="blas", severity="error",
           title="Two OpenMP runtimes loaded in one process")
def two_openmp_runtimes(ctx: Context) -> list[Finding]:
    """
    What it checks:
        The OpenMP runtimes in the process's memory map: GNU libgomp, Intel libiomp5, LLVM libomp,
        and several copies of the same one shipped by different packages.

    Why it matters:
        Each runtime keeps its own thread pool, unaware of the other: together they start twice
        the threads the CPU has, their spin-waits fight for cores, and mixing libiomp5 with
        libgomp is a known source of crashes and wrong thread counts (OMP Error #15).

    Fix:
        Install packages built against the same runtime (pip's torch and numpy, or conda's
        consistently), or make one runtime serve both (LD_PRELOAD it first); in the meantime
        limit every pool with OMP_NUM_THREADS.
    """
    runtimes = ctx.insp.openmp_runtimes
    if len(runtimes) < 2:
        return []
    kinds = sorted({lib.runtime or lib.file for lib in runtimes})
    listed = ", ".join(f"{lib.file}" + (f" (from {lib.origin})" if lib.origin else "") for lib in runtimes)
    usable = ctx.usable or len(ctx.allowed()) or 1
    if len(kinds) >= 2:
        title = f"{len(kinds)} different OpenMP runtimes loaded: {listed}"
        sev = "error"
        why = ("Each runtime has its own thread pool that does not know the other: both size themselves to "
               "the whole machine, their spin-waits compete for the same cores, and libiomp5 + libgomp in one "
               "process is a classic cause of slowdowns, hangs and 'OMP: Error #15' crashes.")
        fix = ("Use packages built against one runtime: e.g. pip-only torch and numpy (libgomp), or conda with "
               "one OpenMP (llvm-openmp or intel-openmp) for everything. Never 'fix' it with "
               "KMP_DUPLICATE_LIB_OK=TRUE, which only hides the crash. Until then cap every pool.")
    else:
        title = f"{len(runtimes)} copies of the same OpenMP runtime loaded: {listed}"
        sev = "warning"
        why = ("Two copies of one runtime (bundled by two packages) are two separate thread pools: each starts "
               "its own threads and neither counts the other's, so the process oversubscribes its CPUs when both "
               "are busy.")
        fix = "Limit both pools with the same thread count, or install packages that share one copy."
    return [_finding(sev, title, why, fix, ctx.relaunch(None, max(1, usable // 2 if len(kinds) >= 2 else usable)),
                     ctx.evidence(openmp_runtimes=[lib.file for lib in runtimes],
                                  origins=[lib.origin for lib in runtimes]))]


@proc_rule("PROC006", "worker-thread-explosion", category="threads", severity="warning",
           title="DataLoader workers times threads far exceed the CPUs")
def worker_thread_explosion(ctx: Context) -> list[Finding]:
    """
    What it checks:
        The child processes (DataLoader workers) and their thread counts: workers x threads per
        worker plus the main process's threads, against the usable CPUs, when workers really ran
        several threads at once (over one CPU each, or more than one runnable thread on average).

    Why it matters:
        Every worker that touches numpy, OpenCV or torch ops starts its own BLAS/OpenMP pool sized
        to the whole machine. Eight workers on a 16-CPU box then own 128 threads that fight the
        training threads for cores whenever they compute.

    Fix:
        Limit threads inside the workers with each library's own switch in worker_init_fn:
        torch.set_num_threads(1), threadpoolctl's threadpool_limits(1) for OpenBLAS/MKL, and
        cv2.setNumThreads(1) when OpenCV is loaded (OMP_NUM_THREADS does not reach OpenCV's pool,
        nor a pool that exists before the fork); or start the job with OPENBLAS_NUM_THREADS=1 and
        set torch.set_num_threads in the main process explicitly.
    """
    i = ctx.insp
    usable = ctx.usable
    if usable is None or len(i.children) < 2 or i.children_threads is None:
        return []
    per_worker = max((c.threads or 0) for c in i.children)
    total = i.children_threads + (i.num_threads or 0)
    if per_worker < 3 or total <= 2 * usable:
        return []
    # Idle pools cost memory, not time: only workers that really run several threads at once
    # (more than one CPU busy, or more than one runnable thread on average) count.
    parallel = [c for c in i.children
                if (c.cpu_percent or 0.0) > 120.0 or (c.runnable_mean or 0.0) > 1.5]
    if not parallel:
        return []
    workers = len(i.children)
    why = (f"{workers} child processes run {i.children_threads} threads (up to {per_worker} each) beside the "
           f"main process's {i.num_threads}: {total} threads for {plural(usable, 'usable CPU')}, and {len(parallel)} of the "
           "workers ran several threads at once in the window. Each worker's BLAS/OpenMP pool is sized for the "
           "whole machine and competes with the training threads when it computes.")
    main_threads = max(1, usable - workers)
    pools = worker_pools(i.libraries, i.libraries_readable)
    snippet = worker_init_snippet(pools, main_threads, workers)
    named = ", ".join(WORKER_POOL_WORDS[p] for p in ("torch", "blas", "opencv") if p in pools)
    fix = (f"Give each worker one thread per pool with each library's own switch in worker_init_fn ({named}), and the "
           f"training process {main_threads} (the usable CPUs minus the workers)")
    if "opencv" in pools:
        # no variable reaches OpenCV's pool in a forked worker: cv2.getNumThreads() stays at every CPU
        fix += "; no environment variable shrinks OpenCV's pool in a worker, only cv2.setNumThreads does."
    else:
        fix += (f"; as a launch-time alternative: "
                f"{ctx.relaunch(None, main_threads, extra_env={'OPENBLAS_NUM_THREADS': '1'})}")
    return [_finding("warning", f"{workers} workers x up to {per_worker} threads: {total} threads on {plural(usable, 'CPU')}",
                     why, fix, snippet,
                     ctx.evidence(workers=workers, children_threads=i.children_threads, per_worker_max=per_worker,
                                  main_threads=i.num_threads, usable_cpus=usable), lang="python")]


@proc_rule("PROC007", "swapping", category="memory", severity="error",
           title="The process is swapping")
def swapping(ctx: Context) -> list[Finding]:
    """
    What it checks:
        The swap use (VmSwap) of the process and its DataLoader workers, and their rate of major
        page faults (pages read back from disk or swap) over the window, beside the machine's
        swap-ins.

    Why it matters:
        A page fault that goes to disk costs milliseconds, a million times a cache hit. A
        training loop that swaps runs at the disk's speed whatever the CPU does.

    Fix:
        Use less memory (smaller batch, fewer DataLoader workers: each holds a copy of the
        dataset object, prefetch_factor) or add RAM; check other memory users.
    """
    i = ctx.insp
    mem = i.memory
    swap = (mem.total_swap_bytes if mem is not None and mem.total_swap_bytes is not None else i.swap_bytes) or 0
    rate = (mem.major_faults_per_s if mem is not None and mem.major_faults_per_s is not None
            else i.major_faults_per_s) or 0.0
    if swap < 64 * 2**20 and rate < 100:
        return []
    sev = "error" if rate >= 1000 or (i.rss_bytes and swap > i.rss_bytes) else "warning"
    whose = "the process and its workers" if mem is not None and mem.workers else "the process"
    parts = []
    if swap:
        parts.append(f"{swap / 2**20:.0f} MiB of {whose} are swapped out")
    if rate:
        parts.append(f"{rate:.0f} major page faults per second (pages read back from disk)")
    swap_in = mem.system.swap_in_per_s if mem is not None and mem.system is not None else None
    if swap_in:
        parts.append(f"the machine read {swap_in:.0f} pages a second back from swap")
    why = "; ".join(parts) + ". Each major fault stalls a thread for milliseconds."
    fix = ("Reduce memory: a smaller batch with gradient accumulation, fewer DataLoader workers (each keeps a copy "
           "of the dataset object), a lower prefetch_factor, or more RAM; `cpudoctor fit` sizes the batch for the "
           "memory there is. Check `free -h` for other memory users.")
    return [_finding(sev, "The process is swapping", why, fix, "",
                     ctx.evidence(swap_bytes=swap, major_faults_per_s=rate, rss_bytes=i.rss_bytes,
                                  swap_in_per_s=swap_in))]


@proc_rule("PROC008", "starved-threads", category="threads", severity="warning",
           title="Low CPU use with many threads: the job waits (often on data loading)")
def starved_threads(ctx: Context) -> list[Finding]:
    """
    What it checks:
        The CPU the process used over the window against the threads it has and the CPUs it may
        use, and whether its children (DataLoader workers) were busy meanwhile.

    Why it matters:
        A training process with many compute threads that uses a fraction of one CPU is waiting:
        for batches from the DataLoader, for disk or network, or on a lock. More threads will not
        help; the input pipeline is the bottleneck.

    Fix:
        Profile the input pipeline: more DataLoader workers (from the spare CPUs),
        persistent_workers=True, lighter per-sample transforms, a faster data format. Check that
        the training threads are not simply idle between small steps. A job whose sampled time is
        mostly torch.compile (its compiler processes busy) waits for its own compile, not for data:
        EVID024 and EVID003 speak for it.
    """
    i = ctx.insp
    usable = ctx.usable
    if i.cpu_percent is None or usable is None or (i.num_threads or 0) < 4 or i.status != "ok":
        return []
    capacity = min(i.num_threads or 1, usable) * 100
    if capacity < 200 or i.cpu_percent >= 0.3 * capacity:
        return []
    if i.wait_percent is not None and i.wait_percent >= CONTENTION_WAIT:
        return []                      # it wanted CPU and could not get it: PROC013, not waiting on data
    bd = i.time
    if bd is not None and bd.seconds > 0 and (bd.share(COMPILE) >= COMPILING or any(
            p.role in ("compiler", "compile_worker") and p.samples for p in bd.processes)
            and bd.share(COMPILE) >= 0.2):
        return []                      # it waits for its own compile (torch.compile): EVID024/EVID003 say so
    child_cpu = i.children_cpu_percent or 0.0
    if i.children and child_cpu >= 50:
        title = "The training process mostly waits while its DataLoader workers are busy"
        why = (f"The main process used {percent(i.cpu_percent)} CPU (of up to {percent(capacity)} for its {i.num_threads} "
               f"threads on {plural(usable, 'CPU')}) while its {plural(len(i.children), 'worker')} used {percent(child_cpu)}: "
               "it is waiting for batches.")
        fix = ("Make data loading faster: more workers if CPUs are spare, persistent_workers=True, "
               "cheaper transforms, or pre-processed data.")
    else:
        title = f"Only {percent(i.cpu_percent)} CPU with {i.num_threads} threads: the job is waiting"
        why = (f"The process used {percent(i.cpu_percent)} CPU over the window, far below the {percent(capacity)} its "
               f"{i.num_threads} threads could use on {plural(usable, 'CPU')}"
               + (f"; its {len(i.children)} children used {percent(child_cpu)}" if i.children else "")
               + ". It waits on I/O, a lock, a single-threaded step, or data loading in the main process.")
        fix = ("Find the wait: py-spy dump --pid PID shows where each thread is. With num_workers=0, move data "
               "loading to DataLoader workers.")
    return [_finding("warning", title, why, fix, f"py-spy dump --pid {i.pid}",
                     ctx.evidence(cpu_percent=i.cpu_percent, num_threads=i.num_threads, usable_cpus=usable,
                                  children_cpu_percent=i.children_cpu_percent))]


@proc_rule("PROC009", "threads-exceed-usable", category="threads", severity="warning",
           title="The thread variables ask for more threads than the process may use")
def threads_exceed_usable(ctx: Context) -> list[Finding]:
    """
    What it checks:
        OMP_NUM_THREADS, MKL_NUM_THREADS and OPENBLAS_NUM_THREADS in the process's environment
        against its usable CPUs (affinity and cgroup quota).

    Why it matters:
        In a container or under taskset the machine has more CPUs than the job may use; a thread
        count copied from a guide or from nproc on the host oversubscribes the job's CPUs.

    Fix:
        Set the variables to the usable CPU count (minus DataLoader workers).
    """
    usable = ctx.usable
    if usable is None:
        return []
    too_many = {n: ctx.env_int(n) for n in THREAD_VARS if (ctx.env_int(n) or 0) > usable}
    if not too_many:
        return []
    seen = seen_threads(ctx.state)
    if thread_setting(ctx.state) is not None and seen is not None and seen <= usable:
        return []                      # the script sets the count itself and it fits: the variables lose to it
    listed = ", ".join(f"{k}={v}" for k, v in too_many.items())
    why = (f"{listed} but the process may use {plural(usable, 'CPU')}"
           + (f" (cgroup quota {plural(ctx.insp.cpu_quota, 'CPU')})" if ctx.insp.cpu_quota else "")
           + ": the extra threads time-slice on the same CPUs.")
    workers = len(ctx.insp.children)
    cpus, threads = ctx.own_share(max(1, usable - workers) if workers < usable else 1)
    return [_finding("warning", f"{listed} exceeds the {plural(usable, 'usable CPU')}", why,
                     f"Relaunch with {plural(threads, 'thread')}"
                     + (f" on {cpus_text(cpus)}, its share beside the other PyTorch jobs on its CPUs (PROC014)."
                        if cpus else "."), ctx.relaunch(cpus, threads),
                     ctx.evidence(usable_cpus=usable, cpu_quota=ctx.insp.cpu_quota, **too_many))]


@proc_rule("PROC010", "threads-migrate", category="topology", severity="info",
           title="Busy threads keep moving between CPUs")
def threads_migrate(ctx: Context) -> list[Finding]:
    """
    What it checks:
        How often the busy threads were seen on a different CPU from one sample to the next,
        when the process is not pinned (its affinity allows more CPUs than it has busy threads).

    Why it matters:
        A thread that moves loses its warm L1/L2 (and L3 when it crosses a CCX); with OpenMP the
        slowest thread sets the pace, so a few moves per step cost a few percent.

    Fix:
        Bind threads to cores with OMP_PLACES=cores OMP_PROC_BIND=close (plus a CPU set with
        taskset when other jobs share the machine).
    """
    i = ctx.insp
    busy = ctx.busy_threads()
    if len(busy) < 1 or not i.window_s or i.samples < 4:
        return []
    allowed = ctx.allowed()
    if len(allowed) <= len(busy):
        return []
    moves = sum(t.migrations for t in busy)
    per_s = moves / i.window_s / len(busy)
    if per_s < 1.0:
        return []
    cpus = ctx.physical_first(allowed)[: len(busy)]
    why = (f"{len(busy)} busy threads changed CPU {moves} times in {i.window_s:.1f} s (at least: moves between "
           "samples are not seen). Each move cools the thread's caches.")
    return [_finding("info", f"Busy threads migrate ({per_s:.1f} moves per thread per second)", why,
                     "Bind the threads to cores.", ctx.relaunch(cpus or None, len(busy)),
                     ctx.evidence(busy_threads=len(busy), migrations=moves, window_s=i.window_s))]


@proc_rule("PROC011", "myth-env-in-process", category="myth", severity="warning",
           title="The job sets variables from guides that nothing reads")
def myth_env_in_process(ctx: Context) -> list[Finding]:
    """
    What it checks:
        The process's whitelisted environment against the variables popular guides recommend but
        no library reads (TORCH_LOOP_CORE_PINNING and friends; the list and the reason for each
        live in resources/advisor_knowledge.json, shared with the machine rules).

    Why it matters:
        The user believes the job is pinned or tuned while nothing changed; the real problem stays.

    Fix:
        Remove the variable and use the setting that exists (OpenMP binding, taskset/numactl,
        OMP_NUM_THREADS).
    """
    from cpudoctor.knowledge import ADVISOR_KNOWLEDGE

    myths: dict[str, str] = ADVISOR_KNOWLEDGE.data["myth_env"]
    hits = {k: v for k, v in ctx.insp.env.items() if k in myths}
    if not hits:
        return []
    listed = ", ".join(setting(k, v) for k, v in hits.items())
    why = " ".join(f"{k}: {myths[k]}." for k in hits)
    return [_finding("warning", f"{listed}: set for this job, read by nothing", why,
                     "Remove it; pin and size threads with settings that exist.",
                     "unset " + " ".join(hits) + "\n" + ctx.relaunch(None, ctx.usable or 1),
                     ctx.evidence(**hits))]


@proc_rule("PROC012", "kmp-vars-ignored", category="myth", severity="warning",
           title="KMP_* variables set, but only GNU libgomp is loaded")
def kmp_vars_ignored(ctx: Context) -> list[Finding]:
    """
    What it checks:
        KMP_AFFINITY, KMP_BLOCKTIME and other KMP_* variables in the process's environment, while
        the only OpenMP runtime in its memory map is GNU libgomp (what pip's PyTorch ships).

    Why it matters:
        KMP_* settings are read by Intel's libiomp5 and LLVM's libomp only. Intel tuning guides
        recommend them, but with libgomp they do nothing: the threads are neither bound nor tuned.

    Fix:
        Drop the KMP_* variables and restrict the job's CPUs with taskset/numactl. The libgomp
        equivalents are OMP_PLACES=cores and OMP_PROC_BIND=close (GOMP_SPINCOUNT for the wait
        policy), but binding pins the main thread at import torch and DataLoader workers inherit
        its one CPU; or preload libiomp5 on purpose.
    """
    i = ctx.insp
    kmp = {k: v for k, v in i.env.items() if k.startswith("KMP_") and k != "KMP_DUPLICATE_LIB_OK"}
    runtimes = {lib.runtime for lib in i.openmp_runtimes}
    if not kmp or not i.libraries_readable or runtimes != {"gomp"}:
        return []
    listed = ", ".join(f"{k}={v}" for k, v in kmp.items())
    why = (f"{listed} is set, but the process runs GNU libgomp only ({', '.join(lib.file for lib in i.openmp_runtimes)}); "
           "KMP_* variables are read by Intel libiomp5 and LLVM libomp, not by libgomp, so they change nothing.")
    cpus = ctx.physical_first(ctx.allowed())
    threads = len(cpus) or (ctx.usable or 1)
    snippet = "unset " + " ".join(kmp) + "\n" + ctx.relaunch(cpus or None, threads)
    return [_finding("warning", f"{', '.join(kmp)} ignored: this job's OpenMP is libgomp", why,
                     "Drop the KMP_* variables and restrict the CPUs with taskset (below); OMP_PLACES/OMP_PROC_BIND "
                     "are what libgomp reads, but binding pins the main thread and its DataLoader workers to one CPU.",
                     snippet, ctx.evidence(runtimes=sorted(runtimes), **kmp))]


@proc_rule("PROC013", "cpu-contention", category="threads", severity="warning",
           title="Other programs take the CPUs this job wants")
def cpu_contention(ctx: Context) -> list[Finding]:
    """
    What it checks:
        The time the job's threads spent waiting on a run queue (schedstat) while the job itself
        had no more runnable threads than usable CPUs.

    Why it matters:
        Then the waiting is caused by other processes on the same CPUs (another training run, a
        build, a browser). OpenMP regions run at the speed of their most delayed thread, so a
        little contention costs a lot; more threads in the job only make it worse.

    Fix:
        Find the competing processes (ps/top sorted by CPU) and stop them, give them other CPUs,
        or pin this job to CPUs nothing else uses.
    """
    i = ctx.insp
    usable = ctx.usable
    wait = i.wait_percent
    if usable is None or wait is None or i.runnable_mean is None or i.window_s is None:
        return []
    if _self_oversubscribed(ctx):
        return []                      # the job oversubscribes itself: PROC001
    if wait < CONTENTION_WAIT or wait < 0.5 * (i.cpu_percent or 0.0):
        return []
    why = (f"The job's threads waited {wait / 100:.1f} s per second for a CPU, against {(i.cpu_percent or 0) / 100:.1f} s "
           f"per second of running, while it had only {i.runnable_mean:g} runnable threads on average for {usable} "
           "usable CPUs: other processes are running on the same CPUs.")
    return [_finding("warning", f"Other programs compete for this job's CPUs (waited {wait / 100:.1f} s/s)", why,
                     "Find them (the command lists the busiest threads and the CPU each runs on), stop them or "
                     "move them to other CPUs, or pin this job to CPUs nothing else uses.",
                     "ps -eLo pid,tid,psr,pcpu,comm --sort=-pcpu | head -20",
                     ctx.evidence(wait_percent=wait, cpu_percent=i.cpu_percent, runnable_mean=i.runnable_mean,
                                  usable_cpus=usable))]


@proc_rule("PROC014", "competing-training-jobs", category="threads", severity="warning",
           title="Several PyTorch jobs share the CPUs, each sized for all of them")
def competing_training_jobs(ctx: Context) -> list[Finding]:
    """
    What it checks:
        Other busy processes with PyTorch loaded (``libtorch_cpu`` in their memory map, at least a
        tenth of a CPU over the window) outside this job's process tree whose CPUs overlap this job's, and
        how many compute threads all of them ask for together: ``OMP_NUM_THREADS`` where their
        environment says, else every usable CPU (PyTorch's default).

    Why it matters:
        Two or three experiments started side by side each size their OpenMP pool for the whole
        machine. Together they run two or three threads per CPU: every barrier waits for a thread
        that is descheduled, and each job runs slower than half its speed alone. Each job on its
        own looks healthy.

    Fix:
        Split the CPUs: give every job of yours its own set with taskset and an OMP_NUM_THREADS
        that fits it (within its cgroup quota), so the jobs' threads add up to the usable CPUs; with
        more jobs than CPUs, one thread each, or run them one after the other. Jobs of other users
        and CPU Doctor's own lab jobs are counted but never relaunched.
    """
    comp = ctx.competition
    if comp is None:
        return []
    i, usable = ctx.insp, comp.usable
    peers, total, jobs, plan = comp.peers, comp.total, comp.jobs, comp.plan
    listed = "; ".join(f"PID {p.pid} ({percent(p.cpu_percent)} CPU, {plural(p.threads or 0, 'thread')}, OMP_NUM_THREADS="
                       f"{p.omp_num_threads if p.omp_num_threads else ('unset' if p.env_readable else 'unknown')}"
                       f"{_ROLE_WORDS.get(_peer_role(i, p), '')})" for p in peers[:4])
    n_jobs = len(jobs)
    why = (f"{len(peers)} other PyTorch {'process runs' if len(peers) == 1 else 'processes run'} "
           f"on the same CPUs ({listed}). Together the {n_jobs} jobs ask for about {total} compute threads on "
           f"{plural(usable, 'usable CPU')} ({total / usable:.1f} per CPU): PyTorch sizes each pool for the whole "
           "machine, so their OpenMP barriers wait for descheduled threads and every job runs at a fraction of "
           "its speed.")
    commands = {p.pid: job_command(p.pid, p.argv, p.cmdline) for p in peers}
    commands[i.pid] = ctx.job_command()
    lines: list[str] = []
    for share in plan.shares:
        who = f"this job (PID {i.pid})" if share.job.role == "this" else f"PID {share.job.pid}"
        lines.append(f"# {who}, {cpus_text(share.cpus)}, {plural(share.threads, 'thread')}:")
        lines.append(ctx.relaunch(share.cpus, share.threads,
                                  other=None if share.job.role == "this" else commands[share.job.pid]))
    fix = _split_fix(plan, usable, i.cpu_quota)
    notes = [commands[s.job.pid].note("this job" if s.job.role == "this" else f"PID {s.job.pid}")
             for s in plan.shares]
    fix = " ".join([fix, *[n for n in notes if n]])
    own_jobs = [s.job.pid for s in plan.shares]
    return [_finding("warning", f"{n_jobs} PyTorch jobs share {plural(usable, 'CPU')}, asking for {total} threads "
                     "together", why, fix, "\n".join(lines),
                     ctx.evidence(usable_cpus=usable, jobs=n_jobs, threads_asked=total,
                                  peers=[p.pid for p in peers], own_jobs=own_jobs,
                                  other_users_jobs=[j.pid for j in plan.staying if j.role == "other user"],
                                  cpudoctor_jobs=[j.pid for j in plan.staying if j.role == "cpu doctor"],
                                  relaunch=[{"pid": s.job.pid, "cpus": format_cpulist(s.cpus), "threads": s.threads,
                                             "hidden_arguments": commands[s.job.pid].hidden}
                                            for s in plan.shares]))]


@dataclass
class Competition:
    """Several PyTorch jobs on this job's CPUs asking for more threads than there are (PROC014's facts and plan)."""

    usable: int
    peers: list[PeerJob]
    total: int                     # compute threads all the jobs ask for together
    jobs: list[Job]                # this job first
    plan: SplitPlan


def _competition(ctx: Context) -> Competition | None:
    """PROC014's question: only a job that runs PyTorch competes as one (a job that sleeps, or a tool, does not),
    with busy PyTorch processes (the probe counts only processes that run libtorch_cpu as code, not a profiler
    that maps it to read its symbols) whose threads and this job's exceed the usable CPUs."""
    i, usable = ctx.insp, ctx.usable
    peers = [p for p in i.peers if p.shared_cpus]
    if not peers or usable is None or not ctx.runs_torch():
        return None
    own = ctx.env_int("OMP_NUM_THREADS") or usable
    demand = {i.pid: own}
    for p in peers:
        demand[p.pid] = p.omp_num_threads or min(len(p.affinity) or usable, usable)
    total = sum(demand.values())
    if total <= usable:
        return None
    jobs = [Job(i.pid, "this", ctx.allowed(), own, quota_threads(i.cpu_quota))]
    jobs += [Job(p.pid, _peer_role(i, p), sorted(p.affinity or p.shared_cpus), demand[p.pid]) for p in peers]
    return Competition(usable, peers, total, jobs, plan_split(jobs, ctx.physical_first))


_ROLE_WORDS = {"other user": ", another user's", "cpu doctor": ", a CPU Doctor lab job",
               "unknown owner": ", whose owner could not be read"}


def _peer_role(insp: Inspection, peer) -> str:
    """yours | other user | unknown owner | cpu doctor: whose job a peer is, from facts the inspector read. Only
    the inspected job's owner's jobs are relaunched: one whose owner could not be read is not."""
    if peer.cpudoctor_child:
        return "cpu doctor"
    if peer.uid is None or insp.uid is None:
        return "unknown owner"
    return "other user" if peer.uid != insp.uid else "yours"


def _split_fix(plan: SplitPlan, usable: int, quota: float | None) -> str:
    """The plan in words, made from the same shares as the commands."""
    mine = len(plan.shares)
    if plan.crowded:
        text = (f"{mine} jobs of yours and {plural(len(plan.pool), 'CPU')} to run them on: give each job 1 thread "
                f"(up to {plan.per_cpu()} jobs take turns on one CPU, as below), or better run them one after the "
                "other.")
    elif mine == 1:
        s = plan.shares[0]
        text = f"Give this job {cpus_text(s.cpus)} and {plural(s.threads, 'thread')} (taskset + OMP_NUM_THREADS)"
        text += (", its fair share beside the jobs that stay." if plan.fair_share is not None else ".")
    else:
        same = plan.uniform
        if same is not None:
            cpus = "its own CPU" if len(same.cpus) == 1 else f"its own {len(same.cpus)} CPUs"
            text = (f"Give each of your {mine} jobs {cpus} and {plural(same.threads, 'thread')} (taskset + "
                    "OMP_NUM_THREADS), or run them one after the other.")
        else:
            text = ("Give each of your jobs its own CPUs and as many threads as its share allows (taskset + "
                    "OMP_NUM_THREADS, per job below), or run them one after the other.")
    this = plan.shares[0]
    if quota and quota < len(this.cpus):
        text += (f" This job's cgroup quota ({quota:g} CPUs) caps it below its "
                 f"{'CPU' if len(this.cpus) == 1 else f'{len(this.cpus)} CPUs'} whatever the split: "
                 f"{plural(this.threads, 'thread')} is all it can use.")
    if plan.staying:
        others = [j for j in plan.staying if j.role == "other user"]
        unknown = [j for j in plan.staying if j.role == "unknown owner"]
        helpers = [j for j in plan.staying if j.role == "cpu doctor"]
        parts = []
        if others:
            parts.append(f"PID {', '.join(str(j.pid) for j in others)} belong{'s' if len(others) == 1 else ''} to "
                         "another user: ask its owner, or wait")
        if unknown:
            parts.append(f"PID {', '.join(str(j.pid) for j in unknown)}: whose {'it is' if len(unknown) == 1 else 'they are'} "
                         "could not be read")
        if helpers:
            parts.append(f"PID {', '.join(str(j.pid) for j in helpers)} "
                         f"{'is a CPU Doctor lab job' if len(helpers) == 1 else 'are CPU Doctor lab jobs'}: let "
                         f"{'it' if len(helpers) == 1 else 'them'} finish or cancel {'it' if len(helpers) == 1 else 'them'} "
                         "in CPU Doctor")
        text += " " + "; ".join(parts) + " (no relaunch for them here)."
        if plan.avoided:
            text += f" Your jobs keep off {cpus_text(plan.avoided)}, which they use."
    return text


# --- running them ---------------------------------------------------------------------------------


def run_process_rules(insp: Inspection, topo: Topology | None = None, only: set[str] | None = None,
                      *, strict: bool = False, state: JobState | None = None) -> list[Finding]:
    """All (or ``only`` these codes/symbols/categories) process rules over one inspection, worst first; ``state``:
    the job's own state from its probe (``run``), which says where the script sets what a fix would change."""
    ctx = Context(insp, topo, state)
    found = PROCESS_RULES.run(ctx, only, strict=strict)
    hidden = ctx.job_command()
    setting = thread_setting(state)
    for f in found:
        # A relaunch of this job with hidden arguments: the fix says which, and how to supply them.
        if hidden.hidden and f.code != "PROC014" and any(v in f.snippet or v in f.fix for v in hidden.variables):
            f.fix = f"{f.fix} {hidden.note('this job')}".strip()
        # A relaunch while the script sets the thread count itself: the command sets no count (the line would win
        # over it), and the fix says to set the count there
        wanted = next((n for line, n in ctx.counts_left.items() if line in f.snippet), None)
        if setting is not None and f.snippet_lang == "bash" and wanted is not None:
            f.fix = (f"{f.fix} The script sets its own thread count ({setting.where_words()}), which would win over "
                     f"OMP_NUM_THREADS: set {wanted} at that line.").strip()
    return sorted(found, key=lambda f: (-SEVERITY_RANK[f.severity], f.code))
