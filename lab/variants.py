"""The thread sweep's variants, derived from the Topology: what is worth measuring on this machine.

PyTorch's defaults, a thread ladder (1, 2, 4, ... and the physical core
count), one CCX (L3 domain) with and without SMT, the performance cores of a
hybrid chip, each NUMA node, all cores with and without SMT; capped by a
cgroup CPU quota and the CPUs this process may use. Also the CPU sets a person
may pin a single training run to (the Training page's "Pin to").
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from cpudoctor.model import Topology
from cpudoctor.kits.cpulist import format_cpulist
from cpudoctor.kits.plural import plural


@dataclass
class Variant:
    name: str
    threads: int | None           # None = PyTorch default
    cpus: list[int] | None        # None = not pinned
    group: str                    # default | threads | pinning

    def key(self) -> tuple:
        return (self.threads, tuple(self.cpus) if self.cpus is not None else None)


# --------------------------------------------------------------------------- variants


def usable_cpus(topo: Topology, allowed: list[int] | None = None) -> list[int]:
    """CPUs this process may use: the affinity mask, within the online CPUs when known."""
    allowed = allowed if allowed is not None else topo.affinity.allowed_cpus
    if allowed is None and hasattr(os, "sched_getaffinity"):
        allowed = sorted(os.sched_getaffinity(0))
    online = set(topo.online_cpus) if topo.online_cpus else None
    cpus = [c for c in (allowed or topo.online_cpus) if online is None or c in online]
    return sorted(set(cpus))


def _cores(topo: Topology, usable: list[int]) -> list[list[int]]:
    """Usable CPUs grouped by physical core (each CPU its own core when the topology is unknown)."""
    u = set(usable)
    groups = [sorted(c for c in core.cpus if c in u) for core in topo.core_list]
    groups = [g for g in groups if g]
    seen = {c for g in groups for c in g}
    groups += [[c] for c in usable if c not in seen]
    return sorted(groups, key=lambda g: g[0])


def thread_ladder(n: int, cores: int) -> list[int]:
    """1, 2, 4, ... up to n, plus the physical core count and n itself."""
    ladder = {1, n, cores}
    t = 2
    while t < n:
        ladder.add(t)
        t *= 2
    return sorted(x for x in ladder if 1 <= x <= n)


def derive_variants(topo: Topology, allowed: list[int] | None = None) -> list[Variant]:
    """The sweep's variants for this topology: defaults, a thread ladder, then pinning sets."""
    usable = usable_cpus(topo, allowed)
    if not usable:
        return [Variant("PyTorch defaults", None, None, "default")]
    cores = _cores(topo, usable)
    firsts = [g[0] for g in cores]
    smt = any(len(g) > 1 for g in cores)
    variants = [Variant("PyTorch defaults", None, None, "default")]
    # A cgroup CPU quota (containers) caps useful threads below the CPUs we may run on.
    quota = topo.affinity.usable_cpus
    limit = min(len(usable), quota) if quota else len(usable)
    for t in thread_ladder(limit, min(len(cores), limit)):
        variants.append(Variant(plural(t, "thread"), t, None, "threads"))

    def first_threads(cpus: set[int]) -> list[int]:
        return [g[0] for g in cores if g[0] in cpus]

    u = set(usable)
    l3s = [sorted(set(d.cpus) & u) for d in topo.l3_domains]
    l3s = [d for d in l3s if d]
    if len(l3s) > 1:
        ccx = l3s[0]
        fc = first_threads(set(ccx))
        variants.append(Variant(f"one CCX, no SMT (CPUs {format_cpulist(fc)})", len(fc), fc, "pinning"))
        if smt:
            variants.append(Variant(f"one CCX with SMT (CPUs {format_cpulist(ccx)})", len(ccx), ccx, "pinning"))
    kinds = getattr(topo, "cpu_kinds", None) or []
    if len(kinds) > 1:   # hybrid: OpenMP barriers wait for the efficiency cores; measure the P cores alone
        fast = sorted(set(kinds[-1].cpus) & u)
        fc = first_threads(set(fast))
        if len(fc) > 1:
            variants.append(Variant(f"performance cores, no SMT (CPUs {format_cpulist(fc)})", len(fc), fc, "pinning"))
            if len(fast) > len(fc):
                variants.append(Variant(f"performance cores with SMT (CPUs {format_cpulist(fast)})", len(fast), fast,
                                        "pinning"))
    nodes = [(n.id, sorted(set(n.cpus) & u)) for n in topo.numa_nodes]
    nodes = [(i, c) for i, c in nodes if c]
    if len(nodes) > 1:
        for node_id, cpus in nodes:
            fc = first_threads(set(cpus))
            variants.append(Variant(f"NUMA node {node_id}, no SMT (CPUs {format_cpulist(fc)})", len(fc), fc, "pinning"))
    if smt:
        variants.append(Variant(f"all cores, no SMT (CPUs {format_cpulist(firsts)})", len(firsts), firsts, "pinning"))
        variants.append(Variant(f"all cores with SMT (CPUs {format_cpulist(usable)})", len(usable), usable, "pinning"))
    out: list[Variant] = []
    seen: set[tuple] = set()
    for v in variants:
        if v.threads is not None and v.threads > limit:
            v.threads = limit
            v.name += f", {plural(limit, 'thread')} (CPU quota)"
        # Pinning to every usable CPU with one thread each is what the unpinned run already does.
        key = v.key() if v.cpus != usable or smt else (v.threads, None)
        if key not in seen:
            seen.add(key)
            out.append(v)
    return out


def pinning_choices(topo: Topology, allowed: list[int] | None = None) -> list[tuple[str, list[int]]]:
    """CPU sets a person may pin a training run to: each CCX (L3), each NUMA node, all cores without SMT."""
    usable = usable_cpus(topo, allowed)
    u = set(usable)
    cores = _cores(topo, usable)
    choices: list[tuple[str, list[int]]] = []
    l3s = [sorted(set(d.cpus) & u) for d in topo.l3_domains]
    l3s = [d for d in l3s if d]
    if len(l3s) > 1:
        word = "CCX" if topo.l3_is_ccx() else "L3 domain"
        choices += [(f"{word} {i} (CPUs {format_cpulist(d)})", d) for i, d in enumerate(l3s)]
    kinds = getattr(topo, "cpu_kinds", None) or []
    if len(kinds) > 1:   # hybrid: the performance cores alone
        fast = sorted(set(kinds[-1].cpus) & u)
        if fast:
            choices.append((f"performance cores (CPUs {format_cpulist(fast)})", fast))
    nodes = [(n.id, sorted(set(n.cpus) & u)) for n in topo.numa_nodes]
    nodes = [(i, c) for i, c in nodes if c]
    if len(nodes) > 1:
        choices += [(f"NUMA node {i} (CPUs {format_cpulist(c)})", c) for i, c in nodes]
    if any(len(g) > 1 for g in cores):
        firsts = [g[0] for g in cores]
        choices.append((f"all cores, no SMT (CPUs {format_cpulist(firsts)})", firsts))
    return choices
