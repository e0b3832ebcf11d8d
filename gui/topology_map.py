"""The topology map: nested boxes of packages, NUMA nodes, L3 domains (CCXs), cores and threads.

Like hwloc's ``lstopo`` picture, but built for thread placement: every
hardware thread (PU) shows its OS CPU number and is coloured by its live
load; hovering tells the core, its SMT siblings, its L3 peers, its caches,
its NUMA node and its clock; clicking, ctrl-clicking or dragging a rubber
band selects CPUs and emits :attr:`TopologyMap.selection_changed`, which the
Topology page turns into pinning snippets. :meth:`TopologyMap.set_show_caches`
adds lstopo's L2/L1 boxes; :meth:`TopologyMap.set_temperatures` puts each
CCD's temperature (k10temp's Tccd) on its CCXs.

This module only draws. What is drawn and said comes from
:mod:`cpudoctor.gui.topology_model` (the tree, labels, tooltips, CCD
temperatures) and where it goes from :mod:`cpudoctor.gui.topology_layout`
(flowing rows that wrap at the view's width, so a 2 x 64-core EPYC with SMT
fits a normal window); both are free of Qt. Ctrl+wheel zooms and
:meth:`TopologyMap.fit` fills the view with the whole machine.

Only QPainter primitives are used, so :meth:`export_svg` (QSvgGenerator) and
:meth:`export_png` draw exactly what is on screen.
"""

from __future__ import annotations

import math
from pathlib import Path

from PySide6.QtCore import QBuffer, QIODevice, QPointF, QRect, QRectF, QSize, Qt, Signal
from PySide6.QtGui import (QBrush, QColor, QFont, QFontMetricsF, QImage, QKeySequence, QPainter,
                           QPainterPath, QPalette, QPen)
from PySide6.QtSvg import QSvgGenerator
from PySide6.QtWidgets import (QGraphicsItem, QGraphicsScene, QGraphicsView, QSizePolicy, QStyleOptionGraphicsItem,
                               QWidget)

from cpudoctor.gui import topology_model as tm
from cpudoctor.gui.load_scale import rgb_at, stops
from cpudoctor.gui.topology_layout import (CORE_PAD, HEADER, MARGIN, PAD, PU_H, PU_W, STRIP_H, LayoutRules,
                                           Placed, layout, strip_rows)
from cpudoctor.model import Topology
from cpudoctor.render.topology import Node

MAX_FIT_ZOOM = 4.0          # Fit enlarges a small machine up to this (a 2-core VM would otherwise be a stamp)
MIN_ZOOM, MAX_ZOOM = 0.2, 6.0
PNG_MIN_WIDTH_PX = 1600     # exported PNGs are at least this wide (2x at the least): readable in docs and issues
PNG_MAX_WIDTH_PX = 8000
SELECTED_PEN = 3.0          # the selection outline, in pixels: it must read at a glance over any load colour


# ---------------------------------------------------------------------------
# Colours: calm, derived from the palette so light and dark themes both read well


def _mix(a: QColor, b: QColor, t: float) -> QColor:
    t = max(0.0, min(1.0, t))
    return QColor.fromRgbF(a.redF() + (b.redF() - a.redF()) * t,
                           a.greenF() + (b.greenF() - a.greenF()) * t,
                           a.blueF() + (b.blueF() - a.blueF()) * t)


def _is_dark(palette: QPalette) -> bool:
    return palette.color(QPalette.ColorRole.Window).lightness() < 128


class MapColours:
    """Every colour the map uses, picked once per palette."""

    KINDS = ("package", "numa", "l3", "l2", "core")

    def __init__(self, palette: QPalette):
        self.dark = _is_dark(palette)
        base = palette.color(QPalette.ColorRole.Base)
        window = palette.color(QPalette.ColorRole.Window)
        text = palette.color(QPalette.ColorRole.Text)
        tints = {"package": QColor("#8c99a6"), "numa": QColor("#5fa274"), "l3": QColor("#5b8fc7"),
                 "l2": QColor("#7d8fc0"), "core": QColor("#9aa5b1")}
        strength = {"package": 0.10, "numa": 0.10, "l3": 0.12, "l2": 0.10, "core": 0.0}
        self.background = base
        self.text = text
        self.muted = _mix(base, text, 0.55)
        self.box_fill = {k: _mix(window if k == "package" else base, tints[k], strength[k] * (1.6 if self.dark else 1.0))
                         for k in tints}
        self.box_edge = {k: _mix(base, tints[k], 0.75 if self.dark else 0.85) for k in tints}
        self.box_edge["core"] = _mix(base, text, 0.25)
        self.cache_fill = _mix(base, QColor("#b7c3d6"), 0.45 if self.dark else 0.35)
        # Load is the warm ramp of gui/load_scale.py, shared with the Monitor's heat strip: idle is neutral,
        # busy burnt orange, so it never looks like the selection (the palette's highlight, blue in most themes).
        self.load_stops = [(t, QColor(c)) for t, c in stops(self.dark)]
        self.highlight = palette.color(QPalette.ColorRole.Highlight)
        self.selection_fill = QColor(self.highlight)
        self.selection_fill.setAlpha(40)
        self.marker = QColor("#7b5cc4")
        self.hot = QColor("#c0392b") if not self.dark else QColor("#ff7b6b")

    @classmethod
    def from_palette(cls, palette: QPalette) -> "MapColours":
        return cls(palette)

    def load(self, percent: float | None) -> QColor:
        """Fill of a PU at ``percent`` load; None (no sample yet) is the 0% colour."""
        return QColor(*rgb_at(percent, self.dark))

    def on(self, fill: QColor) -> QColor:
        """Readable text colour on ``fill``."""
        return QColor("#ffffff") if fill.lightnessF() < 0.55 else QColor("#1f2a33")


LOAD_STEP_PERCENT = 4.0       # loads closer than this share one colour on the map


def _load_step(percent: float | None) -> int | None:
    return None if percent is None or math.isnan(percent) else int(percent // LOAD_STEP_PERCENT)


# ---------------------------------------------------------------------------
# Items


class BoxItem(QGraphicsItem):
    """A package, NUMA node, L3 domain, shared L2 or core: a rounded box with a label (cores: cache strips)."""

    def __init__(self, node: Node, label: str, owner: "TopologyMap"):
        super().__init__()
        self.node = node
        self.kind = node.kind
        self.cpus = list(node.cpus)
        self.label = label
        self.owner = owner
        self.strips: list[str] = []
        self.w = self.h = 0.0
        self.selected = False
        self.setAcceptHoverEvents(True)
        self.setZValue({"package": 0, "numa": 1, "l3": 2, "l2": 3, "core": 4}.get(self.kind, 0))

    def boundingRect(self) -> QRectF:  # noqa: N802 - Qt API
        return QRectF(0, 0, self.w, self.h)

    def header_text(self) -> str:
        """The label, plus the CCD temperature on a CCX when a sensor reports one."""
        temp = self.owner.temperatures.get(self.node.index) if self.kind == "l3" else None
        return f"{self.label} · {temp.celsius:.0f} °C" if temp is not None else self.label

    def paint(self, painter: QPainter, option: QStyleOptionGraphicsItem, widget: QWidget | None = None) -> None:
        c = self.owner.colours
        r = QRectF(0.5, 0.5, self.w - 1, self.h - 1)
        radius = 3.0 if self.kind == "core" else 5.0
        pen = QPen(c.box_edge[self.kind], 1.0)
        if self.kind == "core" and self.owner.is_efficiency(self.cpus):
            pen.setStyle(Qt.PenStyle.DashLine)
        painter.setPen(pen)
        painter.setBrush(c.box_fill[self.kind])
        painter.drawRoundedRect(r, radius, radius)
        if self.kind == "core":
            painter.setFont(self.owner.label_font("cache"))
            for y, text in strip_rows(self.strips):
                strip = QRectF(CORE_PAD, y, self.w - 2 * CORE_PAD, STRIP_H)
                painter.setPen(QPen(c.box_edge["l2"], 0.8))
                painter.setBrush(c.cache_fill)
                painter.drawRoundedRect(strip, 2, 2)
                painter.setPen(c.text)
                painter.drawText(strip, int(Qt.AlignmentFlag.AlignCenter),
                                 self.owner.elide(text, "cache", strip.width() - 2))
        elif self.label:
            temp = self.owner.temperatures.get(self.node.index) if self.kind == "l3" else None
            painter.setPen(c.text if self.kind != "numa" else _mix(c.text, c.box_edge["numa"], 0.35))
            if temp is not None and temp.celsius >= 85:
                painter.setPen(c.hot)            # hot chiplet: the number turns red
            painter.setFont(self.owner.label_font(self.kind))
            painter.drawText(QRectF(PAD + 1, 1, self.w - 2 * PAD, HEADER - 1),
                             int(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter),
                             self.owner.elide(self.header_text(), self.kind, self.w - 2 * PAD))
        if self.selected:
            # drawn last, over the children's edges: a thick highlight ring, and a light wash on the
            # outermost selected box only (nested washes would stack into a dark blue)
            parent = self.parentItem()
            outermost = not (isinstance(parent, BoxItem) and parent.selected)
            painter.setBrush(c.selection_fill if outermost else Qt.BrushStyle.NoBrush)
            painter.setPen(QPen(c.highlight, SELECTED_PEN))
            inset = SELECTED_PEN / 2
            painter.drawRoundedRect(QRectF(inset, inset, self.w - 2 * inset, self.h - 2 * inset), radius, radius)

    def hoverEnterEvent(self, event) -> None:  # noqa: N802 - Qt API
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
        self.setZValue(5)

    def boundingRect(self) -> QRectF:  # noqa: N802 - Qt API
        return QRectF(0, 0, PU_W, PU_H)

    def fill(self) -> QColor:
        return self.owner.colours.load(self.load)

    def paint(self, painter: QPainter, option: QStyleOptionGraphicsItem, widget: QWidget | None = None) -> None:
        c = self.owner.colours
        fill = self.fill()
        r = QRectF(0.5, 0.5, PU_W - 1, PU_H - 1)
        painter.setBrush(fill)
        painter.setPen(QPen(_mix(fill, c.text, 0.3), 1.0))
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
        if self.selected:
            painter.setBrush(Qt.BrushStyle.NoBrush)
            painter.setPen(QPen(c.highlight, SELECTED_PEN))
            inset = SELECTED_PEN / 2
            painter.drawRoundedRect(QRectF(inset, inset, PU_W - 2 * inset, PU_H - 2 * inset), 3, 3)

    def hoverEnterEvent(self, event) -> None:  # noqa: N802 - Qt API
        self.setToolTip(self.owner.pu_tooltip(self.cpu))
        super().hoverEnterEvent(event)


# ---------------------------------------------------------------------------
# The view


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
        # a machine smaller than the view sits in its middle, not in the top-left corner
        self.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Expanding)
        self.setMinimumSize(240, 160)
        self.rubberBandChanged.connect(self._on_rubber_band)

        self.topology: Topology | None = None
        self.tree: Node | None = None
        self.pu_items: dict[int, PUItem] = {}
        self.core_items: list[BoxItem] = []
        self.box_items: dict[str, list[BoxItem]] = {k: [] for k in MapColours.KINDS}
        self.loads: dict[int, float] = {}
        self.clocks: dict[int, float] = {}
        self.markers: dict[int, list[str]] = {}
        self.temperatures: dict[int, tm.CcxTemperature] = {}
        self.show_caches = False
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
        self._elided: dict[tuple[str, str, int], str] = {}
        self._facts: dict[int, tm.CpuFacts] = {}
        self._empty_text = "No topology yet"
        self.setBackgroundBrush(self.colours.background)

    # -- public API ---------------------------------------------------------

    def set_topology(self, topo: Topology | None) -> None:
        """Rebuild the map for ``topo`` (None or a topology without cores shows a message)."""
        self.topology = topo
        self._rebuild()

    def set_show_caches(self, show: bool) -> None:
        """Draw the L2 and L1 caches of each core (and shared L2 boxes), as lstopo does."""
        if show != self.show_caches:
            self.show_caches = show
            self._rebuild()

    def set_load(self, load: dict[int, float]) -> None:
        """Per-CPU load in percent (0-100); CPUs not listed keep their last value."""
        self.loads.update(load)
        for cpu, value in load.items():
            item = self.pu_items.get(cpu)
            if item is None or item.load == value:
                continue
            # repaint only when the colour visibly changes: an idle machine's 1-3 % jitter repainted
            # every tile twice a second (a big share of the page's cost when Fit enlarges the map)
            visible = _load_step(item.load) != _load_step(value)
            item.load = value
            if visible:
                item.update()

    def set_clocks(self, clocks: dict[int, float]) -> None:
        """Per-CPU current clock in MHz (shown in tooltips)."""
        self.clocks.update(clocks)

    def set_temperatures(self, temps_c: dict[str, float]) -> None:
        """Live sensor readings (``{"k10temp Tccd1": 61.0, ...}``): each CCD's temperature goes on its CCXs."""
        new = tm.ccx_temperatures(self.topology, temps_c) if self.topology is not None else {}
        old = self.temperatures
        self.temperatures = new
        if {k: round(v.celsius) for k, v in new.items()} != {k: round(v.celsius) for k, v in old.items()}:
            for box in self.box_items["l3"]:
                if box.node.index in new or box.node.index in old:
                    box.update()

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
        new = max(MIN_ZOOM, min(MAX_ZOOM, self._zoom * factor))
        factor = new / self._zoom
        self._zoom = new
        self._fit_mode = False
        self.scale(factor, factor)

    def zoom(self) -> float:
        return self._zoom

    def fit(self) -> None:
        """Zoom so the whole map fills the view, re-flowing it to the window's shape (also enlarging it)."""
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

        lo, hi = (1.0, MAX_FIT_ZOOM) if fits(1.0) else (MIN_ZOOM, 1.0)
        for _ in range(10):          # bisect the largest zoom at which the re-flowed map fits
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if fits(mid) else (lo, mid)
        self._zoom = lo
        self.relayout()
        self._set_zoom(lo)

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

    def png_scale(self) -> float:
        """2x at the least, and at least :data:`PNG_MIN_WIDTH_PX` wide (a small machine's map is a few hundred
        units wide), at most :data:`PNG_MAX_WIDTH_PX`."""
        width = max(1.0, self._export_rect().width())
        return max(1.0, min(PNG_MAX_WIDTH_PX / width, max(2.0, PNG_MIN_WIDTH_PX / width)))

    def export_png(self, path: str | Path, scale: float | None = None) -> Path:
        """Write the whole map as PNG, by default at :meth:`png_scale` (crisp in docs and bug reports)."""
        path = Path(path)
        rect = self._export_rect()
        scale = self.png_scale() if scale is None else scale
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

    def _rebuild(self) -> None:
        scene = self.scene()
        scene.clear()
        self.pu_items.clear()
        self.core_items = []
        self.box_items = {k: [] for k in MapColours.KINDS}
        self._facts = {}
        self.tree = None
        topo = self.topology
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
        self.tree = tm.map_tree(topo, caches=self.show_caches)
        self._facts = tm.index_cpus(topo)
        strips = tm.core_cache_labels(topo) if self.show_caches else {}
        self._build_items(self.tree, None, strips)
        allowed = topo.affinity.allowed_cpus
        allowed_set = set(allowed) if allowed is not None else set(self.pu_items)
        for cpu, item in self.pu_items.items():
            item.load = self.loads.get(cpu)
            item.markers = self.markers.get(cpu, [])
            item.allowed = cpu in allowed_set
        self.temperatures = {k: v for k, v in self.temperatures.items() if k < len(topo.l3_domains)}
        if self._fit_mode:
            self.fit()
        else:
            self.relayout()
        kept = old_selection & set(self.pu_items)
        self._apply_selection(kept, emit=kept != old_selection)

    def is_efficiency(self, cpus: list[int]) -> bool:
        """A core of a hybrid chip's slower kind (drawn with a dashed edge)."""
        return bool(cpus) and all((f := self._facts.get(c)) is not None and f.kind == "efficiency" for c in cpus)

    @property
    def hybrid(self) -> bool:
        return any(f.kind for f in self._facts.values())

    def _build_items(self, node: Node, parent: QGraphicsItem | None, strips: dict[int, list[str]]) -> None:
        assert self.topology is not None
        for child in node.children:
            if not child.cpus:
                continue             # CPU-less NUMA nodes: listed in the page, not drawn
            box = BoxItem(child, tm.box_label(child, self.topology), self)
            if parent is None:
                self.scene().addItem(box)
            else:
                box.setParentItem(parent)
            self.box_items[child.kind].append(box)
            if child.kind == "core":
                box.strips = strips.get(child.index, [])
                self.core_items.append(box)
                for cpu in child.cpus:
                    pu = PUItem(cpu, self)
                    pu.setParentItem(box)
                    self.pu_items[cpu] = pu
            else:
                self._build_items(child, box, strips)

    def label_font(self, kind: str) -> QFont:
        font = self._label_fonts.get(kind)
        if font is None:
            font = QFont(self.font())
            scale = {"package": 0.95, "cache": 0.72}.get(kind, 0.88)
            font.setPointSizeF(max(6.5 if kind == "cache" else 7.5, self.font().pointSizeF() * scale))
            font.setBold(kind == "package")
            self._label_fonts[kind] = font
        return font

    def elide(self, text: str, kind: str, width: float) -> str:
        """``text`` cut to ``width`` with an ellipsis; remembered, since boxes repaint under live tiles."""
        key = (text, kind, round(width))
        shown = self._elided.get(key)
        if shown is None:
            fm = QFontMetricsF(self.label_font(kind))
            shown = fm.elidedText(text, Qt.TextElideMode.ElideRight, max(width, 10.0))
            if len(self._elided) > 4096:
                self._elided.clear()
            self._elided[key] = shown
        return shown

    def _header_width(self, node: Node) -> float:
        """Enough width for the label's first part ("L3 32 MiB", "NUMA node 3")."""
        fm = QFontMetricsF(self.label_font(node.kind))
        return min(fm.horizontalAdvance(tm.box_label(node, self.topology)), 170.0) + 2 * PAD + 2

    def _strip_width(self, text: str) -> float:
        return QFontMetricsF(self.label_font("cache")).horizontalAdvance(text)

    # -- layout -------------------------------------------------------------

    def relayout(self) -> None:
        """Flow the boxes into rows that wrap at the visible width (at the current zoom)."""
        if self.tree is None:
            return
        width = max(200.0, self.viewport().width() / max(self._zoom, 1e-3) - 2 * MARGIN - 2)
        self._layout_width = width
        strips = {b.node.index: b.strips for b in self.core_items if b.strips}
        rules = LayoutRules(header_width=self._header_width, strip_width=self._strip_width, strips=strips)
        w, h, tops = layout(self.tree, width, rules)
        boxes = {id(b.node): b for bs in self.box_items.values() for b in bs}
        for x, y, placed in tops:
            self._place(placed, x, y, boxes)
        self.scene().setSceneRect(QRectF(0, 0, w, h))

    def _place(self, placed: Placed, x: float, y: float, boxes: dict[int, BoxItem]) -> None:
        """Position the items of ``placed`` (offsets are relative to the parent item, as Qt's are)."""
        if placed.cpu is not None:
            self.pu_items[placed.cpu].setPos(x, y)
            return
        box = boxes[id(placed.node)]
        box.setPos(x, y)
        box.prepareGeometryChange()
        box.w, box.h = placed.w, placed.h
        for cx, cy, child in placed.children:
            self._place(child, cx, cy, boxes)

    # -- tooltips -----------------------------------------------------------

    def pu_tooltip(self, cpu: int) -> str:
        item = self.pu_items.get(cpu)
        return tm.pu_tooltip(cpu, self.topology, self._facts.get(cpu),
                             allowed=item is None or item.allowed, load=self.loads.get(cpu),
                             clock_mhz=self.clocks.get(cpu), markers=self.markers.get(cpu))

    def box_tooltip(self, item: BoxItem) -> str:
        temp = self.temperatures.get(item.node.index) if item.kind == "l3" else None
        return tm.box_tooltip(item.node, item.label, self.topology, self._facts, self.loads, temp)

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
                # containers light up when wholly selected; cores don't (their threads' rings already do)
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

    def mousePressEvent(self, event) -> None:  # noqa: N802 - Qt API
        self._press_pos = event.position().toPoint()
        self._band = None
        super().mousePressEvent(event)

    def mouseReleaseEvent(self, event) -> None:  # noqa: N802 - Qt API
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

    def keyPressEvent(self, event) -> None:  # noqa: N802 - Qt API
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

    def wheelEvent(self, event) -> None:  # noqa: N802 - Qt API
        if event.modifiers() & Qt.KeyboardModifier.ControlModifier:
            steps = event.angleDelta().y() / 120.0
            if steps:
                self.zoom_by(1.15 ** steps)
            event.accept()
            return
        super().wheelEvent(event)

    def resizeEvent(self, event) -> None:  # noqa: N802 - Qt API
        super().resizeEvent(event)
        if self._fit_mode:
            self.fit()
        else:
            self.relayout()

    def changeEvent(self, event) -> None:  # noqa: N802 - Qt API
        super().changeEvent(event)
        if event.type() in (event.Type.PaletteChange, event.Type.StyleChange, event.Type.FontChange):
            self._elided.clear()
            self._label_fonts.clear()
            self.colours = MapColours.from_palette(self.palette())
            self.setBackgroundBrush(self.colours.background)
            self.scene().update()

    def drawForeground(self, painter: QPainter, rect: QRectF) -> None:  # noqa: N802 - Qt API
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


def _write(path: Path, data: bytes) -> Path:
    """Write an exported picture like a shell's ``>`` (device, symlink, umask and mode respected)."""
    from cpudoctor.fileio import atomic_write

    return atomic_write(path, data)
