from pathlib import Path

from cpudoctor.advisor import diagnose
from cpudoctor.probes.software.gpu import probe_gpus
from cpudoctor.model import PackageInfo, Software, TorchBuild
from cpudoctor.model import Report


def _pci(root: Path, addr: str, cls: str, vendor: str, device: str = "0x0001") -> None:
    d = root / "sys/bus/pci/devices" / addr
    d.mkdir(parents=True)
    (d / "class").write_text(cls + "\n")
    (d / "vendor").write_text(vendor + "\n")
    (d / "device").write_text(device + "\n")


def test_nvidia_and_console_adapters(tmp_path):
    _pci(tmp_path, "0000:00:01.0", "0x030000", "0x1a03")          # ASPEED BMC console
    _pci(tmp_path, "0000:41:00.0", "0x030200", "0x10de", "0x2330")  # NVIDIA 3D controller
    _pci(tmp_path, "0000:00:02.0", "0x020000", "0x8086")          # a NIC, not a GPU
    gpus, notes = probe_gpus(tmp_path)
    assert [(g.vendor, g.compute) for g in gpus] == [("ASPEED", False), ("NVIDIA", True)]
    assert gpus[1].device_id == "0x2330"


def test_no_pci_sysfs_is_unknown_not_none_found(tmp_path):
    gpus, notes = probe_gpus(tmp_path)
    assert gpus is None and "unknown" in notes[0]


def test_wsl2_dxg(tmp_path):
    (tmp_path / "dev").mkdir()
    (tmp_path / "dev/dxg").write_text("")
    (tmp_path / "usr/lib/wsl/lib").mkdir(parents=True)
    (tmp_path / "usr/lib/wsl/lib/libcuda.so").write_text("")
    gpus, _ = probe_gpus(tmp_path)
    assert gpus[0].vendor == "NVIDIA"


def _report_with_cuda_torch(gpus) -> Report:
    sw = Software(packages=[PackageInfo("torch", "2.5.1+cu121", "cuda", "+cu121")],
                  torch=TorchBuild(status="ok", version="2.5.1+cu121", cuda_version="12.1"), gpus=gpus)
    return Report(software=sw)


def test_cuda_build_without_gpu_is_a_warning_and_with_gpu_is_not(tmp_path):
    _pci(tmp_path, "0000:00:01.0", "0x030000", "0x1234")          # QEMU std VGA only
    no_gpu, _ = probe_gpus(tmp_path)
    sev = {f.code: f.severity for f in diagnose(_report_with_cuda_torch(no_gpu), only={"TORCH002"})}
    assert sev.get("TORCH002") == "warning"
    _pci(tmp_path, "0000:41:00.0", "0x030200", "0x10de")
    with_gpu, _ = probe_gpus(tmp_path)
    sev = {f.code: f.severity for f in diagnose(_report_with_cuda_torch(with_gpu), only={"TORCH002"})}
    assert sev.get("TORCH002") != "warning"
