"""Installed DL packages from metadata alone: names, versions, cpu/cuda/rocm builds."""

from __future__ import annotations

import importlib.metadata as metadata

import pytest

from cpudoctor.probes.software import packages as pk
from cpudoctor.knowledge import FLOORS
from cpudoctor.knowledge.versions import normalize
from cpudoctor.probes.software.packages import build_kind, probe_packages, probe_python


class FakeDist:
    """Mirrors what the probe reads of importlib.metadata.Distribution: name, version, requires, INSTALLER."""

    def __init__(self, name: str, version: str, requires: list[str] | None = None, installer: str | None = "pip"):
        self.metadata = {"Name": name}
        self.version = version
        self.requires = requires
        self.installer = installer

    def read_text(self, filename: str) -> str | None:
        return f"{self.installer}\n" if filename == "INSTALLER" and self.installer else None


@pytest.mark.parametrize(
    "name, version, requires, expected",
    [
        ("torch", "2.3.1+cpu", [], ("cpu", "+cpu")),
        ("torch", "2.3.1+cu121", [], ("cuda", "+cu121 (CUDA 12.1)")),
        ("torch", "2.1.0+cu118", [], ("cuda", "+cu118 (CUDA 11.8)")),
        ("torch", "2.4.0+rocm6.1", [], ("rocm", "+rocm6.1")),
        ("torch", "2.5.0+xpu", [], ("xpu", "+xpu")),
        ("torch", "2.5.0", ["nvidia-cublas-cu12==12.4.5.8; platform_system == 'Linux'"], ("cuda", "depends on NVIDIA CUDA wheels")),
        ("onnxruntime-gpu", "1.18.0", [], ("cuda", "CUDA distribution")),
        ("onnxruntime-rocm", "1.18.0", [], ("rocm", "ROCm distribution")),
        ("tensorflow-cpu", "2.16.1", [], ("cpu", "CPU-only distribution")),
        ("jax-cuda12-plugin", "0.4.30", [], ("cuda", "CUDA distribution")),
        ("numpy", "2.4.6", [], ("cpu", "")),
    ],
)
def test_build_kind(name, version, requires, expected):
    assert build_kind(name, version, requires, platform="linux") == expected


def test_macos_torch_is_cpu_build():
    assert build_kind("torch", "2.3.1", [], platform="darwin")[0] == "cpu"


def test_normalize_and_package_of():
    assert normalize("Intel_Extension.For-PyTorch") == "intel-extension-for-pytorch"
    assert FLOORS.package_of("onnxruntime-gpu").name == "onnxruntime"
    assert FLOORS.package_of("tf-nightly").name == "tensorflow"
    assert FLOORS.package_of("Intel_Extension.For-PyTorch").name == "intel-extension-for-pytorch"
    assert FLOORS.package_of("requests") is None


def _patch(monkeypatch, dists):
    monkeypatch.setattr(pk, "safe_distributions", lambda: list(dists))


def test_cpu_stack_from_patched_metadata(monkeypatch):
    _patch(monkeypatch, [
        FakeDist("torch", "2.13.0+cpu"), FakeDist("torchvision", "0.28.0+cpu"), FakeDist("numpy", "2.4.6"),
        FakeDist("requests", "2.32.0"), FakeDist("Intel_Extension_For_PyTorch", "2.8.0"),
    ])
    packages = probe_packages(platform="linux")
    assert [p.name for p in packages] == ["torch", "torchvision", "intel-extension-for-pytorch", "numpy"]
    found = {p.name: p for p in packages}
    assert found["torch"].build == "cpu" and found["torchvision"].version == "0.28.0+cpu"


@pytest.mark.parametrize("spelling", ["intel_extension_for_pytorch", "intel-extension-for-pytorch",
                                      "Intel.Extension_for-PyTorch"])
def test_a_distribution_is_listed_once_however_it_is_spelled(monkeypatch, spelling):
    """The report listed intel-extension-for-pytorch twice: the table named both of its spellings."""
    _patch(monkeypatch, [FakeDist(spelling, "2.8.0"), FakeDist("torch", "2.8.0+cpu")])
    assert [p.name for p in probe_packages(platform="linux")] == ["torch", "intel-extension-for-pytorch"]


def test_the_table_names_each_distribution_once_and_for_one_package():
    owners: dict[str, list[str]] = {}
    for package in FLOORS.data["packages"]:
        for dist in package["distributions"]:
            owners.setdefault(normalize(dist), []).append(package["name"])
    assert {d: names for d, names in owners.items() if len(names) > 1} == {}


def test_cuda_and_rocm_stacks_from_patched_metadata(monkeypatch):
    _patch(monkeypatch, [
        FakeDist("torch", "2.5.1+cu124"), FakeDist("onnxruntime-gpu", "1.20.0"), FakeDist("jaxlib", "0.4.35"),
        FakeDist("jax-cuda12-plugin", "0.4.35"), FakeDist("tensorflow", "2.18.0", ["numpy"]),
    ])
    found = {p.name: p for p in probe_packages(platform="linux")}
    assert found["torch"].build == "cuda" and "CUDA 12.4" in found["torch"].detail
    assert found["onnxruntime-gpu"].build == "cuda"
    assert found["jaxlib"].build == "cpu" and found["jax-cuda12-plugin"].build == "cuda"
    assert found["tensorflow"].build == "unknown"
    _patch(monkeypatch, [FakeDist("torch", "2.4.0+rocm6.1"), FakeDist("onnxruntime-rocm", "1.19.0")])
    found = {p.name: p for p in probe_packages(platform="linux")}
    assert found["torch"].build == "rocm" and found["onnxruntime-rocm"].build == "rocm"


def test_first_distribution_on_path_wins_and_broken_metadata_is_skipped(monkeypatch):
    class Broken:
        metadata = {}
        version = "1"
        requires = None

    _patch(monkeypatch, [FakeDist("numpy", "2.4.6"), Broken(), FakeDist("numpy", "1.26.4")])
    assert [(p.name, p.version) for p in probe_packages()] == [("numpy", "2.4.6")]


def test_never_imports_the_packages(monkeypatch):
    import sys

    before = set(sys.modules)
    probe_packages()
    assert not {"torch", "tensorflow", "jax", "onnxruntime"} & (set(sys.modules) - before)


def test_python_env_kinds(monkeypatch, tmp_path):
    info = probe_python({})
    assert info.version and info.implementation == "cpython" and info.executable
    assert info.env_kind in ("venv", "conda", "system")
    conda = tmp_path / "envs" / "dl"
    (conda / "conda-meta").mkdir(parents=True)
    monkeypatch.setattr(pk.sys, "prefix", str(conda))
    info = probe_python({"CONDA_DEFAULT_ENV": "dl"})
    assert (info.env_kind, info.env_name) == ("conda", "dl")
    # A path-valued CONDA_DEFAULT_ENV is reduced to its name, never the folder.
    info = probe_python({"CONDA_DEFAULT_ENV": "/home/alice/envs/dl"})
    assert info.env_name == "dl"


def test_real_metadata_sees_this_venvs_torch():
    names = {p.name for p in probe_packages()}
    assert "numpy" in names  # a declared dependency of cpudoctor
    assert metadata.version("numpy") in {p.version for p in probe_packages()}


def test_installer_tells_conda_from_pip(monkeypatch):
    """In a conda env PyTorch may come from conda (``pytorch``) or from pip: the fix commands differ."""
    _patch(monkeypatch, [FakeDist("torch", "2.3.1", installer="conda"), FakeDist("numpy", "1.26.4"),
                         FakeDist("torchvision", "0.18.1", installer=None)])
    got = {p.name: p.installer for p in probe_packages()}
    assert got == {"torch": "conda", "numpy": "pip", "torchvision": None}


def test_installer_of_the_running_python_matches_its_dist_info():
    from importlib.metadata import distribution

    numpy = next(p for p in probe_packages() if p.name == "numpy")
    expected = (distribution("numpy").read_text("INSTALLER") or "").strip().lower() or None
    assert numpy.installer == expected
