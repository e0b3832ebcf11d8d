"""Finding Python environments: real venvs with fake packages, a fake conda layout, broken interpreters."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from cpudoctor.probes.software import envs_describe
from cpudoctor.probes.software import pyquery
from cpudoctor.probes.software.envs import EnvError, describe, discover, rank, resolve


def make_venv(path: Path, *, torch: str | None = None, cuda: str | None = None, numpy: str | None = None,
              conda: bool = False) -> Path:
    """A real venv (its python runs) with fake packages: dist-info metadata and torch/version.py."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True, timeout=120)
    site = next(path.glob("lib/python3*/site-packages"))
    if torch:
        (site / "torch").mkdir()
        (site / "torch" / "version.py").write_text(
            f"__version__ = '{torch}'\ncuda: Optional[str] = {cuda!r}\nhip: Optional[str] = None\n")
        _dist(site, "torch", torch)
    if numpy:
        _dist(site, "numpy", numpy)
    if conda:
        (path / "conda-meta").mkdir()
        (path / "conda-meta" / "history").write_text("")
    return path


def _dist(site: Path, name: str, version: str) -> None:
    info = site / f"{name}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")


def script(path: Path, body: str) -> Path:
    path.write_text("#!/bin/sh\n" + textwrap.dedent(body))
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """A home with a conda install (two envs, one listed only in environments.txt), a project with a
    .venv, a virtualenvwrapper folder, pipx, and a PATH holding only a private bin folder."""
    base = tmp_path_factory.mktemp("world")
    home = base / "home"
    conda = home / "miniconda3"
    make_venv(conda, conda=True, numpy="1.26.4")                                   # base env
    (conda / "condabin").mkdir()
    make_venv(conda / "envs" / "amd_dl", conda=True, torch="1.13.1+cpu", numpy="1.23.5")
    elsewhere = make_venv(base / "data" / "condaenvs" / "rocm", conda=True, torch="2.3.0+rocm6.0")
    (home / ".conda").mkdir()
    (home / ".conda" / "environments.txt").write_text(f"{conda}\n{elsewhere}\n")
    project = base / "project"
    project.mkdir()
    make_venv(project / ".venv", torch="2.4.0", cuda="12.1", numpy="2.0.1")
    make_venv(home / ".virtualenvs" / "plain", numpy="2.1.0")
    make_venv(home / ".local" / "pipx" / "venvs" / "black")
    bin_dir = base / "bin"
    bin_dir.mkdir()
    environ = {"HOME": str(home), "PATH": str(bin_dir)}
    return {"base": base, "home": home, "project": project, "environ": environ, "cache": base / "cache"}


def _discover(world, **extra_env):
    environ = {**world["environ"], **extra_env}
    return discover(environ, home=world["home"], cwd=world["project"], run_conda=False, cache=world["cache"])


def test_finds_conda_venvs_and_working_folder(world):
    found = {e.name: e for e in _discover(world)}
    assert {"amd_dl", "base", "rocm", "project/.venv", "plain", "black"} <= set(found)
    amd = found["amd_dl"]
    assert (amd.kind, amd.torch, amd.torch_build, amd.numpy) == ("conda", "1.13.1+cpu", "cpu", "1.23.5")
    assert amd.version == ".".join(map(str, sys.version_info[:3]))
    assert found["rocm"].torch_build == "rocm" and "environments.txt" in found["rocm"].found_by[0]
    venv = found["project/.venv"]
    assert (venv.kind, venv.torch_build, venv.torch_detail, venv.in_cwd) == ("venv", "cuda", "CUDA 12.1", True)
    assert found["plain"].torch is None and found["plain"].numpy == "2.1.0"
    assert found["black"].kind == "pipx"


def test_the_likely_training_environment_comes_first(world):
    ranked = _discover(world)
    assert ranked[0].torch is not None and not ranked[0].own
    assert ranked[0].name == "project/.venv"                      # in the working folder, with torch
    assert ranked[-1].kind == "pipx" or not ranked[-1].usable
    active = _discover(world, CONDA_PREFIX=str(world["home"] / "miniconda3" / "envs" / "amd_dl"))
    assert active[0].name == "amd_dl" and active[0].active


def test_own_environment_is_not_the_default_when_another_has_torch(world):
    found = _discover(world)
    own = [e for e in found if e.own]
    assert own and found.index(own[0]) > 0


def counting_runs(monkeypatch) -> list:
    """Every interpreter CPU Doctor runs to ask who it is, from now on."""
    calls: list = []
    real = pyquery.run_all

    def counting(argvs, *args, **kwargs):
        calls.extend(argvs)
        return real(argvs, *args, **kwargs)

    monkeypatch.setattr(pyquery, "run_all", counting)
    return calls


def test_second_listing_uses_the_cache(world, monkeypatch):
    _discover(world)
    calls = counting_runs(monkeypatch)
    _discover(world)
    assert calls == []


def test_cache_notices_a_new_package(world):
    env = world["home"] / ".virtualenvs" / "grows"
    make_venv(env)
    assert {e.name: e for e in _discover(world)}["grows"].torch is None
    site = next(env.glob("lib/python3*/site-packages"))
    (site / "torch").mkdir()
    (site / "torch" / "version.py").write_text("__version__ = '2.13.0+cpu'\n")
    assert {e.name: e for e in _discover(world)}["grows"].torch == "2.13.0+cpu"


def test_resolve_by_name_and_by_path(world):
    listed = _discover(world)
    assert resolve("amd_dl", listed).torch == "1.13.1+cpu"
    venv_python = world["project"] / ".venv" / "bin" / "python"
    assert resolve(str(venv_python)).prefix == str(world["project"] / ".venv")
    assert resolve(str(world["project"] / ".venv")).torch == "2.4.0"          # the folder works too
    with pytest.raises(EnvError, match="no environment of that name.*amd_dl"):
        resolve("nope", listed)


@pytest.mark.parametrize("case, expected", [
    ("missing", "no such file"),
    ("not_python", "not an executable program"),
    ("python2", "Python 2.7.18 is too old"),
    ("crashes", "failed at start-up: boom"),
    ("folder_without_python", "no bin/python"),
])
def test_bad_interpreters_are_one_clear_line(tmp_path, case, expected):
    target = {
        "missing": lambda: tmp_path / "nope" / "python",
        "not_python": lambda: (tmp_path / "data.txt").write_text("x") and tmp_path / "data.txt",
        "python2": lambda: script(tmp_path / "python2", """\
            case "$*" in *-I*) echo "Unknown option: -I" >&2; exit 2;; esac
            printf '2.7.18\\n/opt/py27\\n'
            """),
        "crashes": lambda: script(tmp_path / "python", "echo boom >&2; exit 1\n"),
        "folder_without_python": lambda: tmp_path,
    }[case]()
    env = describe(Path(target), cache=False)
    assert not env.usable and expected in env.error
    with pytest.raises(EnvError, match=expected.split(":")[0]):
        resolve(str(target), cache=False)


def test_an_interpreter_that_hangs_is_bounded(tmp_path, monkeypatch):
    monkeypatch.setattr(envs_describe, "QUERY_TIMEOUT_S", 0.5)
    hang = script(tmp_path / "python", "exec sleep 30\n")
    env = describe(hang, cache=False)
    assert not env.usable and "did not answer" in env.error


def test_cli_lists_environments_named_in_environments_txt_and_the_working_folder(world):
    env = {**world["environ"], "PATH": world["environ"]["PATH"] + os.pathsep + os.path.dirname(sys.executable),
           "CPUDOCTOR_CACHE_DIR": str(world["cache"])}
    out = subprocess.run([sys.executable, "-m", "cpudoctor", "envs", "--format", "json", "--no-conda"],
                         capture_output=True, text=True, cwd=world["project"], env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    names = [e["name"] for e in data["environments"]]
    assert {"amd_dl", "rocm", "project/.venv"} <= set(names)
    assert data["default"] == data["environments"][0]["python"]
    text = subprocess.run([sys.executable, "-m", "cpudoctor", "envs", "--no-conda"], capture_output=True,
                          text=True, cwd=world["project"], env=env, timeout=120)
    assert text.returncode == 0 and "amd_dl" in text.stdout and "1.13.1+cpu" in text.stdout


def test_rank_puts_unusable_last():
    from cpudoctor.probes.software.envs import PythonEnv

    broken = PythonEnv(python="/x/python", prefix="/x", kind="system", name="x", error="no such file")
    plain = PythonEnv(python="/usr/bin/python3", prefix="/usr", kind="system", name="python3", version="3.11.2")
    assert rank([broken, plain])[0] is plain


def test_an_environment_is_model_data_with_serde_and_one_record(world):
    """PythonEnv lives in cpudoctor.model (a result type, not a probe's): it goes to JSON and back exactly, and
    PythonEnv.record is the one way to the report's PythonInfo (two converters before)."""
    from cpudoctor.model import PythonEnv, PythonInfo, from_data, to_data

    found = _discover(world)
    assert all(type(e) is PythonEnv for e in found)
    data = json.loads(json.dumps(to_data(found)))
    assert [from_data(PythonEnv, d) for d in data] == found
    amd = next(e for e in found if e.name == "amd_dl")
    assert amd.record("likely") == PythonInfo(version=amd.version, implementation=amd.implementation,
                                              executable=amd.python, env_kind="conda", env_name="amd_dl",
                                              prefix=amd.prefix, own=False, chosen_by="likely", error=None)
