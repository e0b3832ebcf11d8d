"""Which kernels ran, read from the libraries' own reports, and how they compare with the CPU.

The evidence a job leaves about the code that did its work: oneDNN's verbose
lines (``ONEDNN_VERBOSE=profile_exec``, or ``torch.backends.mkldnn.verbose``)
name the implementation and instruction set of every primitive executed and
its time (``onednn_verbose,v1,primitive,exec,cpu,convolution,brg_conv_fwd:avx512_core,
forward_training,src:f32::blocked:acdb::f0 ...,mb64_ic1oc32...,0.0969``);
oneMKL's ``MKL_VERBOSE`` lines name each call, its time and, on Intel CPUs,
the instruction set of its code path; PyTorch says which of its three ATen
kernel sets it picked (``torch.backends.cpu.get_cpu_capability()``), and
threadpoolctl which OpenBLAS core kernels numpy's BLAS uses.

:func:`parse_onednn_verbose` and :func:`parse_mkl_verbose` are pure parsers
(lines in, :class:`Kernel` list out) for any source of those lines: a lab
job's census, or a user's job run with the variables set (``cpudoctor run``).
:func:`check_kernels` compares what ran with what the CPU's flags
(``/proc/cpuinfo``) allow, per library, using the instruction-set table of
resources/isa_forcing.json, and says why a kernel ran below the CPU: a cap
variable, a CPU the library saw smaller than the OS reports (an emulator, a
hypervisor hiding state), or the library's own choice (an old build, no
kernel for that shape). The comparison is by vector width (SSE < AVX < AVX2 <
AVX-512): an fp32 convolution on an AMX machine rightly runs AVX-512 code.
A bf16 or int8 primitive is judged on its dtype too: its kernel either has
the dot-product instructions (AVX512_BF16, AMX, VNNI) or it emulates them.

Standard library only, no Qt, no torch: the parent parses what children sent.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from cpudoctor.knowledge import ISA_FORCING
from cpudoctor.model.kernels import Kernel, KernelCensus

ONEDNN = "oneDNN"
MKL = "oneMKL"
ATEN = "ATen"
OPENBLAS = "OpenBLAS"

# The variable of resources/isa_forcing.json whose values name each library's instruction sets,
# and every variable that caps or forces that library (the causes a finding names).
TABLE_VARIABLE = {ONEDNN: "DNNL_MAX_CPU_ISA", ATEN: "ATEN_CPU_CAPABILITY", MKL: "MKL_ENABLE_INSTRUCTIONS",
                  OPENBLAS: "OPENBLAS_CORETYPE"}
CAP_VARIABLES = {ONEDNN: ("ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA"), ATEN: ("ATEN_CPU_CAPABILITY",),
                 MKL: ("MKL_ENABLE_INSTRUCTIONS", "MKL_CBWR"), OPENBLAS: ("OPENBLAS_CORETYPE",)}
ALL_CAP_VARIABLES = tuple(dict.fromkeys(v for names in CAP_VARIABLES.values() for v in names))

# oneDNN's data-type names in the words every surface uses.
DTYPES = {"f32": "fp32", "bf16": "bf16", "f16": "fp16", "s8": "int8", "u8": "int8", "f64": "fp64", "s32": "int32"}
# The code path oneMKL names in its version line (it names none on non-Intel CPUs).
_MKL_ISA_WORDS = (("Advanced Matrix Extensions", "avx512"), ("AVX-512", "avx512"), ("AVX512", "avx512"),
                  ("AVX2", "avx2"), ("Advanced Vector Extensions (", "avx"), ("SSE4.2", "sse4_2"),
                  ("Streaming SIMD Extensions 4.2", "sse4_2"), ("SSSE3", "ssse3"))
_MKL_VERSION_RE = re.compile(r"^MKL_VERBOSE\s+(Intel\(R\) (oneAPI )?(Math Kernel Library|MKL)|oneMKL)\b")


# ----------------------------------------------------------------------------- oneDNN

# oneDNN's lines are read by the one parser of them, :mod:`cpudoctor.probes.process.onednn_verbose` (which
# ``cpudoctor run`` uses on a user's job); this module groups what it read into kernels with time shares.


def onednn_isa(impl: str) -> str | None:
    """The instruction set in an implementation name: ``brg_conv_fwd:avx512_core`` -> ``avx512_core``,
    ``ref:any`` -> ``ref`` (no vector kernel), ``jit:uni`` / ``gemm:jit`` -> None (not named)."""
    from cpudoctor.probes.process.onednn_verbose import isa_of

    isa = isa_of(impl)
    # "ref"/"gemm:ref" is the portable C++ code; "simple:any" reorders are ordinary layout copies, not named
    return isa if isa is not None else ("ref" if re.match(r"(gemm:)?ref(:|_|$)", impl.lower()) else None)


def parse_onednn_verbose(lines: Iterable[str]) -> list[Kernel]:
    """oneDNN's ``exec`` lines as kernels: one per (primitive, implementation, dtype), with its share of
    that primitive's time. Other lines (info, create, a program's own output) are ignored."""
    from cpudoctor.probes.process.onednn_verbose import parse_onednn_verbose as read

    return onednn_kernels(read(lines))


def onednn_kernels(log: Any) -> list[Kernel]:
    """A parsed oneDNN log (:class:`~cpudoctor.probes.process.onednn_verbose.OneDnnLog`) as kernels, each with its
    share of its primitive's time: the lab's census and ``cpudoctor run`` read oneDNN the same way."""
    groups = log.summary()
    totals: dict[str, float] = {}
    for g in groups:
        totals[g.kind] = totals.get(g.kind, 0.0) + g.time_ms
    out = []
    for g in groups:
        total, siblings = totals[g.kind], sum(1 for h in groups if h.kind == g.kind)
        share = round(g.time_ms / total, 4) if total > 0 else round(1.0 / siblings, 4)
        out.append(Kernel(ONEDNN, g.kind, onednn_isa(g.impl), share, g.impl, DTYPES.get(g.data_type, g.data_type),
                          g.count, round(g.time_ms, 4)))
    return sorted(out, key=lambda k: (k.primitive, -(k.ms or 0.0)))


def run_census(log: Any, env: Mapping[str, str]) -> KernelCensus:
    """What ``cpudoctor run`` saw of a job's kernels: its oneDNN log, and the cap variables its environment set."""
    caps = {k: v for k, v in env.items() if k in ALL_CAP_VARIABLES and v not in (None, "")}
    return KernelCensus(onednn_kernels(log), caps, log.max_isa)


def onednn_detected_isa(lines: Iterable[str]) -> str | None:
    """The instruction set oneDNN says it will use at most (its ``info,cpu,isa:`` line), caps applied."""
    from cpudoctor.probes.process.onednn_verbose import parse_onednn_verbose as read

    return read(lines).max_isa


def detected_width(text: str | None) -> int | None:
    """The vector width of oneDNN's "Intel AVX-512 with ..." / "Intel AVX2" wording."""
    return ISA_FORCING.reported_width(text)


# ----------------------------------------------------------------------------- oneMKL, ATen, OpenBLAS


def mkl_isa(lines: Iterable[str]) -> str | None:
    """The code path oneMKL names in its version line; None where it names none (non-Intel CPUs)."""
    for line in lines:
        if _MKL_VERSION_RE.match(line.strip()):
            for words, isa in _MKL_ISA_WORDS:
                if words in line:
                    return isa
            return None
    return None


def parse_mkl_verbose(lines: Iterable[str]) -> list[Kernel]:
    """oneMKL's call lines (``MKL_VERBOSE SGEMM(N,N,...) 165.33us CNR:OFF ...``) as one kernel per function."""
    from cpudoctor.probes.process.mkl_verbose import parse_mkl_verbose as read     # the one parser of the lines

    lines = list(lines)
    isa = mkl_isa(lines)
    calls: dict[str, list[float]] = {}
    for call in read(lines).calls:
        calls.setdefault(call.name, []).append(call.time_ms)
    dtype = {"S": "fp32", "D": "fp64", "C": "complex64", "Z": "complex128"}
    return [Kernel(MKL, name, isa, 1.0, name, dtype.get(name[:1]), len(t), round(sum(t), 4))
            for name, t in sorted(calls.items(), key=lambda kv: -sum(kv[1]))]


def aten_kernel(capability: str | None) -> Kernel | None:
    """PyTorch's own vectorised operators: the kernel set ATen dispatched (DEFAULT, AVX2, AVX512, ...)."""
    if not capability:
        return None
    return Kernel(ATEN, "vectorised operators", str(capability).lower(), None, f"cpu capability {capability}")


def openblas_kernels(blas: Iterable[Mapping[str, Any]] | None) -> list[Kernel]:
    """OpenBLAS's core kernels from threadpoolctl's ``threadpool_info()`` (its ``architecture``)."""
    out = []
    for lib in blas or []:
        if lib.get("internal_api") == "openblas" and lib.get("architecture"):
            out.append(Kernel(OPENBLAS, "gemm", str(lib["architecture"]).lower(), None,
                              f"OpenBLAS {lib.get('version') or ''} {lib['architecture']}".replace("  ", " ")))
    return out


def from_reports(reports: Mapping[str, Any] | None) -> list[Kernel]:
    """Every kernel in a lab job's ``library_reports``: ``{"onednn": [lines], "mkl": [lines],
    "aten_capability": "AVX512", "blas": [threadpoolctl info], "quantized_engine": "x86"}``."""
    if not isinstance(reports, Mapping):
        return []
    out = parse_onednn_verbose(reports.get("onednn") or []) + parse_mkl_verbose(reports.get("mkl") or [])
    aten = aten_kernel(reports.get("aten_capability"))
    out += ([aten] if aten else []) + openblas_kernels(reports.get("blas"))
    engine = reports.get("quantized_engine")
    if engine:          # FBGEMM (x86, fbgemm) and QNNPACK keep their kernel choice to themselves
        library = {"x86": "FBGEMM", "fbgemm": "FBGEMM", "qnnpack": "QNNPACK", "onednn": ONEDNN}.get(engine, engine)
        out.append(Kernel(library, "quantized linear", None, None, f"torch.backends.quantized.engine = {engine}",
                          "int8"))
    return out


# ----------------------------------------------------------------------------- against the CPU


def kernel_width(kernel: Kernel) -> int | None:
    """The vector width of the kernel's instruction set (0 = reference code); None when not named or unknown."""
    return ISA_FORCING.width_of(TABLE_VARIABLE.get(kernel.library, ""), kernel.isa)


def cpu_width(library: str, flags: Iterable[str]) -> int | None:
    """The widest instruction set ``library`` has kernels for that a CPU with ``flags`` runs."""
    return ISA_FORCING.cpu_width(TABLE_VARIABLE.get(library, ""), flags)


def dtype_native_on_cpu(dtype: str | None, flags: Iterable[str]) -> bool | None:
    """Whether the CPU computes ``dtype`` with instructions of its own (bf16: AVX512_BF16/AMX; int8: VNNI/AMX ...)."""
    return ISA_FORCING.dtype_native(dtype, flags)


def kernel_native_dtype(kernel: Kernel) -> bool | None:
    """Whether a oneDNN bf16/fp16/int8 kernel used instructions of its own for its dtype (None: can't tell)."""
    if kernel.library != ONEDNN or kernel.dtype not in ("bf16", "fp16", "int8") or not kernel.isa:
        return None
    if kernel.isa == "ref":
        return False
    return kernel.dtype in ISA_FORCING.dot_products(TABLE_VARIABLE[ONEDNN], kernel.isa)


@dataclass
class KernelCheck:
    """One kernel judged against the CPU: below its vector width, or a dtype computed by emulation."""

    kernel: Kernel
    width: int | None                 # the kernel's vector width (0 reference .. 4 AVX-512)
    cpu_width: int | None             # the widest this library runs on this CPU
    below: bool = False               # narrower vectors than the CPU has
    dtype_emulated: bool = False      # bf16/int8 without the dot-product instructions
    dtype_native_on_cpu: bool | None = None
    cause: str = ""                   # cap | hidden | library | cpu (emulated dtype: the CPU lacks it)
    cap: str | None = None            # "ONEDNN_MAX_CPU_ISA=AVX2" when a variable caps the library
    notes: list[str] = field(default_factory=list)

    @property
    def expected(self) -> str:
        return ISA_FORCING.width_name(self.cpu_width)

    @property
    def ran(self) -> str:
        return ISA_FORCING.width_name(self.width) if self.width is not None else "not named"


def check_kernels(kernels: Iterable[Kernel], flags: Iterable[str], caps: Mapping[str, str] | None = None,
                  detected: str | None = None) -> list[KernelCheck]:
    """Each kernel against the CPU's ``flags``; ``caps`` are the cap variables set in the job's environment,
    ``detected`` oneDNN's own ``isa:`` line (what it saw of the CPU, caps applied)."""
    from cpudoctor.model.joblogs import LAYOUT_KINDS

    have = set(flags)
    caps = {k: v for k, v in (caps or {}).items() if v not in (None, "")}
    out = []
    for k in kernels:
        if k.library == ONEDNN and k.primitive in LAYOUT_KINDS:   # copies: no vector width to hold against the CPU
            out.append(KernelCheck(k, None, cpu_width(k.library, have)))
            continue
        width, best = kernel_width(k), cpu_width(k.library, have)
        below = width is not None and best is not None and width < best
        native_cpu = dtype_native_on_cpu(k.dtype, have)
        native_kernel = kernel_native_dtype(k)
        # a oneDNN kernel whose name says no instruction set (gemm:jit) still emulates a dtype the CPU lacks
        emulated = native_kernel is False or (native_kernel is None and native_cpu is False and k.library == ONEDNN)
        check = KernelCheck(k, width, best, below, emulated, native_cpu)
        if below or (emulated and native_cpu):
            check.cause, check.cap = _cause(k.library, width, best, caps, detected, have)
        elif emulated:
            check.cause = "cpu"
        out.append(check)
    return out


def _cause(library: str, width: int | None, best: int | None, caps: Mapping[str, str], detected: str | None,
           flags: set[str]) -> tuple[str, str | None]:
    for name in CAP_VARIABLES.get(library, ()):
        if name in caps and str(caps[name]).strip().lower() not in ("all", "default", "auto"):
            return "cap", f"{name}={caps[name]}"
    # oneDNN's own "isa:" line is what the process sees of the CPU: below the flags, every library is hit
    seen = detected_width(detected)
    cpu_best = cpu_width(ONEDNN, flags)
    if seen is not None and cpu_best is not None and seen < cpu_best:
        return "hidden", None
    return "library", None


def time_share(checks: Iterable[KernelCheck], which: str = "below") -> float | None:
    """The share of the timed kernel time (per library, reorders excluded) that ran below the CPU
    (``which="below"``) or with an emulated dtype (``"emulated"``); None when nothing was timed."""
    timed = [c for c in checks if c.kernel.ms and c.kernel.primitive != "reorder"]
    total = sum(c.kernel.ms or 0.0 for c in timed)
    if total <= 0:
        return None
    hit = [c for c in timed if (c.below if which == "below" else c.dtype_emulated)]
    return round(sum(c.kernel.ms or 0.0 for c in hit) / total, 4)


def summary(checks: list[KernelCheck]) -> dict[str, Any]:
    """What a result records next to its kernels: the shares that ran below the CPU or emulated, and why."""
    below = [c for c in checks if c.below]
    emulated = [c for c in checks if c.dtype_emulated]
    caps = sorted({c.cap for c in below + emulated if c.cap})
    causes = sorted({c.cause for c in below + emulated if c.cause})
    return {"below_share": time_share(checks, "below"), "emulated_share": time_share(checks, "emulated"),
            "below": [_brief(c) for c in below], "emulated": [_brief(c) for c in emulated],
            "caps": caps, "causes": causes}


def _brief(c: KernelCheck) -> dict[str, Any]:
    return {"library": c.kernel.library, "primitive": c.kernel.primitive, "isa": c.kernel.isa,
            "dtype": c.kernel.dtype, "share": c.kernel.share, "ran": c.ran, "cpu": c.expected, "cause": c.cause,
            "cap": c.cap}
