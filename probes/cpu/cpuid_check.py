"""Cross-check /proc/cpuinfo against CPUID + XGETBV executed in a child process.

Why a child: executing raw machine code can crash the interpreter (SELinux
denying executable memory, an emulator without XGETBV), and under emulation
(qemu-user, Rosetta 2) ``/proc/cpuinfo`` describes the *host*, while CPUID run
by our own code describes the CPU that actually executes PyTorch. Run it with
``python -m cpudoctor.probes.cpu.cpuid_check``: it prints one JSON object.

Only for the live machine and only when asked (the report pipeline's
``cpuid-cross-check`` stage, skipped by ``--fast``): it costs a Python
start-up (~0.1-0.3 s). The result goes into the report twice: as
:class:`CpuidCheck` data the advisor judges, and as notes people read.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass, field
from typing import Any
from cpudoctor.model.cpu import CpuidCheck

# XCR0 bits the OS sets when it saves a register state on context switch.
XCR0_SSE, XCR0_AVX = 1 << 1, 1 << 2
XCR0_AVX512 = (1 << 5) | (1 << 6) | (1 << 7)         # opmask, ZMM_Hi256, Hi16_ZMM
XCR0_AMX = (1 << 17) | (1 << 18)                      # XTILECFG, XTILEDATA
_REGS = {"eax": b"", "ebx": b"\x89\xd8", "ecx": b"\x89\xc8", "edx": b"\x89\xd0"}


@dataclass
class CpuidResult:
    vendor_id: str | None = None
    family: int | None = None
    model: int | None = None
    stepping: int | None = None
    brand: str | None = None
    xcr0: int | None = None
    flags: list[str] = field(default_factory=list)       # CPUID bits, as kernel flag names
    os_disabled: list[str] = field(default_factory=list)  # in CPUID but the OS does not save their state
    hypervisor_vendor: str | None = None                  # leaf 0x40000000's signature ("KVMKVMKVM") in a guest
    error: str | None = None


# -- the child side: runs CPUID in this process -----------------------------

def _asm(code: bytes) -> int:
    """Run position-independent x86 code returning a uint32 in eax."""
    import ctypes

    from cpuinfo.cpuinfo import ASM  # py-cpuinfo's portable executable-memory helper

    asm = ASM(ctypes.c_uint32, (), [code])
    asm.compile()
    try:
        return int(asm.run())
    finally:
        asm.free()


def _cpuid(leaf: int, subleaf: int, reg: str) -> int:
    code = (b"\x53"                                       # push rbx (callee-saved, CPUID clobbers it)
            + b"\xb8" + leaf.to_bytes(4, "little")        # mov eax, leaf
            + b"\xb9" + subleaf.to_bytes(4, "little")     # mov ecx, subleaf
            + b"\x0f\xa2"                                 # cpuid
            + _REGS[reg]                                  # mov eax, <reg>
            + b"\x5b\xc3")                                # pop rbx; ret
    return _asm(code)


def _xgetbv0() -> int:
    return _asm(b"\x31\xc9\x0f\x01\xd0\xc3")             # xor ecx,ecx; xgetbv; ret


def read_cpuid() -> dict[str, Any]:
    """CPUID identity + flags of the executing CPU. May crash: run it in a child."""
    from cpudoctor.knowledge import FLAGS

    max_leaf = _cpuid(0, 0, "eax")
    vendor = b"".join(_cpuid(0, 0, r).to_bytes(4, "little") for r in ("ebx", "edx", "ecx")).decode("ascii", "replace")
    eax1 = _cpuid(1, 0, "eax")
    base_family = (eax1 >> 8) & 0xF
    family = base_family + ((eax1 >> 20) & 0xFF if base_family == 0xF else 0)
    model = (eax1 >> 4) & 0xF
    if base_family in (0x6, 0xF):
        model |= ((eax1 >> 16) & 0xF) << 4
    max_ext = _cpuid(0x80000000, 0, "eax")
    regs: dict[tuple[int, int, str], int] = {}

    def reg(leaf: int, sub: int, name: str) -> int:
        key = (leaf, sub, name)
        if key not in regs:
            ok = (leaf <= max_leaf) if leaf < 0x80000000 else (leaf <= max_ext)
            if leaf == 7 and sub == 1 and ok:
                ok = _cpuid(7, 0, "eax") >= 1
            regs[key] = _cpuid(leaf, sub, name) if ok else 0
        return regs[key]

    flags = []
    for name, (leaf, sub, register, bit) in FLAGS.cpuid_bits().items():
        if reg(leaf, sub, register) >> bit & 1:
            flags.append(name)
    brand = None
    if max_ext >= 0x80000004:
        raw = b"".join(_cpuid(leaf, 0, r).to_bytes(4, "little")
                       for leaf in (0x80000002, 0x80000003, 0x80000004) for r in ("eax", "ebx", "ecx", "edx"))
        brand = " ".join(raw.split(b"\0")[0].decode("ascii", "replace").split()) or None
    osxsave = bool(reg(1, 0, "ecx") >> 27 & 1)
    xcr0 = _xgetbv0() if osxsave else None
    # CPUID.1:ECX bit 31 is set by hypervisors for their guests; leaf 0x40000000 then holds the hypervisor's
    # 12-byte signature in EBX, ECX, EDX (KVM: "KVMKVMKVM\0\0\0", Hyper-V: "Microsoft Hv").
    hypervisor = None
    if reg(1, 0, "ecx") >> 31 & 1:
        hypervisor = signature(b"".join(_cpuid(0x40000000, 0, r).to_bytes(4, "little") for r in ("ebx", "ecx", "edx")))
    return {"vendor_id": vendor, "family": family, "model": model, "stepping": eax1 & 0xF,
            "brand": brand, "xcr0": xcr0, "flags": flags, "os_disabled": _os_disabled(flags, xcr0),
            "hypervisor_vendor": hypervisor}


def signature(raw: bytes) -> str | None:
    """A hypervisor's CPUID signature as text: NULs and unprintable bytes dropped, None when nothing is left."""
    text = "".join(chr(b) for b in raw if 32 <= b < 127).rstrip()
    return text or None


def _os_disabled(flags: list[str], xcr0: int | None) -> list[str]:
    """CPUID flags whose register state the OS does not enable (so they must not be used)."""
    state = xcr0 or 0
    off = []
    avx_family = {"avx", "avx2", "fma", "f16c", "avx_vnni", "avx_vnni_int8", "avx_vnni_int16", "avx_ne_convert",
                  "avx_ifma", "vaes", "vpclmulqdq"}
    for name in flags:
        if name.startswith("avx512") and state & (XCR0_AVX512 | XCR0_AVX | XCR0_SSE) != (XCR0_AVX512 | XCR0_AVX | XCR0_SSE):
            off.append(name)
        elif name in avx_family and state & (XCR0_AVX | XCR0_SSE) != (XCR0_AVX | XCR0_SSE):
            off.append(name)
        elif name.startswith("amx_") and state & XCR0_AMX != XCR0_AMX:
            off.append(name)
    if sys.platform == "darwin" and any(n.startswith("avx512") for n in off):
        # macOS enables AVX-512 state lazily, on first use: ask the kernel instead of XCR0.
        try:
            out = subprocess.run(["sysctl", "-n", "hw.optional.avx512f"], capture_output=True, text=True, timeout=5)
            if out.stdout.strip() == "1":
                off = [n for n in off if not n.startswith("avx512")]
        except (OSError, subprocess.SubprocessError):
            pass
    return off


def main() -> int:
    import platform

    from cpudoctor.model import arch_family

    if arch_family(platform.machine()) != "x86":
        print(json.dumps({"error": f"CPUID is x86-only; this is {platform.machine()}"}))
        return 0
    try:
        data = read_cpuid()
    except Exception as exc:  # noqa: BLE001 - report any failure as data, the parent decides
        data = {"error": f"{type(exc).__name__}: {exc}"}
    print(json.dumps(data))
    return 0


# -- the parent side ------------------------------------------------------

def run_child(timeout: float = 20.0) -> CpuidResult:
    """Run the CPUID reader in a child Python (the app's one child runner); never raises."""
    from cpudoctor.kits.child.own import own_command
    from cpudoctor.kits.child.runner import ChildSpec
    from cpudoctor.kits.child.runner import run_child as run_probe_child

    child = run_probe_child(ChildSpec(own_command("cpudoctor.probes.cpu.cpuid_check"),
                                      what="the CPUID check", timeout=timeout))
    if not child.ok:
        return CpuidResult(error=child.diagnosis.message)
    if not child.data:
        return CpuidResult(error="the CPUID check printed no result")
    return CpuidResult(**{k: v for k, v in child.data.items() if k in CpuidResult.__dataclass_fields__})


def summarise(cpu, result: CpuidResult) -> CpuidCheck:
    """Where /proc/cpuinfo (``cpu``) and the executing CPU's CPUID (``result``) disagree, as data."""
    if result.error:
        return CpuidCheck(error=result.error)
    from cpudoctor.knowledge import FLAGS

    comparable = set(FLAGS.cpuid_bits())
    kernel = set(cpu.flags) & comparable
    usable = set(result.flags) - set(result.os_disabled)
    return CpuidCheck(
        executing=f"{result.vendor_id} family {result.family} model {result.model}",
        emulated=bool(cpu.vendor_id) and (cpu.vendor_id, cpu.family, cpu.model) != (result.vendor_id, result.family,
                                                                                   result.model),
        missing_flags=sorted(kernel - set(result.flags)),
        hidden_flags=sorted((usable & comparable) - kernel),
        os_disabled=sorted(set(result.os_disabled) & kernel),
        hypervisor_vendor=result.hypervisor_vendor,
    )


def compare(cpu, result: CpuidResult) -> list[str]:
    """Notes where /proc/cpuinfo and the executing CPU's CPUID disagree."""
    return notes(cpu, summarise(cpu, result), result.xcr0)


def notes(cpu, check: CpuidCheck, xcr0: int | None = None) -> list[str]:
    """The disagreements of ``check`` in words, for the report's notes."""
    if check.error:
        return [f"CPUID cross-check skipped: {check.error}"]
    out = []
    if check.emulated:
        out.append(
            f"/proc/cpuinfo describes {cpu.vendor_id} family {cpu.family} model {cpu.model}, but the CPU executing "
            f"code reports {check.executing}: this looks like emulation "
            "(qemu-user, Rosetta 2), so /proc/cpuinfo shows the host. Trust the executing CPU's flags."
        )
    if check.missing_flags:
        it = "it" if len(check.missing_flags) == 1 else "them"
        out.append(
            f"/proc/cpuinfo lists {', '.join(check.missing_flags)} but CPUID in a child process does not: the CPU that "
            f"runs your code lacks {it} (emulation?), so code using {it} would crash with SIGILL."
        )
    if check.hidden_flags:
        it = "it" if len(check.hidden_flags) == 1 else "them"
        out.append(
            f"CPUID reports {', '.join(check.hidden_flags)} but the kernel does not list {it}: the kernel disabled {it} "
            f"(a known erratum or a boot option) or is older than the CPU; libraries that trust CPUID may still use {it}."
        )
    if check.os_disabled:
        xcr0_text = f"XCR0 = {xcr0:#x}: " if xcr0 is not None else ""
        out.append(f"{xcr0_text}the OS does not save the register state of {', '.join(check.os_disabled)}.")
    return out


if __name__ == "__main__":
    raise SystemExit(main())
