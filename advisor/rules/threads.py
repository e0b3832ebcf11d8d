"""Thread counts: set at all, within the CPUs the process may use, one per physical core."""

from __future__ import annotations

from cpudoctor.advisor import machine, measured, snippets
from cpudoctor.advisor.engine import Facts, rule
from cpudoctor.kits.cpulist import format_cpulist
from cpudoctor.kits.plural import plural
from cpudoctor.model import Finding, Report


def _set_counts(f: Facts) -> dict[str, int]:
    """Thread-count variables that are set (and parse as numbers)."""
    out = {}
    for name in machine.THREAD_VARS:
        n = machine.env_int(f, name)
        if n is not None:
            out[name] = n
    return out


def _limit_text(f: Facts, usable: int) -> str:
    quota = f.get("topology.affinity.cpu_quota")
    allowed = f.get("topology.affinity.allowed_cpus")
    logical = f.get("topology.logical_cpus")
    parts = []
    if allowed and logical and len(allowed) < logical:
        parts.append(f"the affinity/cpuset allows {len(allowed)} of {logical} CPUs")
    if quota:
        parts.append(f"the cgroup CPU quota is {plural(quota, 'CPU')}")
    return plural(usable, "usable CPU") + (f" ({'; '.join(parts)})" if parts else "")


@rule("THR001", "thread-env-unset", category="threads", severity="warning",
      title="Thread counts are left to each library's default")
def thread_env_unset(report: Report) -> list[Finding]:
    """What it checks:
        Whether ``OMP_NUM_THREADS`` is set in the environment the report was made in.

    Why it matters:
        Without it every library guesses on its own: PyTorch takes the number of physical cores of
        the whole machine (ignoring cgroup quotas), numpy's OpenBLAS takes every logical CPU, and
        each DataLoader worker process starts its own pools. An explicit count makes runs
        reproducible and keeps pools from fighting.

        When the lab measured PyTorch's default against other counts (the thread sweep, or training
        runs at several ``--threads``), the measurement decides: a passed check when the default is
        what it measured fastest or no count beat it beyond the spreads, and the measured gain (which
        also ranks the finding) when another count was faster beyond both spreads. Without a
        measurement the best count is not known: it depends on the model's size (a tiny model ran 17x
        faster on 1 thread than on 2 here), so the finding says so, and is a passed check when
        PyTorch already takes the cores' count.

    Fix:
        Export ``OMP_NUM_THREADS`` (and ``MKL_NUM_THREADS``) to the usable physical cores — or to
        the thread sweep's best count — before Python starts.
    """
    f = Facts(report)
    if not machine.env_known(f):
        return []
    value = machine.env(f, "OMP_NUM_THREADS")
    if value is not None:
        return [f.finding("ok", f"OMP_NUM_THREADS is set ({value})")]
    measured_finding = _thread_env_measured(report, f)
    if measured_finding is not None:
        return [measured_finding]
    plan = snippets.thread_plan(report)
    torch_default = f.get("software.torch.intra_op_threads")
    if measured.measured_by(report) and torch_default:
        # the sweep measured, and no count beat the others beyond their spreads: the measurement, not a rule
        return [f.finding("ok", f"OMP_NUM_THREADS is not set, and {measured.measured_by(report)} measured no count "
                                f"clearly faster than PyTorch's default ({plural(torch_default, 'thread')}): their "
                                "spreads overlap")]
    if isinstance(torch_default, int) and torch_default == plan.threads and not plan.cpus:
        # nothing measured, and PyTorch already takes what the cores give: no advice to rank above the others
        return [f.finding("ok", f"OMP_NUM_THREADS is not set: PyTorch takes {plural(torch_default, 'thread')} (this "
                                f"machine's {plan.source}); the best count depends on the model (`cpudoctor bench "
                                "sweep` measures it)")]
    why = "OMP_NUM_THREADS is not set, so each library picks its own thread count"
    why += f": PyTorch chose {torch_default}." if torch_default else "."
    why += f" This machine's cores give {plan.threads} ({plan.source}). " + DEPENDS_ON_MODEL
    fix = f"Set the thread count to {plan.threads} before Python starts as a start"
    fix += f", launched pinned to CPUs {format_cpulist(plan.cpus)} ({plan.variant})" if plan.cpus else ""
    fix += ", then measure your model: `cpudoctor bench sweep` (or `cpudoctor run` at two counts)."
    return [f.finding("info", "OMP_NUM_THREADS is not set: the best count depends on the model", why=why, fix=fix,
                      snippet=snippets.shell_exports(report, "bash"))]


# What no rule of thumb knows: the thread count a model runs fastest at (measured on a 2-CPU VM: a tiny model 17x
# faster on 1 thread than on 2, a ResNet faster on every core).
DEPENDS_ON_MODEL = ("The best count depends on the model's size: a small model (a few layers, small batches) often "
                    "runs fastest on 1 thread, where more threads only wait for each other; a large one on every "
                    "physical core. Nothing here measured yours.")


# A measured gain from this factor on is a warning: the job trains that much slower than it could.
MEASURED_WARNING = 1.25


def _thread_env_measured(report: Report, f: Facts) -> Finding | None:
    """THR001 from the lab's measurement of PyTorch's default (the sweep, else training runs at several thread
    counts), when there is one."""
    choice = measured.sweep_choice(report, f)
    default = measured.default_point(report)
    torch_default = f.get("software.torch.intra_op_threads")
    if default is None and choice is not None and choice.default_samples_per_s and torch_default:
        # A saved recommendation carries the default's figure without the sweep's points.
        rate = float(choice.default_samples_per_s)
        default = measured.Point("PyTorch default", "default", int(torch_default), None, rate, rate, rate)
    if choice is None or default is None:
        return None
    pinned_elsewhere = bool(choice.cpus) and sorted(choice.cpus) != sorted(default.cpus or [])
    if choice.threads == default.threads and not pinned_elsewhere:
        return f.finding("ok", f"OMP_NUM_THREADS is not set, and PyTorch's default ({plural(default.threads, 'thread')}) "
                               f"is what {measured.measured_by(report) or 'the thread sweep'} measured fastest here")
    rate = choice.samples_per_s or 0.0
    gain = rate / default.median if rate and default.median else None
    if gain is None:
        return None
    f.record("measured_effect", round(gain, 2))
    conclusive = report.recommendation is not None
    where = f" on CPUs {format_cpulist(choice.cpus)}" if pinned_elsewhere and choice.cpus else ""
    title = (f"OMP_NUM_THREADS is not set: {plural(choice.threads, 'thread')}{where} measured {gain:.1f}x as fast as "
             f"PyTorch's default {default.threads}" if gain >= 1.05 else
             f"OMP_NUM_THREADS is not set: {plural(choice.threads, 'thread')}{where} measured as fast as PyTorch's "
             f"default {default.threads}, with fewer threads")
    named = measured.named_variant(choice)
    run = measured.latest_sweep(report)
    points = measured.sweep_points(run) if run else measured.train_points(report)
    best = next((p for p in points if p.threads == choice.threads and abs(p.median - rate) < 0.06 * rate), None)
    spread = f" ({best.lo:,.0f}-{best.hi:,.0f})" if best is not None and best.hi > best.lo else ""
    who = measured.measured_by(report) or "the thread sweep"
    why = (f"OMP_NUM_THREADS is not set, so PyTorch runs {plural(default.threads, 'thread')}. {who[0].upper() + who[1:]} "
           f"measured {rate:,.0f} samples/s{spread} with {plural(choice.threads, 'thread')}"
           + (f" ({named})" if named else "") + f" against {default.median:,.0f}"
           + (f" ({default.lo:,.0f}-{default.hi:,.0f})" if default.hi > default.lo else "")
           + " with PyTorch's default.")
    if not conclusive and run is not None:
        why += (" The sweep's verdict was inconclusive (others used the CPU, or time ran out), but this difference "
                "lies beyond both settings' spreads.")
    elif not conclusive:
        why += (" Other programs may have used the CPU during those runs, but this difference lies beyond both "
                "settings' spreads.")
    plan = snippets.thread_plan(report)
    fix = f"Set the thread count to {plan.threads}, as measured, before Python starts"
    fix += f", and launch the job pinned to CPUs {format_cpulist(plan.cpus)}." if plan.cpus else "."
    return f.finding("warning" if gain >= MEASURED_WARNING else "info", title, why=why, fix=fix,
                     snippet=snippets.shell_exports(report, "bash"))


@rule("THR002", "threads-above-usable-cpus", category="threads", severity="warning",
      title="More threads than CPUs the process may use")
def threads_above_usable(report: Report) -> list[Finding]:
    """What it checks:
        Each thread-count variable (``OMP_NUM_THREADS``, ``MKL_NUM_THREADS``,
        ``OPENBLAS_NUM_THREADS``) and PyTorch's actual intra-op thread count against the usable
        CPUs: the affinity mask / cgroup cpuset and the cgroup CPU quota (``cpu.max``).

    Why it matters:
        OpenMP threads spin and then wait at every barrier for the slowest one. With more threads
        than CPUs, some threads wait for a time slice while the rest spin: in a container limited
        to 4 CPUs, 64 threads make every parallel region several times slower, not faster.
        PyTorch's default ignores cgroup quotas, so containers hit this by default.

    Fix:
        Set the thread counts to the usable CPUs (better: the usable physical cores).
    """
    f = Facts(report)
    usable = machine.usable_cpus(f)
    if not usable:
        return []
    counts = _set_counts(f)
    torch_threads = f.get("software.torch.intra_op_threads")
    if torch_threads:
        counts.setdefault("torch intra-op threads", int(torch_threads))
    if not counts:
        return []
    over = {k: v for k, v in counts.items() if v > usable}
    if not over:
        return [f.finding("ok", f"Thread counts fit the {plural(usable, 'usable CPU')} ({max(counts.values())} at most)")]
    worst = max(over.values())
    plan = snippets.thread_plan(report)
    return [f.finding(
        "warning", f"{plural(worst, 'thread')} on {plural(usable, 'usable CPU')}",
        why=(f"{', '.join(f'{k}={v}' for k, v in over.items())} but this process may use {_limit_text(f, usable)}. "
             f"That is {worst / usable:.1f}x oversubscribed: threads wait for time slices at every OpenMP barrier."),
        fix=f"Lower the thread counts to {plan.threads} ({plan.source}).",
        snippet=snippets.shell_exports(report, "bash"))]


@rule("THR003", "threads-count-smt", category="threads", severity="warning",
      title="Thread count includes SMT siblings")
def threads_count_smt(report: Report) -> list[Finding]:
    """What it checks:
        Whether the thread count (``OMP_NUM_THREADS`` or PyTorch's intra-op threads) is above the
        number of usable physical cores on a CPU with SMT (2 hardware threads per core), i.e. it
        counts logical CPUs.

    Why it matters:
        Two threads on one core share its vector units, caches and load ports. GEMM and
        convolution kernels already keep the FMA units busy with one thread, so the sibling adds
        contention, not FLOP/s; training is rarely faster and often slower than with one thread
        per core, and the extra threads make every barrier slower. A thread sweep that measured
        more threads as faster on this machine overrides this rule.

    Fix:
        Use one thread per physical core (the thread sweep measures both), and leave the SMT
        siblings to DataLoader workers.
    """
    f = Facts(report)
    smt = machine.smt_threads(f)
    cores = machine.usable_physical_cores(f)
    usable = machine.usable_cpus(f)
    if not smt or not cores or not usable:
        return []
    count = machine.env_int(f, "OMP_NUM_THREADS")
    source = "OMP_NUM_THREADS"
    if count is None:
        count = f.get("software.torch.intra_op_threads")
        source = "PyTorch's intra-op thread count"
    if not count:
        return []
    if smt < 2:
        return [f.finding("ok", "No SMT: one thread per core already")]
    if count <= cores:
        return [f.finding("ok", f"{source} = {count} stays within the {plural(cores, 'physical core')}")]
    rec = measured.sweep_choice(report, f)
    if rec is not None and rec.threads and rec.threads >= count:
        return [f.finding("ok", f"{count} threads: the thread sweep measured {rec.threads} as best here")]
    if count > usable:
        return []  # THR002 reports this, with the bigger problem first
    return [f.finding(
        "warning", f"{count} threads on {cores} physical cores: SMT siblings are counted",
        why=(f"{source} is {count}, but the usable CPUs hold only {cores} physical cores ({smt} hardware threads each). "
             f"{count - cores} threads share a core's FMA units with another compute thread."),
        fix=f"Use {cores} threads (one per physical core) and give the siblings to DataLoader workers.",
        snippet=snippets.shell_exports(report, "bash"))]


@rule("THR004", "interop-threads-above-usable", category="threads", severity="warning",
      title="PyTorch's inter-op pool is sized for the host, not for the CPUs the process may use")
def interop_above_usable(report: Report) -> list[Finding]:
    """What it checks:
        PyTorch's inter-op thread count (``torch.get_num_interop_threads()`` in the child) against
        the usable CPUs (affinity, cgroup cpuset and quota).

    Why it matters:
        The inter-op pool runs independent operators side by side (TorchScript ``fork``, some
        autograd and data-parallel paths), and each of its threads opens its own intra-op OpenMP
        team. Many PyTorch releases size it from the host's CPU count
        (``std::thread::hardware_concurrency``), not from ``taskset``, a cpuset or a container
        quota: under ``taskset -c 0-3`` on a 64-CPU host it has 64 threads, and when it is used the
        job runs inter-op x intra-op threads on 4 CPUs.

    Fix:
        Call ``torch.set_num_interop_threads(n)`` once, before any parallel work, with n at most
        the usable CPUs (1 is right for ordinary training loops). There is no environment
        variable for it.
    """
    f = Facts(report)
    interop = f.get("software.torch.inter_op_threads")
    usable = machine.usable_cpus(f)
    if not interop or not usable:
        return []
    if interop <= usable:
        return [f.finding("ok", f"PyTorch's inter-op pool ({interop}) fits the {plural(usable, 'usable CPU')}")]
    plan = snippets.thread_plan(report)
    n = max(1, min(plan.interop, usable))
    logical = f.get("topology.logical_cpus")
    host = f" — the host's {logical} CPUs" if logical and logical == interop else ""
    return [f.finding(
        "warning", f"PyTorch's inter-op pool has {plural(interop, 'thread')} on {plural(usable, 'usable CPU')}",
        why=(f"torch.get_num_interop_threads() is {interop}{host}, but this process may use {_limit_text(f, usable)}. "
             "This PyTorch sizes the inter-op pool from the host, not from the affinity, cpuset or quota; each of its "
             "threads opens its own intra-op team when it runs, so parallel operators oversubscribe the CPUs."),
        fix=(f"Call torch.set_num_interop_threads({n}) once at the start of the script, before any parallel work "
             "(there is no environment variable for it)."),
        snippet=(f"import torch\n\ntorch.set_num_interop_threads({n})  # before any parallel work; once per process\n"
                 f"torch.set_num_threads({plan.threads})"),
        snippet_lang="python")]


def _worker_pool_users(f: Facts) -> list[str]:
    """Installed packages whose transforms run thread pools inside DataLoader workers (the evidence THR005 needs)."""
    known = machine.knowledge()["worker_pool_packages"]["packages"]
    found = []
    for pkg in f.get("software.packages", record=False) or []:
        name = pkg.name.lower().replace("_", "-")
        if name in known and name not in found:
            found.append(name)
    f.record("software.packages", found)
    return found


# Loaded pools that a forked DataLoader worker inherits with all their threads.
_WORKER_POOL_LIBS = {"openblas": "OpenBLAS", "mkl": "MKL", "blis": "BLIS"}


@rule("THR005", "worker-library-pools", category="threads", severity="info",
      title="Each DataLoader worker inherits BLAS thread pools sized for every CPU")
def worker_library_pools(report: Report) -> list[Finding]:
    """What it checks:
        The thread pools numpy's BLAS (OpenBLAS, MKL, BLIS) keeps, as the probe children measured
        them through the libraries' own APIs (``openblas_get_num_threads``,
        ``MKL_Get_Max_Threads``), when PyTorch is installed and the pools have more than one
        thread, and whether the environment has a package whose transforms run thread pools in
        the workers (OpenCV, which albumentations and imgaug bring along: ``worker_pool_packages`` in
        resources/advisor_knowledge.json). numpy alone is no such evidence: its BLAS pool only
        wakes up in a worker whose transforms call BLAS.

    Why it matters:
        A DataLoader worker is a fork of the training process: it inherits these pools, and every
        numpy, scipy or OpenCV call in a transform starts a full set of threads in each worker.
        With 8 workers on 16 CPUs that is 128 BLAS threads beside the training threads.
        ``OMP_NUM_THREADS`` set in the shell does not shrink pools that already exist in the fork.

    Fix:
        A ``worker_init_fn`` that gives each worker one thread with each library's own switch:
        ``torch.set_num_threads(1)``, ``threadpool_limits(1)`` (OpenBLAS/MKL/BLIS, through their C
        APIs) and ``cv2.setNumThreads(1)`` for OpenCV.
    """
    f = Facts(report)
    if not machine.torch_installed(f):
        return []
    libs = f.get("software.loaded_libs", record=False) or []
    pools = {_WORKER_POOL_LIBS[lib.internal_api]: int(lib.num_threads) for lib in libs
             if lib.user_api == "blas" and lib.internal_api in _WORKER_POOL_LIBS and lib.num_threads}
    f.record("software.loaded_libs", {k: v for k, v in pools.items()})
    big = {k: v for k, v in pools.items() if v > 1}
    if not big:
        return [f.finding("ok", "numpy's BLAS runs one thread: DataLoader workers inherit no big pool")] if pools else []
    users = _worker_pool_users(f)
    if not users:
        return [f.finding("ok", "No installed transform library runs thread pools in DataLoader workers")]
    plan = snippets.thread_plan(report)
    workers = max(plan.workers, 1)
    listed = ", ".join(f"{k} {plural(v, 'thread')}" for k, v in big.items())
    known = machine.knowledge()["worker_pool_packages"]["packages"]
    evidence = "; ".join(f"{name}: {known[name]}" for name in users)
    return [f.finding(
        "info", f"DataLoader workers inherit numpy's BLAS pool ({listed}), and {', '.join(users)} is installed",
        why=(f"numpy's BLAS keeps its own pool ({listed}), and this environment has {', '.join(users)} ({evidence}). "
             f"Each DataLoader worker is a fork of the training process and inherits the pools: {plural(workers, 'worker')} "
             f"doing numpy or OpenCV work in transforms start up to {workers * max(big.values())} threads beside the "
             f"{plural(plan.threads, 'compute thread')}. "
             "OMP_NUM_THREADS in the shell does not reach a pool that already exists in the fork."),
        fix=("Give every worker one thread per pool with each library's own switch in worker_init_fn: "
             "torch.set_num_threads(1), threadpool_limits(1) for the BLAS, cv2.setNumThreads(1) if transforms use OpenCV."),
        snippet=snippets.worker_init_snippet(["torch", "blas", "opencv"], plan.threads, workers),
        snippet_lang="python")]
