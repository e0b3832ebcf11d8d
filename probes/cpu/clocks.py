"""A CPU's clocks: base and max from sysfs (cpufreq, ACPI CPPC) or the brand string, and the current one.

Shared by the /proc/cpuinfo reader (:mod:`.identity`) and the py-cpuinfo one
(:mod:`._pycpuinfo`, macOS and Windows), so neither imports the other.
"""

from __future__ import annotations

import re
from pathlib import Path

from cpudoctor.model.cpu import CpuInfo

_BRAND_GHZ = re.compile(r"@\s*([0-9]{1,5}(?:\.[0-9]{1,4})?)\s*([GM])Hz", re.IGNORECASE)


def fill_clocks(cpu: CpuInfo, root: Path | None) -> None:
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


def fill_current_clock(cpu: CpuInfo, parsed, root: Path | None) -> None:
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
