"""Native thread pools: OpenMP runtimes and BLAS libraries loaded side by side."""

from __future__ import annotations

import re

from cpudoctor.advisor import machine, snippets
from cpudoctor.advisor.engine import Facts, rule
from cpudoctor.kits.plural import plural
from cpudoctor.model import Finding, Report

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


def _openmp_files(f: Facts) -> dict[str, list[str]]:
    """OpenMP runtime label -> its files mapped in one of the checks' children, one entry per copy.

    Each child lists one entry per distinct file it mapped, so two copies with
    the same name from different folders appear twice; the child that saw the
    most copies of a runtime speaks for it.
    """
    sources: list[list[str]] = []
    libs = f.get("software.loaded_libs", record=False) or []
    sources.append([lib.library for lib in libs if (lib.user_api == "openmp" or _runtime(lib)) and lib.library])
    for order in f.get("software.import_orders", record=False) or []:
        sources.append(list(order.openmp_libs))
        # The child died loading the second copy, before it could list it; the runtime named both.
        m = _ERROR_15.search(order.openmp_error or "")
        if m:
            sources.append([m.group(1), m.group(2)])
    runtimes: dict[str, list[str]] = {}
    for files in sources:
        per_label: dict[str, list[str]] = {}
        for name in files:
            per_label.setdefault(_runtime_name(name) or "OpenMP", []).append(name)
        for label, names in per_label.items():
            if len(names) > len(runtimes.get(label, [])):
                runtimes[label] = names
    return runtimes


# "OMP: Error #15: Initializing libiomp5.so, but found libiomp5.so already initialized."
_ERROR_15 = re.compile(r"Initializing (\S+?),? but found (\S+?) already initialized")


def _listed(names: list[str]) -> str:
    """``libiomp5.so (2 copies)`` for repeated names, else the names."""
    out = []
    for name in dict.fromkeys(names):
        n = names.count(name)
        out.append(f"{name} ({n} copies from different folders)" if n > 1 else name)
    return ", ".join(out)


def _runtime_name(file_name: str) -> str | None:
    for pattern, label in _OPENMP_RUNTIMES:
        if re.match(pattern, file_name.lower()):
            return label
    return None


@rule("BLAS001", "multiple-openmp-runtimes", category="blas", severity="error",
      title="Several OpenMP runtimes, or several copies of one, loaded in one process")
def multiple_openmp_runtimes(report: Report) -> list[Finding]:
    """What it checks:
        The OpenMP runtime files mapped in the children that import torch and numpy (in both
        orders): more than one runtime among GNU libgomp, Intel libiomp5 and LLVM libomp, or two
        copies of the same runtime shipped by two packages (``libgomp.so.1`` beside
        ``libgomp-a34b3233.so.1``).

    Why it matters:
        Each runtime, and each copy, keeps its own thread pool and none knows the others: with
        libgomp (PyTorch pip wheels) and libiomp5 (conda MKL) both active, a parallel region in
        each starts a full set of threads, so the machine runs twice as many threads as cores.
        Two copies of libiomp5 abort with "OMP: Error #15"; mixed runtimes can deadlock after
        ``fork``.

    Fix:
        Install packages from one ecosystem (all pip, or all conda-forge) so one runtime is loaded
        once, and set ``OMP_NUM_THREADS`` so that even two pools fit. Never "fix" Error #15 with
        ``KMP_DUPLICATE_LIB_OK=TRUE``: it hides the duplicate, which can give wrong results.
    """
    f = Facts(report)
    runtimes = _openmp_files(f)
    if not runtimes:
        return []
    f.record("software.openmp_runtimes", {k: v for k, v in runtimes.items()})
    copies = {k: v for k, v in runtimes.items() if len(v) > 1}
    if len(runtimes) == 1 and not copies:
        label, files = next(iter(runtimes.items()))
        return [f.finding("ok", f"One OpenMP runtime loaded ({label}: {files[0]})")]
    listed = "; ".join(f"{k}: {_listed(v)}" for k, v in runtimes.items())
    dup = machine.env(f, "KMP_DUPLICATE_LIB_OK")
    if len(runtimes) > 1:
        title = f"{len(runtimes)} OpenMP runtimes in one process"
        why = (f"{len(runtimes)} OpenMP runtimes are loaded together ({listed}). Each has its own thread pool, so "
               "parallel regions of torch and of numpy/MKL oversubscribe the cores; mixed runtimes can also hang after fork.")
    else:
        label, files = next(iter(copies.items()))
        title = f"{len(files)} copies of {label} in one process"
        why = (f"{len(files)} copies of {label} are loaded ({_listed(files)}), shipped by different packages. Each copy "
               "is a separate runtime with its own thread pool and its own idea of how many threads to start; "
               "two copies of Intel's runtime abort with 'OMP: Error #15' as soon as both start.")
    if dup:
        why += f" KMP_DUPLICATE_LIB_OK={dup} is set, which hides duplicate-runtime errors instead of fixing them."
    return [f.finding(
        "error", title,
        why=why,
        fix=("Install torch, numpy and MKL from one ecosystem (all pip or all conda-forge) so one runtime is loaded "
             "once; keep OMP_NUM_THREADS set meanwhile."),
        **_inventory(report))]


def _inventory(report: Report, modules: list[str] | None = None) -> dict[str, str]:
    """Commands that list who brought which OpenMP runtime: bash, or PowerShell for a Windows machine,
    where the runtimes are DLLs (libiomp5md.dll, vcomp140.dll) and Error #15 names them."""
    if snippets.report_os(report) == "windows":
        lines = ([f'python -c "import {", ".join(modules)}"  # reproduces it'] if modules else []) + [
            "python -m pip list | Select-String -Pattern 'intel-openmp|mkl|torch|numpy'",
            "conda list | Select-String -Pattern 'intel-openmp|llvm-openmp|_openmp_mutex|mkl'",
            "# every copy of Intel's OpenMP runtime in this environment, and who shipped it (folder)",
            "Get-ChildItem -Path (python -c \"import sys; print(sys.prefix)\") -Recurse -Include libiomp5md.dll, "
            "vcomp*.dll, libomp*.dll -ErrorAction SilentlyContinue | Select-Object FullName"]
        return {"snippet": "\n".join(lines), "snippet_lang": "powershell"}
    lines = ([f"python -c 'import {', '.join(modules)}'  # reproduces it"] if modules else []) + [
        "python -m pip list 2>/dev/null | grep -i -E 'intel-openmp|mkl|torch|numpy'",
        "conda list 2>/dev/null | grep -i -E 'intel-openmp|llvm-openmp|_openmp_mutex|mkl'"]
    return {"snippet": "\n".join(lines)}


@rule("OMP001", "import-order-fails", category="blas", severity="error",
      title="Packages that import alone fail together, in the order scripts import them")
def import_order_fails(report: Report) -> list[Finding]:
    """What it checks:
        Children that import several packages in one process, in the orders training scripts do
        (numpy then torch, torch then numpy), with each package's tiny workload, run without
        ``KMP_DUPLICATE_LIB_OK`` unless you set it: a crash, an error or a hang there while every
        package imports fine on its own. The OpenMP runtime's own message ("OMP: Error #15") is
        quoted when it printed one. An order that fails because one package fails alone (its import
        or its first computation, e.g. under a forced ``OPENBLAS_CORETYPE``) is left to the rules
        that explain that package; an order killed by SIGILL is named as an instruction the CPU
        lacks, never as two runtimes.

    Why it matters:
        Two copies of Intel's OpenMP runtime, or libiomp5 beside libgomp, only meet when both
        packages are loaded in one process: each import check passes, and the training script
        dies at start-up (Error #15 aborts the process) or hangs.

    Fix:
        Install the packages from one ecosystem so they share one OpenMP runtime (pip wheels
        together, or conda-forge packages together); setting ``KMP_DUPLICATE_LIB_OK=TRUE`` only
        hides the duplicate and can give wrong results.
    """
    f = Facts(report)
    orders = f.get("software.import_orders", record=False) or []
    if not orders:
        return []
    failed_alone = _failed_alone(f)
    f.record("software.import_orders", [f"{' then '.join(o.modules)}: {o.status}" for o in orders])
    out = []
    for order in orders:
        if order.status in ("ok", "skipped"):
            continue
        if any(m in failed_alone for m in order.modules):
            continue  # one of them fails on its own (import or first computation): ISA003/ISA004/KERNEL001 say why
        sequence = " then ".join(order.modules)
        if order.signal_name == "SIGILL":
            out.append(_order_sigill(f, order, sequence))   # an instruction the CPU lacks, never two runtimes
            continue
        why = f"{order.message}." if order.message else f"Importing {sequence} in one process failed."
        why += " Each of them imports fine on its own."
        if order.openmp_libs:
            why += f" OpenMP runtimes mapped: {', '.join(order.openmp_libs)}."
        if order.openmp_error and "#15" in order.openmp_error:
            why += (" Error #15 means two copies of Intel's OpenMP runtime (libiomp5, libiomp5md.dll on Windows) were "
                    "initialised in one process: two packages each bring their own.")
        dup = machine.env(f, "KMP_DUPLICATE_LIB_OK")
        if dup:
            why += f" KMP_DUPLICATE_LIB_OK={dup} is set by you, yet it still fails."
        out.append(f.finding(
            "error", f"import {sequence} fails" + (f": {order.openmp_error[:60]}" if order.openmp_error else ""),
            why=why,
            fix=("Install the packages from one ecosystem so that one OpenMP runtime is loaded once (pip wheels "
                 "together, or conda-forge packages together), then run the doctor again. Do not set "
                 "KMP_DUPLICATE_LIB_OK=TRUE: it hides the duplicate and can give wrong results."),
            **_inventory(report, list(order.modules))))
    if out:
        return out
    checked = [" then ".join(o.modules) for o in orders if o.status == "ok"]
    return [f.finding("ok", f"Packages import together in the orders scripts use ({'; '.join(checked)})")] if checked else []


def _failed_alone(f: Facts) -> set[str]:
    """Modules whose own import check failed, at the import or at the first computation after it.

    ``OPENBLAS_CORETYPE=SkylakeX`` on a CPU without AVX-512 kills numpy's first
    matrix product whatever else the process imported: every order with numpy
    fails too, and that is KERNEL001's finding, not two OpenMP runtimes.
    """
    out = set()
    for c in f.get("software.import_checks", record=False) or []:
        if c.status not in ("ok", "skipped") or c.workload_status not in (None, "ok"):
            out.add(c.module)
            f.record(f"software.import_checks[{c.package}]",
                     f"{c.status}" + (f", workload {c.workload_status}" if c.workload_status else ""))
    return out


def _order_sigill(f: Facts, order, sequence: str) -> Finding:
    """An order killed by SIGILL while each module passed alone: the CPU lacks an instruction (say where)."""
    where = f" at '{order.stage}'" if order.stage else ""
    inside = f" inside {order.crashed_in}'s code" if order.crashed_in else ""
    return f.finding(
        "error", f"import {sequence} dies of SIGILL{where}",
        why=(f"{order.message or f'Importing {sequence} in one process failed'}.{' The crash was' + inside + '.' if inside else ''} "
             "SIGILL (Illegal instruction) means code ran an instruction this CPU lacks: a build or a kernel choice "
             "made for another CPU, not two OpenMP runtimes. Each package passed its own check, so the path that "
             "crashed is only taken when both are loaded."),
        fix=("Reproduce it with the command below; check the variables that force an instruction set "
             "(OPENBLAS_CORETYPE, ATEN_CPU_CAPABILITY, ONEDNN_MAX_CPU_ISA) and install builds of both packages "
             "made for this CPU."),
        snippet="python -c 'import " + ", ".join(order.modules) + "'  # reproduces it\n"
                "env | grep -E 'OPENBLAS_CORETYPE|ATEN_CPU_CAPABILITY|ONEDNN_MAX_CPU_ISA|DNNL_MAX_CPU_ISA|MKL_ENABLE'")


_TRUE = ("1", "true", "yes", "on", "y", "t")


@rule("OMP003", "kmp-duplicate-lib-ok", category="blas", severity="warning",
      title="KMP_DUPLICATE_LIB_OK=TRUE hides duplicate OpenMP runtimes")
def kmp_duplicate_lib_ok(report: Report) -> list[Finding]:
    """What it checks:
        Whether ``KMP_DUPLICATE_LIB_OK`` is set to a true value in the environment you start
        Python from. A value a library set inside CPU Doctor's own process (threadpoolctl sets it
        when imported) is not yours and is not counted.

    Why it matters:
        It is the workaround that circulates for "OMP: Error #15: Initializing libiomp5.so, but
        found libiomp5.so already initialized". The error means two copies of Intel's OpenMP
        runtime were loaded into one process; the variable makes the second copy carry on instead
        of aborting. Intel's own message says this "may cause crashes or silently produce
        incorrect results": two runtimes, two thread pools on the same cores, and the duplicate
        that caused it stays, as does the next one.

    Fix:
        Unset it, find the packages that bring the second runtime (``pip list`` / ``conda list``
        for intel-openmp, mkl, llvm-openmp) and install them from one ecosystem (all pip or all
        conda-forge) so one runtime is loaded once.
    """
    f = Facts(report)
    if not machine.env_known(f):
        return []
    value = machine.env(f, "KMP_DUPLICATE_LIB_OK")
    if value is None or value.strip().lower() not in _TRUE:
        return [f.finding("ok", "KMP_DUPLICATE_LIB_OK is not set: a duplicate OpenMP runtime would show")] \
            if value is None else []
    runtimes = _openmp_files(f)
    copies = {k: v for k, v in runtimes.items() if len(v) > 1}
    if len(runtimes) > 1 or copies:
        found = "; ".join(f"{k}: {_listed(v)}" for k, v in runtimes.items())
        hides = (f"Here it hides a real duplicate: the checks loaded these runtimes in one process ({found}; "
                 "BLAS001).")
    elif runtimes:
        hides = ("The checks found one OpenMP runtime, so it hides nothing today; the next package that brings its "
                 "own copy will load silently.")
    else:
        hides = "No check listed the OpenMP runtimes, so what it hides here is not known."
    return [f.finding(
        "warning", f"KMP_DUPLICATE_LIB_OK={value} hides duplicate OpenMP runtimes",
        why=(f"KMP_DUPLICATE_LIB_OK={value} is set where you start Python. It makes a second copy of Intel's OpenMP "
             "runtime carry on instead of aborting with 'OMP: Error #15'; Intel's own message warns that this may "
             f"crash or silently produce incorrect results, and two thread pools then share the cores. {hides}"),
        fix=("Unset KMP_DUPLICATE_LIB_OK, then remove the duplicate: list the packages that ship an OpenMP runtime "
             "and install them from one ecosystem (all pip, or all conda-forge) so one runtime is loaded once."),
        snippet=(snippets.unset_lines(["KMP_DUPLICATE_LIB_OK"]) + "\n"
                 "python -m pip list 2>/dev/null | grep -i -E 'intel-openmp|mkl|torch|numpy'\n"
                 "conda list 2>/dev/null | grep -i -E 'intel-openmp|llvm-openmp|_openmp_mutex|mkl'"))]


# MKL_THREADING_LAYER value -> the OpenMP runtime (label of _OPENMP_RUNTIMES) that layer loads.
_LAYER_RUNTIME = {"INTEL": "Intel libiomp5", "GNU": "GNU libgomp"}


@rule("OMP002", "mkl-threading-layer-mismatch", category="blas", severity="error",
      title="MKL_THREADING_LAYER names an OpenMP runtime other than the one loaded")
def mkl_threading_layer_mismatch(report: Report) -> list[Finding]:
    """What it checks:
        ``MKL_THREADING_LAYER`` (INTEL, GNU, TBB, SEQUENTIAL) against the OpenMP runtimes the
        torch/numpy children actually loaded, and whether a dynamically loaded MKL (``libmkl_rt``,
        the one that reads the variable) is among them with the layer it chose.

    Why it matters:
        ``MKL_THREADING_LAYER=INTEL`` makes MKL load Intel's libiomp5 beside PyTorch's libgomp:
        two thread pools, or mkl-service's "MKL_THREADING_LAYER=INTEL is incompatible with
        libgomp" error at import. ``GNU`` with libiomp5 does the mirror image. Copied from a
        tuning guide written for another install, the variable breaks this one.

    Fix:
        Set it to the runtime that is loaded (``GNU`` for pip's PyTorch, which ships libgomp) or
        unset it.
    """
    f = Facts(report)
    value = machine.env(f, "MKL_THREADING_LAYER")
    if not value:
        return []
    libs = f.get("software.loaded_libs", record=False) or []
    runtimes = _openmp_files(f)
    if not libs and not runtimes:
        return []
    layer = value.strip().upper()
    mkl = [lib for lib in libs if lib.internal_api == "mkl"]
    f.record("software.loaded_libs", [f"{lib.library} ({lib.internal_api}, layer {lib.threading_layer})" for lib in libs])
    wanted = _LAYER_RUNTIME.get(layer)
    loaded = sorted(runtimes)
    if wanted is None or not loaded:
        return [f.finding("ok", f"MKL_THREADING_LAYER={value} does not conflict with the loaded OpenMP runtime")]
    others = [r for r in loaded if r != wanted]
    if not others:
        return [f.finding("ok", f"MKL_THREADING_LAYER={value} matches the loaded OpenMP runtime ({wanted})")]
    fits = "GNU" if "GNU libgomp" in loaded else "INTEL" if "Intel libiomp5" in loaded else None
    why = (f"MKL_THREADING_LAYER={value} asks MKL for {wanted}, but the process runs {', '.join(others)}"
           + (f" (and {wanted} beside it)" if wanted in loaded else "") + ". ")
    if mkl:
        actual = ", ".join(f"{lib.library}: layer {lib.threading_layer or 'unknown'}" for lib in mkl)
        why += (f"MKL is loaded dynamically ({actual}), so the variable is read: MKL brings a second OpenMP runtime "
                "with its own thread pool, or mkl-service refuses with 'MKL_THREADING_LAYER=" + layer
                + " is incompatible with ...' at import.")
        severity = "error"
    else:
        why += ("No dynamically loaded MKL (libmkl_rt) was seen in the checks, so nothing reads it there, but a "
                "conda numpy/scipy with MKL in the same script would load a second runtime.")
        severity = "warning"
    fix = (f"Set MKL_THREADING_LAYER={fits} (the runtime already loaded) or unset it." if fits
           else "Unset MKL_THREADING_LAYER.")
    snippet = f"export MKL_THREADING_LAYER={fits}" if fits else snippets.unset_lines(["MKL_THREADING_LAYER"])
    return [f.finding(severity, f"MKL_THREADING_LAYER={value} but the loaded OpenMP runtime is {', '.join(others)}",
                      why=why, fix=fix, snippet=snippet)]


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
        "warning", f"{len(pools)} thread pools with {total} threads on {plural(usable, 'usable CPU')}",
        why=(f"Loaded pools: {listed}. Together {total} threads on {plural(usable, 'CPU')} ({total / usable:.1f}x); when numpy "
             "work and torch work overlap (augmentation, DataLoader workers) they spin on the same cores."),
        fix="Give numpy's BLAS one thread in data-loading processes and the compute threads to torch.",
        snippet=("import threadpoolctl\n\n"
                 "def worker_init_fn(worker_id):\n"
                 "    threadpoolctl.threadpool_limits(1, user_api=\"blas\")  # numpy in workers: 1 thread\n\n"
                 "loader = torch.utils.data.DataLoader(dataset, num_workers=4, worker_init_fn=worker_init_fn)"),
        snippet_lang="python")]
