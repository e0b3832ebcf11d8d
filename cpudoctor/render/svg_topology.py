"""The topology map as a standalone SVG string, drawn without Qt.

Nested boxes like hwloc's lstopo: Package > NUMA node > L3 (a CCX on AMD) >
Core > hardware thread (PU, labelled with the OS CPU number). Used by the
HTML export (inline) and, rasterised, by the PDF export.

Levels nest as in the shared containment tree of cpudoctor.render.topology
(the text report and the GUI map use the same), so all views agree. Rows
wrap at a fixed width so a 2-socket, 384-thread EPYC stays legible instead of
becoming a 20,000 pixel wide strip.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from cpudoctor.kits.escape import html_escape as escape

from cpudoctor.model import Core, Topology
from cpudoctor.render import topology as tree
from cpudoctor.kits.plural import plural

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


def _cores(topo: Topology) -> list[Core]:
    """The core list, or one synthetic core per online CPU when the probe had no core data."""
    if topo.core_list:
        return list(topo.core_list)
    cpus = topo.online_cpus or sorted({c for d in topo.l3_domains for c in d.cpus}) or list(range(topo.logical_cpus or 0))
    l3_of = {c: i for i, d in enumerate(topo.l3_domains) for c in d.cpus}
    numa_of = {c: n.id for n in topo.numa_nodes for c in n.cpus}
    pkg = topo.package_list[0].id if len(topo.package_list) == 1 else 0
    return [Core(package=pkg, core_id=c, cpus=[c], l3=l3_of.get(c), numa=numa_of.get(c)) for c in cpus]


def build_tree(topo: Topology) -> Box:
    """Turn the Topology into nested boxes (no coordinates yet).

    The nesting is the one shared containment tree of
    :func:`cpudoctor.render.topology.build_tree` (the text report and the GUI
    map draw the same), so every view agrees on where a NUMA node sits
    (around packages on the IBM x3950, inside one L3 on SNC2 parts).
    """
    synthetic = not topo.core_list
    if synthetic:
        topo = dataclasses.replace(topo, core_list=_cores(topo))
    online = set(topo.online_cpus) if topo.online_cpus else None
    machine = _box(tree.build_tree(topo), topo, online)
    if synthetic and machine.children:
        _drop_synthetic_cores(machine)
        if all(child.kind == "pu" for child in machine.children):
            machine.children = [Box("package", "Logical CPUs", "core layout unknown", children=machine.children)]
    return machine


def _drop_synthetic_cores(box: Box) -> None:
    """Without core data (a cpuinfo-only tree) a box per CPU labelled "Core N" would contradict the
    report's own core count (16 cores, 32 CPUs): draw the CPUs bare instead."""
    children: list[Box] = []
    for child in box.children:
        if child.kind == "core":
            children.extend(child.children)
        else:
            _drop_synthetic_cores(child)
            children.append(child)
    box.children = children


def _box(node: tree.Node, topo: Topology, online: set[int] | None) -> Box:
    if node.kind == "core":
        core = Box("core", node.label)
        core.children = [Box("pu", str(cpu), offline=online is not None and cpu not in online) for cpu in node.cpus]
        return core
    cores = sum(1 for n in node.walk() if n.kind == "core")
    if node.kind == "package":
        box = Box("package", f"Package P#{node.index}", f"{plural(cores, 'core')}, {plural(len(node.cpus), 'thread')}")
    elif node.kind == "numa":
        box = Box("numa", node.label)
    elif node.kind == "l3":
        box = Box("l3", tree.l3_label(topo, node.index, short=True), f"{cores} cores")
    else:
        box = Box(node.kind, node.label)
    box.children = [_box(child, topo, online) for child in node.children]
    return box


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


MAX_ZOOM = 1.6


def render_svg(topo: Topology, title: str = "CPU topology", max_width: int = DEFAULT_WIDTH,
               min_width: int = 0) -> str:
    """The whole map as one ``<svg>`` element (no XML declaration: it is inlined in HTML).

    ``max_width`` is where rows wrap (px); a narrow value (a printed page) stacks
    packages and NUMA nodes vertically instead of shrinking the text.
    ``min_width``: a small machine's map (a 2-vCPU VM is 230 px wide, with 10 px
    labels) is displayed enlarged up to that width, at most 1.6x, so it does not
    look like a thumbnail next to the report's text; the viewBox is unchanged.
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
    zoom = min(MAX_ZOOM, min_width / w) if 0 < w < min_width else 1.0
    return (f'<svg xmlns="http://www.w3.org/2000/svg" role="img" aria-label="{escape(title)}" '
            f'viewBox="0 0 {w} {h}" width="{round(w * zoom)}" height="{round(h * zoom)}" class="topology">'
            f"<title>{escape(title)}</title><style>{SVG_STYLE}</style>" + "".join(out) + "</svg>")
