"""Helpers for tests that set a problem up for real on the machine running them (issue 15, class 8).

Each such test creates the situation with what a user would have (environment
variables, a second real copy of an OpenMP runtime, a package that narrows
the affinity on import, real torch/numpy, several real jobs), runs the probe
children or the inspector, checks the finding, applies the fix CPU Doctor
printed, and checks the problem is gone. Nothing here asserts a fact of the
machine: CPU sets come from ``os.sched_getaffinity`` and skip when the
situation cannot exist here (one CPU, no torch, no second OpenMP runtime).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path
from typing import Any

import pytest

from cpudoctor.probes import probe_cpu, probe_topology
from cpudoctor.kits.child.runner import parse_json_lines
from cpudoctor.probes.child.scripts import script_path
from cpudoctor.probes.software.stack import probe_software
from cpudoctor.model import Meta, Report


def usable_cpus() -> list[int]:
    return sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []


def need_cpus(n: int) -> list[int]:
    cpus = usable_cpus()
    if len(cpus) < n:
        pytest.skip(f"needs {n} usable CPUs to set this up, this process may use {len(cpus)}")
    return cpus


def need_module(name: str) -> None:
    import importlib.util

    if importlib.util.find_spec(name) is None:
        pytest.skip(f"{name} is not installed here")


def clean_environ(**extra: str) -> dict[str, str]:
    """This process's environment without the variables the situations set, plus ``extra``."""
    drop = ("OMP_", "GOMP_", "KMP_", "MKL_", "OPENBLAS_", "ATEN_CPU_CAPABILITY", "DNNL_", "ONEDNN_", "NPY_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
    env.update(extra)
    return env


def live_report(environ: dict[str, str], *, children: bool = True) -> Report:
    """A report of this machine whose software part is probed with ``environ`` (fresh children, no cache)."""
    root = Path("/")
    report = Report(meta=Meta(generated_at="now", root="/", platform=sys.platform),
                    cpu=probe_cpu(root), topology=probe_topology(root))
    report.software = probe_software(root, children, environ=environ, cache=False, timeout=120.0)
    return report


def child_command(script: str, *args: str, python: str | None = None) -> str:
    """The shell words that run a probe child script: what replaces ``python train.py`` in a printed fix."""
    return " ".join([python or sys.executable, str(script_path(script)), *args])


def run_shell(command: str, environ: dict[str, str], timeout: float = 180.0) -> tuple[int, dict[str, Any], str]:
    """Run a printed command line with bash, as a user pastes it; (exit code, merged JSON lines, stderr)."""
    proc = subprocess.run(["bash", "-c", command], env=environ, capture_output=True, text=True, timeout=timeout)
    return proc.returncode, parse_json_lines(proc.stdout), proc.stderr


def make_venv(folder: Path, packages: dict[str, str] | None = None, *, see_project: bool = False) -> str:
    """A real throw-away venv (no pip) with small packages ``{name: __init__ source}``; its python.

    ``see_project`` adds a .pth to this project's site-packages (torch, numpy), as a
    user's environment that has them installed would.
    """
    venv.EnvBuilder(with_pip=False, symlinks=True).create(folder)
    python = folder / "bin" / "python"
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    for name, source in (packages or {}).items():
        (site / name).mkdir(parents=True, exist_ok=True)
        (site / name / "__init__.py").write_text(source)
    if see_project:
        import sysconfig

        (site / "project.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return str(python)


def find_library(*candidates: str) -> Path | None:
    """The first existing shared library among the installed packages' and the system's copies."""
    import ctypes.util
    import glob

    for pattern in candidates:
        for base in (sys.prefix, sys.base_prefix, "/usr/lib", "/usr/lib64", "/usr/lib/x86_64-linux-gnu",
                     "/usr/lib/aarch64-linux-gnu"):
            hits = sorted(glob.glob(os.path.join(base, "**", pattern), recursive=True))
            if hits:
                return Path(hits[0])
    name = ctypes.util.find_library(candidates[0].split(".")[0].removeprefix("lib"))
    return Path(name) if name and os.path.isabs(name) and os.path.exists(name) else None


def loader_package(library: Path, folder: Path) -> str:
    """The __init__ of a package that vendors its own copy of ``library`` and starts it, as wheels do."""
    folder.mkdir(parents=True, exist_ok=True)
    copy = folder / library.name
    shutil.copy2(library, copy)
    return (
        "import ctypes, os\n"
        f"_lib = ctypes.CDLL({str(copy)!r}, mode=os.RTLD_NOW | os.RTLD_GLOBAL)\n"
        "_lib.omp_get_max_threads()  # the runtime initialises on first use, like a package's first parallel loop\n"
    )


def dump(obj: Any) -> str:
    return json.dumps(obj, default=str, indent=1)
