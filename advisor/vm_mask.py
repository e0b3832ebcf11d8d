"""Does this VM's CPU model hide the host's vector instruction sets, and what does that cost?

Three cases, from resources/vm_cpu_models.json and the report's CPU facts:

* ``generic``: the hypervisor presents a model of no real CPU (qemu64, kvm64,
  TCG max): whatever the host has, programs see only what the model lists.
* ``masked``: the family/model is a real micro-architecture, but flags its
  silicon always has are missing (a Zen 4 without avx512f, a Zen+ without fma):
  the VM's CPU model or a compatibility mode strips them.
* ``named``: one of QEMU's named models (Haswell, EPYC-Rome ...): complete for
  that generation, but a newer host loses what the model lacks.

ISA009 reports it; ISA001, ISA002 and ISA006 defer to it so one cause gives one finding.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from cpudoctor.advisor import machine
from cpudoctor.advisor.engine import Facts
from cpudoctor.knowledge import VM_CPU_MODELS
from cpudoctor.probes.cpu.vm_model import generic_vm_model, named_vm_model

# What a generic model is judged by: the sets that decide PyTorch's kernels.
_GENERIC_CHECK = ("avx", "avx2", "fma", "avx512f")


def table() -> dict[str, Any]:
    return VM_CPU_MODELS.data


@dataclass
class VmMask:
    kind: str                      # generic | masked | named
    model: str                     # "QEMU's default qemu64/qemu32 model", "Zen 4", or the named model's brand
    missing: list[str] = field(default_factory=list)   # flags the VM hides (generic: of the ones that matter)
    hypervisor: str | None = None  # software.os.virtualization (kvm, qemu, hyperv, vmware ...)

    @property
    def hides_kernels(self) -> bool:
        """The hidden flags change which kernels PyTorch/oneDNN run (not just a nicety like F16C alone)."""
        return any(f in self.missing for f in ("avx2", "fma", "avx512f", "avx512bw", "avx512_bf16", "avx512_vnni",
                                               "amx_tile", "avx_vnni"))


def labels(flags: list[str]) -> str:
    names = table()["flag_labels"]
    return ", ".join(names.get(f, f) for f in flags)


def detect(f: Facts) -> VmMask | None:
    """The VM-model verdict for this report, or None (not a VM, not x86, flags unknown, nothing hidden)."""
    hyper = f.get("cpu.hypervisor")
    vm = f.get("software.os.vm")
    if not (hyper or vm) or f.get("software.os.wsl", record=False):
        return None
    flags = machine.flags(f)
    if not flags or not machine.is_x86(f):
        return None
    brand = f.get("cpu.brand")
    virt = f.get("software.os.virtualization")
    generic = generic_vm_model(brand)
    if generic:
        return VmMask("generic", generic, [x for x in _GENERIC_CHECK if x not in flags], virt)
    uarch = (f.get("cpu.microarchitecture") or "").lower()
    silicon = table()["silicon_isa"].get(uarch)
    line = f.get("cpu.product_line")
    if silicon and line not in table()["skip_product_lines"]:
        missing = [x for x in silicon if x not in flags]
        if missing:
            return VmMask("masked", f.get("cpu.microarchitecture_name") or uarch, missing, virt)
    if named_vm_model(brand):
        return VmMask("named", brand, [], virt)
    return None


def torch_kernels(flags: set[str]) -> str:
    """PyTorch's kernel choice for a flag set (the same test as machine.expected_torch_capability)."""
    if {"avx512f", "avx512bw", "avx512dq", "avx512vl", "fma"} <= flags:
        return "AVX512"
    if {"avx2", "fma"} <= flags:
        return "AVX2"
    return "DEFAULT"


def fixes(virt: str | None) -> list[dict[str, Any]]:
    """The fixes for this hypervisor; for an unknown one, every KVM/QEMU fix and then the others."""
    rows = table()["fixes"]
    chosen = [r for r in rows if virt and virt in r["hypervisors"]]
    return chosen or rows
