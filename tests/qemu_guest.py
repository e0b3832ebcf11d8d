"""A VM guest's /proc + /sys tree for a QEMU CPU model, read from the model itself.

``qemu-x86_64 -cpu MODEL python -m cpudoctor.probes.cpu.cpuid_check`` executes
CPUID inside QEMU's emulation of that model and prints vendor, family, model,
brand and flags: exactly what a KVM guest given that model sees. (In user mode
/proc/cpuinfo still shows the host, which is why the tree is written here.)
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

QEMU = shutil.which("qemu-x86_64")


def cpuid_under(model: str, timeout: float = 120) -> dict:
    """CPUID facts of QEMU's ``model`` (vendor_id, family, model, stepping, brand, flags)."""
    proc = subprocess.run([QEMU, "-cpu", model, sys.executable, "-m", "cpudoctor.probes.cpu.cpuid_check"],
                          capture_output=True, text=True, timeout=timeout)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def python_under(model: str, code: str, env: dict | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    """Run ``python -c code`` on QEMU's emulation of ``model`` (an Illegal instruction: -4, as qemu re-raises it)."""
    return subprocess.run([QEMU, "-cpu", model, sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=timeout, env=env)


def guest_tree(root: Path, cpuid: dict, cpus: int = 2, dmi_vendor: str = "QEMU") -> Path:
    """Write proc/cpuinfo (``cpus`` entries) and DMI for a guest whose CPU is ``cpuid``; returns ``root``."""
    flags = list(cpuid["flags"])
    if "hypervisor" not in flags:
        flags.append("hypervisor")  # a KVM guest's kernel always sees the hypervisor bit
    entries = []
    for n in range(cpus):
        entries.append("\n".join([
            f"processor\t: {n}", f"vendor_id\t: {cpuid['vendor_id']}", f"cpu family\t: {cpuid['family']}",
            f"model\t\t: {cpuid['model']}", f"model name\t: {cpuid['brand']}", f"stepping\t: {cpuid['stepping']}",
            f"physical id\t: 0", f"siblings\t: {cpus}", f"core id\t\t: {n}", f"cpu cores\t: {cpus}",
            f"flags\t\t: {' '.join(flags)}"]))
    (root / "proc").mkdir(parents=True, exist_ok=True)
    (root / "proc" / "cpuinfo").write_text("\n\n".join(entries) + "\n", encoding="utf-8")
    dmi = root / "sys" / "class" / "dmi" / "id"
    dmi.mkdir(parents=True, exist_ok=True)
    (dmi / "sys_vendor").write_text(dmi_vendor + "\n", encoding="utf-8")
    (dmi / "product_name").write_text("Standard PC (i440FX + PIIX, 1996)\n", encoding="utf-8")
    return root
