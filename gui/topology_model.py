"""What the topology map says, computed without Qt: the tree it draws, labels, tooltips, temperatures.

:mod:`cpudoctor.gui.topology_map` draws; this module decides. The tree is
:func:`cpudoctor.render.topology.build_tree` (the one the text report prints),
with shared L2 caches inserted when the map shows caches; the texts are plain
functions of a :class:`Topology` and the live values, so they are tested
without a window.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from cpudoctor.model import Topology
from cpudoctor.kits.cpulist import format_cpulist
from cpudoctor.kits.format import cache_size, clock, percent, size
from cpudoctor.render.words import plural
from cpudoctor.render.topology import Node, build_tree, cpus_text, is_ccx_vendor

CACHE_ORDER = ("L2", "L1d", "L1i")            # top to bottom above a core's threads, as lstopo stacks them
NUMA_MEMORY_NOTE = ("the kernel's MemTotal for this node (/sys/devices/system/node/node{id}/meminfo): "
                    "memory the kernel manages there, less than what is installed (firmware and kernel "
                    "reservations), and in a VM it grows or shrinks with memory hot-plug or a balloon driver")
NODE_MEMORY_SLACK = 0.02                      # node totals within 2 % of MemTotal "add up"


def numa_memory_line(topo: Topology, mem_total: int | None, vm: bool | None, read_at: str | None) -> str:
    """What the NUMA nodes' memory figures are and when they move, when a reader would wonder: they do not
    add up to the machine's MemTotal (the Overview's figure), or the machine is a VM (where they move).

    Empty when there is nothing to explain (no per-node figures; bare metal whose nodes add up).
    """
    nodes = {int(k): v for k, v in topo.numa_memory_bytes.items() if str(k).isdigit() and v}
    if not nodes:
        return ""
    total = sum(nodes.values())
    adds_up = mem_total is not None and abs(total - mem_total) <= NODE_MEMORY_SLACK * mem_total
    if adds_up and not vm:
        return ""
    when = f", read at {read_at.replace('T', ' ')[:16]} UTC" if read_at else ""
    if len(nodes) == 1:
        (nid, mem), = nodes.items()
        what = (f"NUMA node {nid}'s {size(mem)} is the kernel's MemTotal for that node "
                f"(/sys/devices/system/node/node{nid}/meminfo){when}")
    else:
        what = (f"Memory per NUMA node ({size(total)} in all) is each node's MemTotal from the kernel "
                f"(/sys/devices/system/node/node*/meminfo){when}")
    machine = f"; the machine's MemTotal (the Overview's figure) is {size(mem_total)}" if mem_total else ""
    moves = ("In a VM the per-node figure moves with memory hot-plug and the balloon driver, and need not add up "
             "to MemTotal; Refresh reads it again." if vm or not adds_up else "")
    return f"{what}{machine}. {moves}".strip()


NUMA_DISTANCE_NOTE = ("Relative memory access cost between nodes as the firmware reports it (ACPI SLIT): "
                      "10 = local; 20 = twice as far. Keep a job and its memory on one node.")
_TCCD_RE = re.compile(r"^k10temp Tccd(\d+)(?: #(\d+))?$")


@dataclass(frozen=True)
class CpuFacts:
    """Where one logical CPU sits, for tooltips and selections."""

    core: int                     # index into topology.core_list
    core_id: int
    siblings: list[int]
    package: int
    l3: int | None
    numa: int | None
    die: int | None
    kind: str | None              # "performance" | "efficiency" on hybrid chips, else None


@dataclass(frozen=True)
class CcxTemperature:
    """One CCD's temperature shown on a CCX (L3 domain)."""

    celsius: float
    sensor: str                   # "k10temp Tccd1"
    shared_with: int              # other CCXs on the same CCD (Zen 2: 1)


def index_cpus(topo: Topology) -> dict[int, CpuFacts]:
    """Per-CPU facts; on hybrid chips the kinds come slowest first, like hwloc's cpukinds."""
    fast = set(topo.cpu_kinds[-1].cpus) if len(topo.cpu_kinds) >= 2 else None
    out: dict[int, CpuFacts] = {}
    for i, core in enumerate(topo.core_list):
        for cpu in core.cpus:
            out[cpu] = CpuFacts(i, core.core_id, list(core.cpus), core.package, core.l3, core.numa, core.die,
                                None if fast is None else ("performance" if cpu in fast else "efficiency"))
    return out


# -- the tree -------------------------------------------------------------------

def map_tree(topo: Topology, caches: bool = False) -> Node:
    """The containment tree the map draws; with ``caches``, an L2 shared by several cores groups them."""
    tree = build_tree(topo)
    if caches:
        for group in topo.l2_groups:
            _insert_shared_l2(tree, topo, group)
    return tree


def _insert_shared_l2(tree: Node, topo: Topology, group: list[int]) -> None:
    wanted = set(group)
    for node in tree.walk():
        cores = [c for c in node.children if c.kind == "core" and set(c.cpus) <= wanted]
        if cores and {cpu for c in cores for cpu in c.cpus} == wanted:
            size = next((c.size_bytes for c in topo.core_caches if c.name == "L2" and set(c.cpus) == wanted), None)
            l2 = Node("l2", cores[0].index, f"L2 {cache_size(size)} · shared by {len(cores)} cores",
                      sorted(wanted), cores)
            node.children = [c for c in node.children if c not in cores] + [l2]
            node.children.sort(key=lambda o: o.cpus[:1] or [1 << 30])
            return


def core_cache_labels(topo: Topology) -> dict[int, list[str]]:
    """Core index -> its cache strips ("L2 1 MiB", "L1d 32 KiB", ...); a shared L2 is its own box instead."""
    core_of = {cpu: i for i, core in enumerate(topo.core_list) for cpu in core.cpus}
    shared = {frozenset(g) for g in topo.l2_groups}
    out: dict[int, list[str]] = {}
    for name in CACHE_ORDER:
        for cache in topo.core_caches:
            if cache.name != name or (name == "L2" and frozenset(cache.cpus) in shared):
                continue
            cores = {core_of[c] for c in cache.cpus if c in core_of}
            for core in sorted(cores):
                out.setdefault(core, []).append(f"{name} {cache_size(cache.size_bytes)}")
    return out


def box_label(node: Node, topo: Topology) -> str:
    """The text in a box's header: ``Package 0 · 8 cores``, ``NUMA node 1 · 31 GiB``, ``L3 32 MiB · CCX 2``."""
    if node.kind == "package":
        n_cores = sum(1 for c in topo.core_list if c.package == node.index)
        # lstopo's logical numbering: Arm firmware gives ids such as 36 and 8442
        ids = sorted(pk.id for pk in topo.package_list)
        ordinal = ids.index(node.index) if node.index in ids else node.index
        name = f"Package {ordinal}" if ordinal == node.index else f"Package {ordinal} (id {node.index})"
        return f"{name} · {n_cores} cores"
    return node.label


# -- tooltips -------------------------------------------------------------------

def pu_tooltip(cpu: int, topo: Topology | None, facts: CpuFacts | None, *, allowed: bool = True,
               load: float | None = None, clock_mhz: float | None = None, markers: list[str] | None = None) -> str:
    lines = [f"<b>CPU {cpu}</b>"]
    if facts is not None:
        where = f"core {facts.core_id}, package {facts.package}"
        if facts.die is not None:
            where += f", die {facts.die}"
        lines.append(where)
        if facts.kind:
            lines.append("performance core (P)" if facts.kind == "performance" else "efficiency core (E)")
        sib = [c for c in facts.siblings if c != cpu]
        lines.append(f"SMT siblings: {format_cpulist(sib)}" if sib else "SMT siblings: none")
        if topo is not None and facts.l3 is not None:
            d = topo.l3_domains[facts.l3]
            name = f"CCX {facts.l3}" if is_ccx_vendor(topo) else f"L3 #{facts.l3}"
            peers = [c for c in d.cpus if c != cpu]
            lines.append(f"{name} peers (share its L3): {cpus_text(peers)}")
        if topo is not None:
            caches = [f"{c.name} {cache_size(c.size_bytes)}" + (f" (shared with {cpus_text([x for x in c.cpus if x != cpu])})"
                                                               if len(c.cpus) > len(facts.siblings) else "")
                      for c in topo.core_caches if cpu in c.cpus]
            if caches:
                lines.append("Caches: " + ", ".join(caches))
        lines.append(f"NUMA node: {facts.numa}" if facts.numa is not None else "NUMA node: none online")
    if not allowed:
        lines.append("<i>Not allowed for this process (CPU affinity / cgroup cpuset)</i>")
    live = []
    if load is not None:
        live.append(f"load {percent(load)}")
    if clock_mhz:
        live.append(f"clock {clock(clock_mhz)}")
    if live:
        lines.append(", ".join(live))
    if markers:
        shown = markers[:8]
        more = len(markers) - len(shown)
        lines.append("Running here: " + ", ".join(shown) + (f" (+{more} more)" if more > 0 else ""))
    return "<br>".join(lines)


def box_tooltip(node: Node, label: str, topo: Topology | None, facts: dict[int, CpuFacts],
                loads: dict[int, float], temperature: CcxTemperature | None = None) -> str:
    cpus = node.cpus
    n_cores = len({facts[c].core for c in cpus if c in facts})
    text = f"<b>{label}</b><br>{plural(n_cores, 'core')}, {len(cpus)} CPUs: {cpus_text(cpus)}"
    shown = [loads[c] for c in cpus if c in loads]
    if shown:
        text += f"<br>average load {percent(sum(shown) / len(shown))}"
    if temperature is not None:
        text += f"<br>{temperature_text(temperature)}"
    if node.kind == "numa" and topo is not None:
        mem = topo.numa_memory_bytes.get(str(node.index))
        if mem:
            text += (f"<br>Memory: {size(mem)}, " + NUMA_MEMORY_NOTE.format(id=node.index)
                     + (f"; the machine's total is {size(topo.memory_total_bytes)} (MemTotal)"
                        if len(topo.numa_memory_bytes) > 1 and topo.memory_total_bytes else ""))
        row = next((n.distances for n in topo.numa_nodes if n.id == node.index), [])
        if len(row) > 1:
            text += f"<br>Distances to nodes {', '.join(str(n.id) for n in topo.numa_nodes)}: {' '.join(map(str, row))}"
    if node.kind == "core" and topo is not None:
        caches = [f"{c.name} {cache_size(c.size_bytes)}" for c in topo.core_caches if set(c.cpus) & set(cpus)]
        if caches:
            text += "<br>Caches: " + ", ".join(dict.fromkeys(caches))
    return text + "<br><i>Click to select, ctrl-click to add</i>"


def temperature_text(t: CcxTemperature) -> str:
    shared = (f", shared with {t.shared_with} other CCX{'s' if t.shared_with != 1 else ''} on the same CCD"
              if t.shared_with else "")
    return f"{t.celsius:.0f} °C ({t.sensor}: the chiplet's sensor{shared})"


# -- NUMA distances -------------------------------------------------------------

def numa_distances(topo: Topology) -> tuple[list[int], list[list[int | None]]] | None:
    """(node ids, matrix) when there are two or more nodes with a distance row each, else None."""
    nodes = [n for n in topo.numa_nodes if n.distances]
    if len(nodes) < 2:
        return None
    ids = [n.id for n in topo.numa_nodes]
    return ids, [[row[i] if i < len(row) else None for i in range(len(ids))] for row in (n.distances for n in topo.numa_nodes)]


# -- per-CCD temperatures ---------------------------------------------------------

def ccx_temperatures(topo: Topology, temps_c: dict[str, float]) -> dict[int, CcxTemperature]:
    """L3 domain index -> the temperature of the CCD it sits on, from k10temp's Tccd sensors.

    k10temp reports one Tccd per populated chiplet (numbered by its physical
    slot, so an 8-CCD socket with 4 populated reads Tccd1, Tccd3, Tccd5,
    Tccd7); a second socket's chip comes as ``#2``. The n-th sensor of a
    socket belongs to the n-th group of that socket's L3 domains: one CCX per
    CCD from Zen 3 on, two on Zen 2. When the counts do not divide evenly the
    mapping would be a guess, and nothing is shown.
    """
    if not temps_c or not is_ccx_vendor(topo):
        return {}
    by_socket: dict[int, list[tuple[int, str, float]]] = {}
    for key, value in temps_c.items():
        m = _TCCD_RE.match(key)
        if m:
            socket = int(m.group(2) or 1) - 1
            by_socket.setdefault(socket, []).append((int(m.group(1)), key, value))
    if not by_socket:
        return {}
    pkg_of_l3 = {}
    for core in topo.core_list:
        if core.l3 is not None:
            pkg_of_l3.setdefault(core.l3, core.package)
    packages = sorted({p.id for p in topo.package_list})
    out: dict[int, CcxTemperature] = {}
    for socket, sensors in by_socket.items():
        if socket >= len(packages):
            continue
        domains = sorted(i for i, pkg in pkg_of_l3.items() if pkg == packages[socket])
        sensors.sort()
        if not domains or len(domains) % len(sensors):
            continue
        per = len(domains) // len(sensors)
        for n, (_slot, key, value) in enumerate(sensors):
            for l3 in domains[n * per:(n + 1) * per]:
                out[l3] = CcxTemperature(value, key, per - 1)
    return out
