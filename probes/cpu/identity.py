"""CPU identity, flags and ISA verdicts.

Linux (and any captured tree under ``root``): ``/proc/cpuinfo`` plus cpufreq /
ACPI CPPC in sysfs, never py-cpuinfo in-process (it takes ~1.3 s and gets the
L3 wrong). Other platforms, live only: py-cpuinfo, checked by a child process
that executes CPUID + XGETBV (see :mod:`cpudoctor.probes.cpu.cpuid_check`).

The micro-architecture comes from family/model (x86) or implementer/part (ARM)
through ``resources/microarchitectures.json``; flags only cross-check it,
because hypervisors mask flags but rarely the model.
"""

from __future__ import annotations

import platform
import re
import sys
from pathlib import Path

from cpudoctor.model.cpu import CpuInfo, arch_family, canonical_arch
from cpudoctor.probes.cpu.clocks import fill_clocks, fill_current_clock
from cpudoctor.kits.rooted import is_live_root


def probe_cpu(root: Path = Path("/")) -> CpuInfo:
    """Identity, flags and ISA verdicts of the CPU under ``root``.

    Never raises: a missing or garbled cpuinfo gives an unknown CpuInfo whose
    ``notes`` say what was wrong.
    """
    from cpudoctor.kits.rooted import read_text, under

    root = Path(root)
    path = under(root, "/proc/cpuinfo")
    text = read_text(path)
    if text is None and is_live_root(root) and not sys.platform.startswith("linux"):
        # Method 2 (macOS, Windows, BSD): py-cpuinfo, only where there is no procfs.
        from cpudoctor.probes.cpu import _pycpuinfo

        return _pycpuinfo.probe_live()
    return cpu_from_cpuinfo_text(text, root=root, path=str(path))


def cpu_from_cpuinfo_text(text: str | None, root: Path | None = None, path: str = "/proc/cpuinfo") -> CpuInfo:
    """Build a CpuInfo from cpuinfo text (plus sysfs under ``root`` for clocks and MIDR)."""
    from cpudoctor.probes.cpu._cpuinfo import parse_cpuinfo

    cpu = CpuInfo()
    parsed = parse_cpuinfo(text)
    cpu.notes.extend(n.replace("/proc/cpuinfo", path) for n in parsed.notes)
    if text is not None and "\ufffd" in text and parsed.processors:
        cpu.notes.append(f"{path} contains bytes that are not text; those values were ignored")
    if not parsed.processors:
        cpu.notes.append("CPU identity unknown: " + ("no readable cpuinfo" if text is None else "cpuinfo has no usable entries"))
        fill_clocks(cpu, root)
        return cpu
    cpu.source = "procfs"
    cpu.logical_cpus_listed = sum(1 for p in parsed.processors if "processor" in p) or None
    is_arm = parsed.first("CPU implementer") is not None or (
        parsed.first("vendor_id") is None and parsed.first("Features") is not None)
    if is_arm:
        _fill_arm(cpu, parsed, root)
    else:
        _fill_x86(cpu, parsed)
    _fill_flags(cpu, parsed)
    cpu.arch = _arch(cpu, parsed, root, set(cpu.flags), is_arm)
    match = _fill_uarch(cpu)
    fill_clocks(cpu, root)
    fill_current_clock(cpu, parsed, root)
    _fill_isa(cpu, root, match)
    return cpu


# -- identity -------------------------------------------------------------

def _int(text: str | None) -> int | None:
    """A cpuinfo number (family, model, stepping): bounded ASCII decimal or 0x hex, else None."""
    from cpudoctor.kits.cpulist import GarbledValue, parse_int

    if text is None:
        return None
    try:
        return parse_int(text, 0, 0xFFFFFFFF)
    except GarbledValue:
        return None


def _fill_x86(cpu: CpuInfo, parsed) -> None:
    from cpudoctor.probes.cpu.uarch import clean_brand, vendor_short

    cpu.vendor_id = parsed.first("vendor_id")
    cpu.vendor = vendor_short(cpu.vendor_id)
    if cpu.vendor_id and cpu.vendor is None:
        cpu.notes.append(f"unknown CPU vendor id {cpu.vendor_id!r}")
    cpu.brand = clean_brand(parsed.first("model name"))
    cpu.family = _int(parsed.first("cpu family"))
    cpu.model = _int(parsed.first("model"))
    cpu.stepping = _int(parsed.first("stepping"))
    missing = [k for k, v in (("vendor_id", cpu.vendor_id), ("cpu family", cpu.family), ("model", cpu.model)) if v is None]
    if missing:
        cpu.notes.append(f"cpuinfo lacks {', '.join(missing)} (truncated or unusual file)")


def _fill_arm(cpu: CpuInfo, parsed, root: Path | None) -> None:
    from cpudoctor.probes.cpu.uarch import clean_brand, vendor_short

    # Method 1: "CPU implementer" / "CPU part" lines. Method 2: the MIDR_EL1
    # register the kernel exports per CPU, for cpuinfo files that lack them.
    impl = parsed.first("CPU implementer")
    parts = [p.lower() for p in parsed.values("CPU part")]
    variant = parsed.first("CPU variant")
    if impl is None and root is not None:
        impl, parts, variant = _midr(root)
        if impl is not None:
            cpu.notes.append("CPU implementer/part read from sysfs MIDR_EL1 (cpuinfo lacks them)")
    cpu.vendor_id = impl.lower() if impl else None
    cpu.vendor = vendor_short(cpu.vendor_id)
    cpu.arm_parts = parts
    cpu.arm_variant = variant
    cpu.brand = clean_brand(parsed.first("model name", "Hardware"))


def _midr(root: Path) -> tuple[str | None, list[str], str | None]:
    """Implementer, distinct parts and variant from ``cpuN/regs/identification/midr_el1``."""
    from cpudoctor.kits.rooted import numbered_dirs, read_text, under

    base = under(root, "/sys/devices/system/cpu")
    impl = variant = None
    parts: list[str] = []
    for n in numbered_dirs(base, "cpu"):
        text = read_text(base / f"cpu{n}" / "regs" / "identification" / "midr_el1")
        try:
            midr = int(text, 16) if text and len(text) <= 18 else None
        except ValueError:
            midr = None
        if midr is None:
            continue
        impl = impl or f"0x{midr >> 24 & 0xFF:02x}"
        variant = variant or f"0x{midr >> 20 & 0xF:x}"
        part = f"0x{midr >> 4 & 0xFFF:03x}"
        if part not in parts:
            parts.append(part)
    return impl, parts, variant


def _fill_flags(cpu: CpuInfo, parsed) -> None:
    lines = [p.get("flags") or p.get("Features") for p in parsed.processors]
    lines = [ln for ln in lines if ln]
    if not lines:
        # Old ARM kernels print Features once, after the processor blocks.
        lines = [ln for ln in (parsed.header.get("flags"), parsed.header.get("Features")) if ln]
    if not lines:
        cpu.notes.append("cpuinfo lists no flags: ISA verdicts are unknown")
        return
    sets = [set(ln.split()) for ln in lines]
    common = set.intersection(*sets)
    only_some = sorted(set.union(*sets) - common)
    # Keep the kernel's order (grouped by CPUID word), without duplicates or garbage tokens.
    cpu.flags = [name for name in dict.fromkeys(lines[0].split()) if name in common and _flag_name_ok(name)]
    if len(cpu.flags) > _MAX_FLAGS:
        cpu.notes.append(f"cpuinfo lists {len(cpu.flags)} flags, more than any CPU has: only the first "
                         f"{_MAX_FLAGS} were kept")
        cpu.flags = cpu.flags[:_MAX_FLAGS]
    if only_some:
        cpu.notes.append(
            f"flags differ between processors ({', '.join(only_some[:8])}{' ...' if len(only_some) > 8 else ''} "
            "only on some): verdicts use the flags every processor has, since threads migrate"
        )


# x86 kernels name about 350 flags in all, arm64 about 80; a name is a short word.
_MAX_FLAGS = 1024


def _flag_name_ok(name: str) -> bool:
    return len(name) <= 64 and bool(re.fullmatch(r"[a-z0-9_.]+", name))


def _arch(cpu: CpuInfo, parsed, root: Path | None, flags: set[str], is_arm: bool) -> str | None:
    """The architecture cpuinfo describes; on the live machine checked against this interpreter's.

    Under qemu-user or Rosetta, /proc/cpuinfo describes the host while this
    process runs emulated: keep the cpuinfo view (so flags and verdicts agree)
    and say so loudly.
    """
    if is_arm:
        arch = (parsed.first("CPU architecture") or "").strip()
        # "asimd" is the aarch64 name of NEON (32-bit kernels say "neon").
        described = "aarch64" if arch in {"8", "9", "AArch64"} or (not arch and "asimd" in flags) else "arm"
    elif parsed.first("vendor_id") is not None or flags:
        described = "x86_64" if "lm" in flags else "i686"
    else:
        described = None
    if root is not None and is_live_root(root):
        machine = platform.machine().lower()
        running = canonical_arch(machine)
        if described is None:
            return running
        if running and arch_family(running) != arch_family(described):
            cpu.notes.append(
                f"/proc/cpuinfo describes an {described} CPU but this Python runs as {running}: it is emulated "
                "(qemu-user, Rosetta 2, box64), so the flags below are the host's, not what your code can use"
            )
    return described


def _fill_uarch(cpu: CpuInfo):
    from cpudoctor.probes.cpu.uarch import UarchMatch, decode_arm, decode_x86

    if cpu.is_arm:
        match = decode_arm(cpu.vendor_id, cpu.arm_parts)
        if match.uarch and cpu.arm_parts:
            # The part that named the chip (the fastest core).
            cpu.arm_part = _part_of(match, cpu) or cpu.arm_parts[0]
        if cpu.brand is None and match.display:
            company = cpu.vendor or "ARM"
            name = match.codename if match.codename and "+" in match.codename else match.display
            cpu.brand = name if name.startswith(company) else f"{company} {name}"
            cpu.notes.append("ARM cpuinfo has no model name: the name is decoded from CPU implementer/part")
    else:
        match = decode_x86(cpu.vendor, cpu.family, cpu.model, cpu.stepping, cpu.brand)
        generic = _generic_vm_model(cpu.brand)
        if generic:
            # qemu64 says AMD family 15 (K8), kvm64 Intel family 15: ids of no real CPU of this VM's host.
            match = UarchMatch(notes=[f"the hypervisor presents {generic}: family "
                                       f"{cpu.family} model {cpu.model} describe no real CPU, so the "
                                       "micro-architecture is unknown"])
    cpu.microarchitecture = match.uarch
    cpu.microarchitecture_name = match.display
    cpu.codename = match.codename
    cpu.product_line = match.product_line
    cpu.notes.extend(match.notes)
    return match


def _generic_vm_model(brand: str | None) -> str | None:
    from cpudoctor.probes.cpu.vm_model import generic_vm_model

    return generic_vm_model(brand)


def _part_of(match, cpu: CpuInfo) -> str | None:
    from cpudoctor.knowledge import MICROARCHITECTURES

    for row in MICROARCHITECTURES.data["arm"]:
        if row["uarch"] == match.uarch and row["implementer"] == (cpu.vendor_id or "").lower():
            for part in cpu.arm_parts:
                if part in row["parts"]:
                    return part
    return None


# -- ISA ------------------------------------------------------------------

def _fill_isa(cpu: CpuInfo, root: Path | None, match=None) -> None:
    from cpudoctor.probes.cpu import isa as _isa
    from cpudoctor.kits.rooted import read_int, under

    flags = set(cpu.flags)
    if cpu.is_x86:
        cpu.hypervisor = "hypervisor" in flags
    sve_bits = None
    if root is not None and "sve" in flags:
        # The default SVE vector length of new processes, in bytes (live systems only).
        vl = read_int(under(root, "/proc/sys/abi/sve_default_vector_length"))
        sve_bits = vl * 8 if vl and vl > 0 else None
    if flags:
        cpu.isa = _isa.isa_verdict(flags, cpu.arch, match, sve_bits)
    if match is not None:
        cpu.isa.datapath_bits = match.datapath_bits
        if flags and match.expected_flags:
            missing = [f for f in match.expected_flags if f not in flags]
            if missing:
                if cpu.hypervisor:
                    why = "the hypervisor masks them"
                elif cpu.product_line in {"Pentium", "Celeron", "Atom", "Processor N"}:
                    why = f"Intel disables them on {cpu.product_line} parts"
                else:
                    why = "BIOS settings, kernel boot options or an old kernel hide them"
                cpu.notes.append(
                    f"{match.display or match.uarch} normally reports {', '.join(missing)}, but this system does not "
                    f"({why}); the verdicts follow what the OS reports"
                )
    if cpu.hypervisor:
        cpu.notes.append("running under a hypervisor: it may mask CPU flags and the vCPU layout may not match the host")

