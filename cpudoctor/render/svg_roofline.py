"""The roofline picture as SVG: for ``bench roofline --plot``, the HTML report and (through Qt) the PDF.

Log-log axes (FLOP/byte against GFLOP/s), the memory roof as a slope, each
measured compute roof flat from its ridge point on (every usable CPU solid,
one core dashed), the nominal peak of each dtype dotted in its colour, and the
points of :class:`cpudoctor.render.roofline.Picture` coloured by dtype,
shaped by kind, labelled where a label fits without touching another; each
point carries its figures as ``data-x``/``data-y`` and a tooltip. The claim
sentence and the points left unlabelled follow under the plot. Drawn at
900x600 by default, in a font size that stays readable when a PDF page
scales it to its text width.
"""

from __future__ import annotations

import math
from cpudoctor.kits.escape import html_escape as escape
from cpudoctor.kits.format import percent, wrap
from cpudoctor.render.roofline import Picture, Point, Roof

FONT = "system-ui,-apple-system,'Segoe UI',Roboto,sans-serif"
DTYPE_COLOURS = {"fp32": "#2f6fbf", "bf16": "#d9822b", "int8": "#2e7d4f", "fp64": "#8e44ad"}
MEMORY_COLOUR = "#c0392b"
NOMINAL_COLOUR = "#7f8c8d"
CHAR_W = 6.4                       # an 11 px sans-serif character, for label placement
_STYLE = (f"<style>.rf-ax{{stroke:#8b95a1;stroke-width:1}}.rf-gr{{stroke:#8b95a1;stroke-opacity:.25}}"
          f".rf-t{{font:11px {FONT};fill:#27313b}}.rf-m{{font:11px {FONT};fill:#55606b}}"
          f".rf-h{{font:600 13px {FONT};fill:#27313b}}</style>")


def _decades(lo: float, hi: float) -> list[float]:
    a, b = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    return [10.0 ** e for e in range(a, b + 1)]


def _tick(v: float) -> str:
    if v >= 1000:
        return f"{v / 1000:g}k"
    return f"{v:g}"


class _Axes:
    def __init__(self, pic: Picture, left: float, top: float, width: float, height: float):
        xs = [p.intensity for p in pic.points] + [r for r in (pic.ridge(x) for x in pic.compute + pic.nominal) if r]
        ys = [p.gflops for p in pic.points] + [r.gflops for r in pic.compute + pic.nominal]
        xs = [x for x in xs if x > 0] or [1.0]
        ys = [y for y in ys if y > 0] or [1.0]
        self.xt = _decades(min(xs) / 2, max(xs) * 2)
        self.yt = _decades(min(ys) / 2, max(ys) * 2)
        self.left, self.top, self.width, self.height = left, top, width, height

    def x(self, v: float) -> float:
        lo, hi = math.log10(self.xt[0]), math.log10(self.xt[-1])
        return self.left + (math.log10(max(v, 1e-12)) - lo) / ((hi - lo) or 1) * self.width

    def y(self, v: float) -> float:
        lo, hi = math.log10(self.yt[0]), math.log10(self.yt[-1])
        return self.top + self.height - (math.log10(max(v, 1e-12)) - lo) / ((hi - lo) or 1) * self.height


def _marker(p: Point, cx: float, cy: float, colour: str) -> str:
    data = (f'data-kind="{escape(p.kind)}" data-x="{p.intensity:.6g}" data-y="{p.gflops:.6g}" '
            f'data-label="{escape(p.label)}" data-dtype="{escape(p.dtype or "")}"')
    tip = f"<title>{escape(p.detail or p.label)}</title>"
    if p.kind == "operator":
        return (f'<rect class="rf-point" {data} x="{cx - 4:.1f}" y="{cy - 4:.1f}" width="8" height="8" '
                f'fill="{colour}" stroke="#ffffff" stroke-width="1">{tip}</rect>')
    if p.kind == "job":                        # the user's job: a diamond
        return (f'<path class="rf-point rf-job" {data} d="M{cx:.1f} {cy - 6:.1f}L{cx + 6:.1f} {cy:.1f}L{cx:.1f} '
                f'{cy + 6:.1f}L{cx - 6:.1f} {cy:.1f}Z" fill="{colour}" stroke="#27313b" stroke-width="1">{tip}</path>')
    r = 3 if p.kind == "gemm-ladder" else 5
    fill = "#ffffff" if p.kind == "gemm-ladder" else colour
    return (f'<circle class="rf-point" {data} cx="{cx:.1f}" cy="{cy:.1f}" r="{r}" fill="{fill}" '
            f'stroke="{colour}" stroke-width="1.5">{tip}</circle>')


def _place(label: str, cx: float, cy: float, taken: list[tuple[float, float, float, float]],
           box: tuple[float, float, float, float]) -> tuple[float, float] | None:
    """Where ``label`` fits beside (cx, cy) without touching another label or leaving the plot."""
    w, h = CHAR_W * len(label), 12.0
    for dx, dy in ((8, -4), (8, 12), (-8 - w, -4), (-8 - w, 12), (-w / 2, -10), (-w / 2, 20)):
        x0, y0 = cx + dx, cy + dy - h + 2
        rect = (x0, y0, x0 + w, y0 + h)
        inside = box[0] <= rect[0] and rect[2] <= box[2] and box[1] <= rect[1] and rect[3] <= box[3]
        if inside and _free(rect, taken):
            taken.append(rect)
            return cx + dx, cy + dy
    return None


def _text(x: float, y: float, text: str, cls: str = "rf-t", fill: str | None = None, extra: str = "") -> str:
    """A label on a light backing, so a line running behind it does not cut through the letters."""
    colour = f' fill="{fill}"' if fill else ""
    return (f'<rect x="{x - 2:.1f}" y="{y - 10:.1f}" width="{CHAR_W * len(text) + 4:.1f}" height="13" '
            f'fill="#ffffff" fill-opacity="0.8"/><text class="{cls}" x="{x:.1f}" y="{y:.1f}"{colour}{extra}>'
            f"{escape(text)}</text>")


def _free(rect: tuple[float, float, float, float], taken: list) -> bool:
    return all(rect[2] < t[0] or rect[0] > t[2] or rect[3] < t[1] or rect[1] > t[3] for t in taken)


def _line_label(text: str, y: float, above: bool, ax: _Axes, taken: list, prefer_right: bool = True) -> float | None:
    """The x where ``text`` fits just above (or below) a horizontal line at ``y``; None when nowhere."""
    w = CHAR_W * len(text)
    steps = [ax.left + ax.width - w - 4 - i * ax.width / 12 for i in range(12)]
    for x in steps if prefer_right else list(reversed(steps)):
        if x < ax.left + 4:
            continue
        rect = (x, y - 14, x + w, y - 2) if above else (x, y + 2, x + w, y + 14)
        if _free(rect, taken):
            taken.append(rect)
            return x
    return None


def _roof_lines(pic: Picture, ax: _Axes, out: list[str], labels: list[str], taken: list) -> None:
    x_end = ax.xt[-1]
    for roof in pic.compute:
        colour = DTYPE_COLOURS.get(roof.dtype, "#34495e")
        start = pic.ridge(roof) or ax.xt[0]
        dash = "" if roof.all_cpus else ' stroke-dasharray="6 4"'
        y = ax.y(roof.gflops)
        out.append(f'<line class="rf-roof" data-dtype="{escape(roof.dtype)}" data-y="{roof.gflops:.6g}" '
                   f'data-threads="{escape(roof.threads)}" x1="{ax.x(max(start, ax.xt[0])):.1f}" x2="{ax.x(x_end):.1f}" '
                   f'y1="{y:.1f}" y2="{y:.1f}" stroke="{colour}" stroke-width="{2.5 if roof.all_cpus else 1.5}"{dash}>'
                   f"<title>{escape(roof.label)}</title></line>")
        if roof.all_cpus:
            tx = _line_label(roof.label, y, True, ax, taken)
            if tx is not None:
                labels.append(_text(tx, y - 4, roof.label, fill=colour))
    for roof in pic.nominal:                     # one dotted line per dtype, in its colour
        colour = DTYPE_COLOURS.get(roof.dtype, NOMINAL_COLOUR)
        y = ax.y(roof.gflops)
        out.append(f'<line class="rf-nominal" data-dtype="{roof.dtype}" data-y="{roof.gflops:.6g}" x1="{ax.left}" '
                   f'x2="{ax.left + ax.width}" y1="{y:.1f}" y2="{y:.1f}" stroke="{colour}" '
                   f'stroke-width="1.2" stroke-dasharray="2 3"><title>{escape(roof.label)}</title></line>')
        tx = _line_label(roof.label, y, True, ax, taken, prefer_right=False)
        if tx is not None:
            labels.append(_text(tx, y - 4, roof.label, "rf-m", fill=colour))
    if pic.memory_gbps:
        top = max(pic.compute, key=lambda r: r.gflops, default=None) or (pic.nominal[0] if pic.nominal else None)
        x_hi = (pic.ridge(top) if top else None) or x_end
        x_lo = max(ax.xt[0], ax.yt[0] / pic.memory_gbps)
        out.append(f'<line class="rf-memory" data-gbps="{pic.memory_gbps:.6g}" x1="{ax.x(x_lo):.1f}" '
                   f'y1="{ax.y(pic.memory_gbps * x_lo):.1f}" x2="{ax.x(x_hi):.1f}" y2="{ax.y(pic.memory_gbps * x_hi):.1f}" '
                   f'stroke="{MEMORY_COLOUR}" stroke-width="2.5"><title>{escape(pic.memory_label)}</title></line>')
        # The label runs along the slope, just above it, where it touches no other label.
        angle = math.degrees(math.atan2(ax.y(pic.memory_gbps * x_hi) - ax.y(pic.memory_gbps * x_lo),
                                        ax.x(x_hi) - ax.x(x_lo)))
        w = CHAR_W * len(pic.memory_label)
        dx, dy = w * math.cos(math.radians(angle)), w * math.sin(math.radians(angle))
        for fraction, offset in ((f, o) for f in (0.12, 0.2, 0.05, 0.3, 0.4, 0.5) for o in (-6, 16)):
            xv = x_lo * (x_hi / x_lo) ** fraction
            px, py = ax.x(xv) + (8 if offset > 0 else 0), ax.y(pic.memory_gbps * xv) + offset
            # the rotated text as a chain of small boxes along its baseline
            boxes = [(px + dx * t / 6, py + dy * t / 6 - 12, px + dx * (t + 1) / 6, py + dy * t / 6)
                     for t in range(6)]
            if all(_free(b, taken) for b in boxes) and min(b[1] for b in boxes) > ax.top:
                taken.extend(boxes)
                labels.append(f'<text class="rf-t rf-memory-label" x="0" y="0" fill="{MEMORY_COLOUR}" '
                              f'transform="translate({px:.1f} {py:.1f}) rotate({angle:.1f})">'
                              f"{escape(pic.memory_label)}</text>")
                break


def render_svg(pic: Picture, width: int = 900, height: int = 600) -> str:
    """The picture as a standalone SVG document of ``width`` x ``height`` (plus the text under it)."""
    left, right, top, plot_bottom = 66, 18, 50, 46
    ax = _Axes(pic, left, top, width - left - right, height - top - plot_bottom)
    out: list[str] = []
    for v in ax.xt:
        out.append(f'<line class="rf-gr" x1="{ax.x(v):.1f}" x2="{ax.x(v):.1f}" y1="{top}" y2="{top + ax.height}"/>'
                   f'<text class="rf-m" x="{ax.x(v):.1f}" y="{top + ax.height + 15}" text-anchor="middle">{_tick(v)}</text>')
    for v in ax.yt:
        out.append(f'<line class="rf-gr" x1="{left}" x2="{left + ax.width}" y1="{ax.y(v):.1f}" y2="{ax.y(v):.1f}"/>'
                   f'<text class="rf-m" x="{left - 6}" y="{ax.y(v) + 4:.1f}" text-anchor="end">{_tick(v)}</text>')
    out.append(f'<line class="rf-ax" x1="{left}" x2="{left + ax.width}" y1="{top + ax.height}" y2="{top + ax.height}"/>'
               f'<line class="rf-ax" x1="{left}" x2="{left}" y1="{top}" y2="{top + ax.height}"/>')
    out.append(f'<text class="rf-m" x="{left + ax.width / 2:.1f}" y="{top + ax.height + 32}" text-anchor="middle">'
               "arithmetic intensity (FLOP per byte moved, log)</text>")
    out.append(f'<text class="rf-m" transform="translate(14 {top + ax.height / 2:.1f}) rotate(-90)" '
               'text-anchor="middle">GFLOP/s (GOP/s for int8, log)</text>')
    # Every marker is taken first, so no label covers a point.
    taken: list[tuple[float, float, float, float]] = [(ax.x(p.intensity) - 5, ax.y(p.gflops) - 5, ax.x(p.intensity) + 5,
                                                       ax.y(p.gflops) + 5) for p in pic.points]
    labels: list[str] = []
    _roof_lines(pic, ax, out, labels, taken)
    box = (left + 2, top + 2, left + ax.width - 2, top + ax.height - 2)
    unlabelled: list[Point] = []
    for p in sorted(pic.points, key=lambda p: (not p.labelled, -p.gflops)):
        colour = DTYPE_COLOURS.get(p.dtype or "", "#34495e")
        cx, cy = ax.x(p.intensity), ax.y(p.gflops)
        out.append(_marker(p, cx, cy, colour))
        spot = _place(p.label, cx, cy, taken, box) if p.labelled else None
        if spot is None:
            if p.kind not in ("gemm-ladder", "job"):      # a job's kernels keep their figures in their tooltips
                unlabelled.append(p)
            continue
        labels.append(_text(spot[0], spot[1], p.label, "rf-t rf-label"))
    below = _below(pic, unlabelled, width)
    total_h = height + 16 * len(below) + (8 if below else 0)
    head = [f'<svg xmlns="http://www.w3.org/2000/svg" role="img" aria-label="Roofline" '
            f'viewBox="0 0 {width} {total_h}" width="{width}" height="{total_h}" class="chart roofline">', _STYLE,
            f'<rect x="0" y="0" width="{width}" height="{total_h}" fill="#ffffff"/>',
            f'<text class="rf-h" x="{left}" y="20">Roofline: measured roofs, nominal peak, and where the work ran</text>']
    shown = {r.dtype for r in pic.compute} | {p.dtype for p in pic.points if p.dtype}
    legend = _legend(left, 38, [d for d in DTYPE_COLOURS if d in shown] + sorted(shown - set(DTYPE_COLOURS)))
    text = [f'<text class="rf-t" x="{left}" y="{height + 10 + 16 * i}">{escape(line)}</text>'
            for i, line in enumerate(below)]
    return "".join(head + [legend] + out + labels + text) + "</svg>"


def _legend(left: float, y: float, dtypes: list[str]) -> str:
    """The key: the marks, then a colour for each precision the picture draws (none it does not)."""
    items = [("●", "GEMM run"), ("○", "in-cache multiply"), ("■", "training operator"), ("◆", "this job"),
             ("- -", "roof on one core"), ("···", "nominal peak")] + [("—", d) for d in dtypes]
    parts, x = [], left
    for mark, name in items:
        text = f"{mark} {name}"
        colour = DTYPE_COLOURS.get(name, MEMORY_COLOUR if name == "memory" else "#55606b")
        parts.append(f'<text class="rf-m" x="{x:.1f}" y="{y}" fill="{colour}">{escape(text)}</text>')
        x += CHAR_W * len(text) + 14
    return "".join(parts)


def _below(pic: Picture, unlabelled: list[Point], width: int) -> list[str]:
    """The claim, then the points without a label (with their figures), wrapped to the picture's width."""
    chars = int((width - 80) / CHAR_W)
    lines = wrap(pic.claim, chars) if pic.claim else []
    if unlabelled:
        listed = "; ".join(f"{p.label} {p.gflops:,.1f} GFLOP/s at {p.intensity:,.1f} FLOP/B" for p in unlabelled[:12])
        more = f" (+{len(unlabelled) - 12} more)" if len(unlabelled) > 12 else ""
        lines += wrap("Also measured: " + listed + more, chars)
    return lines


def render_bars(bars: list, width: int = 640) -> str:
    """Per-layer-kind bars (:func:`cpudoctor.render.achieved.bars`): achieved GFLOP/s filled, the attainable bound
    (the roofline's, at the kind's intensity) outlined, the compute roof as a tick; a log scale, so 1 % and 60 %
    are both visible. An empty string when there is nothing to draw."""
    bars = [b for b in bars if b.achieved > 0]
    if not bars:
        return ""
    label_w, right, row, top = 190, 150, 26, 28
    values = [v for b in bars for v in (b.achieved, b.roof, b.attainable) if v]
    lo, hi = math.log10(min(values) / 2), math.log10(max(values) * 1.5)
    plot_w = width - label_w - right

    def x(v: float) -> float:
        return label_w + (math.log10(max(v, 1e-12)) - lo) / ((hi - lo) or 1) * plot_w

    height = top + row * len(bars) + 10
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" role="img" aria-label="Achieved rate against the roof" '
           f'viewBox="0 0 {width} {height}" width="{width}" height="{height}" class="chart achieved-bars">', _STYLE,
           f'<rect x="0" y="0" width="{width}" height="{height}" fill="#ffffff"/>',
           f'<text class="rf-h" x="4" y="18">Achieved rate per layer kind against the roof (log scale)</text>']
    for i, b in enumerate(bars):
        y = top + i * row
        colour = DTYPE_COLOURS.get(b.dtype, "#34495e")
        out.append(f'<text class="rf-t" x="4" y="{y + 15}">{escape(b.label)}</text>')
        if b.attainable:
            out.append(f'<rect class="ab-bound" x="{label_w}" y="{y + 3}" width="{x(b.attainable) - label_w:.1f}" '
                       f'height="16" fill="none" stroke="{colour}" stroke-dasharray="3 2"/>')
        out.append(f'<rect class="ab-bar" data-gflops="{b.achieved:.6g}" x="{label_w}" y="{y + 5}" '
                   f'width="{max(1.0, x(b.achieved) - label_w):.1f}" height="12" fill="{colour}">'
                   f"<title>{escape(b.text)}</title></rect>")
        if b.roof:
            out.append(f'<line class="ab-roof" x1="{x(b.roof):.1f}" x2="{x(b.roof):.1f}" y1="{y + 1}" y2="{y + 21}" '
                       f'stroke="#27313b" stroke-width="2"/>')
        of = f" ({percent(b.achieved / b.roof, fraction=True)} of roof)" if b.roof else ""
        out.append(f'<text class="rf-m" x="{width - right + 6}" y="{y + 15}">{b.achieved:,.1f} GFLOP/s{of}</text>')
    return "".join(out) + "</svg>"
