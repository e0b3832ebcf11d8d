"""Native thread pools: OpenMP runtimes and BLAS libraries loaded side by side."""

from __future__ import annotations

import re

from cpudoctor.advisor import machine
from cpudoctor.advisor.engine import Facts, rule
from cpudoctor.report import Finding, Report

# File-name prefixes of the three OpenMP runtimes (conda/pip may add a hash suffix).
_OPENMP_RUNTIMES: tuple[tuple[str, str], ...] = (
    (r"^libgomp", "GNU libgomp"),
    (r"^libiomp5", "Intel libiomp5"),
    (r"^libomp", "LLVM libomp"),
    (r"^vcomp", "MSVC vcomp"),
)


def _runtime(lib) -> str | None:
    name = (lib.library or "").lower()
    for pattern, label in _OPENMP_RUNTIMES:
        if re.match(pattern, name):
            return label
    return None


@rule("BLAS001", "multiple-openmp-runtimes", category="blas", severity="warning",
      title="Several OpenMP runtimes loaded in one process")
def multiple_openmp_runtimes(report: Report) -> list[Finding]:
    """What it checks:
        The native libraries loaded by a child that imports torch and numpy (threadpoolctl's view,
        ``software.loaded_libs``): more than one OpenMP runtime among GNU libgomp, Intel libiomp5
        and LLVM libomp.

    Why it matters:
        Each runtime keeps its own thread pool and none knows the others: with libgomp (PyTorch
        pip wheels) and libiomp5 (conda MKL) both active, a parallel region in each starts a full
        set of threads, so the machine runs twice as many threads as cores. Two copies of libiomp5
        abort with "OMP: Error #15"; mixed runtimes can deadlock after ``fork``.

    Fix:
        Install packages from one ecosystem (all pip, or all conda-forge) so one runtime is loaded,
        and set ``OMP_NUM_THREADS`` so that even two pools fit. Never "fix" Error #15 with
        ``KMP_DUPLICATE_LIB_OK=TRUE``: it hides the duplicate, which can give wrong results.
    """
    f = Facts(report)
    libs = f.get("software.loaded_libs", record=False)
    if not libs:
        return []
    runtimes: dict[str, list[str]] = {}
    for lib in libs:
        if lib.user_api == "openmp" or _runtime(lib):
            label = _runtime(lib) or (lib.internal_api or "OpenMP")
            runtimes.setdefault(label, []).append(lib.library or "?")
    f.record("software.loaded_libs", [f"{lib.library} ({lib.user_api}, {lib.num_threads} threads)" for lib in libs])
    if len(runtimes) <= 1:
        if runtimes:
            return [f.finding("ok", f"One OpenMP runtime loaded ({next(iter(runtimes))})")]
        return []
    listed = "; ".join(f"{k}: {', '.join(v)}" for k, v in runtimes.items())
    dup = machine.env(f, "KMP_DUPLICATE_LIB_OK")
    why = (f"{len(runtimes)} OpenMP runtimes are loaded together ({listed}). Each has its own thread pool, so "
           "parallel regions of torch and of numpy/MKL oversubscribe the cores; mixed runtimes can also hang after fork.")
    if dup:
        why += f" KMP_DUPLICATE_LIB_OK={dup} is set, which hides duplicate-runtime errors instead of fixing them."
    return [f.finding(
        "warning", f"{len(runtimes)} OpenMP runtimes in one process",
        why=why,
        fix="Install torch, numpy and MKL from one ecosystem (all pip or all conda-forge); keep OMP_NUM_THREADS set.",
        snippet=("python -m pip list 2>/dev/null | grep -i -E 'intel-openmp|mkl|torch|numpy'\n"
                 "conda list 2>/dev/null | grep -i -E 'intel-openmp|llvm-openmp|_openmp_mutex|mkl'"))]


@rule("BLAS002", "blas-thread-pools-fight", category="blas", severity="warning",
      title="OpenBLAS, MKL and OpenMP thread pools add up to more than the CPUs")
def blas_pools_fight(report: Report) -> list[Finding]:
    """What it checks:
        The thread pools of the loaded libraries: two different BLAS libraries (e.g. numpy's
        OpenBLAS and MKL) each with more than one thread, beside the OpenMP pool, whose sizes
        add up to more than the usable CPUs.

    Why it matters:
        numpy's OpenBLAS uses pthreads of its own, sized to every logical CPU, MKL another pool,
        and PyTorch's OpenMP a third. When numpy/scipy work (augmentation, DataLoader workers) runs
        while torch computes, the pools spin on the same cores and each runs at a fraction of its
        speed.

    Fix:
        Give each pool a share: ``OPENBLAS_NUM_THREADS=1`` in data-loading processes (or
        ``threadpoolctl.threadpool_limits(1, "blas")`` in ``worker_init_fn``), and
        ``OMP_NUM_THREADS``/``MKL_NUM_THREADS`` for the compute threads.
    """
    f = Facts(report)
    libs = f.get("software.loaded_libs", record=False)
    usable = machine.usable_cpus(f)
    if not libs or not usable:
        return []
    pools: dict[str, int] = {}
    blas_kinds: set[str] = set()
    for lib in libs:
        if lib.num_threads and lib.num_threads > 1:
            key = f"{lib.internal_api or lib.user_api or '?'} ({lib.library or '?'})"
            pools[key] = max(pools.get(key, 0), int(lib.num_threads))
            if lib.user_api == "blas":
                blas_kinds.add(lib.internal_api or lib.library or "?")
    f.record("software.loaded_libs", {k: v for k, v in pools.items()})
    total = sum(pools.values())
    # One BLAS beside torch's OpenMP pool is every default install: they rarely run
    # at the same moment. Two BLAS libraries (OpenBLAS and MKL) each with a full
    # pool, on top of OpenMP, is the fight this rule is about.
    if len(blas_kinds) < 2 or total <= usable:
        return [f.finding("ok", "BLAS and OpenMP thread pools do not compete")] if pools else []
    listed = ", ".join(f"{k}: {v}" for k, v in pools.items())
    return [f.finding(
        "warning", f"{len(pools)} thread pools with {total} threads on {usable} usable CPUs",
        why=(f"Loaded pools: {listed}. Together {total} threads on {usable} CPUs ({total / usable:.1f}x); when numpy "
             "work and torch work overlap (augmentation, DataLoader workers) they spin on the same cores."),
        fix="Give numpy's BLAS one thread in data-loading processes and the compute threads to torch.",
        snippet=("import threadpoolctl\n\n"
                 "def worker_init_fn(worker_id):\n"
                 "    threadpoolctl.threadpool_limits(1, user_api=\"blas\")  # numpy in workers: 1 thread\n\n"
                 "loader = torch.utils.data.DataLoader(dataset, num_workers=4, worker_init_fn=worker_init_fn)"),
        snippet_lang="python")]
