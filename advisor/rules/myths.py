"""Settings from popular guides that do nothing, detected where a report can see them.

A report holds the whitelisted thread environment (OMP_*, MKL_*, TORCH_*, ...),
not your source code: a ``torch.backends.openblas`` line in a script is
invisible here, a TORCH_* variable naming it is not. Each rule says what it can
and cannot see.
"""

from __future__ import annotations

from cpudoctor.advisor import machine, snippets
from cpudoctor.advisor.engine import Facts, rule
from cpudoctor.model import Finding, Report


def _version_tuple(text: str | None) -> tuple[int, ...] | None:
    if not text:
        return None
    parts = []
    for token in text.replace("-", ".").split("."):
        digits = "".join(ch for ch in token if ch.isdigit())
        if not digits:
            break
        parts.append(int(digits))
    return tuple(parts) or None


@rule("MYTH001", "torch-loop-core-pinning", category="myth", severity="warning",
      title="TORCH_LOOP_CORE_PINNING does nothing")
def torch_loop_core_pinning(report: Report) -> list[Finding]:
    """What it checks:
        ``TORCH_LOOP_CORE_PINNING`` in the environment.

    Why it matters:
        Some tuning guides recommend it, but no such variable exists in PyTorch: nothing reads it,
        so threads stay unpinned while the user believes they are pinned.

    Fix:
        Remove it. Pin with ``OMP_PLACES=cores OMP_PROC_BIND=close`` plus ``taskset`` or
        ``numactl`` (see the topology rules for this machine's CPU sets).
    """
    f = Facts(report)
    value = machine.env(f, "TORCH_LOOP_CORE_PINNING")
    if value is None:
        return []
    return [f.finding(
        "warning", f"{machine.setting('TORCH_LOOP_CORE_PINNING', value)} is a myth: PyTorch has no such setting",
        why=(f"{machine.setting('TORCH_LOOP_CORE_PINNING', value)} is set, but {machine.knowledge()['myth_env']['TORCH_LOOP_CORE_PINNING']}. "
             "Threads are not pinned by it."),
        fix="Remove it and pin with OpenMP binding (and taskset/numactl for a CCX or NUMA node).",
        snippet=(snippets.unset_lines(["TORCH_LOOP_CORE_PINNING"]) + "\nexport OMP_PLACES=cores OMP_PROC_BIND=close"
                 "\n# binding pins the main thread at import torch: give DataLoader workers their CPUs back in"
                 "\n# worker_init_fn with os.sched_setaffinity, or restrict CPUs with taskset instead (AFF001)"))]


@rule("MYTH002", "torch-backends-openblas", category="myth", severity="warning",
      title="There is no torch.backends.openblas switch")
def torch_backends_openblas(report: Report) -> list[Finding]:
    """What it checks:
        Environment variables that try to switch PyTorch to OpenBLAS: a ``TORCH_*`` variable with
        OPENBLAS in its name, or any whitelisted variable whose value mentions
        ``torch.backends.openblas``. A line in your script cannot be seen from a report: if you
        copied ``torch.backends.openblas...`` from a guide, Python raises AttributeError there.

    Why it matters:
        ``torch.backends`` has cpu, mkl, mkldnn, openmp, cuda, cudnn, mps ... but no openblas; the
        BLAS PyTorch uses is fixed when it is built (see ``torch.__config__.show()``). Such a
        setting does nothing, and tuning effort goes to the wrong place.

    Fix:
        Remove it. To tune the BLAS numpy uses, set ``OPENBLAS_NUM_THREADS``; PyTorch's own math
        is tuned with ``OMP_NUM_THREADS``/``torch.set_num_threads``.
    """
    f = Facts(report)
    env = f.get("software.thread_env", record=False) or {}
    hits = {k: v for k, v in env.items()
            if (k.startswith("TORCH") and "OPENBLAS" in k) or "backends.openblas" in str(v).lower()}
    if not hits:
        return []
    for k, v in hits.items():
        f.record(f"software.thread_env.{k}", v)
    names = ", ".join(machine.setting(k, v) for k, v in hits.items())
    return [f.finding(
        "warning", "Setting for a torch.backends.openblas switch that does not exist",
        why=(f"{names} is set, but there is no torch.backends.openblas switch: PyTorch's BLAS is chosen when it is built "
             "(torch.__config__.show() lists it), so this changes nothing."),
        fix="Remove it; tune numpy's OpenBLAS with OPENBLAS_NUM_THREADS and PyTorch with OMP_NUM_THREADS.",
        snippet=snippets.unset_lines(sorted(hits)))]


@rule("MYTH003", "mkl-debug-cpu-type", category="myth", severity="warning",
      title="MKL_DEBUG_CPU_TYPE=5 is ignored by MKL 2020.1 and later")
def mkl_debug_cpu_type(report: Report) -> list[Finding]:
    """What it checks:
        ``MKL_DEBUG_CPU_TYPE`` in the environment, and the MKL version PyTorch reports.

    Why it matters:
        The undocumented switch once made old MKL use its AVX2 code path on AMD CPUs. Intel removed
        it in MKL 2020 Update 1; every current PyTorch wheel links a far newer MKL, which ignores the
        variable (and picks AVX2 paths on Zen by itself). Guides still repeat it.

    Fix:
        Remove it. If MKL is slow on an AMD CPU, update PyTorch/MKL, or compare with OpenBLAS/BLIS
        builds of numpy using the lab's GEMM benchmark.
    """
    f = Facts(report)
    value = machine.env(f, "MKL_DEBUG_CPU_TYPE")
    if value is None:
        return []
    since = machine.knowledge()["mkl_debug_cpu_type"]["ignored_since"]
    mkl = f.get("software.torch.mkl_version")
    ver = _version_tuple(mkl)
    if ver is not None and ver < _version_tuple(since):
        return [f.finding(
            "info", f"{machine.setting('MKL_DEBUG_CPU_TYPE', value)} still works with this old MKL ({mkl})",
            why=(f"This PyTorch links MKL {mkl}, older than {since}, which still reads the switch. Current builds "
                 "ignore it, so updating PyTorch is the lasting fix."),
            fix="Update PyTorch (its newer MKL handles AMD CPUs) and then remove the variable.",
            snippet=snippets.install_commands(report))]
    which = f"MKL {mkl}" if mkl else f"MKL {since} and later (every current PyTorch wheel)"
    return [f.finding(
        "warning", f"{machine.setting('MKL_DEBUG_CPU_TYPE', value)} is ignored",
        why=(f"{machine.setting('MKL_DEBUG_CPU_TYPE', value)} is set, but {which} ignores it: Intel removed the switch in MKL {since}."),
        fix="Remove it; measure MKL against OpenBLAS with the lab's GEMM benchmark if in doubt.",
        snippet=snippets.unset_lines(["MKL_DEBUG_CPU_TYPE"]))]


@rule("MYTH004", "pin-memory-without-gpu", category="myth", severity="info",
      title="pin_memory=True without a GPU")
def pin_memory_without_gpu(report: Report) -> list[Finding]:
    """What it checks:
        A recorded ``pin_memory`` setting that is true — from the training lab's runs or an
        inspected process, stored in the report's benchmark settings — on a machine with the CPU
        build of PyTorch or no GPU. Your own script's DataLoader arguments are not in a report,
        so this rule cannot see them: check them yourself.

    Why it matters:
        ``pin_memory=True`` page-locks each batch so that a *GPU* can copy it asynchronously. On a
        CPU-only run there is no copy to speed up: the DataLoader spends an extra copy and a pinning
        thread per batch, and locked pages cannot be swapped.

    Fix:
        ``DataLoader(..., pin_memory=False)`` (the default) when training on the CPU.
    """
    f = Facts(report)
    pinned = [run for run in report.benchmarks if run.settings.get("pin_memory") is True]
    if not pinned:
        return []
    f.record("benchmarks[*].settings.pin_memory", True)
    build = machine.torch_build(f)
    if build in ("cuda", "rocm") and machine.gpu_present(f, build) is not False:
        return []  # a GPU may be there: pinning can help its copies
    return [f.finding(
        "info", "pin_memory=True on a CPU-only run",
        why=(f"{len(pinned)} recorded run(s) used pin_memory=True, but "
             + ("this is the CPU build of PyTorch" if build == "cpu" else "no GPU is in use")
             + ": pinning only speeds up copies to a GPU, so it adds a copy per batch here."),
        fix="Use pin_memory=False (the default) for CPU training.",
        snippet="loader = torch.utils.data.DataLoader(dataset, batch_size=64, pin_memory=False)",
        snippet_lang="python")]
