"""Small charts as SVG strings, for benchmark results in HTML/PDF exports (no Qt).

The lab's results are lists of measurement dicts (``metrics["points"]``): the
sweep's variants (``{"variant": ..., "threads": 8, "samples_per_s": ...}``),
GEMM's thread ladder per precision (``{"threads", "precision", "gflops"}``),
quantisation per batch size (``{"batch", "fp32_samples_per_s",
"int8_samples_per_s"}``). :func:`find_charts` looks for these shapes rather
than for one format, so a new job gets a chart without code here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from cpudoctor.kits.escape import html_escape as escape
from typing import Any
from cpudoctor.kits.format import metric, number

X_KEYS = ("threads", "num_threads", "intra_op_threads", "batch", "batch_size", "n", "size", "x", "step")
Y_PREFERRED = ("samples_per_s", "throughput", "gflops", "tokens_per_s", "items_per_s", "speedup", "y")
LABEL_KEYS = ("variant", "name", "label")
GROUP_KEYS = ("precision", "dtype", "backend", "library", "model")
# Bookkeeping of a measurement, never a figure to chart: how many segments or repetitions it took, its spread's
# ends, how much of the CPU others took ("segments vs threads" charted the sweep's own counting).
NOT_MEASURES = ("segments", "rounds", "reps", "other_share", "steal_share", "threads_used", "interop_threads",
                "cpus", "elapsed", "emulated")
PALETTE = ("#2f6fbf", "#d9822b", "#2e7d4f", "#8e44ad", "#c0392b", "#16a085")
FONT = "system-ui,-apple-system,'Segoe UI',Roboto,sans-serif"


@dataclass
class Series:
    name: str
    points: list[tuple[float, float]]


@dataclass
class Chart:
    title: str
    x_label: str
    y_label: str
    series: list[Series] = field(default_factory=list)          # line chart
    bars: list[tuple[str, float]] = field(default_factory=list)  # bar chart (label, value)


def _num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


# Unit-bearing keys whose plain "underscores to spaces" reading would be wrong or ugly.
_LABELS = {"gflops": "GFLOP/s", "best_gflops": "best GFLOP/s", "peak_gflops": "nominal peak GFLOP/s",
           "gflops_lo": "GFLOP/s, lowest", "gflops_hi": "GFLOP/s, highest", "other_share": "CPU to others",
           "steal_share": "CPU stolen", "eval_accuracy": "held-out accuracy", "top1_agreement": "top-1 agreement",
           "utilisation": "of nominal peak", "roof_gflops": "measured roof GFLOP/s", "of_roof": "of measured roof",
           "nominal_gflops": "nominal peak GFLOP/s", "of_nominal": "of nominal peak", "gbps": "GB/s",
           "median_gbps": "median GB/s", "median_gflops": "median GFLOP/s",
           "threads_used": "threads used", "interop_threads": "inter-op threads",
           "elapsed": "elapsed (s)", "import_s": "import (s)", "compile_s": "compile (s)",
           "budget_s": "time budget (s)", "segment_s": "segment length (s)", "startup_s": "start-up (s)",
           "warmup_s": "warm-up (s)", "job_s": "whole job (s)", "seconds": "run for (s)",
           "batch_size": "batch size", "dtype": "precision", "segments": "segments measured",
           "rounds": "full rounds", "verdict": "verdict", "ended_by": "ended by", "cut_off": "cut off during",
           "eval_samples": "held-out samples", "smoothing_steps": "smoothing (steps)",
           "min_rounds": "rounds at least", "quiet_limit": "busy above (share to others)",
           "max_variants": "settings at most"}
# A measurement's spread and count: ``samples_per_s_lo`` reads "samples/s, lowest", never "samples/s lo".
_SUFFIXES = (("_lo", "lowest"), ("_hi", "highest"), ("_n", "measurements"))


def _label(key: str) -> str:
    if key in _LABELS:
        return _LABELS[key]
    for suffix, word in _SUFFIXES:
        if key.endswith(suffix) and len(key) > len(suffix):
            base = key[: -len(suffix)]
            return f"{_label(base)}, {word}" if word != "measurements" else f"{word} of {_label(base)}"
    if key.endswith("_s") and not key.endswith("_per_s"):
        return key[:-2].replace("_", " ") + " (s)"
    return key.replace("_per_s", "/s").replace("_", " ")


def metric_label(key: str) -> str:
    """A metric key as a reader sees it: ``fp32_samples_per_s`` -> ``fp32 samples/s``, ``gflops`` -> ``GFLOP/s``."""
    return _label(str(key))


def find_charts(metrics: dict[str, Any], kind: str = "") -> list[Chart]:
    """Charts hidden in a BenchRun's metrics (see the module docstring)."""
    charts: list[Chart] = []
    for name, value in metrics.items():
        if not isinstance(value, list) or not value or not all(isinstance(p, dict) for p in value):
            continue
        title = kind if name in ("points", "series", "results") else f"{kind} {name}".strip()
        keys = list(dict.fromkeys(k for p in value for k in p))
        numeric = [k for k in keys if sum(_num(p.get(k)) for p in value) >= 2]
        ys = [k for k in Y_PREFERRED if k in numeric] or [k for k in numeric if k.endswith("_per_s")]
        label_key = next((k for k in LABEL_KEYS if k in keys and all(isinstance(p.get(k), str) for p in value)), None)
        if label_key and ys:
            bars = [(p[label_key], float(p[ys[0]])) for p in value if _num(p.get(ys[0]))]
            if len(bars) >= 2:
                charts.append(Chart(f"{title}: {_label(ys[0])} per setting", "", _label(ys[0]), bars=bars))
        xk = next((k for k in X_KEYS if k in numeric), None)
        if xk is None:
            continue
        measures = [k for k in numeric if k not in NOT_MEASURES and not k.endswith(("_lo", "_hi", "_n"))]
        y_keys = [k for k in measures if k.endswith("_samples_per_s")] or ys[:1] or [k for k in measures if k != xk][:1]
        y_keys = [k for k in y_keys if k != xk]
        if not y_keys:
            continue
        rows = [p for p in value if not label_key or p.get("group", "threads") == "threads"]
        # The key that tells the most series apart: GEMM's "backend" (torch-fp32 vs numpy-fp32), not its
        # "precision", which would join two libraries' points into one zig-zag line.
        distinct = {g: len({str(p.get(g)) for p in rows if g in p}) for g in GROUP_KEYS}
        group = max((g for g in GROUP_KEYS if distinct[g] > 1), key=lambda g: distinct[g], default=None)
        series: list[Series] = []
        for yk in y_keys:
            groups = sorted({str(p.get(group)) for p in rows}) if group else [""]
            for g in groups:
                pts = sorted((float(p[xk]), float(p[yk])) for p in rows
                             if _num(p.get(xk)) and _num(p.get(yk)) and (not group or str(p.get(group)) == g))
                if len(pts) >= 2:
                    label = " ".join(x for x in (g, _label(yk) if len(y_keys) > 1 else "") if x)
                    series.append(Series(label or _label(yk), pts))
        if series:
            y_label = _label(y_keys[0]) if len(y_keys) == 1 else "samples/s"
            charts.append(Chart(f"{title}: {y_label} vs {_label(xk)}", _label(xk), y_label, series=series))
    return charts


def _ticks(lo: float, hi: float, n: int = 5, integer: bool = False) -> list[float]:
    """Round tick values covering lo..hi; ``integer`` (thread counts, batch sizes) never ticks at 1.2."""
    if hi <= lo:
        hi = lo + 1
    raw = (hi - lo) / n
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    if integer:
        step = max(1.0, float(math.ceil(step)))
    first, last = math.floor(lo / step + 1e-9), math.ceil(hi / step - 1e-9)
    return [round(i * step, 10) for i in range(first, last + 1)]


def _fmt(v: float) -> str:
    if abs(v) >= 10_000:
        return f"{v / 1000:g}k"
    return f"{v:g}"


_STYLE = (f"<style>.ch-ax{{stroke:#8b95a1;stroke-width:1}}.ch-gr{{stroke:#8b95a1;stroke-opacity:.25}}"
          f".ch-t{{font:11px {FONT};fill:#55606b}}.ch-h{{font:600 12px {FONT};fill:#27313b}}"
          f"@media (prefers-color-scheme: dark){{.ch-t{{fill:#aab3bc}}.ch-h{{fill:#e6e9ec}}}}</style>")


def render_chart(chart: Chart, width: int = 600) -> str:
    return bar_chart(chart, width) if chart.bars else line_chart(chart, width)


def line_chart(chart: Chart, width: int = 600, height: int = 280) -> str:
    """Series as a line chart with axes, ticks, a legend and each series' best point marked.

    The legend adds to ``height`` rather than eating the plot: four GEMM
    backends must not squeeze the lines into a strip.
    """
    legend_h = 16 * len(chart.series) if len(chart.series) > 1 else 0
    height += legend_h
    ml, mr, mt, mb = 60, 16, 28 + legend_h, 40
    pw, ph = width - ml - mr, height - mt - mb
    xs = [x for s in chart.series for x, _ in s.points]
    ys = [y for s in chart.series for _, y in s.points]
    xt = _ticks(min(xs), max(xs), integer=all(float(x).is_integer() for x in xs))
    yt = _ticks(min(0.0, min(ys)), max(ys))
    x0, x1, y0, y1 = xt[0], xt[-1], yt[0], yt[-1]

    def sx(v: float) -> float:
        return ml + (v - x0) / ((x1 - x0) or 1) * pw

    def sy(v: float) -> float:
        return mt + ph - (v - y0) / ((y1 - y0) or 1) * ph

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" role="img" aria-label="{escape(chart.title)}" '
           f'viewBox="0 0 {width} {height}" width="{width}" height="{height}" class="chart">', _STYLE,
           f'<text class="ch-h" x="{ml}" y="16">{escape(chart.title)}</text>']
    for v in yt:
        out.append(f'<line class="ch-gr" x1="{ml}" x2="{ml + pw}" y1="{sy(v):.1f}" y2="{sy(v):.1f}"/>')
        out.append(f'<text class="ch-t" x="{ml - 6}" y="{sy(v) + 4:.1f}" text-anchor="end">{_fmt(v)}</text>')
    for v in xt:
        out.append(f'<text class="ch-t" x="{sx(v):.1f}" y="{mt + ph + 16}" text-anchor="middle">{_fmt(v)}</text>')
    out.append(f'<line class="ch-ax" x1="{ml}" x2="{ml + pw}" y1="{mt + ph}" y2="{mt + ph}"/>')
    out.append(f'<line class="ch-ax" x1="{ml}" x2="{ml}" y1="{mt}" y2="{mt + ph}"/>')
    out.append(f'<text class="ch-t" x="{ml + pw / 2:.1f}" y="{height - 6}" text-anchor="middle">'
               f"{escape(chart.x_label)}</text>")
    out.append(f'<text class="ch-t" transform="translate(14 {mt + ph / 2:.1f}) rotate(-90)" text-anchor="middle">'
               f"{escape(chart.y_label)}</text>")
    for i, s in enumerate(chart.series):
        color = PALETTE[i % len(PALETTE)]
        if legend_h:
            ly = 26 + 16 * i
            out.append(f'<rect x="{ml}" y="{ly}" width="12" height="3" fill="{color}"/>'
                       f'<text class="ch-t" x="{ml + 18}" y="{ly + 5}">{escape(s.name)}</text>')
        pts = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in s.points)
        out.append(f'<polyline fill="none" stroke="{color}" stroke-width="2" points="{pts}"/>')
        best = max(s.points, key=lambda p: p[1])
        for x, y in s.points:
            r = 4.5 if (x, y) == best else 3
            out.append(f'<circle fill="{color}" cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="{r}">'
                       f"<title>{escape(s.name)}: {escape(chart.x_label)} {x:g} → {number(y)}</title></circle>")
    out.append("</svg>")
    return "".join(out)


def bar_chart(chart: Chart, width: int = 600) -> str:
    """Horizontal bars, one per setting, the best one highlighted and every value printed."""
    label_w = min(300, 7 * max(len(lbl) for lbl, _ in chart.bars) + 10)
    bar_h, gap, top = 16, 6, 28
    height = top + len(chart.bars) * (bar_h + gap) + 8
    vmax = max(v for _, v in chart.bars) or 1.0
    span = width - label_w - 80
    best = max(range(len(chart.bars)), key=lambda i: chart.bars[i][1])
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" role="img" aria-label="{escape(chart.title)}" '
           f'viewBox="0 0 {width} {height}" width="{width}" height="{height}" class="chart">', _STYLE,
           f'<text class="ch-h" x="4" y="16">{escape(chart.title)}</text>']
    for i, (label, value) in enumerate(chart.bars):
        y = top + i * (bar_h + gap)
        w = max(1.0, value / vmax * span)
        color = PALETTE[1] if i == best else PALETTE[0]
        short = label if len(label) <= 42 else label[:41] + "…"
        out.append(f'<text class="ch-t" x="{label_w - 6}" y="{y + 12}" text-anchor="end">'
                   f"<title>{escape(label)}</title>{escape(short)}</text>")
        out.append(f'<rect x="{label_w}" y="{y}" width="{w:.1f}" height="{bar_h}" rx="2" fill="{color}"/>')
        out.append(f'<text class="ch-t" x="{label_w + w + 6:.1f}" y="{y + 12}">{number(value)}'
                   + (" (best)" if i == best else "") + "</text>")
    out.append("</svg>")
    return "".join(out)


def measurement_tables(metrics: dict[str, Any]) -> list[tuple[str, list[str], list[list[str]]]]:
    """Every list of measurement dicts as (name, columns, rows of display strings), for tables."""
    from cpudoctor.kits.cpulist import format_cpulist

    tables = []
    for name, value in metrics.items():
        if not isinstance(value, list) or not value or not all(isinstance(p, dict) for p in value):
            continue
        cols = [k for k in dict.fromkeys(k for p in value for k in p)
                if any(p.get(k) not in (None, "", []) for p in value) and k not in ("error",)]

        def cell(k: str, v: Any) -> str:
            if v is None:
                return ""
            if isinstance(v, (bool, int, float)):
                return metric(k, v)
            if isinstance(v, list) and all(isinstance(x, int) for x in v):
                return format_cpulist(v)
            if isinstance(v, (list, dict)):
                return str(v)
            return str(v)

        tables.append((name, [metric_label(c) for c in cols], [[cell(k, p.get(k)) for k in cols] for p in value]))
    return tables


def split_constant_columns(cols: list[str], rows: list[list[str]]) -> tuple[list[str], list[list[str]], list[str]]:
    """Columns that hold the same value in every row, lifted out as ``name value`` texts.

    GEMM's table repeats ``size 512`` in every row; saying it once keeps the
    table narrow enough for a printed page and a pasted issue.
    """
    if len(rows) < 2:
        return cols, rows, []
    const = [i for i in range(len(cols)) if len({r[i] for r in rows}) == 1 and rows[0][i] != ""]
    if len(const) == len(cols):
        return cols, rows, []
    keep = [i for i in range(len(cols)) if i not in const]
    return ([cols[i] for i in keep], [[r[i] for i in keep] for r in rows],
            [f"{cols[i]} {rows[0][i]}" for i in const])


def drop_derived_columns(cols: list[str], rows: list[list[str]]) -> tuple[list[str], list[list[str]]]:
    """Columns whose every value is part of another column's in the same row, left out: GEMM's ``library``
    (``torch``) and ``precision`` (``fp32``) say again what ``backend`` (``torch-fp32``) says, and their width
    is what squeezed a printed table until its headers broke mid-word."""
    if not rows:
        return cols, rows
    drop = set()
    for i in range(len(cols)):
        for j in range(len(cols)):
            if i == j or j in drop or not all(r[i] for r in rows):
                continue
            if all(r[i] != r[j] and r[i] in r[j].replace("-", " ").split() for r in rows):
                drop.add(i)
                break
    keep = [i for i in range(len(cols)) if i not in drop]
    return [cols[i] for i in keep], [[r[i] for i in keep] for r in rows]

