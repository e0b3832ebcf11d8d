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

from cpudoctor.advisor.torch_install import Platform, normalise_arch, pip_install, wheel_source
from cpudoctor.probes.software.envs import PythonEnv

__all__ = ["NEW_ENV_NAME", "TorchSetup", "install_command", "install_target", "normalise_arch", "torch_setup",
           "wheel_source"]

NEW_ENV_NAME = "torch-cpu"      # the folder of the environment the command creates when none is fit


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
    platform = Platform(os_name, arch)
    if target is not None:
        return pip_install(["torch"], platform, pip=f"{_quote(target.python, os_name)} -m pip"), source
    if os_name == "Windows":
        folder = rf"%USERPROFILE%\{NEW_ENV_NAME}"
        return f"py -m venv {folder} && " + pip_install(["torch"], platform, pip=f"{folder}\\Scripts\\python -m pip"), source
    folder = f"~/{NEW_ENV_NAME}"
    return f"python3 -m venv {folder} && " + pip_install(["torch"], platform, pip=f"{folder}/bin/python -m pip"), source


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
