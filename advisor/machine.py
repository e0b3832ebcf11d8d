"""Quantities derived from a Report that several rules and the snippets need.

Each helper reads through :class:`~cpudoctor.advisor.engine.Facts` so the
fields it relied on end up in the finding's evidence. Everything returns None
when the report does not know, never a guess.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from cpudoctor.advisor import measured
from cpudoctor.advisor.engine import Facts
from cpudoctor.advisor.thread_vars import THREAD_VARS  # noqa: F401 - the pools' variables, for the report rules
from cpudoctor.kits.plural import plural
from cpudoctor.knowledge import ADVISOR_KNOWLEDGE
from cpudoctor.model import Report

# Variables that pin or bind OpenMP threads (any one of them counts as "pinned").
PINNING_VARS: tuple[str, ...] = ("OMP_PLACES", "OMP_PROC_BIND", "GOMP_CPU_AFFINITY", "KMP_AFFINITY")


def knowledge() -> dict[str, Any]:
    """resources/advisor_knowledge.json (schema-checked): the facts the rules decide from."""
    return ADVISOR_KNOWLEDGE.data


def env_known(f: Facts) -> bool:
    """The report read the Python, packages and environment of its machine (not a captured tree)."""
    return f.get("software", record=False) is not None and not f.get("software.captured", record=False)


def env(f: Facts, name: str) -> str | None:
    """A whitelisted environment variable from the report (None when unset or unknown)."""
    value = f.get(f"software.thread_env.{name}")
    return None if value is None else str(value)


def setting(name: str, value: str | None) -> str:
    """``NAME=value`` as a person reads it; just ``NAME`` when the report hid the value (shown as "set")."""
    return name if value in (None, "", "set") else f"{name}={value}"


def env_int(f: Facts, name: str) -> int | None:
    value = env(f, name)
    if value is None:
        return None
    try:
        # OMP_NUM_THREADS may be a nesting list "8,2": the first level counts.
        return int(str(value).split(",")[0].strip())
    except ValueError:
        return None


def usable_cpu_list(f: Facts) -> list[int] | None:
    """The CPUs this process may run on: the affinity/cgroup set, else every online CPU."""
    allowed = f.get("topology.affinity.allowed_cpus")
    if allowed:
        return sorted(allowed)
    online = f.get("topology.online_cpus")
    return sorted(online) if online else None


def usable_cpus(f: Facts) -> int | None:
    """How many CPUs' worth of time the process may use (affinity and cgroup quota)."""
    usable = f.get("topology.affinity.usable_cpus")
    if usable:
        return int(usable)
    cpus = usable_cpu_list(f)
    quota = f.get("topology.affinity.cpu_quota")
    n = len(cpus) if cpus else f.get("topology.logical_cpus")
    if n and quota:
        return max(1, min(int(n), math.ceil(quota)))
    return int(n) if n else None


def usable_physical_cores(f: Facts) -> int | None:
    """Physical cores among the usable CPUs, capped by the cgroup quota.

    Compute-bound kernels (GEMM, convolutions) saturate a core's vector units
    with one thread, so this is the right default thread count.
    """
    cores = f.get("topology.core_list", record=False) or []
    allowed = set(usable_cpu_list(f) or [])
    n: int | None = None
    if cores and allowed:
        n = sum(1 for c in cores if allowed.intersection(c.cpus))
        f.record("topology.core_list", f"{len(cores)} cores")
    if not n:
        total_cores = f.get("topology.cores")
        logical = f.get("topology.logical_cpus")
        if total_cores and allowed and logical and len(allowed) < logical:
            # Restricted set but no per-core map: assume SMT siblings are spread evenly.
            n = max(1, round(len(allowed) * total_cores / logical))
        else:
            n = total_cores
    if not n:
        return None
    quota = f.get("topology.affinity.cpu_quota")
    if quota:
        n = max(1, min(n, math.ceil(quota)))
    return int(n)


def smt_threads(f: Facts) -> int | None:
    smt = f.get("topology.smt_threads_per_core")
    if smt:
        return int(smt)
    cores, logical = f.get("topology.cores"), f.get("topology.logical_cpus")
    if cores and logical:
        return max(1, logical // cores)
    return None


@dataclass
class HybridSplit:
    """The core kinds of a hybrid CPU as this process sees them (usable CPUs only)."""

    fast_cpus: list[int]       # usable CPUs of the fastest kind (P-cores, Cortex-X)
    slow_cpus: list[int]       # usable CPUs of every slower kind (E-cores)
    fast_cores: int            # physical cores among fast_cpus
    slow_cores: int
    kinds_used: int            # how many core kinds the usable CPUs touch
    source: str                # the sysfs figure the kinds were told apart by
    fast_perf: int | None
    slow_perf: int | None


def hybrid_split(f: Facts) -> HybridSplit | None:
    """P/E core sets of a hybrid chip; None on chips with one core kind (or no per-CPU figures)."""
    kinds = f.get("topology.cpu_kinds", record=False) or []
    if len(kinds) < 2:
        return None
    from cpudoctor.kits.cpulist import format_cpulist

    f.record("topology.cpu_kinds", [f"{format_cpulist(k.cpus)} ({k.source} {k.perf})" for k in kinds])
    fast = kinds[-1]                       # slowest kind first, like hwloc
    usable = set(usable_cpu_list(f) or [c for k in kinds for c in k.cpus])
    fast_cpus = sorted(usable.intersection(fast.cpus))
    slow_cpus = sorted(usable - set(fast.cpus))
    cores = f.get("topology.core_list", record=False) or []

    def physical(cpus: list[int]) -> int:
        return len({tuple(c.cpus) for c in cores if set(c.cpus) & set(cpus)}) or len(cpus)

    return HybridSplit(fast_cpus, slow_cpus, physical(fast_cpus), physical(slow_cpus),
                       sum(1 for k in kinds if usable.intersection(k.cpus)), fast.source, fast.perf, kinds[0].perf)


def performance_cores(f: Facts) -> HybridSplit | None:
    """The hybrid split when training belongs on the performance cores alone, else None.

    That is: the process may run on both kinds, and there are at least two
    physical P-cores (Lakefield has one Sunny Cove core beside four Tremonts:
    pinning to it would leave most of the compute idle). TOPO003 and the
    thread plan both ask here, so they always name the same CPUs.
    """
    split = hybrid_split(f)
    if split is None or split.kinds_used < 2 or split.fast_cores < 2:
        return None
    return split


def recommended_threads(report: Report, f: Facts | None = None) -> tuple[int, str]:
    """(threads, where the number comes from): the sweep's measurement first, else physical cores.

    On a hybrid CPU without a measurement, the physical performance cores:
    OpenMP's equal chunks make every thread wait for the ones on E-cores.
    """
    f = f or Facts(report)
    rec = measured.sweep_choice(report, f)
    if rec is not None and rec.threads:
        what = "the thread sweep's best setting" if report.recommendation is not None else \
            f"what {measured.measured_by(report) or 'the thread sweep'} measured fastest, beyond every spread"
        variant = measured.named_variant(rec)
        return int(rec.threads), f"{what} ({variant})" if variant else what
    hybrid = performance_cores(f)
    if hybrid is not None:
        n = hybrid.fast_cores
        quota = f.get("topology.affinity.cpu_quota")
        if quota:
            n = max(1, min(n, math.ceil(quota)))
        return n, f"the {plural(n, 'performance core')} of this hybrid CPU, one thread each"
    n = usable_physical_cores(f)
    if n:
        return n, plural(n, "usable physical core")
    cpus = usable_cpus(f)
    if cpus:
        return cpus, plural(cpus, "usable CPU")
    return 1, "unknown CPU count (1 is safe; raise it)"


def flags(f: Facts) -> set[str]:
    return set(f.get("cpu.flags") or [])


def is_x86(f: Facts) -> bool | None:
    """``CpuInfo.is_x86`` of the report (None: architecture unknown), with ``cpu.arch`` as its evidence."""
    f.get("cpu.arch")
    cpu = f.get("cpu", record=False)
    return None if cpu is None else cpu.is_x86


def expected_torch_capability(f: Facts) -> str | None:
    """What PyTorch's dispatcher should pick from this CPU's flags (x86 only)."""
    if not is_x86(f):
        return None
    if not f.get("cpu.flags"):
        return None
    lacking = executing_lacks(f)
    fma = bool(f.get("cpu.isa.fma")) and "fma" not in lacking
    if f.get("cpu.isa.avx512_torch_kernels") and fma and not lacking & {"avx512f", "avx512bw", "avx512dq", "avx512vl"}:
        return "AVX512"
    if f.get("cpu.isa.avx2") and fma and "avx2" not in lacking:
        return "AVX2"
    return "DEFAULT"


def executing_lacks(f: Facts) -> set[str]:
    """Flags /proc/cpuinfo lists that the CPU executing code lacks (the CPUID cross-check; emulation).

    Empty when the check did not run or found nothing; recorded as evidence only when it matters.
    """
    missing = f.get("cpu.cpuid_check.missing_flags", record=False) or []
    if missing:
        f.record("cpu.cpuid_check.missing_flags", missing)
    return set(missing)


def running_flags(f: Facts) -> set[str]:
    """The flags of the CPU that executes Python: /proc/cpuinfo's, less what the CPUID cross-check found missing.

    Under user-mode emulation /proc/cpuinfo describes the host; what a build
    needs is checked against the CPU that runs it.
    """
    return flags(f) - executing_lacks(f)


def torch_installed(f: Facts) -> bool:
    """torch is installed (its child ran, or the quick probe found its package metadata)."""
    status = f.get("software.torch.status")
    if status == "skipped":
        return any(p.name == "torch" for p in (f.get("software.packages", record=False) or []))
    return status not in (None, "not_installed")


def torch_build(f: Facts) -> str | None:
    """cpu | cuda | rocm | None, from the package metadata or the torch child."""
    for pkg in f.get("software.packages", record=False) or []:
        if pkg.name == "torch" and pkg.build and pkg.build != "unknown":
            f.record("software.packages[torch].build", pkg.build)
            return pkg.build
    if f.get("software.torch.hip_version"):
        return "rocm"
    if f.get("software.torch.cuda_version"):
        return "cuda"
    version = f.get("software.torch.version") or ""
    if "+cpu" in version:
        return "cpu"
    if "+cu" in version:
        return "cuda"
    if "+rocm" in version:
        return "rocm"
    return None


def package(report: Report, name: str):
    """The PackageInfo for ``name`` (None when not installed or unknown)."""
    sw = report.software
    if sw is None:
        return None
    for pkg in sw.packages:
        if pkg.name.lower().replace("_", "-") == name.lower():
            return pkg
    return None


def gpu_present(f: Facts, kind: str) -> bool | None:
    """Whether an NVIDIA (``cuda``) or AMD (``rocm``) GPU was seen; None when the report cannot say.

    ``software.gpus`` (PCI display/accelerator devices; console adapters of
    BMCs and VMs do not count) answers when the probe could read PCI sysfs;
    otherwise only a torch child that actually saw a device can answer.
    """
    gpus = f.get("software.gpus", record=False)
    if isinstance(gpus, list):
        f.record("software.gpus", gpus)
        vendors = {str(getattr(g, "vendor", g)).lower() for g in gpus if getattr(g, "compute", True)}
        want = "nvidia" if kind == "cuda" else "amd"
        return any(want in v for v in vendors)
    count = f.get("software.torch.device_count", record=False)
    if isinstance(count, int) and torch_build(f) == kind:
        f.record("software.torch.device_count", count)
        return count > 0
    return None


def l3_count(f: Facts) -> int:
    doms = f.get("topology.l3_domains", record=False) or []
    f.record("topology.l3_domains", plural(len(doms), "L3 domain"))
    return len(doms)


def numa_count(f: Facts) -> int:
    nodes = [n for n in (f.get("topology.numa_nodes", record=False) or []) if n.cpus]
    f.record("topology.numa_nodes", f"{plural(len(nodes), 'NUMA node')} with CPUs")
    return len(nodes)
