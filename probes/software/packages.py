"""Installed deep-learning packages and the Python running them, from metadata only.

Importing torch or tensorflow to ask their version can kill the caller with
SIGILL, so this module never imports them: it reads the installed
``*.dist-info`` (:mod:`cpudoctor.probes.software.dists`: bounded, regular files
only, METADATA read only for the packages it knows), which takes milliseconds.
Which distributions to look for comes from the ISA-floor table
(:data:`cpudoctor.knowledge.FLOORS`).
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from cpudoctor.knowledge import FLOORS
from cpudoctor.knowledge.versions import normalize
from cpudoctor.model import PackageInfo, PythonInfo
from cpudoctor.probes.software.dists import SafeDistribution, quick_name
from cpudoctor.probes.software.dists import distributions as safe_distributions

if TYPE_CHECKING:
    import importlib.metadata as metadata


_CUDA_LOCAL = re.compile(r"^cu(\d+)$")
_ROCM_LOCAL = re.compile(r"^rocm(\d+(?:\.\d+)*)$")


def build_kind(dist_name: str, version: str | None, requires: Iterable[str] = (), platform: str = sys.platform) -> tuple[str, str]:
    """``(build, detail)``: cpu | cuda | rocm | xpu | unknown, and the evidence.

    Method 1: the local version label PyTorch's own indexes use (``+cpu``,
    ``+cu121``, ``+rocm6.0``, ``+xpu``). Method 2: the distribution name
    (``onnxruntime-gpu``, ``tensorflow-cpu``, ``jax-cuda12-plugin``). Method 3:
    NVIDIA runtime wheels among the requirements (PyPI's Linux torch is a CUDA
    build without a local label). macOS builds are CPU (+MPS) builds.
    """
    dist = normalize(dist_name)
    local = version.split("+", 1)[1].lower() if version and "+" in version else ""
    for part in local.split("."):
        if part == "cpu":
            return "cpu", "+cpu"
        m = _CUDA_LOCAL.match(part)
        if m:
            digits = m.group(1)
            return "cuda", f"+cu{digits} (CUDA {digits[:-1]}.{digits[-1]})" if len(digits) >= 2 else f"+cu{digits}"
        if part.startswith("rocm"):
            m = _ROCM_LOCAL.match(local) or _ROCM_LOCAL.match(part)
            return "rocm", f"+{m.group(0) if m else part}"
        if part == "xpu":
            return "xpu", "+xpu"
    if dist.endswith("-cpu"):
        return "cpu", "CPU-only distribution"
    if "cuda" in dist or dist.endswith("-gpu"):
        return "cuda", "CUDA distribution"
    if "rocm" in dist:
        return "rocm", "ROCm distribution"
    if any(normalize(r).startswith("nvidia-") for r in requires):
        return "cuda", "depends on NVIDIA CUDA wheels"
    if platform == "darwin":
        return "cpu", "macOS build"
    if dist in ("numpy", "scipy", "zentorch", "torchvision", "torchaudio", "jax", "intel-extension-for-pytorch"):
        return "cpu", ""
    if dist == "jaxlib":
        return "cpu", "CUDA/ROCm support comes from separate plug-ins"
    return "unknown", ""


def installed_distributions(dists: Iterable[metadata.Distribution] | None = None,
                            wanted: set[str] | None = None) -> dict[str, tuple[str, str | None, list[str]]]:
    """Normalised name -> (name as installed, version, requirements) for every distribution (``wanted``: only
    those normalised names; the others' metadata is never read).

    One scan of sys.path instead of one per name; a ``*.dist-info`` folder's name says which
    distribution it is, so only the wanted ones' METADATA is read (bounded, see :mod:`.dists`).
    """
    out: dict[str, tuple[str, str | None, list[str]]] = {}
    for dist in safe_distributions() if dists is None else dists:
        key = normalize(quick_name(dist))
        if not key or key in out or (wanted is not None and key not in wanted):
            continue  # the first on sys.path wins, as import would
        try:
            name = dist.metadata["Name"] or quick_name(dist)
            version = dist.version
        except Exception:  # noqa: BLE001 - broken metadata must not break the probe
            name, version = quick_name(dist), getattr(dist, "folder_version", None)
        if not name:
            continue
        try:
            requires = list(dist.requires or [])
        except Exception:  # noqa: BLE001 - broken metadata must not break the probe
            requires = []
        out[key] = (name, version, requires)
    return out


def probe_packages(dists: Iterable[metadata.Distribution] | None = None, platform: str = sys.platform) -> list[PackageInfo]:
    """Every installed distribution of the known DL packages, in table order."""
    dists = list(safe_distributions() if dists is None else dists)
    known_names = {normalize(d) for k in FLOORS.packages.values() for d in k.distributions}
    installed = installed_distributions(dists, known_names)
    found: list[PackageInfo] = []
    listed: set[str] = set()
    for known in FLOORS.packages.values():
        for dist_name in known.distributions:
            key = normalize(dist_name)
            entry = installed.get(key)
            if entry is None or key in listed:   # one row per installed distribution
                continue
            listed.add(key)
            name, version, requires = entry
            build, detail = build_kind(name, version, requires, platform)
            found.append(PackageInfo(name=normalize(name), version=version, build=build, detail=detail,
                                     installer=installer_of(dist_name, dists)))
    return found


_COMPILED_SUFFIXES = (".so", ".pyd", ".dylib")


def compiled_distributions(dists: Iterable[metadata.Distribution] | None = None) -> list[str]:
    """Installed distributions that ship compiled code (an .so/.pyd/.dylib in their RECORD).

    Reads only the metadata files pip wrote (a byte search of each RECORD, bounded); nothing is
    imported. A distribution without a RECORD (some system packages) is skipped.
    """
    names: dict[str, str] = {}
    for dist in safe_distributions() if dists is None else dists:
        if isinstance(dist, SafeDistribution):
            key = normalize(dist.quick_name)
            if not key or key in names or not dist.ships_compiled():
                continue
            names[key] = dist.display_name()
            continue
        try:
            name = dist.metadata["Name"]
            files = dist.files or []
        except Exception:  # noqa: BLE001 - one broken dist-info must not hide the others
            continue
        if not name or normalize(name) in names:
            continue
        if any(f.name.endswith(_COMPILED_SUFFIXES) or ".so." in f.name for f in files):
            names[normalize(name)] = name
    return sorted(names.values(), key=str.lower)


def installer_of(dist_name: str, dists: Iterable[metadata.Distribution]) -> str | None:
    """``pip``, ``conda``, ``uv``...: the dist-info INSTALLER file (PEP 376), None when absent or unreadable.

    In a conda environment PyTorch may come from conda (package ``pytorch``) or
    from pip (``torch``); the commands to replace it differ.
    """
    key = normalize(dist_name)
    for dist in dists:                       # the first on sys.path wins, as in installed_distributions
        try:
            if normalize(quick_name(dist)) != key:
                continue
            text = dist.read_text("INSTALLER")
        except (KeyError, TypeError, OSError, ValueError):
            return None
        return (text.strip().lower() or None) if text else None
    return None


GENERIC_VENV_NAMES = (".venv", "venv", ".env", "env")


def venv_name(prefix: str) -> str | None:
    """What people call a venv: its folder, or ``project/.venv`` for the generic folder names
    (the picker, ``cpudoctor envs`` and the report name one environment alike)."""
    path = Path(prefix.rstrip("/\\") or prefix)
    if path.name in GENERIC_VENV_NAMES and path.parent.name:
        return f"{path.parent.name}/{path.name}"
    return path.name or None


def probe_python(environ: Mapping[str, str] | None = None) -> PythonInfo:
    """This interpreter: version, implementation, executable, venv/conda env name.

    The executable path is stored as is; exports redact home paths.
    """
    env = os.environ if environ is None else environ
    info = PythonInfo(
        version=".".join(str(p) for p in sys.version_info[:3]),
        implementation=sys.implementation.name,
        executable=sys.executable or None,
    )
    prefix = sys.prefix
    if os.path.isdir(os.path.join(prefix, "conda-meta")):
        info.env_kind = "conda"
        # CONDA_DEFAULT_ENV is "base" or an env name; a path-style value is reduced to its last part.
        name = env.get("CONDA_DEFAULT_ENV") or os.path.basename(prefix.rstrip(os.sep))
        info.env_name = os.path.basename(name.rstrip("/\\")) or None
    elif sys.prefix != getattr(sys, "base_prefix", sys.prefix):
        info.env_kind = "venv"
        info.env_name = venv_name(prefix)
    else:
        info.env_kind = "system"
    return info
