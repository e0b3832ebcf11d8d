"""CPU identity on platforms without /proc/cpuinfo (macOS, Windows, BSD), via py-cpuinfo.

py-cpuinfo takes ~1.3 s (it starts its own CPUID child), so callers run this
off the UI thread. Its CPUID flags ignore XCR0 and miss leaf 7 subleaf 1
(avx512_bf16, avx_vnni) and the AMX bits, so on x86 the result is corrected by
our own CPUID + XGETBV child (:mod:`cpudoctor.probes.cpu.cpuid_check`).
"""

from __future__ import annotations

import platform

from cpudoctor.model import CpuInfo, arch_family, canonical_arch


def normalise_flags(flags: list[str]) -> list[str]:
    """py-cpuinfo / CPUID flag names -> Linux /proc/cpuinfo names (resources/flags.json aliases)."""
    from cpudoctor.knowledge import FLAGS

    out: list[str] = []
    for name in flags:
        name = FLAGS.canonical(name)
        if name not in out:
            out.append(name)
    return out


def cpu_from_pycpuinfo(info: dict, cpuid=None) -> CpuInfo:
    """Build a CpuInfo from ``cpuinfo.get_cpu_info()`` output (+ an optional CpuidResult)."""
    from cpudoctor.probes.cpu import isa as _isa
    from cpudoctor.probes.cpu.clocks import fill_clocks
    from cpudoctor.probes.cpu.uarch import clean_brand, decode_arm, decode_brand, decode_x86, vendor_short

    cpu = CpuInfo(source="py-cpuinfo")
    arch_raw = (info.get("arch_string_raw") or platform.machine() or "").lower()
    cpu.arch = canonical_arch(arch_raw)
    cpu.vendor_id = info.get("vendor_id_raw") or None
    cpu.vendor = vendor_short(cpu.vendor_id)
    cpu.brand = clean_brand(info.get("brand_raw"))
    if cpu.vendor is None and cpu.brand and cpu.brand.startswith("Apple"):
        cpu.vendor = "Apple"
    for key in ("family", "model", "stepping"):
        value = info.get(key)
        setattr(cpu, key, value if isinstance(value, int) else None)
    flags = normalise_flags(list(info.get("flags") or []))
    if cpuid is not None and not cpuid.error:
        # Our child knows leaf 7.1 and AMX, and XCR0: add what py-cpuinfo missed, drop what the OS disables.
        flags += [f for f in cpuid.flags if f not in flags]
        disabled = set(cpuid.os_disabled)
        if disabled:
            cpu.notes.append(f"CPUID reports {', '.join(sorted(disabled))} but the OS does not enable their register state (XCR0)")
        flags = [f for f in flags if f not in disabled]
    elif cpuid is not None and cpuid.error and cpu.is_x86:
        cpu.notes.append(f"XCR0 could not be checked ({cpuid.error}): AVX-512 verdict trusts CPUID alone")
    cpu.flags = flags
    if cpu.is_x86:
        match = decode_x86(cpu.vendor, cpu.family, cpu.model, cpu.stepping, cpu.brand)
        cpu.hypervisor = "hypervisor" in flags
    elif cpu.brand and decode_brand(cpu.brand).uarch:
        match = decode_brand(cpu.brand)
    else:
        match = decode_arm(None, [])
    cpu.microarchitecture, cpu.microarchitecture_name = match.uarch, match.display
    cpu.codename, cpu.product_line = match.codename, match.product_line
    cpu.notes.extend(match.notes)
    hz = info.get("hz_advertised")
    if isinstance(hz, (list, tuple)) and hz and isinstance(hz[0], (int, float)) and hz[0] > 0:
        cpu.base_mhz, cpu.base_mhz_source = hz[0] / 1e6, "py-cpuinfo advertised clock"
    fill_clocks(cpu, None)
    if flags:
        cpu.isa = _isa.isa_verdict(set(flags), cpu.arch, match)
        cpu.isa.datapath_bits = match.datapath_bits
    elif cpu.is_arm:
        # macOS on Apple silicon: every arm64 CPU has NEON; py-cpuinfo lists no flags there.
        cpu.isa = _isa.isa_verdict({"asimd", "fp"}, cpu.arch, match)
        cpu.notes.append("py-cpuinfo lists no flags on this platform: ISA verdicts assume the aarch64 baseline (NEON)")
    return cpu


def probe_live() -> CpuInfo:
    """The live machine through py-cpuinfo (+ the CPUID/XGETBV child on x86). ~1.3 s."""
    try:
        import cpuinfo  # py-cpuinfo
    except ImportError:
        return CpuInfo(notes=["no /proc/cpuinfo and py-cpuinfo is not installed: CPU identity unknown"])
    try:
        info = cpuinfo.get_cpu_info()
    except Exception as exc:  # noqa: BLE001 - py-cpuinfo shells out to many tools; any failure -> unknown
        return CpuInfo(notes=[f"py-cpuinfo failed ({type(exc).__name__}: {exc}): CPU identity unknown"])
    cpuid = None
    if arch_family(platform.machine()) == "x86":
        from cpudoctor.probes.cpu.cpuid_check import run_child

        cpuid = run_child()
    cpu = cpu_from_pycpuinfo(info, cpuid)
    if _rosetta():
        cpu.notes.append("this x86 Python runs under Rosetta 2 on Apple silicon: x86 code is translated (no AVX-512, "
                         "slow AVX); install the native arm64 Python and PyTorch instead")
    return cpu


def _rosetta() -> bool:
    """macOS: sysctl.proc_translated is 1 for a process translated by Rosetta 2."""
    import sys

    if sys.platform != "darwin":
        return False
    from cpudoctor.kits.child.captured import run_captured

    return run_captured(["sysctl", "-n", "sysctl.proc_translated"], 5.0, what="sysctl").text.strip() == "1"
