"""Theoretical peak FLOP/s: physical cores x clock x FLOP/cycle/core from resources/peak_flops.json.

The table is knowledge, kept as data with a source for each entry; this module
only looks it up and multiplies. No torch here: the GUI shows utilisation too.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from cpudoctor import resources

PRECISIONS = ("fp32", "fp64", "bf16")


@dataclass
class FlopsPerCycle:
    microarchitecture: str
    precision: str
    flops_per_cycle: float
    basis: str                 # "native" | "fp32 (no native bf16 math)" | "half of fp32"
    reason: str = ""
    source: str = ""


@dataclass
class Peak:
    gflops: float | None
    cores: int
    clock_mhz: float | None
    per_cycle: FlopsPerCycle | None
    notes: list[str] = field(default_factory=list)


def table() -> dict:
    return resources.load_json("peak_flops.json")["microarchitectures"]


def flops_per_cycle(microarchitecture: str | None, precision: str = "fp32", brand: str | None = None) -> FlopsPerCycle | None:
    """FLOP/cycle/core for a micro-architecture (archspec name) and precision; None when unknown."""
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, not {precision!r}")
    if not microarchitecture:
        return None
    entry = table().get(microarchitecture.lower())
    if entry is None:
        return None
    chosen = entry
    for variant in entry.get("variants", []):
        if brand and re.search(variant["brand_regex"], brand):
            chosen = {**entry, **variant}
            break
    fp32 = float(chosen["fp32"])
    reason, source = chosen.get("reason", ""), chosen.get("source", "")
    if precision == "fp32":
        return FlopsPerCycle(microarchitecture, precision, fp32, "native", reason, source)
    if precision == "fp64":
        value = chosen.get("fp64")
        return FlopsPerCycle(microarchitecture, precision, float(value) if value else fp32 / 2,
                             "native" if value else "half of fp32", reason, source)
    value = chosen.get("bf16")
    if value:
        return FlopsPerCycle(microarchitecture, precision, float(value), "native", reason, source)
    return FlopsPerCycle(microarchitecture, precision, fp32, "fp32 (no native bf16 math)", reason, source)


def cpuinfo_mhz(root: Path = Path("/")) -> float | None:
    """The 'cpu MHz' the kernel shows for the first CPU (fallback when cpufreq is absent, e.g. in VMs)."""
    from cpudoctor.probes._fs import read_text, under

    text = read_text(under(root, "/proc/cpuinfo"))
    if not text:
        return None
    m = re.search(r"^cpu MHz\s*:\s*([0-9.]+)", text, re.M)
    return float(m.group(1)) if m else None


def peak(
    cores: int,
    precision: str,
    microarchitecture: str | None,
    *,
    brand: str | None = None,
    max_mhz: float | None = None,
    base_mhz: float | None = None,
    fallback_mhz: float | None = None,
) -> Peak:
    """Theoretical GFLOP/s for ``cores`` physical cores; the notes say which clock was used and why."""
    notes: list[str] = []
    per = flops_per_cycle(microarchitecture, precision, brand)
    if per is None:
        notes.append(f"no FLOP/cycle figure for micro-architecture {microarchitecture or 'unknown'}")
    clock = None
    if max_mhz:
        clock = max_mhz
        notes.append(f"clock {max_mhz:.0f} MHz = the highest boost clock; all-core vector loads usually run lower")
    elif base_mhz:
        clock = base_mhz
        notes.append(f"clock {base_mhz:.0f} MHz = base clock (no boost clock known)")
    elif fallback_mhz:
        clock = fallback_mhz
        notes.append(f"clock {fallback_mhz:.0f} MHz = 'cpu MHz' from /proc/cpuinfo (no cpufreq; in a VM this is "
                     "the nominal clock, boost can exceed it and push utilisation above 100%)")
    else:
        notes.append("clock unknown")
    if per is None or clock is None:
        return Peak(None, cores, clock, per, notes)
    return Peak(cores * clock * per.flops_per_cycle / 1000.0, cores, clock, per, notes)
