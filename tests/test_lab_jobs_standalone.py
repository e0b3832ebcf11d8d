"""The child jobs run in the user's own Python (3.8 to 3.14) without CPU Doctor: check that they can.

Every file in lab/jobs/ imports only the standard library, its siblings and
torch/numpy, and parses as Python 3.8. Any other interpreter found on this
machine (PATH, pyenv) runs the jobs' settings check isolated (``-I``), which
compiles every module a job imports before torch.
"""

from __future__ import annotations

import ast
import glob
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cpudoctor.lab import jobs
from cpudoctor.lab.runner import job_command

JOB_FILES = sorted(jobs.FOLDER.glob("*.py"))
ALLOWED_TOP = {"torch", "numpy", "torchao", "threadpoolctl", "onnxruntime"}   # onnxruntime: the inference job
SIBLINGS = {p.stem for p in JOB_FILES}


def _stdlib() -> set[str]:
    return set(sys.stdlib_module_names) | {"__future__"}


@pytest.mark.parametrize("path", JOB_FILES, ids=lambda p: p.name)
def test_job_files_import_nothing_of_cpudoctor(path):
    tree = ast.parse(path.read_text(encoding="utf-8"), feature_version=(3, 8))   # also: 3.8 syntax
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        for name in names:
            top = name.split(".")[0]
            assert top in _stdlib() | ALLOWED_TOP | SIBLINGS, f"{path.name} imports {name}"


def _pythons() -> list[str]:
    """One interpreter per Python version found on this machine, 3.8 and newer (none is required: the test then
    checks the running one). Found by name, without starting them, so collecting the tests stays instant."""
    by_version = {f"{sys.version_info[0]}.{sys.version_info[1]}": sys.executable}
    candidates = [shutil.which(f"python3.{minor}") for minor in range(8, 15)]
    candidates += glob.glob(os.path.expanduser("~/.pyenv/versions/3.*/bin/python3.[0-9]*"))
    for exe in candidates:
        if not exe or "shims" in exe or exe.endswith("-config"):
            continue
        match = re.fullmatch(r"python(3\.(\d+))", Path(exe).name)
        version = match.group(1) if match else ""
        if match and int(match.group(2)) >= 8:
            by_version.setdefault(version, os.path.realpath(exe))
    return [by_version[v] for v in sorted(by_version, key=lambda v: int(v.split(".")[1]))]


PYTHONS = _pythons()


@pytest.mark.parametrize("python", PYTHONS)
def test_jobs_start_in_any_python_from_38(python):
    """Bad settings are refused before torch is imported, so this runs even where torch is missing."""
    files = [str(p) for p in JOB_FILES]
    compiled = subprocess.run([python, "-I", "-c", "import sys\nfor f in sys.argv[1:]: compile(open(f).read(), f, 'exec')",
                               *files], capture_output=True, text=True, timeout=60)
    assert compiled.returncode == 0, compiled.stderr[-2000:]
    for job, bad, message in (("train", {"batch_size": 0}, "batch size must be between 1 and 65536, not 0"),
                              ("gemm", {"backends": ["cuda-fp8"]}, "backend must be one of"),
                              ("quant", {"api": "onnx"}, "quantisation API must be one of")):
        out = subprocess.run(job_command(job, bad, python=python), capture_output=True, text=True, timeout=60,
                             stdin=subprocess.DEVNULL, cwd="/")
        assert out.returncode == 2, out.stderr[-2000:]
        line = json.loads(out.stdout.splitlines()[-1])
        assert line["type"] == "error" and line["kind"] == "settings" and message in line["message"]
    probe = "import importlib.util as u; print(all(u.find_spec(m) for m in ('numpy', 'torch')))"
    has_both = subprocess.run([python, "-I", "-c", probe], capture_output=True, text=True, timeout=60).stdout.strip()
    if has_both != "True":      # one clear line naming this Python and what it lacks, not a traceback
        out = subprocess.run(job_command("train", {"steps": 1}, python=python), capture_output=True, text=True,
                             timeout=60, stdin=subprocess.DEVNULL, cwd="/")
        line = json.loads(out.stdout.splitlines()[-1])
        assert out.returncode == 1 and line["kind"] == "missing"
        assert line["message"].startswith(f"{python} cannot import"), line["message"]


def test_a_job_runs_from_a_copy_outside_the_package(tmp_path):
    """The scripts find their siblings by their own folder, not through cpudoctor: a copy elsewhere runs."""
    for p in JOB_FILES:
        shutil.copy(p, tmp_path / p.name)
    out = subprocess.run(job_command(str(tmp_path / "train.py"), {"batch_size": 0}), capture_output=True, text=True,
                         timeout=60, cwd="/")
    assert out.returncode == 2 and "batch size" in out.stdout
    assert Path(job_command("train", {})[4]).parent == jobs.FOLDER          # [python, -I, -B, launcher, job]


def test_the_parent_side_never_imports_torch():
    """Only the child jobs import torch: every parent module (and the jobs' shared kit) imports without it."""
    parent = sorted(p.stem for p in (jobs.FOLDER.parent).glob("*.py") if p.stem != "__init__")
    mods = [f"cpudoctor.lab.{m}" for m in parent] + ["cpudoctor.lab.jobs._jobkit", "cpudoctor.lab.jobs._settings",
                                                     "cpudoctor.lab.jobs._cpumeter"]
    code = (f"import importlib, sys\nfor m in {mods!r}: importlib.import_module(m)\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'PySide6')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "[]"
    assert {"runner", "protocol", "settings", "results", "sweep"} <= set(parent)
