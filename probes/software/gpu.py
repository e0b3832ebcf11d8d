"""Which GPUs the machine has, read from PCI sysfs (no driver, no torch needed).

The advisor needs to know whether a CUDA or ROCm build of torch has a GPU to
run on: a multi-GB CUDA wheel on a machine without an NVIDIA GPU is pure
waste. Reading PCI class/vendor files answers that without loading any
driver library, so it is safe in the GUI process and works on captured trees.
"""

from __future__ import annotations

from pathlib import Path

from cpudoctor.kits.rooted import list_dir, read_text, under
from cpudoctor.model.software import GpuInfo

# PCI base class 0x03 = display controller (VGA 0x0300, 3D 0x0302, other 0x0380);
# 0x12 = processing accelerator (some data-centre GPUs and NPUs report it).
_DISPLAY_CLASS = 0x03
_ACCEL_CLASS = 0x12
_VENDORS = {0x10DE: "NVIDIA", 0x1002: "AMD", 0x8086: "Intel", 0x1A03: "ASPEED", 0x1234: "QEMU", 0x15AD: "VMware",
            0x1414: "Microsoft", 0x1AF4: "virtio"}
# Vendors whose display devices are only a console framebuffer, never a compute GPU.
_CONSOLE_ONLY = {"ASPEED", "QEMU", "VMware", "Microsoft", "virtio"}


def probe_gpus(root: Path = Path("/")) -> tuple[list[GpuInfo] | None, list[str]]:
    """GPUs on the PCI bus, or None (unknown) when PCI sysfs is not there.

    WSL2 has no PCI view of the GPU: its paravirtual /dev/dxg means "a GPU is
    shared from Windows", reported with vendor "WSL (dxg)"; the NVIDIA user
    library shipped by the Windows driver (/usr/lib/wsl/lib/libcuda.so) says
    which vendor.
    """
    notes: list[str] = []
    pci = under(root, "/sys/bus/pci/devices")
    if under(root, "/dev/dxg").exists():
        vendor = "NVIDIA" if under(root, "/usr/lib/wsl/lib/libcuda.so").exists() else "WSL (dxg)"
        return [GpuInfo(vendor=vendor, pci_address="dxg")], ["GPU shared from Windows through WSL2 (/dev/dxg)"]
    if not pci.is_dir():
        return None, ["no PCI information (/sys/bus/pci/devices): GPUs unknown"]
    gpus: list[GpuInfo] = []
    for addr in list_dir(pci):
        cls = read_text(pci / addr / "class")
        vendor = read_text(pci / addr / "vendor")
        if not cls or not vendor:
            continue
        try:
            base = int(cls, 16) >> 16
            vendor_id = int(vendor, 16)
        except ValueError:
            continue
        if base not in (_DISPLAY_CLASS, _ACCEL_CLASS):
            continue
        name = _VENDORS.get(vendor_id, f"PCI vendor {vendor_id:#06x}")
        if base == _ACCEL_CLASS and name not in ("NVIDIA", "AMD", "Intel"):
            continue  # other accelerators (crypto, NPUs) are not GPUs
        gpus.append(GpuInfo(vendor=name, pci_address=addr, device_id=read_text(pci / addr / "device") or "",
                            compute=name not in _CONSOLE_ONLY))
    return gpus, notes
