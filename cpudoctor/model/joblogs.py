"""What the job's libraries logged while it ran: oneDNN's kernels and PyTorch's recompilations.

Plain records the parsers fill (:mod:`cpudoctor.probes.process.onednn_verbose`,
:mod:`cpudoctor.probes.process.torch_logs`) from the lines ``cpudoctor run``
switched on; the evidence rules judge them, render shows them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# oneDNN kinds that copy data between layouts (or types) rather than compute: their implementation
# (``simple:any``, ``jit:uni``, even a named ``jit:avx2``) is no vector roof and no reference computation.
LAYOUT_KINDS = frozenset({"reorder"})


@dataclass
class Primitive:
    """One executed (or created) oneDNN primitive."""

    kind: str                     # convolution, inner_product, matmul, reorder, eltwise, ...
    impl: str                     # brg_conv_fwd:avx512_core, jit:avx2, gemm:jit, ref:any
    isa: str | None               # avx512_core, avx2, ... None when the name says none (uni, any, gemm:jit)
    prop: str                     # forward_training, forward_inference, backward_data, undef
    dtypes: dict[str, str]        # src/wei/dst -> f32, bf16, f16, s8, u8
    problem: str                  # mb16_ic3oc32_ih64...
    time_ms: float | None         # exec only
    stage: str = "exec"           # exec | create
    reference: bool = False       # oneDNN's reference (portable C++) implementation of a computation
    flop: float | None = None     # arithmetic counted from the shape (None: a kind not counted, or unreadable)
    bytes: float | None = None    # each operand read or written once (None: unreadable)

    @property
    def layout_copy(self) -> bool:
        """A reorder: data copied between layouts, not computed."""
        return self.kind in LAYOUT_KINDS

    @property
    def data_type(self) -> str:
        """The compute type: the weights' type, else the source's."""
        return (self.dtypes.get("wei") or self.dtypes.get("src") or self.dtypes.get("dst") or self.dtypes.get("data")
                or "?")


@dataclass
class KernelSummary:
    """All executions of one (kind, implementation, data type)."""

    kind: str
    impl: str
    isa: str | None
    data_type: str
    count: int = 0
    time_ms: float = 0.0
    reference: bool = False

    @property
    def layout_copy(self) -> bool:
        """A reorder: data copied between layouts, not computed (see :data:`LAYOUT_KINDS`)."""
        return self.kind in LAYOUT_KINDS


@dataclass
class OneDnnLog:
    version: str | None = None          # "v3.12.0"
    runtime: str | None = None          # OpenMP, TBB, SEQ
    threads: int | None = None
    max_isa: str | None = None          # the info line: "Intel AVX-512 with Intel DL Boost and bfloat16 support"
    primitives: list[Primitive] = field(default_factory=list)
    lines: int = 0                      # verbose lines read
    dropped: int = 0                    # lines kept out of ``primitives`` (over the limit)
    windows: list[tuple[str, float]] = field(default_factory=list)   # (on | off | end, monotonic s): the job
                                        # switched its verbose lines on for windows only (verbose_window.py)

    @property
    def observed_s(self) -> float | None:
        """The wall time the verbose lines cover when the job switched them on for windows only (each closed
        window's length); None when the lines were on all along."""
        if not self.windows:
            return None
        total, opened = 0.0, None
        for state, t in self.windows:
            if state == "on":
                opened = t if opened is None else opened
            elif opened is not None:
                total += max(0.0, t - opened)
                opened = None
        return total

    def summary(self) -> list[KernelSummary]:
        """Executed primitives grouped by kind, implementation and data type, longest total time first."""
        groups: dict[tuple[str, str, str], KernelSummary] = {}
        for p in self.primitives:
            if p.stage != "exec":
                continue
            key = (p.kind, p.impl, p.data_type)
            g = groups.get(key)
            if g is None:
                g = groups[key] = KernelSummary(p.kind, p.impl, p.isa, p.data_type, reference=p.reference)
            g.count += 1
            g.time_ms += p.time_ms or 0.0
        return sorted(groups.values(), key=lambda g: (-g.time_ms, -g.count))

    @property
    def total_ms(self) -> float:
        return sum(p.time_ms or 0.0 for p in self.primitives if p.stage == "exec")


@dataclass
class MklCall:
    """One oneMKL call its verbose mode printed (``MKL_VERBOSE SGEMM(N,N,m,n,k,...) 12.3us ... NThr:2``)."""

    name: str                     # SGEMM, DGEMM, SGEMV, SGEMM_BATCH, GEMM_S8U8S32, ...
    dtype: str                    # f32, f64, s8, bf16 (oneDNN's spelling, as Primitive.dtypes)
    dims: tuple[int, ...]         # (m, n, k) of a GEMM, (m, n) of a GEMV; () when the line gives none
    time_ms: float
    threads: int | None = None    # NThr
    flop: float | None = None
    bytes: float | None = None


@dataclass
class MklLog:
    """What oneMKL's verbose mode (``MKL_VERBOSE=1``) printed while the job ran."""

    version: str | None = None    # the version line, as printed (it names the code path on Intel CPUs)
    calls: list[MklCall] = field(default_factory=list)
    lines: int = 0
    dropped: int = 0

    @property
    def total_ms(self) -> float:
        return sum(c.time_ms for c in self.calls)


@dataclass
class Recompile:
    frame: int
    count: int                    # this frame's compile number (1 = first recompile)
    function: str
    file: str
    line: int
    guard_failure: str = ""       # the newest guard failure, as PyTorch logged it
    tensor: str | None = None     # a size mismatch: which tensor, which dim
    dim: int | None = None
    expected: int | None = None
    actual: int | None = None


@dataclass
class RecompileLog:
    recompiles: list[Recompile] = field(default_factory=list)
    limit_hit: bool = False       # Dynamo gave up (cache/recompile limit) and ran the function uncompiled

    def by_function(self) -> dict[str, list[Recompile]]:
        out: dict[str, list[Recompile]] = {}
        for r in self.recompiles:
            out.setdefault(f"{r.function} ({r.file}:{r.line})", []).append(r)
        return out

    def size_changes(self) -> dict[tuple[str, int], list[int]]:
        """(tensor, dim) -> the sizes that triggered recompiles, in order."""
        out: dict[tuple[str, int], list[int]] = {}
        for r in self.recompiles:
            if r.tensor is not None and r.dim is not None and r.actual is not None:
                out.setdefault((r.tensor, r.dim), []).append(r.actual)
        return out
