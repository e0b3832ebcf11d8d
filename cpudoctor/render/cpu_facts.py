"""Which CPU this is, as rows of facts: one list for the window's Overview and every export.

:func:`cpu_facts` words the identity of a CPU (model, vendor, family, micro-architecture,
architecture, clock, virtual machine, where it was read) as :class:`Fact` rows. The text,
Markdown and HTML reports print each row's :attr:`Fact.text`; the Overview's Processor
card lays out the same rows (the model is its heading and the clocks have a card of
their own), so the window and a pasted report never word one fact two ways.
"""

from __future__ import annotations

from dataclasses import dataclass

from cpudoctor.kits.format import clock
from cpudoctor.model import CpuInfo

UNKNOWN = "unknown"


@dataclass(frozen=True)
class Fact:
    """One row: ``Virtual machine`` | ``yes`` | ``the hypervisor may hide CPU features``."""

    label: str
    value: str
    note: str = ""         # why the value matters or where it comes from; shown after the value

    @property
    def text(self) -> str:
        """The value as every surface shows it: ``yes — the hypervisor may hide CPU features``."""
        return f"{self.value} — {self.note}" if self.note else self.value


def cpu_facts(cpu: CpuInfo) -> list[Fact]:
    """The rows describing which CPU this is, in the order every surface shows them."""
    rows = [Fact("Model", cpu.brand or UNKNOWN)]
    vendor = cpu.vendor or UNKNOWN
    if cpu.vendor_id and cpu.vendor_id != cpu.vendor:
        vendor += f" ({cpu.vendor_id})"
    rows.append(Fact("Vendor", vendor))
    if cpu.family is not None or cpu.model is not None:
        fam = "?" if cpu.family is None else f"{cpu.family} (0x{cpu.family:x})"
        mod = "?" if cpu.model is None else f"{cpu.model} (0x{cpu.model:x})"
        step = "" if cpu.stepping is None else f", stepping {cpu.stepping}"
        rows.append(Fact("Family / model", f"{fam} / {mod}{step}"))
    if cpu.arm_parts:
        parts = ", ".join(cpu.arm_parts)
        rows.append(Fact("CPU part", parts + (f", variant {cpu.arm_variant}" if cpu.arm_variant else "")))
    rows.append(Fact("Microarchitecture", _microarchitecture(cpu)))
    arch = cpu.arch or UNKNOWN
    if cpu.isa.x86_64_level:
        arch += (f", psABI level x86-64-v{cpu.isa.x86_64_level}" if cpu.isa.x86_64_level > 1
                 else ", psABI level x86-64 (baseline)")
    rows.append(Fact("Architecture", arch))
    rows.append(Fact("Clock", clock_text(cpu)))
    if cpu.logical_cpus_listed:
        rows.append(Fact("cpuinfo entries", str(cpu.logical_cpus_listed)))
    if cpu.hypervisor is not None:
        rows.append(Fact("Virtual machine", _hypervisor(cpu), "the hypervisor may hide CPU features") if cpu.hypervisor
                    else Fact("Virtual machine", "no", "bare metal"))
    rows.append(Fact("Source", cpu.source))
    return rows


def _hypervisor(cpu: CpuInfo) -> str:
    """"yes (kvm, CPUID signature KVMKVMKVM)" when the CPUID check read the hypervisor leaf, else "yes"."""
    from cpudoctor.probes.software.osinfo import hypervisor_from_cpuid

    signature = cpu.cpuid_check.hypervisor_vendor if cpu.cpuid_check is not None else None
    if not signature:
        return "yes"
    return f"yes ({hypervisor_from_cpuid(signature) or 'unknown hypervisor'}, CPUID signature {signature})"


def _microarchitecture(cpu: CpuInfo) -> str:
    """``zen4 — Genoa, EPYC``: the family name, then the codename and product line when known."""
    if not cpu.microarchitecture:
        return UNKNOWN + (f" ({cpu.product_line})" if cpu.product_line else "")
    extra = [x for x in (cpu.microarchitecture_name, cpu.codename) if x]
    if len(extra) == 2 and extra[0] in extra[1]:
        extra = extra[1:]          # "Cortex-X925 + Cortex-A725" already names the core
    if cpu.product_line:
        extra.append(cpu.product_line)
    return cpu.microarchitecture + (f" — {', '.join(extra)}" if extra else "")


def clock_text(cpu: CpuInfo) -> str:
    """``base 2.40 GHz, max 3.90 GHz``; when neither is known, the clock the kernel reported at probe time."""
    parts = []
    if cpu.base_mhz is not None:
        parts.append(f"base {clock(cpu.base_mhz)}")
    if cpu.max_mhz is not None:
        parts.append(f"max {clock(cpu.max_mhz)}")
    if parts:
        return ", ".join(parts)
    if cpu.current_mhz is not None:
        return f"{clock(cpu.current_mhz)} when probed (no cpufreq data or clock in the name to rate it)"
    return "unknown (no cpufreq data and no clock in the name)"
