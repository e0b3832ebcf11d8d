"""Theoretical peak FLOP/s: physical cores x clock x FLOP/cycle/core from resources/peak_flops.json.

The table is knowledge, kept as data with a source for each entry; this module
only looks it up and multiplies. No torch here: the GUI shows utilisation too.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from cpudoctor.knowledge import PEAK_FLOPS
from cpudoctor.kits.format import percent

PRECISIONS = ("fp32", "fp64", "bf16", "int8")


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
    return PEAK_FLOPS.data["microarchitectures"]


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
    if precision == "int8":
        value = chosen.get("int8")     # int8 operations (a multiply-accumulate counts 2); no figure: unknown
        return FlopsPerCycle(microarchitecture, precision, float(value), "native", chosen.get("int8_reason", reason),
                             chosen.get("int8_source", source)) if value else None
    value = chosen.get("bf16")
    if value:
        return FlopsPerCycle(microarchitecture, precision, float(value), "native", reason, source)
    return FlopsPerCycle(microarchitecture, precision, fp32, "fp32 (no native bf16 math)", reason, source)


def cpuinfo_mhz(root: Path = Path("/")) -> float | None:
    """The 'cpu MHz' the kernel shows for the first CPU (fallback when cpufreq is absent, e.g. in VMs)."""
    from cpudoctor.kits.rooted import read_text, under

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


@dataclass
class MachinePeak:
    """What the peak of this machine needs, read once in the parent; the GEMM job itself only measures."""

    microarchitecture: str | None = None
    brand: str | None = None
    max_mhz: float | None = None
    base_mhz: float | None = None
    cpuinfo_mhz: float | None = None
    clock_mhz: float | None = None          # a person's override (--clock-mhz)
    physical_cores: int = 1                 # physical cores among the CPUs this process may use
    notes: list[str] = field(default_factory=list)

    @classmethod
    def from_probe(cls, cpu, topology, allowed: list[int] | None = None, root: Path = Path("/"),
                   clock_mhz: float | None = None) -> "MachinePeak":
        """From the CPU and Topology probes (of ``root``): cores among ``allowed`` (default: the affinity)."""
        import os

        if allowed is None:
            allowed = topology.affinity.allowed_cpus or topology.online_cpus or (
                sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else [])
        core_of = {c: i for i, core in enumerate(topology.core_list) for c in core.cpus}
        notes = list(cpu.notes[:1]) if not cpu.microarchitecture else []
        if not core_of:
            notes.append("topology unknown: each usable CPU counted as a physical core")
        cores = len({core_of.get(c, ("cpu", c)) for c in allowed}) or 1
        return cls(cpu.microarchitecture, cpu.brand, cpu.max_mhz, cpu.base_mhz, cpuinfo_mhz(root), clock_mhz,
                   cores, notes)

    def cores_for_threads(self, threads: int) -> int:
        """Threads beyond the physical cores run on SMT siblings and add no FMA units."""
        return max(1, min(threads, self.physical_cores))

    def peak(self, threads: int, precision: str) -> Peak:
        return peak(self.cores_for_threads(threads), precision, self.microarchitecture, brand=self.brand,
                    max_mhz=self.clock_mhz or self.max_mhz, base_mhz=self.base_mhz, fallback_mhz=self.cpuinfo_mhz)

    def annotate(self, point: dict) -> dict:
        """A GEMM point with the peak of the cores it used and its share of it (utilisation)."""
        threads, precision, gflops = point.get("threads"), point.get("precision"), point.get("gflops")
        if not isinstance(threads, int) or precision not in PRECISIONS:
            return dict(point)
        pk = self.peak(threads, precision)
        out = dict(point, cores=pk.cores, peak_gflops=round(pk.gflops, 1) if pk.gflops else None,
                   peak_basis=pk.per_cycle.basis if pk.per_cycle else None)
        out["utilisation"] = round(gflops / pk.gflops, 4) if pk.gflops and isinstance(gflops, (int, float)) else None
        return out

    def facts(self) -> dict:
        """The machine as a GEMM result shows it."""
        return {"microarchitecture": self.microarchitecture, "brand": self.brand, "max_mhz": self.max_mhz,
                "base_mhz": self.base_mhz, "cpuinfo_mhz": self.cpuinfo_mhz, "clock_mhz": self.clock_mhz,
                "physical_cores": self.physical_cores, "notes": list(self.notes)}

    def notes_for(self, points: list[dict]) -> list[str]:
        """Which clock the peak assumes, and what a point above its peak says about the real clock."""
        pk = self.peak(1, "fp32")
        return pk.notes + clock_notes(points)


def clock_notes(points: list[dict]) -> list[str]:
    """A point above its peak means the clock assumed is too low: say what clock it implies."""
    over = [p for p in points if p.get("utilisation") and p["utilisation"] > 1.0]
    if not over:
        return []
    worst = max(over, key=lambda p: p["utilisation"])
    return [f"{worst['backend']} at {worst['threads']} thread(s) measured {percent(worst['utilisation'], fraction=True)} of the computed peak: "
            f"the cores ran at least {worst['utilisation']:.2f}x the clock assumed (boost), so the percentages are upper "
            "bounds; give the real all-core clock with clock_mhz / --clock-mhz"]
