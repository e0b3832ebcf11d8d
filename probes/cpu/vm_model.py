"""Recognise a hypervisor's generic CPU model from the brand string (resources/vm_cpu_models.json).

QEMU's default ``qemu64`` model reports "QEMU Virtual CPU version 2.5+" with
AMD family 15 model 107, and ``kvm64`` "Common KVM processor" with Intel family
15 model 6: decoded as silicon they would read as a 2003 Opteron or a Pentium 4.
Such a family/model describes no CPU, so the identity probe leaves the
micro-architecture unknown for them, and the advisor explains what the model hides.
"""

from __future__ import annotations

import re
from cpudoctor.knowledge import VM_CPU_MODELS


def _table() -> dict:
    return VM_CPU_MODELS.data


def generic_vm_model(brand: str | None) -> str | None:
    """The generic model ("qemu64 / qemu32 (QEMU's default model)") a brand string names, or None."""
    if not brand:
        return None
    for entry in _table()["generic_models"]:
        if re.search(entry["pattern"], brand.strip()):
            return entry["model"]
    return None


def named_vm_model(brand: str | None) -> bool:
    """True when the brand string is one of QEMU's named models ("Intel Core Processor (Haswell)")."""
    return bool(brand) and brand.strip() in _table()["named_models"]
