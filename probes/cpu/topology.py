"""Packages, NUMA nodes, L3 (CCX) domains, cores and threads, affinity and cgroup limits.

CONTRACT (fields are a public JSON contract, see issue 3). Everything comes from
sysfs under ``root`` (``/sys/devices/system/{cpu,node}``), checked against
hwloc's own expected output on every machine of the corpus; /proc/cpuinfo and
then psutil are the fallbacks where there is no sysfs (dumps, macOS, Windows).
"""

from __future__ import annotations

import math
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

from cpudoctor.model import CgroupLimits
from cpudoctor.probes.cgroup import read_cgroup_limits
from cpudoctor.kits.cpulist import MAX_CPUS, MAX_NUMA_NODES, GarbledValue, cpu_number, format_cpulist, parse_int
from cpudoctor.kits.rooted import (MAX_NUMBERED_DIRS, cap_notes, is_live_root, list_dir, numbered_dirs, read_cpulist,
    read_cpumask, read_int, read_lines, read_size, read_text, shown, under)
from cpudoctor.model.topology import Cache, Core, CpuKind, L3Domain, NumaNode, Package, Topology


# ---------------------------------------------------------------------------
# Probe

_CPU_DIR = "/sys/devices/system/cpu"
_NODE_DIR = "/sys/devices/system/node"
# A core's hardware threads: SMT8 (POWER, SPARC) is the most any CPU has. A sibling list naming more is garbled:
# "0-65535" in each of 8,192 CPUs' topology/ took `report --root` a minute to expand and intersect.
MAX_THREADS_PER_CORE = 16


@dataclass
class _Cpu:
    """What sysfs says about one online logical CPU (internal)."""

    id: int
    package: int | None = None
    die: int | None = None
    core_id: int | None = None
    siblings: list[int] = field(default_factory=list)


def probe_topology(root: Path = Path("/"), live: bool | None = None) -> Topology:
    """Read the CPU topology under ``root``.

    ``live`` says whether ``root`` is the running system (then
    ``os.sched_getaffinity`` is this process's affinity); by default it is
    true exactly when ``root`` is ``/``. For a captured tree the cgroup
    cpuset found in the tree is the allowed set instead.
    """
    root = Path(root)
    if live is None:
        live = is_live_root(root)
    cpu_dir = under(root, _CPU_DIR)
    # Method 1: sysfs (Linux). Method 2: /proc/cpuinfo only (dumps, odd
    # containers). Method 3: psutil counts on the live machine (macOS, Windows).
    if _cpu_numbers(cpu_dir):
        topo = _from_sysfs(root)
    elif read_text(under(root, "/proc/cpuinfo")):
        topo = _from_cpuinfo(root)
    elif live:
        topo = _from_psutil()
    else:
        return Topology(notes=[f"no /sys/devices/system/cpu and no /proc/cpuinfo under {root}: topology unknown"])
    if topo.vendor is None:
        topo.vendor = _cpuinfo_vendor(root)
    if topo.cpu_family is None:
        topo.cpu_family = _cpuinfo_family(root)
    if topo.memory_total_bytes is None:
        topo.memory_total_bytes = _mem_total(root, live)
    _fill_affinity(topo, root, live)
    topo.notes = cap_notes(topo.notes)
    return topo


def _meminfo_total(lines: list[str] | None) -> int | None:
    """``MemTotal:`` of a meminfo file (the system's or a NUMA node's) in bytes; None when absent or garbled."""
    for line in lines or []:
        if "MemTotal:" in line:
            parts = line.split("MemTotal:", 1)[1].split()
            try:
                kib = parse_int(parts[0], 0, 1 << 43)          # 8 PiB: no machine has more
            except (GarbledValue, IndexError):
                return None
            return kib * (1024 if parts[1:2] == ["kB"] else 1)
    return None


def _mem_total(root: Path, live: bool) -> int | None:
    """The machine's memory: /proc/meminfo's MemTotal (psutil on a live machine without /proc).

    Not the sum of the NUMA nodes' totals: some kernels (VMs with memory hot-plug or a balloon) report
    per-node totals that move and do not add up to it.
    """
    total = _meminfo_total(read_lines(under(root, "/proc/meminfo")))
    if total is None and live:
        try:
            import psutil

            total = int(psutil.virtual_memory().total)
        except Exception:  # noqa: BLE001 - unknown stays unknown
            total = None
    return total


def _cpuinfo_vendor(root: Path) -> str | None:
    for line in read_lines(under(root, "/proc/cpuinfo")) or []:
        if line.startswith("vendor_id"):
            return line.partition(":")[2].strip() or None
    return None


def _cpuinfo_family(root: Path) -> int | None:
    for line in read_lines(under(root, "/proc/cpuinfo")) or []:
        if line.startswith("cpu family"):
            try:
                return parse_int(line.partition(":")[2], 0, 0xFFFF)
            except GarbledValue:
                return None
    return None



def _cpu_numbers(cpu_dir: Path, notes: list[str] | None = None) -> list[int]:
    """``cpu0``, ``cpu12`` -> [0, 12]: ASCII numbers below MAX_CPUS only (never ``cpu²``), a bounded count."""
    return numbered_dirs(cpu_dir, "cpu", notes)


def _cpuset_file(directory: Path, name: str, mask_name: str | None = None,
                 notes: list[str] | None = None, most: int | None = None) -> list[int] | None:
    """``<name>_list`` (cpulist), else the hex mask ``<mask_name or name>`` in ``directory``; a set of more
    than ``most`` CPUs is garbled."""
    cpus = read_cpulist(directory / f"{name}_list", notes, most)
    if cpus is None:
        cpus = read_cpumask(directory / (mask_name or name), notes, most)
    return cpus


def _online_cpus(cpu_dir: Path, present: list[int], notes: list[str] | None = None) -> list[int]:
    """Online CPUs: the ``online`` list, else each cpuN/online flag, else topology/ present.

    Old kernels (96em64t) have no ``online`` file; an offline CPU keeps its
    cpuN directory but loses ``topology/``. A garbled ``online`` (``5-2``) is
    a note and the per-CPU files decide.
    """
    listed = read_cpulist(cpu_dir / "online", notes)
    if listed is not None:
        return sorted(set(listed) & set(present)) if present else listed
    online = []
    for n in present:
        flag = read_int(cpu_dir / f"cpu{n}" / "online")
        if flag == 0:
            continue
        if flag == 1 or (cpu_dir / f"cpu{n}" / "topology").is_dir():
            online.append(n)
    return online


def _read_cpu(cpu_dir: Path, n: int, online: set[int], notes: list[str] | None = None) -> _Cpu:
    topo_dir = cpu_dir / f"cpu{n}" / "topology"
    package = read_int(topo_dir / "physical_package_id")
    if package is not None and package < 0:        # some VMs and ARM boards say -1
        package = 0
    die = read_int(topo_dir / "die_id")
    siblings = _cpuset_file(topo_dir, "core_cpus", notes=notes, most=MAX_THREADS_PER_CORE)
    if siblings is None:
        siblings = _cpuset_file(topo_dir, "thread_siblings", notes=notes, most=MAX_THREADS_PER_CORE)
    sib = sorted((set(siblings or []) & online) | {n})
    return _Cpu(n, package, die if die is not None and die >= 0 else None, read_int(topo_dir / "core_id"), sib)


def _group_cores(cpus: dict[int, _Cpu]) -> list[list[int]]:
    """Physical cores as lists of online CPUs.

    A core is a set of SMT siblings (``core_cpus`` / ``thread_siblings``),
    split further when its members report different ``core_id``s.

    Why the split: on AMD family 0x15 (Bulldozer/Piledriver CMT) Linux reports
    the two integer cores of a compute unit as thread siblings, but each has its
    own ``core_id`` (and /proc/cpuinfo says 8 cores, 16 siblings per package).
    hwloc applies an x86 quirk for exactly this and counts 64 Cores x 1 PU on a
    4x Opteron 6276, which is our ground truth: each integer core has its own
    scheduler, integer units and L1D, so for thread placement it behaves like a
    core (the shared FPU is reported as the shared L2/compute unit group
    instead, in ``l2_groups``). On every other CPU, SMT siblings share one
    ``core_id`` and the split changes nothing.
    """
    seen: set[int] = set()
    cores: list[list[int]] = []
    for n in sorted(cpus):
        if n in seen:
            continue
        group = [c for c in cpus[n].siblings if c in cpus] or [n]
        by_id: dict[tuple[int | None, int | None, int | None], list[int]] = {}
        for c in group:
            info = cpus[c]
            by_id.setdefault((info.package, info.die, info.core_id), []).append(c)
        for members in by_id.values():
            members = sorted(set(members) - seen)
            if members:
                cores.append(members)
                seen.update(members)
    cores.sort(key=lambda m: m[0])
    return cores


def _read_caches(cpu_dir: Path, online: list[int], notes: list[str] | None = None
                 ) -> tuple[bool, dict[str, list[tuple[frozenset[int], int | None]]]]:
    """Per cache (L1d, L1i, L2, L3): distinct (CPU set, size), from cache/index*/.

    Returns (any cache directory seen, {name: [(cpus, size_bytes)]}); L2 and
    L3 are data or unified caches. The shared sets may include offline CPUs
    (offline-cpu0-node0), so every set is intersected with the online CPUs. A
    CPU already covered by a shared set of that cache is not read again: on a
    256-thread EPYC that halves the files read.
    """
    online_set = set(online)
    found = False
    levels: dict[str, dict[frozenset[int], int | None]] = {}
    covered: dict[str, set[int]] = {"L1d": set(), "L1i": set(), "L2": set(), "L3": set()}
    for n in online:
        cache_dir = cpu_dir / f"cpu{n}" / "cache"
        for name in list_dir(cache_dir):
            if not name.startswith("index"):
                continue
            idx = cache_dir / name
            level = read_int(idx / "level")
            if level is None:
                continue
            found = True
            if level not in (1, 2, 3):
                continue
            kind = (read_text(idx / "type") or "Unified").lower()
            if level == 1:
                key = "L1i" if kind == "instruction" else "L1d"
            elif kind == "instruction":
                continue
            else:
                key = f"L{level}"
            if n in covered[key]:
                continue          # this CPU's set for this cache is already known
            # hwloc reads shared_cpu_map; the two files come from one kernel mask,
            # but edited dumps (64amd64: map says the L2 is shared by the compute
            # unit, list says not) can disagree, and the map is the older, always
            # present file (96em64t has no list at all). So: map first.
            shared = read_cpumask(idx / "shared_cpu_map", notes, MAX_NUMBERED_DIRS)
            if shared is None:
                shared = read_cpulist(idx / "shared_cpu_list", notes, MAX_NUMBERED_DIRS)
            members = frozenset((set(shared or []) & online_set) | {n})
            covered[key].update(members)
            per_level = levels.setdefault(key, {})
            if members not in per_level or per_level[members] is None:
                per_level[members] = read_size(idx / "size", notes)
    return found, {key: sorted(d.items(), key=lambda kv: min(kv[0])) for key, d in levels.items()}


def _read_numa(root: Path, online: list[int], topo: Topology) -> None:
    node_dir = under(root, _NODE_DIR)
    present = numbered_dirs(node_dir, "node", topo.notes, limit=MAX_NUMA_NODES)
    listed = read_cpulist(node_dir / "online", topo.notes)
    ids = sorted(set(listed) & set(present)) if listed is not None else present
    online_set = set(online)
    if not ids:
        topo.notes.append("no NUMA nodes in /sys/devices/system/node: assuming one node")
        topo.numa_nodes = [NumaNode(0, list(online), [10])]
        return
    row_lengths = {len(ids), len(present), max(present, default=0) + 1}
    for k in ids:
        d = node_dir / f"node{k}"
        cpus = read_cpulist(d / "cpulist", topo.notes)
        if cpus is None:
            cpus = read_cpumask(d / "cpumap", topo.notes) or []
        cpus = sorted(set(cpus) & online_set)
        topo.numa_nodes.append(NumaNode(k, cpus, _distances(d / "distance", row_lengths, topo.notes)))
        node_total = _meminfo_total(read_lines(d / "meminfo"))
        if node_total is not None:
            topo.numa_memory_bytes[str(k)] = node_total
        if not cpus:
            topo.cpuless_numa_nodes.append(k)
    without = online_set - {c for node in topo.numa_nodes for c in node.cpus}
    if without:
        topo.notes.append(
            f"CPUs {format_cpulist(without)} belong to no online NUMA node (their node is offline); "
            "their memory is always remote")


def _distances(path: Path, nodes: set[int], notes: list[str]) -> list[int]:
    """A node's row of the SLIT distance matrix: one entry per node, 10 (local) to 255 (unreachable).

    ``nodes`` are the sensible row lengths: current kernels print one entry per
    online node, older ones one per possible node.
    """
    text = read_text(path)
    if not text:
        return []
    try:
        row = [parse_int(x, 0, 255) for x in text.split()]
    except GarbledValue as exc:
        notes.append(f"{shown(path)} is not a row of NUMA distances ({exc}): ignored")
        return []
    if len(row) not in nodes:
        notes.append(f"{shown(path)} lists {len(row)} distances for {min(nodes)} NUMA nodes: ignored")
        return []
    return row


def _from_sysfs(root: Path) -> Topology:
    cpu_dir = under(root, _CPU_DIR)
    topo = Topology(source="sysfs")
    present = _cpu_numbers(cpu_dir, topo.notes)
    online = _online_cpus(cpu_dir, present, topo.notes)
    online_set = set(online)
    topo.online_cpus = online
    offline = read_cpulist(cpu_dir / "offline", topo.notes)
    offline_set = (set(offline) & set(present)) if offline is not None else set()
    topo.offline_cpus = sorted((set(present) - online_set) | offline_set - online_set)
    topo.logical_cpus = len(online)

    cpus = {n: _read_cpu(cpu_dir, n, online_set, topo.notes) for n in online}
    no_topo = [n for n in online if not (cpu_dir / f"cpu{n}" / "topology").is_dir()]
    if no_topo:
        topo.notes.append(f"CPUs {format_cpulist(no_topo)} have no topology/ directory: each counted as its own core")

    # Packages and dies.
    by_pkg: dict[int, list[int]] = {}
    for n, info in cpus.items():
        by_pkg.setdefault(info.package if info.package is not None else 0, []).append(n)
    for pid in sorted(by_pkg, key=lambda p: min(by_pkg[p])):
        dies = sorted({cpus[n].die for n in by_pkg[pid] if cpus[n].die is not None})
        topo.package_list.append(Package(pid, sorted(by_pkg[pid]), dies))
    topo.packages = len(topo.package_list)

    # Caches.
    found, levels = _read_caches(cpu_dir, online, topo.notes)
    topo.l3_known = found
    if not found:
        topo.notes.append("no cache information in sysfs (container, VM or WSL): L3 (CCX) domains unknown")
    else:
        topo.l3_domains = [L3Domain(sorted(s), size) for s, size in levels.get("L3", [])]
        if not topo.l3_domains:
            topo.notes.append("the CPUs report no L3 cache")

    # Cores.
    core_groups = _group_cores(cpus)
    topo.cores = len(core_groups)
    topo.smt_threads_per_core = max((len(g) for g in core_groups), default=None)
    core_of = {c: i for i, g in enumerate(core_groups) for c in g}
    topo.l2_groups = [
        sorted(s) for s, _ in levels.get("L2", []) if len({core_of.get(c) for c in s}) > 1
    ] if found else []
    topo.core_caches = [Cache(key, sorted(s), size) for key in ("L2", "L1d", "L1i") for s, size in levels.get(key, [])]

    _read_numa(root, online, topo)
    l3_of = {c: i for i, d in enumerate(topo.l3_domains) for c in d.cpus}
    numa_of = {c: node.id for node in topo.numa_nodes for c in node.cpus}
    for g in core_groups:
        info = cpus[g[0]]
        topo.core_list.append(Core(
            package=info.package if info.package is not None else 0,
            core_id=info.core_id if info.core_id is not None else g[0],
            cpus=g, die=info.die, l3=l3_of.get(g[0]), numa=numa_of.get(g[0])))
    topo.cpu_kinds = _cpu_kinds(cpu_dir, online)
    if topo.offline_cpus:
        topo.notes.append(f"CPUs {format_cpulist(topo.offline_cpus)} are offline")
    return topo


# Two core types differ by far more than preferred-core rankings do: Raptor Lake P/E 64 vs 39,
# Lakefield 43 vs 28, GB10 X925/A725 997-1024 vs 718-731, while AMD/Intel "preferred cores" on one
# core type spread their CPPC highest_perf in small steps. A jump of 20% or more between
# neighbouring values starts a new kind (the idea of hwloc's cpukinds, from the same files).
_KIND_GAP = 1.2
_KIND_SOURCES = ("cpu_capacity", "acpi_cppc/highest_perf", "cpufreq/cpuinfo_max_freq")


def _cpu_kinds(cpu_dir: Path, online: list[int]) -> list[CpuKind]:
    """Core types of a hybrid chip from per-CPU performance figures; [] on uniform chips or no data."""
    for source in _KIND_SOURCES:
        perf = {n: read_int(cpu_dir / f"cpu{n}" / source) for n in online}
        if not online or any(v is None or v <= 0 for v in perf.values()):
            continue              # a figure missing on some CPUs cannot separate kinds: try the next file
        values = sorted(set(perf.values()))
        groups: list[list[int]] = [[values[0]]]
        for v in values[1:]:
            if v >= groups[-1][-1] * _KIND_GAP:
                groups.append([v])
            else:
                groups[-1].append(v)
        if len(groups) < 2:
            return []
        return [CpuKind(sorted(n for n in online if perf[n] in g), max(g), source) for g in groups]
    return []


def _from_cpuinfo(root: Path) -> Topology:
    """Counts from /proc/cpuinfo alone (no sysfs): packages, cores, logical CPUs.

    Some dumps keep only the first processor entry; ``siblings`` and ``cpu
    cores`` are per package, so the counts come from them when they exceed
    the entries listed.
    """
    topo = Topology(source="cpuinfo")
    entries: list[dict[str, str]] = []
    current: dict[str, str] = {}
    for line in (read_text(under(root, "/proc/cpuinfo")) or "").splitlines():
        if not line.strip():
            if current:
                entries.append(current)
            current = {}
            continue
        key, _, value = line.partition(":")
        current[key.strip()] = value.strip()
    if current:
        entries.append(current)
    procs = [e for e in entries if "processor" in e]
    if not procs:
        topo.notes.append("/proc/cpuinfo lists no processors: topology unknown")
        return topo
    pkgs = sorted({e.get("physical id", "0") for e in procs})
    topo.packages = len(pkgs)
    try:
        siblings = parse_int(procs[0].get("siblings", "0"), 0, MAX_CPUS)
        per_pkg_cores = parse_int(procs[0].get("cpu cores", "0"), 0, MAX_CPUS)
    except GarbledValue as exc:
        topo.notes.append(f"/proc/cpuinfo 'siblings' or 'cpu cores' is garbled ({exc}): ignored")
        siblings = per_pkg_cores = 0
    distinct_cores = {(e.get("physical id"), e.get("core id")) for e in procs if "core id" in e}
    topo.logical_cpus = min(max(len(procs), siblings * len(pkgs)), MAX_CPUS)
    topo.cores = max(len(distinct_cores), per_pkg_cores * len(pkgs)) or None
    if topo.cores:
        topo.smt_threads_per_core = max(1, topo.logical_cpus // topo.cores)
    if len(procs) < topo.logical_cpus:
        topo.notes.append(
            f"/proc/cpuinfo lists {len(procs)} processor(s) but says {siblings} per package: "
            "counts taken from 'siblings' and 'cpu cores'")
    numbers = [cpu_number(e["processor"]) for e in procs]
    if None not in numbers:
        topo.online_cpus = sorted(n for n in numbers if n is not None)
    if len(topo.online_cpus) != topo.logical_cpus:
        topo.online_cpus = list(range(topo.logical_cpus))
    topo.notes.append("no /sys/devices/system/cpu: L3 (CCX) domains and NUMA nodes unknown")
    return topo


def _from_psutil() -> Topology:
    """Counts only, for platforms without sysfs (macOS, Windows)."""
    import psutil  # imported here: only the non-Linux path needs it

    topo = Topology(source="psutil")
    topo.logical_cpus = psutil.cpu_count(logical=True)
    topo.cores = psutil.cpu_count(logical=False)
    if topo.logical_cpus:
        topo.online_cpus = list(range(topo.logical_cpus))
    if topo.cores and topo.logical_cpus:
        topo.smt_threads_per_core = max(1, topo.logical_cpus // topo.cores)
    topo.notes.append(
        f"no Linux sysfs on {sys.platform}: only CPU counts are known (packages, L3 (CCX) domains "
        "and NUMA nodes unknown)")
    return topo


def _fill_affinity(topo: Topology, root: Path, live: bool) -> None:
    aff = topo.affinity
    limits = read_cgroup_limits(root) if sys.platform.startswith("linux") or not live else CgroupLimits()
    online = set(topo.online_cpus)
    if limits.cpuset_cpus is not None:
        cpuset = sorted(set(limits.cpuset_cpus) & online) if online else limits.cpuset_cpus
        if cpuset:
            aff.cgroup_cpuset = cpuset
            aff.allowed_mems = limits.cpuset_mems
        else:   # a cpuset naming no online CPU cannot be what the process runs on: ignore it
            topo.notes.append(f"the cgroup cpuset ({limits.cpuset_path}) lists no online CPU: ignored")
    aff.cpu_quota = limits.cpu_quota
    if live and hasattr(os, "sched_getaffinity"):
        try:
            aff.allowed_cpus = sorted(os.sched_getaffinity(0))
        except OSError as exc:
            topo.notes.append(f"sched_getaffinity failed ({exc}): affinity unknown")
    elif live:
        try:
            import psutil

            aff.allowed_cpus = sorted(psutil.Process().cpu_affinity())
        except Exception:  # noqa: BLE001 - macOS has no cpu_affinity; psutil may be absent
            pass
    if aff.allowed_cpus is None:
        if aff.cgroup_cpuset is not None:
            aff.allowed_cpus = list(aff.cgroup_cpuset)
        elif topo.online_cpus:
            aff.allowed_cpus = list(topo.online_cpus)
    if aff.allowed_cpus is not None:
        usable = len(aff.allowed_cpus)
        if aff.cpu_quota is not None:
            usable = max(1, min(usable, math.ceil(aff.cpu_quota - 1e-9)))
        aff.usable_cpus = usable
    elif aff.cpu_quota is not None:
        aff.usable_cpus = max(1, math.ceil(aff.cpu_quota - 1e-9))
    if aff.allowed_cpus is not None and topo.logical_cpus and len(aff.allowed_cpus) < topo.logical_cpus:
        how = "the cgroup cpuset" if aff.allowed_cpus == aff.cgroup_cpuset else "the CPU affinity"
        topo.notes.append(
            f"{how} allows {len(aff.allowed_cpus)} of {topo.logical_cpus} CPUs "
            f"({format_cpulist(aff.allowed_cpus)}): size thread pools to that")
    if aff.cpu_quota is not None:
        topo.notes.append(
            f"cgroup CPU quota = {aff.cpu_quota:g} CPUs ({limits.quota_path}): more busy threads than "
            f"{aff.usable_cpus} only add throttling")
    if live:   # a captured tree without cgroup files is normal, not worth a note; garbled ones are
        topo.notes.extend(limits.notes)
    else:
        topo.notes.extend(n for n in limits.notes if n.endswith(": ignored"))
