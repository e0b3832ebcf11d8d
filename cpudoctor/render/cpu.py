"""CPU sections shared by the text and Markdown reports: identity rows, ISA verdicts, flag groups.

One list of rows feeds both formats, so they always say the same thing. The
explanations come from the report itself (``isa.avx512_reason``, datapath
note) and from the flag catalogue (:data:`cpudoctor.knowledge.FLAGS`); nothing here reads the machine.
"""

from __future__ import annotations

from dataclasses import dataclass

from cpudoctor.knowledge import FLAGS
from cpudoctor.model import CpuInfo
from cpudoctor.render.cpu_facts import cpu_facts
from cpudoctor.render.words import NEUTRAL_MARK, bracketed

# The verdict marks of the ISA table: fine, worth a look, missing or broken, simply absent.
OK, WARN, BAD, INFO = bracketed("ok"), bracketed("warning"), bracketed("error"), f"[{NEUTRAL_MARK}]"

# Categories whose flags matter for deep learning: listed in full in the text report.
DL_CATEGORIES = ("simd", "fma", "avx512", "matrix", "fp16", "bitmanip", "arm")
# The short "what uses it" table of the Markdown report: beyond the SSE baseline only.
KEY_CATEGORIES = ("fma", "avx512", "matrix", "fp16", "arm")
KEY_FLAGS = ("avx", "avx2")


@dataclass
class IsaRow:
    mark: str          # OK / WARN / BAD / INFO
    name: str          # "AVX-512"
    detail: str        # "usable: F CD BW ..."
    explain: str = ""  # one or two sentences


def identity_rows(cpu: CpuInfo) -> list[tuple[str, str]]:
    """(label, text) rows describing which CPU this is: :func:`cpudoctor.render.cpu_facts.cpu_facts` as the
    text, Markdown and HTML reports print them."""
    return [(fact.label, fact.text) for fact in cpu_facts(cpu)]


def isa_rows(cpu: CpuInfo) -> list[IsaRow]:
    """The verdicts that decide which deep-learning kernels run, each explained."""
    isa = cpu.isa
    flags = set(cpu.flags)
    if not flags:
        return [IsaRow(WARN, "Instruction sets", "unknown", "No CPU flags could be read, so no verdict is possible.")]
    if cpu.is_arm:
        return _arm_rows(cpu, flags)
    rows = []
    if isa.avx512_usable:
        rows.append(IsaRow(OK, "AVX-512", "usable: " + " ".join(isa.avx512_subsets), isa.avx512_reason))
    else:
        # Neutral when the silicon simply has none; a warning when it should (masked) or is half there.
        from cpudoctor.probes.cpu.uarch import uarch_info

        expected = (uarch_info(cpu.microarchitecture) or {}).get("expected_flags", [])
        mark = WARN if ("avx512f" in expected or isa.avx512_subsets) else INFO
        rows.append(IsaRow(mark, "AVX-512", "not usable"
                           + (f" (only {' '.join(isa.avx512_subsets)})" if isa.avx512_subsets else ""), isa.avx512_reason))
    if isa.avx512_usable:
        rows.append(IsaRow(OK if isa.avx512_torch_kernels else WARN, "PyTorch AVX512 kernels",
                           "eligible" if isa.avx512_torch_kernels else "not eligible",
                           "ATen dispatches its AVX512 kernels only with F+BW+DQ+VL; otherwise it uses AVX2."))
    rows.append(IsaRow(OK if isa.avx2 and isa.fma else BAD, "AVX2 + FMA",
                       "yes" if isa.avx2 and isa.fma else "AVX2 " + ("yes" if isa.avx2 else "no") + ", FMA " + ("yes" if isa.fma else "no"),
                       "" if isa.avx2 and isa.fma else
                       "PyTorch's vectorised CPU kernels need AVX2 with FMA; without them it runs its slow default (SSE) kernels."))
    int8 = [name for name, ok in (("AVX-512 VNNI", isa.avx512_vnni), ("AVX-VNNI", isa.avx_vnni)) if ok]
    rows.append(IsaRow(OK if int8 else INFO, "int8 dot products", ", ".join(int8) if int8 else "no VNNI",
                       "oneDNN/FBGEMM int8 inference uses VNNI; without it int8 matmuls take three instructions instead of one."
                       if not int8 else ""))
    rows.append(IsaRow(OK if isa.avx512_bf16 else INFO, "bf16", "AVX-512 BF16" if isa.avx512_bf16 else "no native bf16",
                       "" if isa.avx512_bf16 or isa.amx else
                       "bf16 autocast on this CPU converts in software and is usually slower than fp32; keep fp32."))
    rows.append(IsaRow(OK if isa.amx else INFO, "AMX", " ".join(isa.amx) if isa.amx else "not present",
                       "AMX tiles give the fastest bf16/int8 GEMM on CPU (oneDNN uses them automatically)." if isa.amx else
                       "Matrix tiles exist only on Intel Xeon Sapphire Rapids and later."))
    rows.append(IsaRow(OK if isa.f16c else INFO, "F16C", "yes" if isa.f16c else "no", "fp16 <-> fp32 conversion for half-precision tensors."))
    rows.append(IsaRow(OK if isa.bmi2 else INFO, "BMI2", "yes" if isa.bmi2 else "no", ""))
    return rows


def _arm_rows(cpu: CpuInfo, flags: set[str]) -> list[IsaRow]:
    isa = cpu.isa
    sve = "sve2" if "sve2" in flags else "sve" if "sve" in flags else None
    return [
        IsaRow(OK if "asimd" in flags else BAD, "NEON (Advanced SIMD)", "yes" if "asimd" in flags else "no",
               "The 128-bit baseline every aarch64 PyTorch build needs."),
        IsaRow(OK if sve else INFO, "SVE", (sve.upper() + (f", {isa.vector_width_bits}-bit vectors" if isa.vector_width_bits else ""))
               if sve else "no", "Scalable vectors: oneDNN/ACL and PyTorch's SVE kernels use them." if sve else ""),
        IsaRow(OK if "asimddp" in flags else INFO, "int8 dot product", "yes" if "asimddp" in flags else "no", ""),
        IsaRow(OK if "i8mm" in flags else INFO, "int8 matrix multiply (I8MM)", "yes" if "i8mm" in flags else "no", ""),
        IsaRow(OK if "bf16" in flags else INFO, "bf16", "yes" if "bf16" in flags else "no",
               "" if "bf16" in flags else "No bf16 instructions: keep fp32 on this CPU."),
        IsaRow(OK if "atomics" in flags else WARN, "LSE atomics", "yes" if "atomics" in flags else "no",
               "" if "atomics" in flags else "Without LSE atomics, OpenMP barriers and locks are slow on many cores."),
    ]


def width_line(cpu: CpuInfo) -> str | None:
    isa = cpu.isa
    if isa.vector_width_bits is None and not isa.datapath_note:
        return None
    text = f"{isa.vector_width_bits}-bit registers" if isa.vector_width_bits else "register width unknown"
    if isa.datapath_note:
        text += f"; {isa.datapath_note}"
    return text


def describe_flag(name: str, arch: str | None = None, vendor: str | None = None) -> tuple[str, str]:
    """(category, meaning) of a kernel flag on this architecture and vendor (the flag catalogue's words)."""
    return FLAGS.describe(name, arch, vendor)


def flag_groups(flags: list[str], arch: str | None = None, vendor: str | None = None) -> dict[str, list[str]]:
    """Flags grouped by category, in the category order of the flag catalogue."""
    return FLAGS.groups(flags, arch, vendor)


def category_title(cat: str) -> str:
    return FLAGS.category_title(cat)
