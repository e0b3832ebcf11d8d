"""The interpreter of an inspected Python process: fake /proc trees for each method, one real process."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from cpudoctor.probes.process.interpreter import process_python
from inspect_fakes import FakeProc


def _env_folder(root: Path, prefix: str) -> None:
    (root / prefix.lstrip("/") / "bin").mkdir(parents=True)
    (root / prefix.lstrip("/") / "bin" / "python3").write_text("")


def test_maps_name_the_environment_torch_came_from(tmp_path):
    _env_folder(tmp_path, "/home/ann/miniconda3/envs/amd_dl")
    lib = "/home/ann/miniconda3/envs/amd_dl/lib/python3.10/site-packages/torch/lib/libtorch_cpu.so"
    found = process_python(tmp_path, 42, environ={"VIRTUAL_ENV": "/elsewhere"}, argv=["python", "train.py"],
                           mapped=["/usr/lib/x86_64-linux-gnu/libc.so.6", lib])
    assert (found.executable, found.prefix, found.found_by) == (
        "/home/ann/miniconda3/envs/amd_dl/bin/python3", "/home/ann/miniconda3/envs/amd_dl", "maps")


def test_activated_environment_from_its_variables(tmp_path):
    _env_folder(tmp_path, "/srv/venv")
    found = process_python(tmp_path, 42, environ={"VIRTUAL_ENV": "/srv/venv"}, argv=["python", "x.py"])
    assert found.executable == "/srv/venv/bin/python3" and found.found_by == "VIRTUAL_ENV"


def test_relative_argv0_resolved_against_the_working_folder(tmp_path):
    _env_folder(tmp_path, "/work/proj/.venv")
    FakeProc(tmp_path).add_process(42, cmdline=[".venv/bin/python3", "train.py"])
    os.symlink("/work/proj", tmp_path / "proc" / "42" / "cwd")
    found = process_python(tmp_path, 42, environ={}, argv=[".venv/bin/python3", "train.py"])
    assert found.executable == "/work/proj/.venv/bin/python3" and found.found_by == "argv[0]"
    assert found.prefix == "/work/proj/.venv"


def test_exe_link_is_the_last_resort(tmp_path):
    FakeProc(tmp_path).add_process(42)
    os.symlink("/usr/bin/python3.11", tmp_path / "proc" / "42" / "exe")
    found = process_python(tmp_path, 42, environ={}, argv=["python", "x.py"])
    assert (found.executable, found.found_by) == ("/usr/bin/python3.11", "exe")
    assert process_python(tmp_path, 43, environ=None, argv=None) is None


@pytest.mark.hardware
def test_a_real_process_is_traced_to_this_environment():
    """A child of this interpreter that loaded numpy: its environment is this one (sys.prefix)."""
    from cpudoctor.probes.process.inspect import inspect_process

    code = "import sys, numpy; sys.stdout.write('ready\\n'); sys.stdout.flush(); sys.stdin.read()"
    proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        insp = inspect_process(proc.pid, seconds=0.2)
        assert insp.is_python and insp.python is not None
        assert Path(insp.python).parent.parent.resolve() == Path(sys.prefix).resolve(), (insp.python, sys.prefix)
    finally:
        proc.stdin.close()
        proc.wait(timeout=30)
