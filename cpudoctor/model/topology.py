"""How a machine's CPUs are laid out: packages, NUMA nodes, L3 (CCX) domains, cores, threads, limits.

Plain data, filled by :mod:`cpudoctor.probes.cpu.topology` (Linux sysfs, or a
recorded Windows or macOS machine) and read by every other layer. The field
names are a public JSON contract (``resources/report.schema.json``).
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class L3Domain:
    """One L3 cache; on AMD one L3 = one CCX. JSON keys are exactly ``cpus``, ``size_bytes``."""

    cpus: list[int]
    size_bytes: int | None = None


@dataclass
class Cache:
    """An L1 or L2 cache and the CPUs that share it (lstopo's per-core cache boxes)."""

    name: str                              # L1d | L1i | L2
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
    efficiency_class: int | None = None    # Windows EfficiencyClass (higher = faster core type); None elsewhere


@dataclass
class Package:
    id: int                                # physical_package_id (may be 36, 8442, ...)
    cpus: list[int]
    dies: list[int] = field(default_factory=list)


@dataclass
class CpuKind:
    """CPUs of one core type on a hybrid chip (P/E cores, Arm big.LITTLE), slowest kind first like hwloc."""
    cpus: list[int] = field(default_factory=list)
    perf: int | None = None            # the sysfs figure the kinds were told apart by (higher = faster core)
    source: str = ""                   # cpu_capacity | acpi_cppc/highest_perf | cpufreq/cpuinfo_max_freq | EfficiencyClass | hw.perflevel


@dataclass
class ProcessorGroup:
    """A Windows processor group: at most 64 logical CPUs that one affinity mask can name.

    Windows splits machines with more than 64 logical CPUs into groups; before
    Windows 11 / Server 2022 a process runs in one group unless it asks for more.
    """

    id: int                                # the group number Windows uses (0, 1, ...)
    cpus: list[int]                        # global CPU numbers (the report's), active ones only
    first_cpu: int = 0                     # the global number of bit 0 of this group's masks
    maximum: int | None = None             # MaximumProcessorCount: room for hot-added CPUs included


@dataclass
class Affinity:
    """Where this process may run: the usable CPUs are what thread counts must respect."""

    allowed_cpus: list[int] | None = None  # os.sched_getaffinity (live); a tree: its proc/self/status, else its cpuset
    cgroup_cpuset: list[int] | None = None
    cpu_quota: float | None = None         # in CPUs, from cpu.max / cfs_quota_us; None = unlimited/unknown
    usable_cpus: int | None = None         # min(len(allowed), ceil(quota))
    allowed_mems: list[int] | None = None  # cgroup cpuset memory nodes; None = unrestricted/unknown


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
    core_caches: list[Cache] = field(default_factory=list)     # L1d, L1i and L2: one entry per distinct CPU set
    numa_memory_bytes: dict[str, int] = field(default_factory=dict)  # node id -> MemTotal
    memory_total_bytes: int | None = None  # /proc/meminfo MemTotal: the machine's memory (node totals may not add up to it)
    cpuless_numa_nodes: list[int] = field(default_factory=list)
    affinity: Affinity = field(default_factory=Affinity)
    l3_known: bool = False                 # False when there were no cache dirs (container, VM, WSL)
    source: str = "unknown"                # sysfs | cpuinfo | psutil | windows | sysctl | unknown
    vendor: str | None = None              # /proc/cpuinfo vendor_id ("AuthenticAMD"): an L3 is a CCX on AMD/Hygon
    cpu_family: int | None = None          # /proc/cpuinfo "cpu family": AMD L3s are CCXs from Zen (0x17) on, not on K8-Bulldozer
    cpu_kinds: list[CpuKind] = field(default_factory=list)  # hybrid chips only (2+ core types), slowest first
    notes: list[str] = field(default_factory=list)
    processor_groups: list[ProcessorGroup] = field(default_factory=list)  # Windows only: empty elsewhere

    def l3_is_ccx(self) -> bool:
        """Whether an L3 domain is a CCX: on Zen (AMD family 0x17 and later, Hygon), not on K8-Bulldozer or others.

        The one place every view (report, map, monitor, advisor, sweep) asks, so
        an Opteron is never described in Zen words. An unknown family on an AMD
        tree counts as Zen: every AMD part with several L3s per socket is.
        """
        if (self.vendor or "") not in ("AuthenticAMD", "HygonGenuine"):
            return False
        return self.cpu_family is None or self.cpu_family >= 0x17


@dataclass
class CgroupLimits:
    """What the cgroups say. None = no limit found (or unknown), see ``notes``."""

    cpuset_cpus: list[int] | None = None
    cpuset_mems: list[int] | None = None
    cpu_quota: float | None = None        # in CPUs (quota / period); None = unlimited or unknown
    version: str | None = None            # "v2", "v1", "cpuset" (legacy fs) for the cpuset source
    cpuset_path: str | None = None        # file the cpuset was read from, relative to root
    quota_path: str | None = None
    notes: list[str] = field(default_factory=list)
