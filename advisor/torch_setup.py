"""Where the training lab's PyTorch can come from, and the install command when no environment has it.

The lab's jobs run in one of the user's Python environments (the app itself
carries no torch: a build made for a newer CPU would kill it with SIGILL).
When none of the environments found has torch, the Training page says so and
gives the command that installs PyTorch's *CPU* build for this CPU: which
index (a bare ``pip install torch`` on Linux pulls the multi-GB CUDA build),
which version for an Intel Mac, or that no official build exists for this
architecture. The knowledge is data (``resources/torch_wheels.json``); the
words are in :mod:`cpudoctor.render.envs`. No Qt, no torch, nothing run.
"""

from __future__ import annotations

import shlex
import subprocess
from dataclasses import dataclass, field

from cpudoctor.knowledge import TORCH_WHEELS
from cpudoctor.probes.software.envs import PythonEnv

NEW_ENV_NAME = "torch-cpu"      # the folder of the environment the command creates when none is fit
_ARCH_ALIASES = {"amd64": "x86_64", "x64": "x86_64", "arm64": "aarch64", "armv8": "aarch64"}


@dataclass
class TorchSetup:
    """What the training lab can run on, and what to run when it cannot."""

    with_torch: list[PythonEnv] = field(default_factory=list)   # usable environments that have torch
    target: PythonEnv | None = None       # where the command installs; None: it creates NEW_ENV_NAME
    command: str = ""                     # the install command; "" when an environment has torch already
    supported: bool = True                # an official PyTorch build exists for this OS and CPU
    os_name: str = ""
    arch: str = ""
    note: str = ""                        # what the platform's entry says (macOS builds, a version cap)
    new_env: str = NEW_ENV_NAME           # the folder the command creates when there is no target

    @property
    def has_torch(self) -> bool:
        return bool(self.with_torch)


def normalise_arch(machine: str, os_name: str) -> str:
    arch = (machine or "").strip().lower()
    if os_name == "Darwin" and arch in ("arm64", "aarch64"):
        return "arm64"                     # Apple's name, as macOS and its wheels spell it
    return _ARCH_ALIASES.get(arch, arch)


def wheel_source(os_name: str, arch: str) -> dict | None:
    """The torch_wheels.json entry for this OS and (normalised) architecture; None: no official build."""
    for entry in TORCH_WHEELS.data["platforms"]:
        if entry["os"] == os_name and arch in entry["arch"]:
            return entry
    return None


def install_target(envs: list[PythonEnv]) -> PythonEnv | None:
    """The environment to install into: the best-ranked usable venv/conda/pyenv one.

    Not a system Python (Debian, Ubuntu and Fedora refuse pip there: PEP 668),
    not a pipx tool's venv and not CPU Doctor's own; then a new venv is better.
    """
    for env in envs:
        if env.usable and not env.own and env.kind in ("venv", "conda", "pyenv"):
            return env
    return None


def _quote(arg: str, os_name: str) -> str:
    return subprocess.list2cmdline([arg]) if os_name == "Windows" else shlex.quote(arg)


def install_command(os_name: str, arch: str, target: PythonEnv | None) -> tuple[str, dict | None]:
    """The command that installs PyTorch's CPU build here, and the platform entry it used."""
    source = wheel_source(os_name, arch)
    if source is None:
        return "", None
    pip_args = [source.get("pin") or "torch"]
    if source.get("index"):
        pip_args += ["--index-url", source["index"]]
    if target is not None:
        python = _quote(target.python, os_name)
        return f"{python} -m pip install {' '.join(pip_args)}", source
    if os_name == "Windows":
        folder = rf"%USERPROFILE%\{NEW_ENV_NAME}"
        return (f"py -m venv {folder} && {folder}\\Scripts\\python -m pip install {' '.join(pip_args)}"), source
    folder = f"~/{NEW_ENV_NAME}"
    return f"python3 -m venv {folder} && {folder}/bin/python -m pip install {' '.join(pip_args)}", source


def torch_setup(envs: list[PythonEnv], os_name: str, machine: str) -> TorchSetup:
    """Judge the environments found (``envs.discover()``) for the lab on this OS and CPU architecture."""
    arch = normalise_arch(machine, os_name)
    with_torch = [e for e in envs if e.usable and e.torch and e.kind != "pipx"]
    setup = TorchSetup(with_torch=with_torch, os_name=os_name, arch=arch)
    if with_torch:
        return setup
    setup.target = install_target(envs)
    setup.command, source = install_command(os_name, arch, setup.target)
    setup.supported = source is not None
    setup.note = (source or {}).get("note", "")
    return setup
