"""How much of the CPU a job's kernels used: achieved FLOP/s per layer kind against the measured roof.

Plain data and the arithmetic over it, nothing judged or worded. The facts
come from the libraries' verbose lines (:class:`~cpudoctor.model.joblogs.OneDnnLog`,
:class:`~cpudoctor.model.joblogs.MklLog`: each call's FLOPs and bytes counted
from its shapes, its time), the roof from a measurement (:class:`Roofs`: a
saved ``bench roofline`` or a quick one in a child). :func:`utilisation`
groups the calls by layer kind and data type and holds each group against the
roof of its dtype at the job's thread count and against the memory roof at
its intensity (the attainable rate of the roofline model: the lower of the
two). The whole job: the FLOPs its counted kernels did over what the roof
allows in the observed wall time, the same as (share of wall time in
counted kernels) x (their efficiency).

The words are render's (:mod:`cpudoctor.render.achieved`), the findings the
advisor's (:mod:`cpudoctor.advisor.roof_rules`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from cpudoctor.model.joblogs import MklLog, OneDnnLog

# oneDNN's and oneMKL's type names -> the words of the lab's roofs.
DTYPES = {"f32": "fp32", "bf16": "bf16", "f16": "fp16", "s8": "int8", "u8": "int8", "f64": "fp64", "s32": "int32"}
# oneDNN's primitive kinds -> the layer kind a user knows them by.
LAYER_KINDS = {"convolution": "convolution", "deconvolution": "convolution", "inner_product": "linear",
               "matmul": "linear", "gemm_api": "matmul", "eltwise": "elementwise", "binary": "elementwise",
               "prelu": "elementwise", "batch_normalization": "normalisation", "layer_normalization": "normalisation",
               "group_normalization": "normalisation", "lrn": "normalisation", "pooling": "pooling",
               "softmax": "softmax", "reorder": "reorder", "sum": "reorder", "concat": "reorder",
               "shuffle": "reorder", "resampling": "pooling", "reduction": "elementwise"}
COMPUTE_KINDS = ("convolution", "linear", "batched matmul", "matmul")
MAX_POINTS = 40


@dataclass
class RoofFigure:
    dtype: str
    threads: int | None
    gflops: float
    other_share: float | None = None       # what other programs took while it was measured
    nominal_gflops: float | None = None    # cores x clock x FLOP/cycle of the same cores, when known


@dataclass
class Roofs:
    """The measured roofs a job is held against, and where they came from."""

    compute: list[RoofFigure] = field(default_factory=list)
    memory_gbps: float | None = None       # copy bandwidth over all usable CPUs
    source: str = "none"                   # saved | quick | none
    where: str = ""                        # the report or file it was read from; for "quick": how it was measured
    measured_at: str | None = None
    missing: dict[str, str] = field(default_factory=dict)   # dtype -> why it has no measured roof

    def roof(self, dtype: str, threads: int | None) -> RoofFigure | None:
        """The roof of ``dtype`` at ``threads``: the best measured at that count or fewer (a multiply on fewer
        threads is a floor of the roof on more: on a shared machine 2 threads measured 21.7 GFLOP/s beside 103.5 on
        one, while another program ran), else the nearest count above."""
        rows = [r for r in self.compute if r.dtype == dtype and r.gflops > 0]
        if not rows:
            return None
        if threads is None:
            return max(rows, key=lambda r: r.gflops)
        upto = [r for r in rows if (r.threads or 0) <= threads]
        if upto:
            return max(upto, key=lambda r: (r.gflops, r.threads or 0))
        return min(rows, key=lambda r: ((r.threads or 0), -r.gflops))

    @classmethod
    def of_roofline(cls, metrics: dict[str, Any], *, source: str, where: str = "",
                    measured_at: str | None = None) -> "Roofs":
        """The roofs of a roofline run's metrics (``BenchRun.metrics`` of kind ``roofline``)."""
        compute = [RoofFigure(str(c["dtype"]), c.get("threads"), float(c["gflops"]), c.get("other_share"),
                              c.get("nominal_gflops"))
                   for c in metrics.get("compute") or [] if isinstance(c, dict) and c.get("gflops") and c.get("dtype")]
        memory = {(m.get("node"), m.get("kernel")): m for m in metrics.get("memory") or [] if isinstance(m, dict)}
        copy = memory.get(("all", "copy")) or memory.get(("all", "read"))
        missing = {}
        for note in metrics.get("notes") or []:
            head, _, why = str(note).partition(" not measured: ")
            if why and head in ("bf16", "int8", "fp16"):
                missing[head] = why
        return cls(compute, float(copy["gbps"]) if copy and copy.get("gbps") else None, source, where, measured_at,
                   missing)


@dataclass
class KindUse:
    """One layer kind in one data type: its calls, time, counted work and what it reached."""

    kind: str                       # convolution | linear | batched matmul | matmul | elementwise | reorder | ...
    dtype: str                      # fp32 | bf16 | int8 | ...
    libraries: list[str] = field(default_factory=list)
    calls: int = 0
    time_ms: float = 0.0
    counted_ms: float = 0.0         # time of the calls whose FLOPs were counted
    flop: float = 0.0
    bytes: float = 0.0
    bytes_ms: float = 0.0           # time of the calls whose bytes were counted
    threads: int | None = None
    roof_gflops: float | None = None
    roof_threads: int | None = None         # the thread count the roof was measured at
    nominal_gflops: float | None = None
    memory_gbps: float | None = None
    directions: dict[str, float] = field(default_factory=dict)   # forward | backward_data | backward_weights -> ms
    largest: str = ""               # the shape of its longest-running call group

    @property
    def counted(self) -> bool:
        return self.flop > 0 and self.counted_ms > 0

    @property
    def gflops(self) -> float | None:
        return self.flop / self.counted_ms / 1e6 if self.counted else None

    @property
    def gbps(self) -> float | None:
        return self.bytes / self.bytes_ms / 1e6 if self.bytes > 0 and self.bytes_ms > 0 else None

    @property
    def intensity(self) -> float | None:
        return self.flop / self.bytes if self.counted and self.bytes > 0 else None

    @property
    def ridge(self) -> float | None:
        return self.roof_gflops / self.memory_gbps if self.roof_gflops and self.memory_gbps else None

    @property
    def memory_bound(self) -> bool | None:
        """Below the ridge point: the memory roof is the lower one at this intensity."""
        if self.intensity is None or self.ridge is None:
            return None
        return self.intensity < self.ridge

    @property
    def attainable_gflops(self) -> float | None:
        """The roofline's bound at this intensity: the lower of the compute roof and memory x intensity."""
        if self.roof_gflops is None:
            return None
        if self.intensity is None or not self.memory_gbps:
            return self.roof_gflops
        return min(self.roof_gflops, self.memory_gbps * self.intensity)

    @property
    def of_roof(self) -> float | None:
        return self.gflops / self.roof_gflops if self.gflops is not None and self.roof_gflops else None

    @property
    def of_attainable(self) -> float | None:
        att = self.attainable_gflops
        return self.gflops / att if self.gflops is not None and att else None

    @property
    def of_memory(self) -> float | None:
        return self.gbps / self.memory_gbps if self.gbps is not None and self.memory_gbps else None


@dataclass
class KernelPoint:
    """One distinct call (kind, shape, direction, dtype): a point on the roofline picture."""

    kind: str
    dtype: str
    shape: str
    direction: str
    library: str
    calls: int
    time_ms: float
    flop: float
    bytes: float

    @property
    def gflops(self) -> float:
        return self.flop / self.time_ms / 1e6 if self.time_ms > 0 else 0.0

    @property
    def intensity(self) -> float:
        return self.flop / self.bytes if self.bytes > 0 else 0.0


@dataclass
class Utilisation:
    """The job's kernels against the roof: per layer kind, per kernel, and the whole job."""

    kinds: list[KindUse] = field(default_factory=list)
    points: list[KernelPoint] = field(default_factory=list)
    roofs: Roofs = field(default_factory=Roofs)
    threads: int | None = None                # the thread count the libraries reported (oneDNN nthr, MKL NThr)
    wall_s: float | None = None               # the wall time the verbose lines cover
    kernel_ms: float = 0.0                    # every timed kernel call
    counted_ms: float = 0.0                   # the calls whose FLOPs were counted
    flop: float = 0.0
    steps: int | None = None                  # the job's steps, when known (the probe's count)
    not_counted: dict[str, float] = field(default_factory=dict)   # why -> ms of calls whose FLOPs are not counted
    uncounted_kinds: dict[str, float] = field(default_factory=dict)   # layer kinds without FLOPs (bytes only) -> ms
    no_roof: dict[str, str] = field(default_factory=dict)             # dtype -> why it has no measured roof

    def kind(self, name: str, dtype: str | None = None) -> KindUse | None:
        return next((k for k in self.kinds if k.kind == name and (dtype is None or k.dtype == dtype)), None)

    @property
    def kernel_share(self) -> float | None:
        """Share of the observed wall time spent in timed kernels (one thread drives them: a primitive's time is
        wall time)."""
        return min(1.0, self.kernel_ms / 1e3 / self.wall_s) if self.wall_s else None

    @property
    def counted_gflops(self) -> float | None:
        return self.flop / self.counted_ms / 1e6 if self.counted_ms > 0 and self.flop > 0 else None

    def cpu_share(self) -> float | None:
        """The share of this CPU's compute (at the job's threads) the job used over the observed wall time: its
        counted FLOPs over what each dtype's roof allows in that time; None without a roof or wall time."""
        if not self.wall_s:
            return None
        used = 0.0
        for k in self.kinds:
            if k.counted and k.roof_gflops:
                used += k.flop / (k.roof_gflops * 1e9)
            elif k.counted:
                return None               # a dtype without a roof: not guessed
        return used / self.wall_s if used > 0 else None

    def kernel_efficiency(self) -> float | None:
        """The counted kernels' mean efficiency against their roofs, weighted by time: cpu_share / kernel share."""
        seconds = sum(k.counted_ms for k in self.kinds if k.counted) / 1e3
        share = self.cpu_share()
        return share * self.wall_s / seconds if share is not None and seconds > 0 and self.wall_s else None


def _direction(prop: str) -> str:
    if prop.startswith("forward") or prop in ("undef", ""):
        return "forward"
    return prop


def _onednn_kind(kind: str, problem: str) -> str:
    if kind == "matmul":
        first = problem.split(":", 1)[0]
        dims = [d for d in first.split("x") if d.isdigit()]
        if len(dims) > 2 and any(int(d) > 1 for d in dims[:-2]):
            return "batched matmul"
    return LAYER_KINDS.get(kind, kind)


def _mkl_kind(name: str) -> str:
    return "batched matmul" if "BATCH" in name else ("linear" if "GEMM" in name or "GEMV" in name else name.lower())


def utilisation(onednn: OneDnnLog | None, mkl: MklLog | None, roofs: Roofs | None, *,
                wall_s: float | None = None, steps: int | None = None) -> Utilisation:
    """The job's calls grouped by layer kind and dtype, each against its roof (``roofs`` None: no roof)."""
    roofs = roofs or Roofs()
    use = Utilisation(roofs=roofs, wall_s=wall_s, steps=steps)
    groups: dict[tuple[str, str], KindUse] = {}
    points: dict[tuple[str, str, str, str, str], KernelPoint] = {}
    shapes: dict[tuple[str, str], dict[str, float]] = {}

    def add(kind: str, dtype: str, library: str, ms: float, flop: float | None, moved: float | None,
            direction: str, shape: str, threads: int | None, why: str) -> None:
        g = groups.get((kind, dtype))
        if g is None:
            g = groups[(kind, dtype)] = KindUse(kind, dtype)
        if library not in g.libraries:
            g.libraries.append(library)
        g.calls += 1
        g.time_ms += ms
        g.threads = g.threads or threads
        g.directions[direction] = g.directions.get(direction, 0.0) + ms
        use.kernel_ms += ms
        if flop:
            g.counted_ms += ms
            g.flop += flop
            use.counted_ms += ms
            use.flop += flop
            if moved:
                g.bytes += moved
                g.bytes_ms += ms
            key = (kind, dtype, shape, direction, library)
            p = points.get(key)
            if p is None:
                p = points[key] = KernelPoint(kind, dtype, shape, direction, library, 0, 0.0, 0.0, 0.0)
            p.calls += 1
            p.time_ms += ms
            p.flop += flop
            p.bytes += moved or 0.0
            sh = shapes.setdefault((kind, dtype), {})
            sh[shape] = sh.get(shape, 0.0) + ms
        else:
            if moved:
                g.bytes += moved
                g.bytes_ms += ms
            if why:
                use.not_counted[why] = use.not_counted.get(why, 0.0) + ms
            else:
                use.uncounted_kinds[kind] = use.uncounted_kinds.get(kind, 0.0) + ms

    threads = onednn.threads if onednn is not None else None
    for p in onednn.primitives if onednn is not None else []:
        if p.stage != "exec" or p.time_ms is None:
            continue
        why = "" if p.flop or p.kind not in ("convolution", "deconvolution", "inner_product", "matmul", "gemm_api",
                                             "rnn") else ("rnn" if p.kind == "rnn" else "shape")
        add(_onednn_kind(p.kind, p.problem), DTYPES.get(p.data_type, p.data_type), "oneDNN", p.time_ms, p.flop,
            p.bytes, _direction(p.prop), p.problem, threads, why)
    mkl_threads = None
    for c in mkl.calls if mkl is not None else []:
        mkl_threads = mkl_threads or c.threads
        why = "" if c.flop else ("mkl_batch" if "BATCH" in c.name else "")
        shape = "x".join(str(d) for d in c.dims) if c.dims else c.name
        add(_mkl_kind(c.name), DTYPES.get(c.dtype, c.dtype), "oneMKL", c.time_ms, c.flop, c.bytes, "any",
            f"{c.name} {shape}", c.threads, why)
    use.threads = threads or mkl_threads
    for g in groups.values():
        roof = roofs.roof(g.dtype, g.threads or use.threads)
        g.roof_gflops = roof.gflops if roof else None
        g.roof_threads = roof.threads if roof else None
        g.nominal_gflops = roof.nominal_gflops if roof else None
        g.memory_gbps = roofs.memory_gbps
        if g.counted and roof is None:
            use.no_roof[g.dtype] = roofs.missing.get(g.dtype, "")
        sh = shapes.get((g.kind, g.dtype))
        if sh:
            g.largest = max(sh, key=lambda s: sh[s])
    use.kinds = sorted(groups.values(), key=lambda g: -g.time_ms)
    use.points = sorted(points.values(), key=lambda p: -p.time_ms)[:MAX_POINTS]
    return use
