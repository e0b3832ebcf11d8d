"""Packages, NUMA nodes, L3 (CCX) domains, cores and threads, affinity and cgroup limits.

CONTRACT (fields are a public JSON contract, see issue 3): implementation pending.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class L3Domain:
    """One L3 cache; on AMD one L3 = one CCX. JSON keys are exactly ``cpus``, ``size_bytes``."""

    cpus: list[int]
    size_bytes: int | None = None


@dataclass
class NumaNode:
    """JSON keys are exactly ``id``, ``cpus``, ``distances`` (public contract)."""

    id: int
    cpus: list[int]
    distances: list[int] = field(default_factory=list)


@dataclass
class Core:
    """A physical core and its online hardware threads (SMT siblings)."""

    package: int
    core_id: int
    cpus: list[int]
    die: int | None = None
    l3: int | None = None                  # index into Topology.l3_domains
    numa: int | None = None                # NUMA node id


@dataclass
class Package:
    id: int                                # physical_package_id (may be 36, 8442, ...)
    cpus: list[int]
    dies: list[int] = field(default_factory=list)


@dataclass
class Affinity:
    """Where this process may run: the usable CPUs are what thread counts must respect."""

    allowed_cpus: list[int] | None = None  # os.sched_getaffinity (live) or cgroup cpuset (captured tree)
    cgroup_cpuset: list[int] | None = None
    cpu_quota: float | None = None         # in CPUs, from cpu.max / cfs_quota_us; None = unlimited/unknown
    usable_cpus: int | None = None         # min(len(allowed), ceil(quota))


@dataclass
class Topology:
    packages: int | None = None            # public: int
    cores: int | None = None               # public: online physical cores
    logical_cpus: int | None = None        # public: online logical CPUs
    l3_domains: list[L3Domain] = field(default_factory=list)   # public, sorted by first cpu
    numa_nodes: list[NumaNode] = field(default_factory=list)   # public
    online_cpus: list[int] = field(default_factory=list)
    offline_cpus: list[int] = field(default_factory=list)
    smt_threads_per_core: int | None = None
    package_list: list[Package] = field(default_factory=list)
    core_list: list[Core] = field(default_factory=list)
    l2_groups: list[list[int]] = field(default_factory=list)   # only where an L2 is shared by several cores
    numa_memory_bytes: dict[str, int] = field(default_factory=dict)  # node id -> MemTotal
    cpuless_numa_nodes: list[int] = field(default_factory=list)
    affinity: Affinity = field(default_factory=Affinity)
    l3_known: bool = False                 # False when there were no cache dirs (container, VM, WSL)
    source: str = "unknown"                # sysfs | psutil | unknown
    notes: list[str] = field(default_factory=list)


def probe_topology(root: Path = Path("/"), live: bool | None = None) -> Topology:
    # TEMPORARY scaffold until the probe lands (same session).
    return Topology(notes=['topology probe not implemented yet'])
