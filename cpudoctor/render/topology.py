"""Topology sections for text and Markdown reports, and the containment tree they share.

The tree is built the way hwloc nests objects: by CPU-set inclusion, not by a
fixed level order. Usually Package > NUMA node > L3 > Core, but a NUMA node
may span several packages (IBM x3950: one node = 4 packages), one L3 may hold
two NUMA nodes (Intel SNC2), or a NUMA node may equal an L3 (Kunpeng 920).
Sorting every object by size (larger first; at equal size package, then NUMA
node, then L3) and hanging each under the smallest object already placed
that contains it reproduces all of these. The GUI map draws the same tree.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from cpudoctor.kits.cpulist import format_cpulist
from cpudoctor.model import Topology
from cpudoctor.kits.format import cache_size, size
from cpudoctor.kits.escape import md_escape
from cpudoctor.render.words import plural

_RANK = {"machine": -1, "package": 0, "numa": 1, "l3": 2, "core": 3}


@dataclass
class Node:
    """One box of the topology tree: a package, NUMA node, L3 domain or core."""

    kind: str                     # machine | package | numa | l3 | core
    index: int                    # package id, NUMA node id, L3 index, index into core_list
    label: str
    cpus: list[int]
    children: list["Node"] = field(default_factory=list)

    def walk(self):
        yield self
        for child in self.children:
            yield from child.walk()


def cpus_text(cpus: list[int], limit: int = 40) -> str:
    """A cpulist; long lists with a fixed stride use the kernel's ``a-b:stride`` form."""
    text = format_cpulist(cpus)
    if len(text) <= limit or len(cpus) < 4:
        return text
    parts: list[str] = []
    i = 0
    while i < len(cpus):
        j = i + 1
        if j < len(cpus):
            stride = cpus[j] - cpus[i]
            while j + 1 < len(cpus) and cpus[j + 1] - cpus[j] == stride:
                j += 1
            if j - i >= 3:
                parts.append(f"{cpus[i]}-{cpus[j]}" + (f":{stride}" if stride > 1 else ""))
                i = j + 1
                continue
        parts.append(str(cpus[i]))
        i += 1
    strided = ",".join(parts)
    return strided if len(strided) < len(text) else text


def is_ccx_vendor(topo: Topology) -> bool:
    return topo.l3_is_ccx()


def l3_label(topo: Topology, index: int, short: bool = False) -> str:
    """``L3 32 MiB · CCX 3`` on AMD, ``L3 #3 · 30 MiB`` elsewhere."""
    l3 = cache_size(topo.l3_domains[index].size_bytes, "?")
    if is_ccx_vendor(topo):
        return f"CCX {index} · L3 {l3}" if short else f"L3 {l3} · CCX {index}"
    return f"L3 #{index} · {l3}"


def numa_label(topo: Topology, node_id: int) -> str:
    mem = topo.numa_memory_bytes.get(str(node_id))
    return f"NUMA node {node_id}" + (f" · {size(mem)}" if mem else "")


def build_tree(topo: Topology) -> Node:
    """The containment tree of packages, NUMA nodes, L3 domains and cores under a machine node.

    CPU-less NUMA nodes (memory only) hang under the machine at the end.
    """
    machine = Node("machine", 0, "Machine", list(topo.online_cpus))
    objects: list[Node] = []
    for p in topo.package_list:
        objects.append(Node("package", p.id, f"Package {p.id}", list(p.cpus)))
    for n in topo.numa_nodes:
        if n.cpus:
            objects.append(Node("numa", n.id, numa_label(topo, n.id), list(n.cpus)))
    for i, d in enumerate(topo.l3_domains):
        objects.append(Node("l3", i, l3_label(topo, i), list(d.cpus)))
    for i, c in enumerate(topo.core_list):
        objects.append(Node("core", i, f"Core {c.core_id}", list(c.cpus)))
    # Equal sets nest in rank order (Package 0 > NUMA node 0 with the same CPUs), as in lstopo.
    # Two objects of one kind with the same CPUs (a damaged capture repeats an L3 record 700 times) are siblings,
    # not one inside the other: nested, they made a tree 700 deep that drawing it walked for minutes.
    objects.sort(key=lambda o: (-len(o.cpus), _RANK[o.kind], o.cpus[:1]))
    by_cpu: dict[int, list[tuple[frozenset[int], Node]]] = {}     # CPU -> the placed objects holding it, in order
    for obj in objects:
        cpus = frozenset(obj.cpus)
        parent, best = machine, None
        # smallest containing (every container holds the object's first CPU); at equal size the later (lower) one
        for pset, pnode in by_cpu.get(obj.cpus[0], ()) if obj.cpus else ():
            if pnode.kind == obj.kind and pset == cpus:
                continue
            if cpus <= pset and (best is None or len(pset) <= best):
                parent, best = pnode, len(pset)
        parent.children.append(obj)
        if obj.kind != "core":
            for cpu in cpus:
                by_cpu.setdefault(cpu, []).append((cpus, obj))
    for node in machine.walk():
        node.children.sort(key=lambda o: (o.cpus[:1] or [1 << 30], _RANK[o.kind]))
    for nid in topo.cpuless_numa_nodes:
        machine.children.append(Node("numa", nid, numa_label(topo, nid) + " (no CPUs)", []))
    return machine


def summary_line(topo: Topology) -> str:
    def count(n: int | None, word: str) -> str:
        return f"{word}s unknown" if n is None else plural(n, word)

    parts = [count(topo.packages, "package"), count(topo.cores, "core"),
             count(topo.logical_cpus, "logical CPU")]
    if topo.smt_threads_per_core:
        parts[-1] += f" (SMT {topo.smt_threads_per_core})" if topo.smt_threads_per_core > 1 else " (no SMT)"
    if topo.l3_known and not topo.l3_domains:
        parts.append("no L3")
    elif topo.l3_known:
        n = len(topo.l3_domains)
        parts.append(plural(n, "L3 domain") + (
            " (CCX)" if n == 1 and is_ccx_vendor(topo) else " (CCXs)" if is_ccx_vendor(topo) else ""))
    else:
        parts.append("L3 unknown")
    if topo.numa_nodes:
        parts.append(count(len(topo.numa_nodes), "NUMA node"))
    return ", ".join(parts)


def usable_line(topo: Topology) -> str | None:
    """``Usable: 4 CPUs (allowed 0-31 by affinity; cgroup quota 4 CPUs)``."""
    aff = topo.affinity
    if aff.usable_cpus is None:
        return None
    bits = []
    if aff.allowed_cpus is not None:
        if topo.online_cpus and set(aff.allowed_cpus) >= set(topo.online_cpus):
            bits.append("all online CPUs allowed")
        else:
            src = "cgroup cpuset" if aff.allowed_cpus == aff.cgroup_cpuset else "CPU affinity"
            bits.append(f"allowed {cpus_text(aff.allowed_cpus)} by the {src}")
    if aff.cpu_quota is not None:
        bits.append(f"cgroup quota {aff.cpu_quota:g} CPUs")
    return f"Usable: {plural(aff.usable_cpus, 'CPU')}" + (
        f" — {'; '.join(bits)}" if bits else "")


_SHOWN_ELSEWHERE = ("the cgroup cpuset allows", "the CPU affinity allows", "cgroup CPU quota")


def display_notes(topo: Topology) -> list[str]:
    """Notes not already said by the Usable and Offline lines, and whether the nodes' memory adds up."""
    notes = [n for n in topo.notes
             if not n.startswith(_SHOWN_ELSEWHERE) and not (n.startswith("CPUs ") and n.endswith(" are offline"))]
    memory = memory_note(topo)
    return notes + [memory] if memory else notes


def machine_memory(topo: Topology) -> str:
    """" (23.5 GiB total)" from MemTotal, never the nodes' sum (memory_note says when they differ); a tree
    without /proc/meminfo says where its figure comes from instead."""
    if topo.memory_total_bytes:
        return f" ({size(topo.memory_total_bytes)} total)"
    if topo.numa_memory_bytes:
        return f" ({size(sum(topo.numa_memory_bytes.values()))} in its NUMA nodes; MemTotal unknown)"
    return ""


NODE_MEMORY_TOLERANCE = 0.02      # nodes' totals within 2 % of MemTotal add up (firmware and kernel reservations)


def memory_note(topo: Topology) -> str:
    """"" when the NUMA nodes' memory adds up to MemTotal, else what each says (the machine's figure is MemTotal)."""
    total, nodes = topo.memory_total_bytes, sum(topo.numa_memory_bytes.values())
    if not total or not nodes or abs(nodes - total) <= NODE_MEMORY_TOLERANCE * total:
        return ""
    each = "the NUMA node's total" if len(topo.numa_memory_bytes) == 1 else "the NUMA nodes' totals add up to"
    return (f"{each} {size(nodes)}, but the machine has {size(total)} (MemTotal in /proc/meminfo): this kernel's "
            "per-node totals do not add up (seen in VMs with memory hot-plug or a balloon, where they move); "
            "the machine's figure is MemTotal")


def _core_cells(topo: Topology, node: Node) -> list[str]:
    cells = []
    for child in node.children:
        if child.kind == "core":
            core = topo.core_list[child.index]
            cells.append(f"Core {core.core_id}: PU {' '.join(map(str, core.cpus))}")
    return cells


def _tree_lines(topo: Topology, node: Node, depth: int, out: list[str]) -> None:
    pad = "  " * depth
    if node.kind != "machine":
        suffix = f"  CPUs {cpus_text(node.cpus)}" if node.cpus else ""
        if node.kind == "numa":
            nd = next((n for n in topo.numa_nodes if n.id == node.index), None)
            if nd is not None and nd.distances and len(topo.numa_nodes) > 1:
                suffix += f"  distances {' '.join(map(str, nd.distances))}"
        out.append(f"{pad}{node.label}{suffix}")
    cells = _core_cells(topo, node)
    if cells:
        width = max(len(c) for c in cells) + 3
        per_line = max(1, min(4, 96 // width))
        for i in range(0, len(cells), per_line):
            out.append(pad + "  " + "".join(c.ljust(width) for c in cells[i:i + per_line]).rstrip())
    for child in node.children:
        if child.kind != "core":
            _tree_lines(topo, child, depth + 1, out)


def tree_lines(topo: Topology) -> list[str]:
    """The lstopo-like indented tree only (no summary or notes)."""
    if not topo.package_list and not topo.core_list:
        return []
    out: list[str] = []
    out.append("Machine" + machine_memory(topo))
    _tree_lines(topo, build_tree(topo), 0, out)
    return out


def kinds_line(topo: Topology) -> str | None:
    """``Hybrid core kinds: performance CPUs 0-11, efficiency CPUs 12-19 (acpi_cppc/highest_perf 67 vs 39)``."""
    kinds = getattr(topo, "cpu_kinds", None) or []
    if len(kinds) < 2:
        return None
    names = ["efficiency"] * (len(kinds) - 1) + ["performance"]
    if len(kinds) > 2:
        names = [f"kind {i}" for i in range(len(kinds) - 1)] + ["performance"]
    parts = [f"{name} CPUs {format_cpulist(k.cpus)}" for name, k in reversed(list(zip(names, kinds)))]
    perf = " vs ".join(str(k.perf) for k in reversed(kinds))
    return f"Hybrid core kinds: {', '.join(parts)} ({kinds[0].source} {perf})"


def text_lines(topo: Topology) -> list[str]:
    """Topology section of the text report: summary, lstopo-like tree, limits, notes."""
    lines = [summary_line(topo)]
    tree = tree_lines(topo)
    if tree:
        lines += [""] + tree
    if topo.offline_cpus:
        lines.append(f"Offline CPUs: {format_cpulist(topo.offline_cpus)}")
    if topo.l2_groups:
        lines.append(f"Shared L2: {len(topo.l2_groups)} groups, e.g. CPUs {format_cpulist(topo.l2_groups[0])}")
    kinds = kinds_line(topo)
    if kinds:
        lines.append(kinds)
    usable = usable_line(topo)
    if usable:
        lines.append(usable)
    for note in display_notes(topo):
        lines.append(f"Note: {note}")
    return lines


def markdown_lines(topo: Topology) -> list[str]:
    """Topology section of the Markdown report: summary, L3/NUMA tables, limits, tree in <details>."""
    lines = [f"**{summary_line(topo)}**", ""]
    if topo.l3_domains:
        ccx = is_ccx_vendor(topo)
        lines += [f"| {'CCX' if ccx else 'L3'} | L3 size | Package | NUMA node | Cores | CPUs |",
                  "|---:|---:|---:|---:|---:|---|"]
        for i, d in enumerate(topo.l3_domains):
            cores = [c for c in topo.core_list if c.l3 == i]
            pkgs = sorted({c.package for c in cores})
            nodes = sorted({c.numa for c in cores if c.numa is not None})
            lines.append(f"| {i} | {cache_size(d.size_bytes, '?')} | {format_cpulist(pkgs) or '?'} | "
                         f"{format_cpulist(nodes) or '—'} | {len(cores)} | {format_cpulist(d.cpus)} |")
        lines.append("")
    if len(topo.numa_nodes) > 1 or topo.numa_memory_bytes:
        lines += ["| NUMA node | Memory | CPUs | Distances |", "|---:|---:|---|---|"]
        for n in topo.numa_nodes:
            mem = topo.numa_memory_bytes.get(str(n.id))
            lines.append(f"| {n.id} | {size(mem) if mem else '?'} | "
                         f"{format_cpulist(n.cpus) or '(memory only)'} | {' '.join(map(str, n.distances))} |")
        lines.append("")
    extra = []
    if topo.offline_cpus:
        extra.append(f"- Offline CPUs: {format_cpulist(topo.offline_cpus)}")
    kinds = kinds_line(topo)
    if kinds:
        extra.append(f"- {kinds}")
    usable = usable_line(topo)
    if usable:
        extra.append(f"- {usable}")
    for note in display_notes(topo):
        extra.append(f"- Note: {md_escape(note)}")
    if extra:
        lines += extra + [""]
    tree = tree_lines(topo)
    if tree:
        lines += ["<details><summary>Topology tree</summary>", "", "```text", *tree, "```", "", "</details>"]
    while lines and lines[-1] == "":
        lines.pop()
    return lines
