"""ISA verdicts from a flag list: what deep-learning code can actually run here.

Every test is a whole-flag set lookup. ``"avx512" in flags_line`` is the
classic bug: it is true for a CPU that has only ``avx512_vnni``-style names
in an unrelated field, and it says nothing about Foundation + CD, which every
AVX-512 code path needs. The kernel already hides AVX-512 flags when the OS
does not save ZMM state (XCR0), so on Linux the flags are the verdict.
"""

from __future__ import annotations

from typing import Iterable

from cpudoctor.knowledge import FLAGS, LEVELS
from cpudoctor.model import IsaVerdict, arch_family
from cpudoctor.probes.cpu.uarch import UarchMatch

# PyTorch's ATen CPU dispatch picks its AVX512 kernels only when these are all
# present (aten/src/ATen/native/DispatchStub.cpp via cpuinfo: avx512f, avx512bw,
# avx512dq, avx512vl); otherwise it falls back to AVX2.
TORCH_AVX512_NEEDS = ("avx512f", "avx512bw", "avx512dq", "avx512vl")
AMX_FLAGS = {"amx_tile": "tile", "amx_bf16": "bf16", "amx_int8": "int8", "amx_fp16": "fp16", "amx_complex": "complex"}


def isa_verdict(flags: Iterable[str], arch: str | None, uarch: UarchMatch | None = None,
                sve_vector_bits: int | None = None) -> IsaVerdict:
    """Decide every IsaVerdict field from whole flag names (never substrings)."""
    fl = set(flags)
    v = IsaVerdict()
    # arch unknown (py-cpuinfo gave none): x86 flags say x86.
    x86 = arch_family(arch) == "x86" if arch else ("sse2" in fl or "lm" in fl)
    subsets = FLAGS.avx512_subsets()
    v.avx512_subsets = [short for flag, short in subsets.items() if flag in fl]
    has_f, has_cd = "avx512f" in fl, "avx512cd" in fl
    v.avx512_usable = has_f and has_cd
    v.avx512_torch_kernels = all(f in fl for f in TORCH_AVX512_NEEDS)
    v.avx2 = "avx2" in fl
    v.fma = "fma" in fl
    v.f16c = "f16c" in fl
    v.bmi2 = "bmi2" in fl
    v.avx_vnni = "avx_vnni" in fl
    v.avx512_vnni = "avx512_vnni" in fl
    v.avx512_bf16 = "avx512_bf16" in fl
    v.amx = [short for flag, short in AMX_FLAGS.items() if flag in fl]
    v.avx512_reason = _avx512_reason(fl, x86, uarch)
    if x86:
        v.x86_64_level = LEVELS.x86_64_level(fl)
    # Widest register the OS lets code use; the execution width is the datapath note.
    if x86:
        v.vector_width_bits = 512 if v.avx512_usable else 256 if "avx" in fl else 128 if "sse2" in fl or "sse" in fl else None
    elif "sve" in fl:
        v.vector_width_bits = sve_vector_bits or (uarch.sve_bits if uarch else None) or 128
    elif "asimd" in fl:
        v.vector_width_bits = 128
    v.datapath_note = _datapath_note(v, uarch, x86)
    return v


def _avx512_reason(fl: set[str], x86: bool, uarch: UarchMatch | None) -> str:
    if not x86:
        return "AVX-512 is an x86 instruction set; this CPU is not x86."
    has_f, has_cd = "avx512f" in fl, "avx512cd" in fl
    missing_torch = [f for f in TORCH_AVX512_NEEDS if f not in fl]
    if has_f and has_cd:
        text = "AVX-512 Foundation (avx512f) and Conflict Detection (avx512cd) are reported by the OS, so AVX-512 code runs."
        if missing_torch:
            text += f" PyTorch's AVX512 kernels also need {', '.join(missing_torch)}, which is missing, so PyTorch uses its AVX2 kernels."
        else:
            text += " PyTorch can use its AVX512 kernels (F+BW+DQ+VL present)."
        return text
    expected = uarch.expected_flags if uarch else []
    if "avx512f" in expected:
        return ("This CPU has AVX-512 but the OS does not report avx512f/avx512cd: a hypervisor masks them, "
                "the kernel was booted without AVX-512 (XCR0 lacks ZMM state), or it is too old to know them.")
    if has_f or has_cd:
        present = "avx512f" if has_f else "avx512cd"
        absent = "avx512cd" if has_f else "avx512f"
        return f"Only {present} is reported, {absent} is missing: AVX-512 code paths need both, so they are off."
    if uarch and uarch.uarch in {"alderlake", "raptorlake"}:
        return "No AVX-512: Intel fused it off on hybrid Alder/Raptor Lake parts (the E-cores lack it); AVX-VNNI is the 256-bit substitute."
    return "No AVX-512 on this CPU (avx512f and avx512cd are not reported); the widest vectors are " + (
        "256-bit AVX2." if "avx2" in fl else "256-bit AVX." if "avx" in fl else "128-bit SSE.")


def _datapath_note(v: IsaVerdict, uarch: UarchMatch | None, x86: bool) -> str:
    if uarch is None or not uarch.display:
        return ""
    note = uarch.datapath_note
    if x86 and v.avx512_usable and uarch.datapath_bits == 256:
        return note or f"{uarch.display} executes 512-bit AVX-512 ops on 256-bit units."
    if x86 and not v.avx512_usable and uarch.datapath_bits == 512 and "avx512f" in uarch.expected_flags:
        return (note + " " if note else "") + "AVX-512 is not usable here, so code runs at 256-bit width at most."
    return note
