"""The roofline picture as data, and its words: measured roofs, nominal peak, and where the work landed.

A roofline plots achieved GFLOP/s against arithmetic intensity (FLOP per
byte moved): a kernel under the slanted memory roof is starved by memory,
one under the flat compute roof by the arithmetic units. The picture is
built from a report's lab runs (``BenchRun`` metrics, so a saved report
draws the same picture as the window): the latest ``roofline`` run gives the
measured roofs and the nominal peak; ``gemm`` runs and the roofline run's own
in-cache multiplies are points (an n x n x n multiply is 2n^3 FLOP over three
n x n operands: 2n/3 FLOP per element size), and the profiled operators of
training runs (PyTorch's profiler FLOP counts) are points too.

:class:`Picture` holds everything both drawings need (the SVG of the exports
and ``--plot``, :mod:`cpudoctor.render.svg_roofline`; the window's plot,
``cpudoctor.gui.roofline_view``): the same roofs, the same points with the
same labels, and :func:`claim_text`, so the tests check one model.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from cpudoctor.kits.format import percent
from cpudoctor.lab.roofline import headline_roof

ELEMENT_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2, "fp64": 8, "int8": 1}
DTYPE_ORDER = ("fp32", "bf16", "int8", "fp64")
MAX_LABELS = 10


@dataclass
class Roof:
    dtype: str
    gflops: float
    threads: int | None
    label: str
    measured: bool = True                 # False: the nominal peak (cores x clock x FLOP/cycle)
    all_cpus: bool = True                 # False: one core


@dataclass
class Point:
    label: str                            # short, drawn beside the point
    intensity: float                      # FLOP per byte
    gflops: float
    kind: str                             # gemm | gemm-ladder | operator
    dtype: str | None = None
    detail: str = ""                      # the tooltip: where it came from, in full
    labelled: bool = True                 # drawn with its label (the rest are listed under the picture)


@dataclass
class Picture:
    compute: list[Roof] = field(default_factory=list)       # measured, per dtype: every usable CPU and one core
    nominal: list[Roof] = field(default_factory=list)       # nominal peaks: one per dtype, every usable CPU
    memory_gbps: float | None = None                         # the slanted roof: copy bandwidth over all CPUs
    memory_label: str = ""
    read_gbps: float | None = None
    points: list[Point] = field(default_factory=list)
    claim: str = ""
    notes: list[str] = field(default_factory=list)

    @property
    def roof_top(self) -> float | None:
        return max((r.gflops for r in self.compute + self.nominal), default=None)

    def ridge(self, roof: Roof) -> float | None:
        """The intensity where the memory roof meets ``roof`` (FLOP/byte)."""
        return roof.gflops / self.memory_gbps if self.memory_gbps else None


def gemm_intensity(n: float, dtype: str) -> float:
    """FLOP per byte of an n x n x n multiply: 2n^3 over three n x n operands."""
    return 2.0 * n / (3.0 * ELEMENT_BYTES.get(dtype, 4))


def latest(runs: list[Any], kind: str) -> Any | None:
    return next((r for r in reversed(runs) if getattr(r, "kind", None) == kind and r.metrics), None)


def picture_from_runs(runs: list[Any]) -> Picture | None:
    """The picture of a report's lab runs; None without a roofline run (nothing to draw the roofs from)."""
    roof_run = latest(runs, "roofline")
    if roof_run is None:
        return None
    m = roof_run.metrics
    pic = Picture()
    compute = [c for c in m.get("compute") or [] if c.get("gflops")]
    most = max((c.get("threads") or 0 for c in compute), default=0)
    for c in sorted(compute, key=lambda c: (_order(c["dtype"]), -(c.get("threads") or 0))):
        every = c.get("threads") == most
        who = "every usable CPU" if every else f"{c.get('threads')} core" + ("s" if (c.get("threads") or 0) > 1 else "")
        pic.compute.append(Roof(c["dtype"], float(c["gflops"]), c.get("threads"),
                                f"{c['dtype']} roof, {who}: {c['gflops']:,.0f} GFLOP/s", True, every))
    seen: set[str] = set()
    for nom in sorted(m.get("nominal") or [], key=lambda n: _order(str(n.get("dtype")))):
        dtype = str(nom.get("dtype"))
        if nom.get("threads") == most and nom.get("gflops") and dtype not in seen:   # one line per dtype
            seen.add(dtype)
            pic.nominal.append(Roof(dtype, float(nom["gflops"]), most,
                                    f"nominal {dtype} peak: {nom['gflops']:,.0f} GFLOP/s", measured=False))
    total = {x.get("kernel"): x for x in m.get("memory") or [] if x.get("node") == "all"}
    if total.get("copy"):
        pic.memory_gbps = float(total["copy"]["gbps"])
        pic.memory_label = f"memory {pic.memory_gbps:,.1f} GB/s (copy)"
    if total.get("read"):
        pic.read_gbps = float(total["read"]["gbps"])
    pic.points = _ladder_points(m.get("gemm_points") or [], most) + _gemm_run_points(runs) + _operator_points(
        runs, m.get("operators") or [])
    _choose_labels(pic.points)
    pic.claim = claim_text(m.get("claim") or {}, m.get("nominal") or [])
    pic.notes = list(m.get("notes") or [])
    return pic


def _order(dtype: str) -> int:
    return DTYPE_ORDER.index(dtype) if dtype in DTYPE_ORDER else len(DTYPE_ORDER)


def _ladder_points(points: list[dict[str, Any]], most: int) -> list[Point]:
    """The roofline run's own in-cache multiplies on every usable CPU."""
    out = []
    for p in points:
        if p.get("threads") != most or not p.get("gflops") or not p.get("size"):
            continue
        dtype, n = str(p.get("dtype")), int(p["size"])
        out.append(Point(f"{dtype} n={n}", gemm_intensity(n, dtype), float(p["gflops"]), "gemm-ladder", dtype,
                         f"in-cache {dtype} multiply n = {n} on {most} threads (roofline run): best "
                         f"{p['gflops']:,.1f} GFLOP/s"))
    return out


def _gemm_run_points(runs: list[Any]) -> list[Point]:
    """Every point of the latest ``bench gemm`` run: backend, threads, n."""
    run = latest(runs, "gemm")
    out = []
    for p in (run.metrics.get("points") or []) if run else []:
        n, g = p.get("size"), p.get("gflops")
        if not n or not g:
            continue
        dtype = str(p.get("precision") or "fp32")
        label = f"GEMM {p.get('backend')} x{p.get('threads')}"
        out.append(Point(label, gemm_intensity(float(n), dtype), float(g), "gemm", dtype,
                         f"bench gemm: {p.get('backend')} at {p.get('threads')} thread(s), n = {n}: {g:,.1f} GFLOP/s"))
    return out


def _operator_points(runs: list[Any], own: list[dict[str, Any]]) -> list[Point]:
    """The profiled operators of the latest training run (else the roofline run's own micro-training)."""
    run = next((r for r in reversed(runs) if getattr(r, "kind", None) == "train" and r.metrics.get("operators")), None)
    ops = run.metrics["operators"] if run is not None else own
    source = "training run" if run is not None else "roofline run's micro-training"
    out = []
    for op in ops:
        if not op.get("gflops") or not op.get("intensity"):
            continue
        shapes = " ".join("x".join(str(d) for d in s) for s in (op.get("shapes") or [])[:2])
        dtype = str(op.get("dtype") or "fp32")
        out.append(Point(f"{op.get('op')} {dtype}", float(op["intensity"]), float(op["gflops"]), "operator", dtype,
                         f"{op.get('op')} {shapes} ({dtype}, {source}): {op['gflops']:,.2f} GFLOP/s at "
                         f"{op['intensity']:,.1f} FLOP/byte, {op.get('calls', '?')} calls profiled"))
    return out


def _choose_labels(points: list[Point]) -> None:
    """Label the points a reader looks for first: the best of each kind and dtype, then the fastest others.

    At most MAX_LABELS, so labels stay readable at 900x600; the rest keep
    their tooltip and are listed under the picture. Duplicate labels (two
    calls of the same operator shape) are labelled once.
    """
    for p in points:
        p.labelled = False
    chosen: list[Point] = []
    groups: dict[tuple[str, str | None], Point] = {}
    for p in points:
        key = (p.kind, p.dtype)
        if key not in groups or p.gflops > groups[key].gflops:
            groups[key] = p
    chosen += sorted(groups.values(), key=lambda p: -p.gflops)
    chosen += sorted((p for p in points if p not in chosen and p.kind != "gemm-ladder"), key=lambda p: -p.gflops)
    seen: set[str] = set()
    for p in chosen:
        if sum(q.labelled for q in points) >= MAX_LABELS:
            break
        if p.label not in seen:
            p.labelled = True
            seen.add(p.label)


# ----------------------------------------------------------------------------- words


def memory_places(memory: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    """(where, figure) for each memory figure worth a row. On one NUMA node the job reports its one
    measurement as node 0 and as the total: one row each kernel then, named for both."""
    nodes = {x.get("node") for x in memory if x.get("node") != "all"}
    single = len(nodes) == 1 and any(x.get("node") == "all" for x in memory)
    out = []
    for x in memory:
        if x.get("node") == "all":
            if not single:
                out.append(("all nodes", x))
        else:
            out.append((f"node {x.get('node')}" + (" (all)" if single else ""), x))
    return out


def claim_text(claim: dict[str, Any], nominals: list[dict[str, Any]]) -> str:
    """The seeds' "about 90 % of the theoretical compute", checked against this machine's measured roof."""
    if not claim or not claim.get("roof_gflops"):
        return ""
    roof = claim["roof_gflops"]
    nominal = claim.get("nominal_gflops")
    ratio = claim.get("measured_vs_nominal")
    nom = next((n for n in nominals if n.get("dtype") == "fp32" and n.get("threads") == claim.get("threads")), {})
    inputs = ""
    if nom.get("cores") and nom.get("clock_mhz") and nom.get("flops_per_cycle"):
        cores = f"{nom['cores']} core{'s' if nom['cores'] != 1 else ''}"
        inputs = f" ({cores} × {nom['clock_mhz']:,.0f} MHz × {nom['flops_per_cycle']:g} FLOP/cycle)"
    threads = claim.get("threads")
    on = f" on {threads} thread{'s' if threads != 1 else ''}" if threads else ""
    text = f"Measured fp32 roof {roof:,.1f} GFLOP/s{on}"
    if nominal and ratio is not None:
        text += f" = {percent(ratio, fraction=True)} of the nominal peak {nominal:,.1f} GFLOP/s{inputs}"
        if ratio > 1.0:
            text += ": the cores ran faster than the clock the nominal peak assumes"
        text += (f". Guides say CPU training reaches about {percent(claim.get('claim', 0.9), fraction=True)} of the "
                 "theoretical compute (the nominal peak): that "
                 + ("holds for the roof" if claim.get("holds") else "does not hold even for the roof")
                 + " (the best a matrix multiply reaches here)")
    slower = claim.get("slower_with_more")
    if isinstance(slower, dict) and slower.get("gflops"):
        many, few = slower.get("threads"), slower.get("fewer_threads")
        text += (f". {many} threads measured {slower['gflops']:,.1f} GFLOP/s, slower than {few} "
                 f"thread{'s' if few != 1 else ''} ({slower.get('fewer_gflops', 0):,.1f})")
        if slower.get("contended"):
            text += (f" while other programs took {percent(slower.get('other_share'), fraction=True)} of the CPUs: that measurement "
                     "is not the roof; rerun on an idle machine")
        else:
            text += ": more threads did not help this multiply here (SMT siblings, or a VM's vCPUs sharing cores)"
    if claim.get("best_operator_vs_roof") is not None:
        text += (f"; the micro-training's best operator ({claim.get('best_operator')}) reached "
                 f"{percent(claim['best_operator_vs_roof'], digits=1, fraction=True)} of the measured roof")
    return text + "."


def roof_lines(runs: list[Any]) -> list[tuple[str, str]]:
    """("Measured roof", "…") and ("Nominal peak", "…") rows for a report with a roofline run; else []."""
    run = latest(runs, "roofline")
    if run is None:
        return []
    m = run.metrics
    rows: list[tuple[str, str]] = []
    compute = [c for c in m.get("compute") or [] if c.get("gflops")]
    if compute:
        rows.append(("Measured roof", "; ".join(
            f"{c['dtype']} {c['gflops']:,.1f} GFLOP/s on {c['threads']} thread{'s' if c['threads'] != 1 else ''}"
            for c in compute)))
    nominal = [n for n in m.get("nominal") or [] if n.get("gflops")]
    if nominal:
        clock = next((n for n in nominal if n.get("clock_source")), {})
        rows.append(("Nominal peak", "; ".join(
            f"{n['dtype']} {n['gflops']:,.1f} GFLOP/s on {n['cores']} core{'s' if n['cores'] != 1 else ''}"
            for n in nominal) + (f" (clock {clock.get('clock_mhz'):,.0f} MHz: {clock.get('clock_source')}; FLOP/cycle "
                                 "from resources/peak_flops.json)" if clock.get("clock_mhz") else "")))
    memory = [x for x in m.get("memory") or [] if x.get("gbps")]
    if memory:
        rows.append(("Memory bandwidth", "; ".join(
            f"{where} {x['kernel']} {x['gbps']:,.1f} GB/s" for where, x in memory_places(memory))))
    if m.get("claim"):
        rows.append(("Against the guides' 90 % claim", claim_text(m["claim"], m.get("nominal") or [])))
    return rows


def peak_rows(nominal: dict[str, Any] | None, runs: list[Any]) -> list[tuple[str, str, str]]:
    """(label, value, tooltip) rows that keep the nominal peak and the measured roof apart (the Overview)."""
    rows = []
    if nominal and nominal.get("gflops"):
        rows.append(("Nominal peak", f"{nominal['gflops']:,.0f} GFLOP/s fp32 on {nominal['cores']} "
                                     f"core{'s' if nominal['cores'] != 1 else ''} (cores × clock × FLOP/cycle)",
                     f"clock {nominal.get('clock_mhz') or 0:,.0f} MHz: {nominal.get('clock_source')}; "
                     f"{nominal.get('flops_per_cycle'):g} FLOP/cycle from {nominal.get('flops_per_cycle_source')}"))
    else:
        rows.append(("Nominal peak", "unknown", (nominal or {}).get("flops_per_cycle_source") or
                     "no FLOP/cycle figure or no clock for this CPU"))
    run = latest(runs, "roofline")
    roof = None
    if run is not None:
        roof = headline_roof([c for c in run.metrics.get("compute") or [] if c.get("dtype") == "fp32"])
    if roof is not None:
        ratio = f", {percent(roof['of_nominal'], fraction=True)} of the nominal peak" if roof.get("of_nominal") is not None else ""
        rows.append(("Measured roof", f"{roof['gflops']:,.0f} GFLOP/s fp32 on {roof['threads']} "
                                      f"thread{'s' if roof['threads'] != 1 else ''}{ratio}",
                     str(roof.get("method") or "") + (f"; measured {run.started_at}" if run.started_at else "")))
    else:
        rows.append(("Measured roof", "not measured yet (Training page, Roofline tab)",
                     "cpudoctor bench roofline measures it: the best in-cache matrix multiply through torch"))
    return rows
