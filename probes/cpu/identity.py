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

from cpudoctor.model.cpu import CpuInfo, arch_family


def probe_cpu(root: Path = Path("/")) -> CpuInfo:
    """Identity, flags and ISA verdicts of the CPU under ``root``.

    Never raises: a missing or garbled cpuinfo gives an unknown CpuInfo whose
    ``notes`` say what was wrong.
    """
    from cpudoctor.kits.rooted import read_text, under

    root = Path(root)
    path = under(root, "/proc/cpuinfo")
    text = read_text(path)
    if text is None and _is_live(root) and not sys.platform.startswith("linux"):
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
        _fill_clocks(cpu, root)
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
    _fill_clocks(cpu, root)
    _fill_current_clock(cpu, parsed, root)
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


# CPUID brand strings are 48 characters; ARM "Hardware"/"model name" lines are short too.
# Anything far longer is a damaged or hostile file (a 1 MB name made a window take minutes).
_BRAND_MAX = 200


def _clean_brand(text: str | None) -> str | None:
    if not text:
        return None
    text = "".join(ch for ch in text if ch.isprintable() or ch.isspace())   # no escape sequences
    brand = " ".join(text.replace("\ufffd", "").split())
    if len(brand) > _BRAND_MAX:
        brand = brand[: _BRAND_MAX - 1] + "…"
    return brand or None


def _fill_x86(cpu: CpuInfo, parsed) -> None:
    from cpudoctor.probes.cpu.uarch import vendor_short

    cpu.vendor_id = parsed.first("vendor_id")
    cpu.vendor = vendor_short(cpu.vendor_id)
    if cpu.vendor_id and cpu.vendor is None:
        cpu.notes.append(f"unknown CPU vendor id {cpu.vendor_id!r}")
    cpu.brand = _clean_brand(parsed.first("model name"))
    cpu.family = _int(parsed.first("cpu family"))
    cpu.model = _int(parsed.first("model"))
    cpu.stepping = _int(parsed.first("stepping"))
    missing = [k for k, v in (("vendor_id", cpu.vendor_id), ("cpu family", cpu.family), ("model", cpu.model)) if v is None]
    if missing:
        cpu.notes.append(f"cpuinfo lacks {', '.join(missing)} (truncated or unusual file)")


def _fill_arm(cpu: CpuInfo, parsed, root: Path | None) -> None:
    from cpudoctor.probes.cpu.uarch import vendor_short

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
    cpu.brand = _clean_brand(parsed.first("model name", "Hardware"))


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
    if root is not None and _is_live(root):
        machine = platform.machine().lower()
        running = {"amd64": "x86_64", "arm64": "aarch64", "x64": "x86_64"}.get(machine, machine or None)
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

    if cpu.arch in ("aarch64", "arm"):
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


# -- clocks ---------------------------------------------------------------

_BRAND_GHZ = re.compile(r"@\s*([0-9]{1,5}(?:\.[0-9]{1,4})?)\s*([GM])Hz", re.IGNORECASE)


def _fill_clocks(cpu: CpuInfo, root: Path | None) -> None:
    """Base and max clock in MHz.

    Method 1: cpufreq (``cpuinfo_max_freq``, ``base_frequency`` in kHz), per CPU
    directory and per policy; the maximum over CPUs (hybrid parts: the P-cores).
    Method 2: ACPI CPPC ``nominal_freq`` (MHz) for the base clock.
    Method 3: the brand string's "@ 2.40GHz" (Intel prints the base clock there).
    """
    if root is not None:
        max_khz, base_khz, nominal = _sysfs_clocks(root)
        if max_khz:
            cpu.max_mhz, cpu.max_mhz_source = max_khz / 1000.0, "cpufreq cpuinfo_max_freq"
        if base_khz:
            cpu.base_mhz, cpu.base_mhz_source = base_khz / 1000.0, "cpufreq base_frequency"
        elif nominal:
            cpu.base_mhz, cpu.base_mhz_source = float(nominal), "acpi_cppc nominal_freq"
    if cpu.base_mhz is None and cpu.brand:
        m = _BRAND_GHZ.search(cpu.brand)
        if m:
            value = float(m.group(1)) * (1000.0 if m.group(2).upper() == "G" else 1.0)
            cpu.base_mhz, cpu.base_mhz_source = value, "brand string"
    if cpu.max_mhz is not None and cpu.base_mhz is not None and cpu.max_mhz < cpu.base_mhz:
        # Old kernels without boost information report the base clock as max.
        cpu.notes.append("cpufreq max clock is below the base clock: boost is off or not reported")


def _fill_current_clock(cpu: CpuInfo, parsed, root: Path | None) -> None:
    """The clock the kernel reported at probe time, averaged over CPUs: a snapshot, not a rating.

    Often the only clock a VM shows (no cpufreq, no "@ 2.40GHz" in the name).
    Method 1: cpuinfo's "cpu MHz" (x86); method 2: cpufreq ``scaling_cur_freq`` (kHz, Arm).
    """
    values: list[float] = []
    for text in (p.get("cpu MHz") for p in parsed.processors):
        try:
            mhz = float(text) if text else 0.0
        except ValueError:
            continue
        if mhz > 0:
            values.append(mhz)
    if values:
        cpu.current_mhz, cpu.current_mhz_source = round(sum(values) / len(values), 1), "cpuinfo cpu MHz"
        return
    if root is None:
        return
    from cpudoctor.kits.rooted import numbered_dirs, read_int, under

    base = under(root, "/sys/devices/system/cpu")
    khz = [v for n in numbered_dirs(base, "cpu")
           for v in (read_int(base / f"cpu{n}" / "cpufreq" / "scaling_cur_freq"),) if v and v > 0]
    if khz:
        cpu.current_mhz = round(sum(khz) / len(khz) / 1000.0, 1)
        cpu.current_mhz_source = "cpufreq scaling_cur_freq"


def _sysfs_clocks(root: Path) -> tuple[int | None, int | None, int | None]:
    from cpudoctor.kits.rooted import numbered_dirs, read_int, under

    base = under(root, "/sys/devices/system/cpu")
    maxes: list[int] = []
    bases: list[int] = []
    nominals: list[int] = []
    cpus = numbered_dirs(base, "cpu")
    dirs = [base / f"cpu{n}" / "cpufreq" for n in cpus]
    dirs += [base / "cpufreq" / f"policy{n}" for n in numbered_dirs(base / "cpufreq", "policy")]
    for d in dirs:
        v = read_int(d / "cpuinfo_max_freq")
        if v and v > 0:
            maxes.append(v)
        b = read_int(d / "base_frequency")
        if b and b > 0:
            bases.append(b)
    for n in cpus:
        nom = read_int(base / f"cpu{n}" / "acpi_cppc" / "nominal_freq")
        if nom and nom > 0:
            nominals.append(nom)
    return (max(maxes) if maxes else None, max(bases) if bases else None, max(nominals) if nominals else None)


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


def _is_live(root: Path) -> bool:
    try:
        return Path(root).resolve() == Path("/")
    except OSError:
        return False
