"""CPUID + XGETBV of the CPU that executes this process, as one JSON object (the CPUID cross-check's child).

Run by path with CPU Doctor's own interpreter (``python -I -B cpuid.py BITS``), not ``-m``: importing
CPU Doctor's packages cost this child a tenth of a second of a 2-core machine on every report, and it
needs none of them. ``BITS`` is a JSON object ``{flag: [leaf, subleaf, register, bit]}`` (the flag
catalogue's CPUID bits, sent by the parent, :mod:`cpudoctor.probes.cpu.cpuid_check`). Executing machine
code can crash the interpreter (SELinux denying executable memory, an emulator without XGETBV): that is
why it is a child. py-cpuinfo's executable-memory helper runs the code; standard library otherwise.
"""

import json
import subprocess
import sys

# XCR0 bits the OS sets when it saves a register state on context switch.
XCR0_SSE, XCR0_AVX = 1 << 1, 1 << 2
XCR0_AVX512 = (1 << 5) | (1 << 6) | (1 << 7)         # opmask, ZMM_Hi256, Hi16_ZMM
XCR0_AMX = (1 << 17) | (1 << 18)                      # XTILECFG, XTILEDATA
_REGS = {"eax": b"", "ebx": b"\x89\xd8", "ecx": b"\x89\xc8", "edx": b"\x89\xd0"}


def _asm(code):
    """Run position-independent x86 code returning a uint32 in eax."""
    import ctypes

    from cpuinfo.cpuinfo import ASM  # py-cpuinfo's portable executable-memory helper

    asm = ASM(ctypes.c_uint32, (), [code])
    asm.compile()
    try:
        return int(asm.run())
    finally:
        asm.free()


def _cpuid(leaf, subleaf, reg):
    code = (b"\x53"                                       # push rbx (callee-saved, CPUID clobbers it)
            + b"\xb8" + leaf.to_bytes(4, "little")        # mov eax, leaf
            + b"\xb9" + subleaf.to_bytes(4, "little")     # mov ecx, subleaf
            + b"\x0f\xa2"                                 # cpuid
            + _REGS[reg]                                  # mov eax, <reg>
            + b"\x5b\xc3")                                # pop rbx; ret
    return _asm(code)


def _xgetbv0():
    return _asm(b"\x31\xc9\x0f\x01\xd0\xc3")             # xor ecx,ecx; xgetbv; ret


def read_cpuid(bits):
    """CPUID identity + flags of the executing CPU (``bits``: flag -> (leaf, subleaf, register, bit)).
    May crash: run it in a child."""
    max_leaf = _cpuid(0, 0, "eax")
    vendor = b"".join(_cpuid(0, 0, r).to_bytes(4, "little") for r in ("ebx", "edx", "ecx")).decode("ascii", "replace")
    eax1 = _cpuid(1, 0, "eax")
    base_family = (eax1 >> 8) & 0xF
    family = base_family + ((eax1 >> 20) & 0xFF if base_family == 0xF else 0)
    model = (eax1 >> 4) & 0xF
    if base_family in (0x6, 0xF):
        model |= ((eax1 >> 16) & 0xF) << 4
    max_ext = _cpuid(0x80000000, 0, "eax")
    regs = {}

    def reg(leaf, sub, name):
        key = (leaf, sub, name)
        if key not in regs:
            ok = (leaf <= max_leaf) if leaf < 0x80000000 else (leaf <= max_ext)
            if leaf == 7 and sub == 1 and ok:
                ok = _cpuid(7, 0, "eax") >= 1
            regs[key] = _cpuid(leaf, sub, name) if ok else 0
        return regs[key]

    flags = []
    for name, (leaf, sub, register, bit) in bits.items():
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


def signature(raw):
    """A hypervisor's CPUID signature as text: NULs and unprintable bytes dropped, None when nothing is left."""
    text = "".join(chr(b) for b in raw if 32 <= b < 127).rstrip()
    return text or None


def _os_disabled(flags, xcr0):
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


def main(argv):
    # The parent starts this only on x86 (cpudoctor.probes.cpu.cpuid_check.run_child): elsewhere the first
    # CPUID instruction would end the process with SIGILL, which the parent reports as it reports any crash.
    try:
        bits = {name: tuple(where) for name, where in json.loads(argv[1]).items()}
        data = read_cpuid(bits)
    except Exception as exc:  # noqa: BLE001 - report any failure as data, the parent decides
        data = {"error": type(exc).__name__ + ": " + str(exc)}
    print(json.dumps(data))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
