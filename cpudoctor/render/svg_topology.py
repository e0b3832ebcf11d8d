"""The topology map as a standalone SVG string, drawn without Qt.

Nested boxes like hwloc's lstopo: Package > NUMA node > L3 (a CCX on AMD) >
Core > hardware thread (PU, labelled with the OS CPU number). Used by the
HTML export (inline) and, rasterised, by the PDF export.

Levels are nested by what the machine really has: when NUMA nodes are larger
than L3 domains (the usual case) they sit outside; on sub-NUMA-clustered Intel
parts (SNC2: two nodes share one L3) the order flips; a level that nests
neither way is left out rather than drawn wrongly. Rows wrap at a fixed width
so a 2-socket, 384-thread EPYC stays legible instead of becoming a 20,000
pixel wide strip.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from html import escape

from cpudoctor.probes.topology import Core, Topology

PU_W, PU_H = 30, 18
GAP = 5
PAD = 6
LABEL_H = 17
# Rows wrap at the map's width minus the padding of the boxes around; cores also wrap by count.
DEFAULT_WIDTH = 1240
CORES_PER_ROW = 8
STYLE_CLASS = {"package": "tp-pkg", "numa": "tp-numa", "l3": "tp-l3", "core": "tp-core", "pu": "tp-pu",
               "machine": "tp-machine"}

SVG_STYLE = """
.tp-machine{fill:none;stroke:none}
.tp-pkg{fill:#eef0f3;stroke:#8b95a1}
.tp-numa{fill:#e4f2e6;stroke:#6ea676}
.tp-l3{fill:#e3edf9;stroke:#6b93c6}
.tp-core{fill:#f7f3e6;stroke:#b7a46a}
.tp-pu{fill:#ffffff;stroke:#9aa3ad}
.tp-pu.off{fill:#f1f1f1;stroke:#cccccc}
.tp-t{font:600 11px system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;fill:#27313b}
.tp-s{font:10px system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;fill:#55606b}
.tp-n{font:10px ui-monospace,"SFMono-Regular",Menlo,Consolas,monospace;fill:#27313b}
@media (prefers-color-scheme: dark){
.tp-pkg{fill:#262b31;stroke:#69737e}
.tp-numa{fill:#1f3024;stroke:#4f8a58}
.tp-l3{fill:#1d2a3b;stroke:#4f77a8}
.tp-core{fill:#332e20;stroke:#8f7f4d}
.tp-pu{fill:#15181b;stroke:#6d7780}
.tp-t,.tp-n{fill:#e6e9ec}
.tp-s{fill:#aab3bc}
}
"""


@dataclass
class Box:
    kind: str                              # machine | package | numa | l3 | core | pu
    label: str = ""
    sub: str = ""
    children: list["Box"] = field(default_factory=list)
    x: int = 0
    y: int = 0
    w: int = 0
    h: int = 0
    offline: bool = False


def _size(n: int | None) -> str:
    if not n:
        return ""
    for unit, div in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= div:
            val = n / div
            return f"{val:.1f}".rstrip("0").rstrip(".") + f" {unit}"
    return f"{n} B"


def _cores(topo: Topology) -> list[Core]:
    """The core list, or one synthetic core per online CPU when the probe had no core data."""
    if topo.core_list:
        return list(topo.core_list)
    cpus = topo.online_cpus or sorted({c for d in topo.l3_domains for c in d.cpus}) or list(range(topo.logical_cpus or 0))
    l3_of = {c: i for i, d in enumerate(topo.l3_domains) for c in d.cpus}
    numa_of = {c: n.id for n in topo.numa_nodes for c in n.cpus}
    pkg = topo.package_list[0].id if len(topo.package_list) == 1 else 0
    return [Core(package=pkg, core_id=c, cpus=[c], l3=l3_of.get(c), numa=numa_of.get(c)) for c in cpus]


def _nests(inner: dict[object, set[int]], outer: dict[object, set[int]]) -> bool:
    """Every inner group lies inside one outer group."""
    return all(any(g <= o for o in outer.values()) for g in inner.values())


def build_tree(topo: Topology) -> Box:
    """Turn the Topology into nested boxes (no coordinates yet).

    Usually Package > NUMA > L3. When whole packages share one NUMA node (old
    multi-socket boards such as the IBM x3950: 4 packages per node) the NUMA
    node is drawn around its packages instead of being repeated inside each.
    """
    cores = [c for c in _cores(topo) if c.cpus]
    machine = Box("machine")
    online = set(topo.online_cpus) if topo.online_cpus else None
    pkg_groups = _group(cores, lambda c: c.package)
    numa_groups = _group(cores, lambda c: c.numa)
    numa_outside = (bool(topo.numa_nodes) and None not in numa_groups and len(numa_groups) < len(pkg_groups)
                    and _nests(pkg_groups, numa_groups))
    if numa_outside:
        for nid in _ordered(cores, lambda c: c.numa):
            ncores = [c for c in cores if c.numa == nid]
            box = Box("numa", f"NUMA node {nid}", _size(topo.numa_memory_bytes.get(str(nid))))
            machine.children.append(box)
            _packages(box, ncores, topo, online, numa=False)
    else:
        _packages(machine, cores, topo, online, numa=True)
    return machine


def _ordered(cores: list[Core], key) -> list[object]:
    """Distinct keys in order of their lowest CPU number (how lstopo orders logical objects)."""
    first: dict[object, int] = {}
    for c in cores:
        first[key(c)] = min(first.get(key(c), min(c.cpus)), min(c.cpus))
    return sorted(first, key=lambda k: first[k])


def _packages(parent: Box, cores: list[Core], topo: Topology, online: set[int] | None, numa: bool) -> None:
    for pid in _ordered(cores, lambda c: c.package):
        pcores = sorted((c for c in cores if c.package == pid), key=lambda c: min(c.cpus))
        nthreads = sum(len(c.cpus) for c in pcores)
        pkg = Box("package", f"Package P#{pid}", f"{len(pcores)} cores, {nthreads} threads")
        parent.children.append(pkg)
        numa_groups = _group(pcores, lambda c: c.numa)
        l3_groups = _group(pcores, lambda c: c.l3)
        levels: list[str] = []
        if numa and None not in numa_groups and topo.numa_nodes:
            levels.append("numa")
        if None not in l3_groups and topo.l3_domains:
            levels.append("l3")
        if levels == ["numa", "l3"]:
            if _nests(l3_groups, numa_groups):
                pass
            elif _nests(numa_groups, l3_groups):
                levels = ["l3", "numa"]         # sub-NUMA clustering: nodes inside one L3
            else:
                levels = ["l3"]                 # neither nests: leave NUMA out rather than draw it wrong
        _fill(pkg, pcores, levels, topo, online)


def _group(cores: list[Core], key) -> dict[object, set[int]]:
    groups: dict[object, set[int]] = {}
    for c in cores:
        groups.setdefault(key(c), set()).update(c.cpus)
    return groups


def _fill(parent: Box, cores: list[Core], levels: list[str], topo: Topology, online: set[int] | None) -> None:
    if not levels:
        for c in cores:
            core = Box("core", f"Core {c.core_id}")
            for cpu in c.cpus:
                core.children.append(Box("pu", str(cpu), offline=online is not None and cpu not in online))
            parent.children.append(core)
        return
    level, rest = levels[0], levels[1:]
    key = (lambda c: c.numa) if level == "numa" else (lambda c: c.l3)
    for k in _ordered(cores, key):
        members = [c for c in cores if key(c) == k]
        if level == "numa":
            mem = topo.numa_memory_bytes.get(str(k))
            box = Box("numa", f"NUMA node {k}", _size(mem))
        else:
            dom = topo.l3_domains[k] if isinstance(k, int) and 0 <= k < len(topo.l3_domains) else None
            size = _size(dom.size_bytes) if dom else ""
            box = Box("l3", f"L3 {size}".strip(), f"{len(members)} cores")
        parent.children.append(box)
        _fill(box, members, rest, topo, online)


def layout(box: Box, max_width: int = DEFAULT_WIDTH, depth: int = 0) -> None:
    """Assign sizes bottom-up with row wrapping; positions are relative to the parent."""
    if box.kind == "pu":
        box.w, box.h = PU_W, PU_H
        return
    for child in box.children:
        layout(child, max_width, depth + 1)
    pad = 3 if box.kind == "core" else PAD
    gap = 2 if box.kind == "core" else GAP
    top = 14 if box.kind == "core" else (LABEL_H if box.kind != "machine" else 0)
    wrap = 10_000 if box.kind == "core" else max_width - depth * (2 * PAD + 2) - 2 * pad
    x = y = row_h = inner_w = col = 0
    for child in box.children:
        if x > 0 and (x + child.w > wrap or (child.kind == "core" and col == CORES_PER_ROW)):
            col = 0
            y += row_h + gap
            x = row_h = 0
        child.x, child.y = pad + x, top + pad + y if box.kind != "core" else top + y
        x += child.w + gap
        col += 1
        row_h = max(row_h, child.h)
        inner_w = max(inner_w, x - gap)
    label_w = 7 * (len(box.label) + len(box.sub)) + 12 if box.kind != "core" else 6 * len(box.label)
    box.w = max(inner_w, label_w) + 2 * pad
    box.h = top + (pad if box.kind != "core" else 0) + y + row_h + pad


def _emit(box: Box, ox: int, oy: int, out: list[str]) -> None:
    x, y = ox + box.x, oy + box.y
    if box.kind != "machine":
        cls = STYLE_CLASS[box.kind] + (" off" if box.offline else "")
        rx = 2 if box.kind == "pu" else 4
        out.append(f'<rect class="{cls}" x="{x}" y="{y}" width="{box.w}" height="{box.h}" rx="{rx}"/>')
        if box.kind == "pu":
            title = f"CPU {box.label}" + (" (offline)" if box.offline else "")
            out.append(f'<text class="tp-n" x="{x + box.w / 2:g}" y="{y + 13}" text-anchor="middle">'
                       f'<title>{escape(title)}</title>{escape(box.label)}</text>')
        elif box.kind == "core":
            out.append(f'<text class="tp-s" x="{x + 3}" y="{y + 11}">{escape(box.label)}</text>')
        else:
            out.append(f'<text class="tp-t" x="{x + PAD}" y="{y + 13}">{escape(box.label)}</text>')
            if box.sub:
                sx = x + PAD + 7 * len(box.label) + 14
                out.append(f'<text class="tp-s" x="{sx}" y="{y + 13}">{escape(box.sub)}</text>')
    for child in box.children:
        _emit(child, x, y, out)


def render_svg(topo: Topology, title: str = "CPU topology", max_width: int = DEFAULT_WIDTH) -> str:
    """The whole map as one ``<svg>`` element (no XML declaration: it is inlined in HTML).

    ``max_width`` is where rows wrap (px); a narrow value (a printed page) stacks
    packages and NUMA nodes vertically instead of shrinking the text.
    """
    machine = build_tree(topo)
    if not machine.children:
        msg = "Topology unknown" + (f": {topo.notes[0]}" if topo.notes else "")
        return (f'<svg xmlns="http://www.w3.org/2000/svg" role="img" aria-label="{escape(title)}" '
                f'viewBox="0 0 600 40" width="600" height="40"><style>{SVG_STYLE}</style>'
                f'<text class="tp-s" x="8" y="24">{escape(msg)}</text></svg>')
    layout(machine, max_width)
    out: list[str] = []
    _emit(machine, 0, 0, out)
    w, h = machine.w, machine.h
    return (f'<svg xmlns="http://www.w3.org/2000/svg" role="img" aria-label="{escape(title)}" '
            f'viewBox="0 0 {w} {h}" width="{w}" height="{h}" class="topology">'
            f"<title>{escape(title)}</title><style>{SVG_STYLE}</style>" + "".join(out) + "</svg>")
