"""Where every box of the topology map goes: flowing rows that wrap at a width. No Qt.

The map's tree (packages > NUMA nodes > L3 > cores > hardware threads, see
:mod:`cpudoctor.gui.topology_model`) is measured bottom-up: a core is a row
of thread tiles (with its cache strips above them when caches are shown), a
container wraps its children into rows no wider than it may be, and equal
boxes get evenly filled rows (8 boxes in 2 rows are 4 + 4, not 7 + 1). The
result is a tree of sizes and offsets that the view turns into item
positions; text widths come from a callback, so the layout needs no fonts.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

from cpudoctor.render.topology import Node

# Geometry (scene units = pixels at zoom 1).
PU_W, PU_H, PU_GAP = 26.0, 20.0, 3.0
CORE_PAD = 3.0
PAD, GAP, HEADER = 6.0, 6.0, 18.0
STRIP_H, STRIP_GAP = 14.0, 2.0               # one cache strip (L2 / L1d / L1i) above a core's threads
MARGIN = 8.0
MAX_CORES_PER_ROW = {1: 8, 2: 4}             # by threads per core: rows of 8 single-thread or 4 SMT cores


@dataclass
class Placed:
    """A measured box (``node``) or thread tile (``cpu``) and its children at offsets inside it."""

    w: float
    h: float
    node: Node | None = None
    cpu: int | None = None
    children: list[tuple[float, float, "Placed"]] = field(default_factory=list)

    def walk(self, x: float = 0.0, y: float = 0.0):
        """(absolute x, absolute y, placed) for this box and everything inside it."""
        yield x, y, self
        for cx, cy, child in self.children:
            yield from child.walk(x + cx, y + cy)


def balanced_cols(n: int, max_cols: int) -> int:
    """Columns for n equal boxes, at most ``max_cols``, with rows as even as possible."""
    if n <= 0:
        return 1
    cols = min(n, max_cols)
    rows = math.ceil(n / cols)
    return math.ceil(n / rows)


def flow(placed: list[Placed], max_w: float, max_cols: int | None = None) -> tuple[float, float, list]:
    """Left-to-right rows wrapping at ``max_w``; equal boxes get evenly filled rows.

    Returns (width, height, [(x, y, placed)]).
    """
    if not placed:
        return 0.0, 0.0, []
    per_row: list[int] = []
    x = 0.0
    count = 0
    for p in placed:
        if count and (x + GAP + p.w > max_w or (max_cols and count >= max_cols)):
            per_row.append(count)
            x, count = 0.0, 0
        x = p.w if count == 0 else x + GAP + p.w
        count += 1
    per_row.append(count)
    uniform = len({round(p.w) for p in placed}) == 1
    if uniform and len(per_row) > 1:
        cols = math.ceil(len(placed) / len(per_row))
        per_row = [cols] * (len(placed) // cols) + ([len(placed) % cols] if len(placed) % cols else [])
    positions = []
    y = width = 0.0
    i = 0
    for n in per_row:
        row = placed[i:i + n]
        i += n
        x = 0.0
        for p in row:
            positions.append((x, y, p))
            x += p.w + GAP
        width = max(width, x - GAP)
        y += max(p.h for p in row) + GAP
    return width, y - GAP, positions


@dataclass
class LayoutRules:
    """What the layout needs from outside: text widths and which cores carry cache strips."""

    header_width: Callable[[Node], float]                 # room a box's header label needs
    strip_width: Callable[[str], float] = lambda text: 0.0
    strips: dict[int, list[str]] = field(default_factory=dict)   # core index -> cache strip texts


def measure(node: Node, max_w: float, rules: LayoutRules) -> Placed:
    """Size of ``node`` and offsets of its children, no wider than ``max_w`` where it can be."""
    if node.kind == "core":
        return _measure_core(node, rules)
    children = [c for c in node.children if c.cpus]
    children.sort(key=lambda c: c.cpus[0])
    inner = max(40.0, max_w - 2 * PAD)
    placed = [measure(c, inner, rules) for c in children]
    max_cols = None
    if children and all(c.kind == "core" for c in children):
        smt = max(len(c.cpus) for c in children)
        max_cols = balanced_cols(len(children), MAX_CORES_PER_ROW.get(smt, 4))
    w, h, positions = flow(placed, inner, max_cols)
    w = max(w + 2 * PAD, rules.header_width(node))
    return Placed(w, HEADER + h + PAD, node, None, [(PAD + x, HEADER + y, p) for x, y, p in positions])


def _measure_core(node: Node, rules: LayoutRules) -> Placed:
    cpus = sorted(node.cpus)
    row_w = len(cpus) * PU_W + max(0, len(cpus) - 1) * PU_GAP
    strips = rules.strips.get(node.index, [])
    w = 2 * CORE_PAD + max([row_w] + [rules.strip_width(s) + 6 for s in strips])
    top = CORE_PAD + len(strips) * (STRIP_H + STRIP_GAP)
    x0 = (w - row_w) / 2
    kids = [(x0 + i * (PU_W + PU_GAP), top, Placed(PU_W, PU_H, None, cpu)) for i, cpu in enumerate(cpus)]
    return Placed(w, top + PU_H + CORE_PAD, node, None, kids)


def layout(tree: Node, width: float, rules: LayoutRules) -> tuple[float, float, list[tuple[float, float, Placed]]]:
    """The whole map flowed at ``width``: (scene width, scene height, top-level boxes at their positions)."""
    tops = [c for c in tree.children if c.cpus]            # CPU-less NUMA nodes: listed in the page, not drawn
    tops.sort(key=lambda c: c.cpus[0])
    placed = [measure(c, width, rules) for c in tops]
    w, h, positions = flow(placed, width)
    return w + 2 * MARGIN, h + 2 * MARGIN, [(MARGIN + x, MARGIN + y, p) for x, y, p in positions]


def strip_rows(strips: list[str]) -> list[tuple[float, str]]:
    """(y offset inside the core, text) of each cache strip."""
    return [(CORE_PAD + i * (STRIP_H + STRIP_GAP), text) for i, text in enumerate(strips)]
