"""Finding Python environments laid out the Windows way (conda, venvs with Scripts\\python.exe, the py launcher).

Where to look comes from the environment variables (USERPROFILE, LOCALAPPDATA,
ProgramData, PATH), so a Windows home is built here as folders and the
discovery is asked for its candidates; nothing is run but a fake ``py``.
"""

from __future__ import annotations

import stat
from pathlib import Path

from cpudoctor.probes.software import envs, envs_find


def _exe(path: Path, text: str = "") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def _conda_env(prefix: Path) -> Path:
    (prefix / "conda-meta").mkdir(parents=True)
    return _exe(prefix / "python.exe")                     # conda on Windows: python.exe at the root


def _venv(prefix: Path) -> Path:
    prefix.mkdir(parents=True)
    (prefix / "pyvenv.cfg").write_text("home = C:\\Python312\n")
    return _exe(prefix / "Scripts" / "python.exe")


def test_windows_conda_installs_venvs_and_the_py_launcher(tmp_path):
    home, local, programdata = tmp_path / "Users" / "me", tmp_path / "AppData" / "Local", tmp_path / "ProgramData"
    _conda_env(home / "Anaconda3")                          # per-user Anaconda (base)
    dl = home / "Anaconda3" / "envs" / "amd_dl"
    _conda_env(dl)
    _conda_env(local / "miniforge3" / "envs" / "forge")
    _conda_env(programdata / "Miniconda3")                  # all-users install
    listed = tmp_path / "D" / "envs" / "elsewhere"
    _conda_env(listed)
    (home / ".conda").mkdir()
    (home / ".conda" / "environments.txt").write_text(f"{listed}\n")
    wrapper = home / "Envs" / "proj"
    python = _venv(wrapper)
    poetry = local / "pypoetry" / "Cache" / "virtualenvs" / "app-x1y2-py3.12"
    _venv(poetry)
    store = _exe(tmp_path / "store" / "python.exe")
    bin_dir = tmp_path / "bin"
    _exe(bin_dir / "py", f"#!/bin/sh\nprintf ' -V:3.12 *        {store}\\n -V:3.11          C:\\\\Program Files\\\\Python311\\\\python.exe\\n'\n")
    environ = {"USERPROFILE": str(home), "LOCALAPPDATA": str(local), "ProgramData": str(programdata),
               "PATH": str(bin_dir)}
    ctx = envs_find.Context.current(environ, None, tmp_path)
    assert ctx.home == home                                  # no HOME on Windows: USERPROFILE
    found = envs_find.Found()
    envs_find.conda_candidates(ctx, found, run_conda=False, cache=None)
    conda = found.candidates
    assert {home / "Anaconda3", dl, local / "miniforge3" / "envs" / "forge", programdata / "Miniconda3",
            listed} <= set(conda)
    assert conda[listed] == "~/.conda/environments.txt"
    found = envs_find.Found()
    envs_find.venv_candidates(ctx, found)
    venvs = found.candidates
    assert venvs[wrapper].startswith("virtualenvwrapper-win") and venvs[poetry] == "poetry"
    assert envs_find.interpreter_of(wrapper) == python            # Scripts\python.exe
    assert envs_find.interpreter_of(dl) == dl / "python.exe"
    found = envs_find.Found()
    envs_find.py_launcher_candidates(ctx, found, cache=None)
    assert found.candidates == {store: "py launcher",
                                Path("C:\\Program Files\\Python311\\python.exe"): "py launcher"}


def test_py_list_formats_of_old_and_new_launchers():
    text = (" -V:3.12 *        C:\\Users\\me\\AppData\\Local\\Programs\\Python\\Python312\\python.exe\n"
            " -V:ContinuumAnalytics/Anaconda39-64 C:\\Users\\me\\anaconda3\\python.exe\n"
            " -3.9-64        C:\\Python39\\python.exe\n"
            "Installed Pythons found by py Launcher for Windows\n")
    assert envs.parse_py_list(text) == ["C:\\Users\\me\\AppData\\Local\\Programs\\Python\\Python312\\python.exe",
                                        "C:\\Users\\me\\anaconda3\\python.exe", "C:\\Python39\\python.exe"]
    assert envs.parse_py_list("garbage\x00\n" * 3) == []


def test_no_py_launcher_no_candidates(tmp_path):
    ctx = envs_find.Context.current({"PATH": str(tmp_path)}, tmp_path, tmp_path)
    found = envs_find.Found()
    envs_find.py_launcher_candidates(ctx, found, cache=None)
    assert found.candidates == {}


def test_a_py_launcher_that_hangs_is_stopped_and_the_default_never_runs_it(tmp_path, monkeypatch):
    """``py -0p`` runs only for the listing, under its own deadline (a launcher that never answers is
    stopped, and lends no candidate); deciding the default runs no tool at all."""
    ran = tmp_path / "ran"
    bin_dir = tmp_path / "bin"
    _exe(bin_dir / "py", f"#!/bin/sh\necho x >> '{ran}'\nexec sleep 600\n")
    monkeypatch.setattr(envs_find, "PY_LAUNCHER_TIMEOUT_S", 0.5)
    environ = {"USERPROFILE": str(tmp_path), "PATH": str(bin_dir)}
    found = envs_find.Found()
    envs_find.py_launcher_candidates(envs_find.Context.current(environ, tmp_path, tmp_path), found, cache=None)
    assert found.candidates == {} and ran.exists()
    ran.unlink()
    envs.decide(environ=environ, home=tmp_path, cwd=tmp_path, cache=False, ask=False)
    assert not ran.exists()
