"""Whether this CPU computes bf16 and int8 natively, from the CPU probe, for the lab jobs and their words.

A bf16 path without AVX512_BF16 or AMX-BF16 (a Zen 3, say) is emulated with
conversions around every operation; int8 without VNNI or AMX-INT8 takes three
instructions per multiply-accumulate. The jobs run in the user's environment
without CPU Doctor, so the parent decides here and passes ``native_bf16`` /
``native_int8`` in; the results then say why a ratio is what it is. Unknown
flags (macOS, a bare container) give None: neither native nor emulated.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from cpudoctor.model import CpuInfo


@dataclass
class NativeSupport:
    bf16: bool | None = None
    bf16_via: list[str] = field(default_factory=list)     # e.g. ["AVX512_BF16", "AMX-BF16"]
    int8: bool | None = None
    int8_via: list[str] = field(default_factory=list)     # e.g. ["AVX512_VNNI", "AMX-INT8"]

    def job_args(self, job: str) -> dict[str, bool | None]:
        """The facts a child job needs (it cannot probe the CPU itself)."""
        if job == "gemm":
            return {"native_bf16": self.bf16}
        if job == "quant":
            return {"native_int8": self.int8}
        if job == "roofline":
            return {"native_bf16": self.bf16, "native_int8": self.int8}
        return {}


def native_support(cpu: CpuInfo) -> NativeSupport:
    flags = set(cpu.flags or [])
    if not flags:
        return NativeSupport()
    arm = cpu.is_arm or cpu.vendor == "ARM"
    if arm:
        bf16 = ["BF16 (Armv8.6)"] if "bf16" in flags else []
        int8 = [name for flag, name in (("asimddp", "SDOT dot product"), ("i8mm", "I8MM")) if flag in flags]
        return NativeSupport(bool(bf16), bf16, bool(int8), int8)
    isa = cpu.isa
    bf16 = [name for ok, name in ((isa.avx512_bf16 or "avx512_bf16" in flags, "AVX512_BF16"),
                                  ("bf16" in isa.amx or "amx_bf16" in flags, "AMX-BF16")) if ok]
    int8 = [name for ok, name in ((isa.avx512_vnni or "avx512_vnni" in flags, "AVX512_VNNI"),
                                  (isa.avx_vnni or "avx_vnni" in flags, "AVX-VNNI"),
                                  ("int8" in isa.amx or "amx_int8" in flags, "AMX-INT8")) if ok]
    return NativeSupport(bool(bf16), bf16, bool(int8), int8)
