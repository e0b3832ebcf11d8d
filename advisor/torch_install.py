"""The one place a ``pip install`` command line is built, so PyTorch always comes from its CPU wheel index.

A bare ``pip install torch`` on Linux pulls the multi-GB CUDA build (the very
build TORCH002 tells people to remove). Every finding and page that prints a
pip command (a fresh install, an upgrade, a reinstall, a pinned release range)
builds it here: when a distribution of PyTorch's family is among the packages,
the command carries the index of ``resources/torch_wheels.json`` for the
report's OS and CPU architecture (none on macOS, where PyPI's wheels are the
CPU build, and the last release for Intel Macs). Other packages install from
PyPI as usual.
"""

from __future__ import annotations

import shlex
import subprocess
from dataclasses import dataclass

from cpudoctor.knowledge import TORCH_WHEELS
from cpudoctor.model import Report, arch_family, canonical_arch

# Distributions PyTorch's index serves, built against each other.
TORCH_FAMILY = frozenset({"torch", "torch-cpu", "torchvision", "torchaudio"})


@dataclass(frozen=True)
class Platform:
    os_name: str = "Linux"         # platform.system(): Linux | Windows | Darwin
    arch: str = "x86_64"           # normalised platform.machine()


def normalise_arch(machine: str, os_name: str) -> str:
    arch = canonical_arch(machine) or ""
    if os_name == "Darwin" and arch_family(arch) == "arm":
        return "arm64"                     # Apple's name, as macOS and its wheels spell it
    return arch


def wheel_source(os_name: str, arch: str) -> dict | None:
    """The torch_wheels.json entry for this OS and (normalised) architecture; None: no official build."""
    for entry in TORCH_WHEELS.data["platforms"]:
        if entry["os"] == os_name and arch in entry["arch"]:
            return entry
    return None


def platform_of(report: Report) -> Platform:
    """The OS and CPU architecture a report's commands are for (Linux x86-64 when it does not say)."""
    sw = report.software
    system = (sw.os.system if sw and sw.os else None) or _system_from_platform(report.meta.platform)
    return Platform(system, normalise_arch(report.cpu.arch or "x86_64", system))


def _system_from_platform(platform: str) -> str:
    if platform.startswith("win"):
        return "Windows"
    if platform == "darwin":
        return "Darwin"
    return "Linux"


def is_torch(spec: str) -> bool:
    """``spec`` ("torch", "torchvision<0.20") names a distribution of PyTorch's family."""
    name = spec.split(";")[0]
    for stop in "<>=!~[ ":
        name = name.split(stop)[0]
    return name.strip().lower().replace("_", "-") in TORCH_FAMILY


def _quote(arg: str, os_name: str) -> str:
    if os_name == "Windows":
        return f'"{arg}"' if any(c in arg for c in "<>|&^ ") else subprocess.list2cmdline([arg])
    return shlex.quote(arg)


def pip_install(specs: list[str], platform: Platform | None = None, *, pip: str | None = None,
                upgrade: bool = False, force: bool = False) -> str:
    """``python -m pip install [--upgrade] SPECS [--index-url CPU-INDEX]`` for ``platform``.

    ``pip`` is the command that runs pip ("python -m pip", "py -m pip" on
    Windows by default, or an environment's own interpreter). PyTorch's
    family gets the platform's CPU index, and a bare ``torch`` the platform's
    last release where newer ones dropped it (Intel Macs). "" for PyTorch on a
    platform with no official build.
    """
    platform = platform or Platform()
    pip = pip or ("py -m pip" if platform.os_name == "Windows" else "python -m pip")
    torch = [s for s in specs if is_torch(s)]
    source = wheel_source(platform.os_name, platform.arch) if torch else None
    if torch and source is None:
        return ""
    if source and source.get("pin"):
        specs = [source["pin"] if s == "torch" else s for s in specs]
    words = [pip, "install"] + (["--upgrade"] if upgrade else []) + (["--force-reinstall"] if force else [])
    words += [_quote(s, platform.os_name) for s in specs]
    if source and source.get("index"):
        words += ["--index-url", source["index"]]
    return " ".join(words)


def cpu_index(platform: Platform | None = None) -> str | None:
    """PyTorch's CPU wheel index for ``platform`` (None where PyPI's wheels already are the CPU build)."""
    platform = platform or Platform()
    source = wheel_source(platform.os_name, platform.arch)
    return source.get("index") if source else None
