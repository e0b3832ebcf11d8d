"""CPU identity, flags and ISA verdicts.

CONTRACT (fields are a public JSON contract, see issue 2): implementation pending.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class IsaVerdict:
    """What the CPU can run, decided from flags the kernel reports (not substrings)."""

    avx512_usable: bool = False            # avx512f AND avx512cd reported (OS saves ZMM state)
    avx512_subsets: list[str] = field(default_factory=list)  # short names: F, CD, BW, DQ, VL, IFMA, VBMI, VBMI2, VNNI, BF16, FP16, BITALG, VPOPCNTDQ, VP2INTERSECT, ER, PF
    avx512_torch_kernels: bool = False     # PyTorch's AVX512 kernels eligible: F+BW+DQ+VL
    avx512_reason: str = ""                # one or two sentences: why usable / not
    avx2: bool = False
    fma: bool = False
    f16c: bool = False
    bmi2: bool = False
    avx_vnni: bool = False
    avx512_vnni: bool = False
    avx512_bf16: bool = False
    amx: list[str] = field(default_factory=list)   # subset of tile, bf16, int8, fp16, complex
    x86_64_level: int | None = None        # 1-4 per the psABI; None on non-x86
    vector_width_bits: int | None = None   # widest usable SIMD register (128/256/512; SVE: vector length if known)
    datapath_note: str = ""                # e.g. "Zen4 executes 512-bit ops on 256-bit units"


@dataclass
class CpuInfo:
    vendor: str | None = None              # short: AMD, Intel, ARM, Hygon, ...
    vendor_id: str | None = None           # raw: AuthenticAMD, GenuineIntel, 0x41
    brand: str | None = None
    family: int | None = None
    model: int | None = None
    stepping: int | None = None
    microarchitecture: str | None = None   # lowercase: zen, zen2, ..., haswell, skylake, icelake, sapphirerapids, neoverse_v2, ...
    codename: str | None = None            # product codename: Milan, Raphael, Sapphire Rapids, ...
    product_line: str | None = None        # Ryzen desktop, Ryzen mobile, Threadripper, EPYC, Xeon, Core, ...
    arch: str | None = None                # x86_64, aarch64, ...
    base_mhz: float | None = None
    max_mhz: float | None = None
    flags: list[str] = field(default_factory=list)
    isa: IsaVerdict = field(default_factory=IsaVerdict)
    hypervisor: bool | None = None         # running under a hypervisor (flags may be masked)
    source: str = "unknown"                # procfs | py-cpuinfo | unknown
    notes: list[str] = field(default_factory=list)


def probe_cpu(root: Path = Path("/")) -> CpuInfo:
    # TEMPORARY scaffold until the probe lands (same session).
    return CpuInfo(notes=['cpu probe not implemented yet'])
