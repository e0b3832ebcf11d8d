"""Small line charts as SVG strings, for benchmark series in HTML/PDF exports (no Qt)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from html import escape
from typing import Any

X_KEYS = ("threads", "num_threads", "intra_op_threads", "batch", "batch_size", "n", "size", "x", "step")
Y_PREFERRED = ("samples_per_s", "throughput", "gflops", "tokens_per_s", "items_per_s", "speedup", "y", "seconds")


@dataclass
class Series:
    title: str
    x_label: str
    y_label: str
    points: list[tuple[float, float]]


def _num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def find_series(metrics: dict[str, Any], kind: str = "") -> list[Series]:
    """Series hidden in a BenchRun's metrics: lists of dicts that share a numeric x and y key.

    The lab's result format is free-form (``{"points": [{"threads": 8, "samples_per_s": ...}]}``
    and the like), so this looks for the shape rather than for one key name.
    """
    found: list[Series] = []
    for name, value in metrics.items():
        if not isinstance(value, list) or len(value) < 2 or not all(isinstance(p, dict) for p in value):
            continue
        keys = [k for k in value[0] if all(_num(p.get(k)) for p in value)]
        xk = next((k for k in X_KEYS if k in keys), None)
        if xk is None:
            continue
        ys = [k for k in Y_PREFERRED if k in keys and k != xk] or [k for k in keys if k != xk]
        if not ys:
            continue
        yk = ys[0]
        pts = sorted((float(p[xk]), float(p[yk])) for p in value)
        title = f"{kind} {name}".strip() if name not in ("points", "series", "results") else kind or name
        found.append(Series(title, xk.replace("_", " "), yk.replace("_per_s", "/s").replace("_", " "), pts))
    return found


def _ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    if hi <= lo:
        hi = lo + 1
    raw = (hi - lo) / n
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    first, last = math.floor(lo / step + 1e-9), math.ceil(hi / step - 1e-9)
    return [round(i * step, 10) for i in range(first, last + 1)]


def _fmt(v: float) -> str:
    if abs(v) >= 1000:
        return f"{v / 1000:g}k"
    return f"{v:g}"


def line_chart(series: Series, width: int = 560, height: int = 260) -> str:
    """One series as a self-contained SVG line chart with axes, ticks and the best point marked."""
    ml, mr, mt, mb = 56, 16, 28, 40
    pw, ph = width - ml - mr, height - mt - mb
    xs = [p[0] for p in series.points]
    ys = [p[1] for p in series.points]
    xt = _ticks(min(xs), max(xs))
    yt = _ticks(min(0.0, min(ys)), max(ys))
    x0, x1, y0, y1 = xt[0], xt[-1], yt[0], yt[-1]

    def sx(v: float) -> float:
        return ml + (v - x0) / ((x1 - x0) or 1) * pw

    def sy(v: float) -> float:
        return mt + ph - (v - y0) / ((y1 - y0) or 1) * ph

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" role="img" aria-label="{escape(series.title)}" '
           f'viewBox="0 0 {width} {height}" width="{width}" height="{height}" class="chart">',
           "<style>.ch-ax{stroke:#8b95a1;stroke-width:1}.ch-gr{stroke:#8b95a1;stroke-opacity:.25}"
           ".ch-ln{fill:none;stroke:#2f6fbf;stroke-width:2}.ch-pt{fill:#2f6fbf}.ch-best{fill:#d9822b}"
           ".ch-t{font:11px system-ui,sans-serif;fill:#55606b}.ch-h{font:600 12px system-ui,sans-serif;fill:#27313b}"
           "@media (prefers-color-scheme: dark){.ch-t{fill:#aab3bc}.ch-h{fill:#e6e9ec}.ch-ln{stroke:#6aa5ef}"
           ".ch-pt{fill:#6aa5ef}}</style>",
           f'<text class="ch-h" x="{ml}" y="16">{escape(series.title)}</text>']
    for v in yt:
        out.append(f'<line class="ch-gr" x1="{ml}" x2="{ml + pw}" y1="{sy(v):.1f}" y2="{sy(v):.1f}"/>')
        out.append(f'<text class="ch-t" x="{ml - 6}" y="{sy(v) + 4:.1f}" text-anchor="end">{_fmt(v)}</text>')
    for v in xt:
        out.append(f'<text class="ch-t" x="{sx(v):.1f}" y="{mt + ph + 16}" text-anchor="middle">{_fmt(v)}</text>')
    out.append(f'<line class="ch-ax" x1="{ml}" x2="{ml + pw}" y1="{mt + ph}" y2="{mt + ph}"/>')
    out.append(f'<line class="ch-ax" x1="{ml}" x2="{ml}" y1="{mt}" y2="{mt + ph}"/>')
    out.append(f'<text class="ch-t" x="{ml + pw / 2:.1f}" y="{height - 6}" text-anchor="middle">'
               f'{escape(series.x_label)}</text>')
    out.append(f'<text class="ch-t" transform="translate(14 {mt + ph / 2:.1f}) rotate(-90)" text-anchor="middle">'
               f'{escape(series.y_label)}</text>')
    pts = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in series.points)
    out.append(f'<polyline class="ch-ln" points="{pts}"/>')
    best = max(series.points, key=lambda p: p[1]) if "second" not in series.y_label else min(
        series.points, key=lambda p: p[1])
    for x, y in series.points:
        cls = "ch-best" if (x, y) == best else "ch-pt"
        out.append(f'<circle class="{cls}" cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="{4 if cls == "ch-best" else 3}">'
                   f"<title>{escape(series.x_label)} {x:g}: {y:g}</title></circle>")
    out.append("</svg>")
    return "".join(out)
