"""The topology map: nested boxes of packages, NUMA nodes, L3 domains (CCXs), cores and threads.

Like hwloc's ``lstopo`` picture, but built for thread placement: every
hardware thread (PU) shows its OS CPU number and is coloured by its live
load; hovering tells the core, its SMT siblings, its L3 peers, its NUMA node
and its clock; clicking, ctrl-clicking or dragging a rubber band selects CPUs
and emits :attr:`TopologyMap.selection_changed`, which the Topology page turns
into pinning snippets.

Layout: the containment tree of :func:`cpudoctor.render.topology.build_tree`
(the same one the text report prints) is laid out as flowing rows that wrap at
the view's width, so a 2 x 64-core EPYC with SMT (256 PUs) fits a normal
window; ctrl+wheel zooms and :meth:`TopologyMap.fit` shows everything.

Only QPainter primitives are used, so :meth:`export_svg` (QSvgGenerator) and
:meth:`export_png` draw exactly what is on screen.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

from PySide6.QtCore import QBuffer, QIODevice, QPointF, QRect, QRectF, QSize, Qt, Signal
from PySide6.QtGui import (QBrush, QColor, QFont, QFontMetricsF, QImage, QKeySequence, QLinearGradient, QPainter,
                           QPainterPath, QPalette, QPen)
from PySide6.QtSvg import QSvgGenerator
from PySide6.QtWidgets import (QGraphicsItem, QGraphicsScene, QGraphicsView, QSizePolicy, QStyleOptionGraphicsItem,
                               QWidget)

from cpudoctor.probes._fs import format_cpulist
from cpudoctor.probes import Topology
from cpudoctor.render.format import clock as format_clock
from cpudoctor.render.format import percent
from cpudoctor.render.topology import Node, build_tree, cpus_text, is_ccx_vendor
from cpudoctor.render.words import plural

# Geometry (scene units = pixels at zoom 1).
PU_W, PU_H, PU_GAP = 26.0, 20.0, 3.0
CORE_PAD = 3.0
PAD, GAP, HEADER = 6.0, 6.0, 18.0
MARGIN = 8.0


# ---------------------------------------------------------------------------
# Colours: calm, derived from the palette so light and dark themes both read well


def _mix(a: QColor, b: QColor, t: float) -> QColor:
    t = max(0.0, min(1.0, t))
    return QColor.fromRgbF(a.redF() + (b.redF() - a.redF()) * t,
                           a.greenF() + (b.greenF() - a.greenF()) * t,
                           a.blueF() + (b.blueF() - a.blueF()) * t)


def _is_dark(palette: QPalette) -> bool:
    return palette.color(QPalette.ColorRole.Window).lightness() < 128


@dataclass
class MapColours:
    """Every colour the map uses, picked once per palette."""

    background: QColor
    text: QColor
    muted: QColor
    box_fill: dict[str, QColor]
    box_edge: dict[str, QColor]
    load_stops: list[tuple[float, QColor]]
    highlight: QColor
    marker: QColor

    @classmethod
    def from_palette(cls, palette: QPalette) -> "MapColours":
        dark = _is_dark(palette)
        base = palette.color(QPalette.ColorRole.Base)
        window = palette.color(QPalette.ColorRole.Window)
        text = palette.color(QPalette.ColorRole.Text)
        tints = {"package": QColor("#8c99a6"), "numa": QColor("#5fa274"), "l3": QColor("#5b8fc7"),
                 "core": QColor("#9aa5b1")}
        strength = {"package": 0.10, "numa": 0.10, "l3": 0.12, "core": 0.0}
        fill = {k: _mix(window if k == "package" else base, tints[k], strength[k] * (1.6 if dark else 1.0))
                for k in tints}
        edge = {k: _mix(base, tints[k], 0.75 if dark else 0.85) for k in tints}
        edge["core"] = _mix(base, text, 0.25)
        # Load is a warm ramp (idle = neutral, busy = burnt orange) so it never looks like the
        # selection, which uses the palette's highlight (blue in most themes).
        if dark:
            stops = [(0.0, QColor("#2f353d")), (0.5, QColor("#8a6430")), (1.0, QColor("#e0843f"))]
        else:
            stops = [(0.0, QColor("#f3f4f6")), (0.5, QColor("#f1cb8e")), (1.0, QColor("#d4692f"))]
        return cls(background=base, text=text, muted=_mix(base, text, 0.55), box_fill=fill, box_edge=edge,
                   load_stops=stops, highlight=palette.color(QPalette.ColorRole.Highlight),
                   marker=QColor("#7b5cc4"))

    def load(self, percent: float | None) -> QColor:
        """Fill of a PU at ``percent`` load; None (no sample yet) is the 0% colour."""
        t = 0.0 if percent is None or math.isnan(percent) else max(0.0, min(100.0, percent)) / 100.0
        stops = self.load_stops
        for (t0, c0), (t1, c1) in zip(stops, stops[1:]):
            if t <= t1:
                return _mix(c0, c1, (t - t0) / (t1 - t0) if t1 > t0 else 0.0)
        return QColor(stops[-1][1])

    def on(self, fill: QColor) -> QColor:
        """Readable text colour on ``fill``."""
        return QColor("#ffffff") if fill.lightnessF() < 0.55 else QColor("#1f2a33")


# ---------------------------------------------------------------------------
# Items


class BoxItem(QGraphicsItem):
    """A package, NUMA node, L3 domain or core: a rounded box with a label."""

    def __init__(self, node: Node, label: str, owner: "TopologyMap"):
        super().__init__()
        self.node = node
        self.kind = node.kind
        self.cpus = list(node.cpus)
        self.label = label
        self.owner = owner
        self.size = QSize(0, 0)
        self.w = self.h = 0.0
        self.selected = False
        self.setAcceptHoverEvents(True)
        self.setZValue({"package": 0, "numa": 1, "l3": 2, "core": 3}.get(self.kind, 0))

    def boundingRect(self) -> QRectF:
        return QRectF(0, 0, self.w, self.h)

    def paint(self, painter: QPainter, option: QStyleOptionGraphicsItem, widget: QWidget | None = None) -> None:
        c = self.owner.colours
        r = QRectF(0.5, 0.5, self.w - 1, self.h - 1)
        edge = c.highlight if self.selected else c.box_edge[self.kind]
        pen = QPen(edge, 2.0 if self.selected else 1.0)
        if self.kind == "core" and self.owner.is_efficiency(self.cpus):
            pen.setStyle(Qt.PenStyle.DashLine)
        painter.setPen(pen)
        painter.setBrush(c.box_fill[self.kind])
        radius = 3.0 if self.kind == "core" else 5.0
        painter.drawRoundedRect(r, radius, radius)
        if self.kind != "core" and self.label:
            painter.setPen(c.text if self.kind != "numa" else _mix(c.text, c.box_edge["numa"], 0.35))
            painter.setFont(self.owner.label_font(self.kind))
            painter.drawText(QRectF(PAD + 1, 1, self.w - 2 * PAD, HEADER - 1),
                             int(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter),
                             self.owner.elide(self.label, self.kind, self.w - 2 * PAD))

    def hoverEnterEvent(self, event) -> None:
        self.setToolTip(self.owner.box_tooltip(self))
        super().hoverEnterEvent(event)


class PUItem(QGraphicsItem):
    """One hardware thread: its CPU number on a load-coloured tile."""

    def __init__(self, cpu: int, owner: "TopologyMap"):
        super().__init__()
        self.cpu = cpu
        self.cpus = [cpu]
        self.kind = "pu"
        self.owner = owner
        self.load: float | None = None
        self.selected = False
        self.markers: list[str] = []
        self.allowed = True            # False: outside this process's affinity / cgroup cpuset
        self.setAcceptHoverEvents(True)
        self.setZValue(4)

    def boundingRect(self) -> QRectF:
        return QRectF(0, 0, PU_W, PU_H)

    def fill(self) -> QColor:
        return self.owner.colours.load(self.load)

    def paint(self, painter: QPainter, option: QStyleOptionGraphicsItem, widget: QWidget | None = None) -> None:
        c = self.owner.colours
        fill = self.fill()
        r = QRectF(0.5, 0.5, PU_W - 1, PU_H - 1)
        painter.setBrush(fill)
        painter.setPen(QPen(c.highlight, 2.0) if self.selected else QPen(_mix(fill, c.text, 0.3), 1.0))
        painter.drawRoundedRect(r, 3, 3)
        if not self.allowed:
            # hatched like lstopo's disallowed PUs: visible, but clearly not usable by this process
            painter.setBrush(QBrush(_mix(c.background, c.text, 0.35), Qt.BrushStyle.BDiagPattern))
            painter.setPen(Qt.PenStyle.NoPen)
            painter.drawRoundedRect(r, 3, 3)
            painter.setPen(c.muted)
        else:
            painter.setPen(c.on(fill))
        painter.setFont(self.owner.pu_font)
        painter.drawText(r, int(Qt.AlignmentFlag.AlignCenter), str(self.cpu))
        if self.markers:
            painter.setPen(Qt.PenStyle.NoPen)
            painter.setBrush(c.marker)
            path = QPainterPath()
            path.moveTo(PU_W - 10, 0.5)
            path.lineTo(PU_W - 0.5, 0.5)
            path.lineTo(PU_W - 0.5, 10)
            path.closeSubpath()
            painter.drawPath(path)

    def hoverEnterEvent(self, event) -> None:
        self.setToolTip(self.owner.pu_tooltip(self.cpu))
        super().hoverEnterEvent(event)


# ---------------------------------------------------------------------------
# Layout


@dataclass
class _Placed:
    item: QGraphicsItem
    w: float
    h: float
    children: list[tuple[float, float, "_Placed"]] = field(default_factory=list)


def _balanced_cols(n: int, max_cols: int) -> int:
    """Columns for n equal boxes, at most ``max_cols``, with rows as even as possible."""
    if n <= 0:
        return 1
    cols = min(n, max_cols)
    rows = math.ceil(n / cols)
    return math.ceil(n / rows)


class TopologyMap(QGraphicsView):
    """The map widget. Feed it :meth:`set_topology`, then live :meth:`set_load` / :meth:`set_clocks`."""

    selection_changed = Signal(list)          # sorted CPU numbers

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setScene(QGraphicsScene(self))
        self.setRenderHints(QPainter.RenderHint.Antialiasing | QPainter.RenderHint.TextAntialiasing)
        self.setDragMode(QGraphicsView.DragMode.RubberBandDrag)
        self.setRubberBandSelectionMode(Qt.ItemSelectionMode.IntersectsItemShape)
        self.setTransformationAnchor(QGraphicsView.ViewportAnchor.AnchorUnderMouse)
        self.setViewportUpdateMode(QGraphicsView.ViewportUpdateMode.SmartViewportUpdate)
        self.setAlignment(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignTop)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Expanding)
        self.setMinimumSize(240, 160)
        self.rubberBandChanged.connect(self._on_rubber_band)

        self.topology: Topology | None = None
        self.tree: Node | None = None
        self.pu_items: dict[int, PUItem] = {}
        self.core_items: list[BoxItem] = []
        self.box_items: dict[str, list[BoxItem]] = {"package": [], "numa": [], "l3": [], "core": []}
        self.loads: dict[int, float] = {}
        self.clocks: dict[int, float] = {}
        self.markers: dict[int, list[str]] = {}
        self._selection: set[int] = set()
        self._band: QRectF | None = None
        self._press_pos = None
        self._zoom = 1.0
        self._fit_mode = True
        self._layout_width = 0.0
        self.colours = MapColours.from_palette(self.palette())
        self.pu_font = QFont(self.font())
        self.pu_font.setPointSizeF(max(7.0, self.font().pointSizeF() * 0.82))
        self._label_fonts: dict[str, QFont] = {}
        self._info_by_cpu: dict[int, dict] = {}
        self._empty_text = "No topology yet"
        self.setBackgroundBrush(self.colours.background)

    # -- public API ---------------------------------------------------------

    def set_topology(self, topo: Topology | None) -> None:
        """Rebuild the map for ``topo`` (None or a topology without cores shows a message)."""
        scene = self.scene()
        scene.clear()
        self.pu_items.clear()
        self.core_items = []
        self.box_items = {"package": [], "numa": [], "l3": [], "core": []}
        self._info_by_cpu = {}
        self.topology = topo
        self.tree = None
        old_selection = self._selection
        self._selection = set()
        if topo is None or not topo.core_list:
            self._empty_text = ("No topology yet" if topo is None else
                                "Topology unknown on this system" + (f": {topo.notes[0]}" if topo.notes else ""))
            scene.setSceneRect(QRectF(0, 0, 10, 10))
            self.viewport().update()
            if old_selection:
                self.selection_changed.emit([])
            return
        self.tree = build_tree(topo)
        self._index(topo)
        self._build_items(self.tree, None)
        allowed = topo.affinity.allowed_cpus
        allowed_set = set(allowed) if allowed is not None else set(self.pu_items)
        for cpu, item in self.pu_items.items():
            item.load = self.loads.get(cpu)
            item.markers = self.markers.get(cpu, [])
            item.allowed = cpu in allowed_set
        self.relayout()
        kept = old_selection & set(self.pu_items)
        self._apply_selection(kept, emit=kept != old_selection)

    def set_load(self, load: dict[int, float]) -> None:
        """Per-CPU load in percent (0-100); CPUs not listed keep their last value."""
        self.loads.update(load)
        for cpu, value in load.items():
            item = self.pu_items.get(cpu)
            if item is not None and item.load != value:
                item.load = value
                item.update()

    def set_clocks(self, clocks: dict[int, float]) -> None:
        """Per-CPU current clock in MHz (shown in tooltips)."""
        self.clocks.update(clocks)

    def set_markers(self, markers: dict[int, list[str]]) -> None:
        """Labels per CPU (e.g. the threads of an inspected process); replaces all markers."""
        self.markers = {cpu: list(v) for cpu, v in markers.items() if v}
        for cpu, item in self.pu_items.items():
            new = self.markers.get(cpu, [])
            if new != item.markers:
                item.markers = new
                item.update()

    def selected_cpus(self) -> list[int]:
        return sorted(self._selection)

    def set_selection(self, cpus) -> None:
        """Select exactly ``cpus`` (unknown CPUs are ignored) and emit selection_changed."""
        self._apply_selection(set(cpus) & set(self.pu_items), emit=True)

    def clear_selection(self) -> None:
        self.set_selection([])

    def zoom_by(self, factor: float) -> None:
        new = max(0.2, min(6.0, self._zoom * factor))
        factor = new / self._zoom
        self._zoom = new
        self._fit_mode = False
        self.scale(factor, factor)

    def zoom(self) -> float:
        return self._zoom

    def fit(self) -> None:
        """Zoom so the whole map is visible, re-flowing it to the window's shape."""
        self._fit_mode = True
        vp = self.viewport().size()
        if self.tree is None or vp.width() <= 0 or vp.height() <= 0:
            self._set_zoom(1.0)
            return

        def fits(k: float) -> bool:
            self._zoom = k
            self.relayout()
            rect = self.scene().sceneRect()
            return rect.height() * k <= vp.height() + 0.5 and rect.width() * k <= vp.width() + 0.5

        if fits(1.0):
            # small machines: grow up to 2x while everything still fits
            lo, hi = 1.0, 2.0
            for _ in range(5):
                mid = (lo + hi) / 2
                lo, hi = (mid, hi) if fits(mid) else (lo, mid)
            k = lo
            self._zoom = k
            self.relayout()
        else:
            lo, hi = 0.2, 1.0      # bisect the largest zoom at which the re-flowed map fits
            for _ in range(8):
                mid = (lo + hi) / 2
                lo, hi = (mid, hi) if fits(mid) else (lo, mid)
            k = lo
            self._zoom = k
            self.relayout()
        self._set_zoom(k)

    def _set_zoom(self, k: float) -> None:
        self.resetTransform()
        self._zoom = k
        self.scale(k, k)

    def export_svg(self, path: str | Path) -> Path:
        """Write the whole map (not just the visible part) as SVG (like every export: cpudoctor.fileio)."""
        path = Path(path)
        rect = self._export_rect()
        buf = QBuffer()
        buf.open(QIODevice.OpenModeFlag.WriteOnly)
        gen = QSvgGenerator()
        gen.setOutputDevice(buf)
        gen.setSize(QSize(math.ceil(rect.width()), math.ceil(rect.height())))
        gen.setViewBox(QRectF(0, 0, rect.width(), rect.height()))
        gen.setTitle("CPU topology")
        gen.setDescription("CPU Doctor topology map: package > NUMA node > L3 > core > hardware thread")
        painter = QPainter(gen)
        self._render_into(painter, rect, QRectF(0, 0, rect.width(), rect.height()))
        painter.end()
        return _write(path, bytes(buf.data()))

    def export_png(self, path: str | Path, scale: float = 2.0) -> Path:
        """Write the whole map as PNG at ``scale`` x (2 = crisp on high-DPI screens and in docs)."""
        path = Path(path)
        rect = self._export_rect()
        img = QImage(max(1, math.ceil(rect.width() * scale)), max(1, math.ceil(rect.height() * scale)),
                     QImage.Format.Format_ARGB32_Premultiplied)
        img.fill(self.colours.background)
        painter = QPainter(img)
        painter.setRenderHints(QPainter.RenderHint.Antialiasing | QPainter.RenderHint.TextAntialiasing)
        self._render_into(painter, rect, QRectF(0, 0, img.width(), img.height()))
        painter.end()
        buf = QBuffer()
        buf.open(QIODevice.OpenModeFlag.WriteOnly)
        if not img.save(buf, "PNG"):
            raise OSError(f"could not encode the map as PNG ({img.width()}x{img.height()} pixels)")
        return _write(path, bytes(buf.data()))

    # -- building -----------------------------------------------------------

    def _index(self, topo: Topology) -> None:
        """Per-CPU facts for tooltips: core, siblings, L3 peers, NUMA node, package, core kind."""
        # Hybrid chips (P/E cores): the kinds come slowest first, like hwloc's cpukinds.
        fast = set(topo.cpu_kinds[-1].cpus) if len(topo.cpu_kinds) >= 2 else None
        for i, core in enumerate(topo.core_list):
            for cpu in core.cpus:
                self._info_by_cpu[cpu] = {"core": i, "core_id": core.core_id, "siblings": core.cpus,
                                          "package": core.package, "l3": core.l3, "numa": core.numa,
                                          "die": core.die,
                                          "kind": None if fast is None else ("performance" if cpu in fast
                                                                             else "efficiency")}

    def is_efficiency(self, cpus: list[int]) -> bool:
        """A core of a hybrid chip's slower kind (drawn with a dashed edge)."""
        return bool(cpus) and all(self._info_by_cpu.get(c, {}).get("kind") == "efficiency" for c in cpus)

    @property
    def hybrid(self) -> bool:
        return any(info.get("kind") for info in self._info_by_cpu.values())

    def _box_label(self, node: Node) -> str:
        topo = self.topology
        assert topo is not None
        if node.kind == "l3":
            return node.label
        if node.kind == "package":
            n_cores = sum(1 for c in topo.core_list if c.package == node.index)
            # lstopo's logical numbering: Arm firmware gives ids such as 36 and 8442
            ids = sorted(pk.id for pk in topo.package_list)
            ordinal = ids.index(node.index) if node.index in ids else node.index
            name = f"Package {ordinal}" if ordinal == node.index else f"Package {ordinal} (id {node.index})"
            return f"{name} · {n_cores} cores"
        return node.label

    def _build_items(self, node: Node, parent: QGraphicsItem | None) -> None:
        for child in node.children:
            if not child.cpus:
                continue             # CPU-less NUMA nodes: listed in the page, not drawn
            box = BoxItem(child, self._box_label(child), self)
            if parent is None:
                self.scene().addItem(box)
            else:
                box.setParentItem(parent)
            self.box_items[child.kind].append(box)
            if child.kind == "core":
                self.core_items.append(box)
                for cpu in child.cpus:
                    pu = PUItem(cpu, self)
                    pu.setParentItem(box)
                    self.pu_items[cpu] = pu
            else:
                self._build_items(child, box)

    def label_font(self, kind: str) -> QFont:
        font = self._label_fonts.get(kind)
        if font is None:
            font = QFont(self.font())
            font.setPointSizeF(max(7.5, self.font().pointSizeF() * (0.95 if kind == "package" else 0.88)))
            font.setBold(kind == "package")
            self._label_fonts[kind] = font
        return font

    def elide(self, text: str, kind: str, width: float) -> str:
        fm = QFontMetricsF(self.label_font(kind))
        return fm.elidedText(text, Qt.TextElideMode.ElideRight, max(width, 10.0))

    def _min_label_width(self, item: BoxItem) -> float:
        """Enough width for the label's first part ("L3 32 MiB", "NUMA node 3")."""
        fm = QFontMetricsF(self.label_font(item.kind))
        return min(fm.horizontalAdvance(item.label), 170.0) + 2 * PAD + 2

    # -- layout -------------------------------------------------------------

    def relayout(self) -> None:
        """Flow the boxes into rows that wrap at the visible width (at the current zoom)."""
        if self.tree is None:
            return
        width = max(200.0, self.viewport().width() / max(self._zoom, 1e-3) - 2 * MARGIN - 2)
        self._layout_width = width
        tops = [item for item in self.scene().items() if item.parentItem() is None]
        tops.sort(key=lambda it: (it.cpus[:1] or [0])[0])
        placed = [self._measure(item, width) for item in tops]
        w, h, positions = self._flow(placed, width)
        for (x, y, p) in positions:
            self._place(p, MARGIN + x, MARGIN + y)
        self.scene().setSceneRect(QRectF(0, 0, w + 2 * MARGIN, h + 2 * MARGIN))

    def _measure(self, item: QGraphicsItem, max_w: float) -> _Placed:
        if isinstance(item, BoxItem) and item.kind == "core":
            pus = [c for c in item.childItems() if isinstance(c, PUItem)]
            pus.sort(key=lambda p: p.cpu)
            w = 2 * CORE_PAD + len(pus) * PU_W + max(0, len(pus) - 1) * PU_GAP
            h = 2 * CORE_PAD + PU_H
            kids = [(CORE_PAD + i * (PU_W + PU_GAP), CORE_PAD, _Placed(p, PU_W, PU_H)) for i, p in enumerate(pus)]
            return _Placed(item, w, h, kids)
        assert isinstance(item, BoxItem)
        children = [c for c in item.childItems() if isinstance(c, BoxItem)]
        children.sort(key=lambda c: c.cpus[0] if c.cpus else 0)
        inner = max(40.0, max_w - 2 * PAD)
        placed = [self._measure(c, inner) for c in children]
        max_cols = None
        if children and all(c.kind == "core" for c in children):
            smt = max(len(c.cpus) for c in children)
            max_cols = _balanced_cols(len(children), 8 if smt == 1 else 4)
        w, h, positions = self._flow(placed, inner, max_cols)
        w = max(w + 2 * PAD, self._min_label_width(item))
        h = HEADER + h + PAD
        return _Placed(item, w, h, [(PAD + x, HEADER + y, p) for x, y, p in positions])

    @staticmethod
    def _flow(placed: list[_Placed], max_w: float, max_cols: int | None = None):
        """Left-to-right rows wrapping at ``max_w``; equal boxes get evenly filled rows."""
        if not placed:
            return 0.0, 0.0, []
        # greedy row count, then rebalance so 8 boxes in 2 rows are 4 + 4, not 7 + 1
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
            n_rows = len(per_row)
            cols = math.ceil(len(placed) / n_rows)
            per_row = [cols] * (len(placed) // cols) + ([len(placed) % cols] if len(placed) % cols else [])
        positions = []
        y = 0.0
        width = 0.0
        i = 0
        for n in per_row:
            row = placed[i:i + n]
            i += n
            x = 0.0
            row_h = max(p.h for p in row)
            for p in row:
                positions.append((x, y, p))
                x += p.w + GAP
            width = max(width, x - GAP)
            y += row_h + GAP
        return width, y - GAP, positions

    def _place(self, p: _Placed, x: float, y: float) -> None:
        item = p.item
        item.setPos(x, y)
        if isinstance(item, BoxItem):
            item.prepareGeometryChange()
            item.w, item.h = p.w, p.h
            for cx, cy, child in p.children:
                self._place(child, cx, cy)

    # -- tooltips -----------------------------------------------------------

    def pu_tooltip(self, cpu: int) -> str:
        topo = self.topology
        info = self._info_by_cpu.get(cpu, {})
        lines = [f"<b>CPU {cpu}</b>"]
        if info:
            where = f"core {info['core_id']}, package {info['package']}"
            if info.get("die") is not None:
                where += f", die {info['die']}"
            lines.append(where)
            if info.get("kind"):
                lines.append("performance core (P)" if info["kind"] == "performance" else "efficiency core (E)")
            sib = [c for c in info["siblings"] if c != cpu]
            lines.append(f"SMT siblings: {format_cpulist(sib)}" if sib else "SMT siblings: none")
            if topo is not None and info["l3"] is not None:
                d = topo.l3_domains[info["l3"]]
                name = f"CCX {info['l3']}" if is_ccx_vendor(topo) else f"L3 #{info['l3']}"
                peers = [c for c in d.cpus if c != cpu]
                lines.append(f"{name} peers (share its L3): {cpus_text(peers)}")
            lines.append(f"NUMA node: {info['numa']}" if info["numa"] is not None else "NUMA node: none online")
        item = self.pu_items.get(cpu)
        if item is not None and not item.allowed:
            lines.append("<i>Not allowed for this process (CPU affinity / cgroup cpuset)</i>")
        load = self.loads.get(cpu)
        clock = self.clocks.get(cpu)
        live = []
        if load is not None:
            live.append(f"load {percent(load)}")
        if clock:
            live.append(f"clock {format_clock(clock)}")
        if live:
            lines.append(", ".join(live))
        if self.markers.get(cpu):
            shown = self.markers[cpu][:8]
            more = len(self.markers[cpu]) - len(shown)
            lines.append("Running here: " + ", ".join(shown) + (f" (+{more} more)" if more > 0 else ""))
        return "<br>".join(lines)

    def box_tooltip(self, item: BoxItem) -> str:
        cpus = item.cpus
        n_cores = len({self._info_by_cpu.get(c, {}).get("core") for c in cpus})
        text = (f"<b>{item.label}</b><br>{plural(n_cores, 'core')}, "
                f"{len(cpus)} CPUs: {cpus_text(cpus)}")
        loads = [self.loads[c] for c in cpus if c in self.loads]
        if loads:
            text += f"<br>average load {percent(sum(loads) / len(loads))}"
        topo = self.topology
        if item.kind == "numa" and topo is not None:
            node = next((n for n in topo.numa_nodes if n.id == item.node.index), None)
            if node is not None and len(node.distances) > 1:
                text += f"<br>distances: {' '.join(map(str, node.distances))}"
        return text + "<br><i>Click to select, ctrl-click to add</i>"

    # -- selection ----------------------------------------------------------

    def _apply_selection(self, cpus: set[int], emit: bool) -> None:
        self._selection = set(cpus)
        for cpu, item in self.pu_items.items():
            sel = cpu in self._selection
            if item.selected != sel:
                item.selected = sel
                item.update()
        for boxes in self.box_items.values():
            for box in boxes:
                # containers light up when wholly selected; cores don't (their PUs already do)
                sel = bool(box.cpus) and box.kind != "core" and set(box.cpus) <= self._selection
                if box.selected != sel:
                    box.selected = sel
                    box.update()
        if emit:
            self.selection_changed.emit(sorted(self._selection))

    def _item_cpus_at(self, pos) -> list[int] | None:
        for item in self.items(pos):
            if isinstance(item, (PUItem, BoxItem)):
                return list(item.cpus)
        return None

    def mousePressEvent(self, event) -> None:
        self._press_pos = event.position().toPoint()
        self._band = None
        super().mousePressEvent(event)

    def mouseReleaseEvent(self, event) -> None:
        super().mouseReleaseEvent(event)
        if event.button() != Qt.MouseButton.LeftButton or self._press_pos is None:
            return
        ctrl = bool(event.modifiers() & (Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.MetaModifier))
        moved = (event.position().toPoint() - self._press_pos).manhattanLength()
        if self._band is not None and moved > 4:
            hit = {cpu for cpu, item in self.pu_items.items()
                   if item.sceneBoundingRect().intersects(self._band)}
            self._apply_selection((self._selection | hit) if ctrl else hit, emit=True)
        else:
            cpus = self._item_cpus_at(self._press_pos)
            if cpus is None:
                if not ctrl:
                    self._apply_selection(set(), emit=True)
            elif ctrl:
                s = set(cpus)
                new = (self._selection - s) if s <= self._selection else (self._selection | s)
                self._apply_selection(new, emit=True)
            else:
                self._apply_selection(set(cpus), emit=True)
        self._press_pos = None
        self._band = None
        event.accept()

    def _on_rubber_band(self, rect: QRect, from_scene: QPointF, to_scene: QPointF) -> None:
        # the viewport rect is reliable; the scene points Qt passes are not under a zoomed transform
        if not rect.isNull():
            self._band = self.mapToScene(rect).boundingRect()

    # -- events -------------------------------------------------------------

    def keyPressEvent(self, event) -> None:
        if event.matches(QKeySequence.StandardKey.SelectAll):
            self.set_selection([c for c, item in self.pu_items.items() if item.allowed])
        elif event.key() == Qt.Key.Key_Escape:
            self.clear_selection()
        elif event.matches(QKeySequence.StandardKey.ZoomIn):
            self.zoom_by(1.25)
        elif event.matches(QKeySequence.StandardKey.ZoomOut):
            self.zoom_by(1 / 1.25)
        else:
            super().keyPressEvent(event)
            return
        event.accept()

    def wheelEvent(self, event) -> None:
        if event.modifiers() & Qt.KeyboardModifier.ControlModifier:
            steps = event.angleDelta().y() / 120.0
            if steps:
                self.zoom_by(1.15 ** steps)
            event.accept()
            return
        super().wheelEvent(event)

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        if self._fit_mode:
            self.fit()
        else:
            self.relayout()

    def changeEvent(self, event) -> None:
        super().changeEvent(event)
        if event.type() in (event.Type.PaletteChange, event.Type.StyleChange):
            self.colours = MapColours.from_palette(self.palette())
            self.setBackgroundBrush(self.colours.background)
            self.scene().update()

    def drawForeground(self, painter: QPainter, rect: QRectF) -> None:
        if self.tree is None:
            painter.save()
            painter.resetTransform()
            painter.setPen(self.colours.muted)
            painter.drawText(self.viewport().rect(), int(Qt.AlignmentFlag.AlignCenter), self._empty_text)
            painter.restore()

    # -- export helpers -----------------------------------------------------

    def _export_rect(self) -> QRectF:
        rect = self.scene().sceneRect()
        if rect.width() < 20:
            rect = QRectF(0, 0, 320, 80)
        return rect

    def _render_into(self, painter: QPainter, source: QRectF, target: QRectF) -> None:
        painter.fillRect(target, self.colours.background)
        self.scene().render(painter, target, source)
        if self.tree is None:
            painter.setPen(self.colours.muted)
            painter.drawText(target, int(Qt.AlignmentFlag.AlignCenter), self._empty_text)


class LoadLegend(QWidget):
    """The colour scale of the map: 0% to 100% load, plus what a marker and a selection look like."""

    def __init__(self, map_widget: TopologyMap, parent: QWidget | None = None):
        super().__init__(parent)
        self.map = map_widget
        self.setMinimumHeight(max(24, self.fontMetrics().height() + 8))
        self.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Fixed)

    def sizeHint(self) -> QSize:
        return QSize(620, max(24, self.fontMetrics().height() + 8))

    def paintEvent(self, event) -> None:
        c = self.map.colours
        p = QPainter(self)
        p.setRenderHint(QPainter.RenderHint.Antialiasing)
        fm = self.fontMetrics()
        y = (self.height() - 14) / 2
        x = 0.0
        p.setPen(self.palette().color(QPalette.ColorRole.WindowText))
        p.drawText(QRectF(x, 0, 40, self.height()), int(Qt.AlignmentFlag.AlignVCenter), "Load")
        x += fm.horizontalAdvance("Load") + 8
        bar = QRectF(x, y, 140, 14)
        grad = QLinearGradient(bar.topLeft(), bar.topRight())
        for t, col in c.load_stops:
            grad.setColorAt(t, col)
        p.setBrush(grad)
        p.setPen(QPen(c.box_edge["core"], 1))
        p.drawRoundedRect(bar, 3, 3)
        x = bar.right() + 6
        p.setPen(self.palette().color(QPalette.ColorRole.WindowText))
        for text in ("0–100%",):
            p.drawText(QRectF(x, 0, 80, self.height()), int(Qt.AlignmentFlag.AlignVCenter), text)
            x += fm.horizontalAdvance(text) + 16
        for kind, name in (("package", "Package"), ("numa", "NUMA node"), ("l3", "L3 / CCX"), ("core", "Core")):
            box = QRectF(x, y, 18, 14)
            p.setBrush(c.box_fill[kind])
            p.setPen(QPen(c.box_edge[kind], 1))
            p.drawRoundedRect(box, 3, 3)
            x = box.right() + 5
            p.setPen(self.palette().color(QPalette.ColorRole.WindowText))
            p.drawText(QRectF(x, 0, 100, self.height()), int(Qt.AlignmentFlag.AlignVCenter), name)
            x += fm.horizontalAdvance(name) + 14
        sel = QRectF(x, y, 18, 14)
        p.setBrush(c.load(0))
        p.setPen(QPen(c.highlight, 2))
        p.drawRoundedRect(sel, 3, 3)
        x = sel.right() + 5
        p.setPen(self.palette().color(QPalette.ColorRole.WindowText))
        p.drawText(QRectF(x, 0, 100, self.height()), int(Qt.AlignmentFlag.AlignVCenter), "Selected")
        x += fm.horizontalAdvance("Selected") + 14
        path = QPainterPath()
        path.moveTo(x, y)
        path.lineTo(x + 10, y)
        path.lineTo(x + 10, y + 10)
        path.closeSubpath()
        p.setPen(Qt.PenStyle.NoPen)
        p.setBrush(c.marker)
        p.drawPath(path)
        p.setPen(self.palette().color(QPalette.ColorRole.WindowText))
        p.drawText(QRectF(x + 14, 0, 120, self.height()), int(Qt.AlignmentFlag.AlignVCenter), "Marked thread")
        x += 14 + fm.horizontalAdvance("Marked thread") + 14
        if self.map.hybrid:
            box = QRectF(x, y, 18, 14)
            p.setBrush(c.box_fill["core"])
            pen = QPen(c.box_edge["core"], 1)
            pen.setStyle(Qt.PenStyle.DashLine)
            p.setPen(pen)
            p.drawRoundedRect(box, 3, 3)
            p.setPen(self.palette().color(QPalette.ColorRole.WindowText))
            p.drawText(QRectF(box.right() + 5, 0, 160, self.height()), int(Qt.AlignmentFlag.AlignVCenter),
                       "Efficiency core")
            x = box.right() + 5 + fm.horizontalAdvance("Efficiency core") + 14
        if any(not item.allowed for item in self.map.pu_items.values()):
            box = QRectF(x, y, 18, 14)
            p.setBrush(c.load(0))
            p.setPen(QPen(c.box_edge["core"], 1))
            p.drawRoundedRect(box, 3, 3)
            p.setBrush(QBrush(_mix(c.background, c.text, 0.35), Qt.BrushStyle.BDiagPattern))
            p.setPen(Qt.PenStyle.NoPen)
            p.drawRoundedRect(box, 3, 3)
            p.setPen(self.palette().color(QPalette.ColorRole.WindowText))
            p.drawText(QRectF(box.right() + 5, 0, 200, self.height()), int(Qt.AlignmentFlag.AlignVCenter),
                       "Not allowed (affinity / cgroup)")
        p.end()


def _write(path: Path, data: bytes) -> Path:
    """Write an exported picture like a shell's ``>`` (device, symlink, umask and mode respected)."""
    from cpudoctor.fileio import atomic_write

    return atomic_write(path, data)
