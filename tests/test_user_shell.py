"""The app in a user's shell, not a clean one: a home folder nothing can be written under.

A read-only home (a locked-down account, a container with ``HOME=/``, a read-only bind mount)
must cost the caches and settings only: the children's cache, QSettings and the report all fall
back, and nothing crashes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

GUI_SCRIPT = Path(sys.executable).with_name("cpudoctor-gui")


@pytest.fixture
def unwritable_home(tmp_path) -> Path:
    """A home where creating anything fails: mode 555 stops a normal user; root ignores modes, so for
    root the home is a file (mkdir under it fails with ENOTDIR, as it fails with EROFS on a read-only mount)."""
    home = tmp_path / "home"
    home.mkdir()
    home.chmod(0o555)
    if os.access(home, os.W_OK):
        home.chmod(0o755)
        home.rmdir()
        home.write_text("not a folder\n")
    return home


def _env(home: Path) -> dict[str, str]:
    """The user's environment with every override of the home-based folders taken away."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("XDG_CACHE_HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "CPUDOCTOR_CACHE_DIR")}
    env["HOME"] = str(home)
    return env


@pytest.mark.slow
@pytest.mark.alongside
def test_doctor_runs_its_children_with_an_unwritable_home(unwritable_home, tmp_path):
    """The full report: the children run (their cache cannot be written) and the JSON is complete."""
    proc = subprocess.run([sys.executable, "-m", "cpudoctor", "doctor", "--format", "json"], capture_output=True,
                          text=True, timeout=300, env=_env(unwritable_home), cwd=tmp_path)
    assert proc.returncode in (0, 1), proc.stderr              # 1 = it found problems
    assert "Traceback" not in proc.stderr, proc.stderr
    data = json.loads(proc.stdout)
    assert data["source"] == "this machine" and data["findings"]
    assert not list(tmp_path.glob("**/software-children.json"))   # no cache fell back into the working folder


def test_window_starts_and_draws_with_an_unwritable_home(unwritable_home, tmp_path):
    """QSettings cannot save the window state: the window still opens, draws and exits cleanly."""
    if not GUI_SCRIPT.exists():
        pytest.fail(f"{GUI_SCRIPT} is missing: install the package (pip install -e .) so the gui-script exists")
    shot = tmp_path / "shot.png"
    env = {**_env(unwritable_home), "QT_QPA_PLATFORM": "offscreen"}
    proc = subprocess.run([str(GUI_SCRIPT), "--screenshot", str(shot), "--screenshot-delay", "300", "--no-children"],
                          capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    assert shot.is_file() and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_window_closed_while_its_background_work_runs_exits_cleanly(tmp_path):
    """The screenshot is taken (and the window closed) at once, while the environment picker still describes a
    slow interpreter: the app waits for that work before Python and Qt are torn down, and exits 0 (a window
    closed early on a busy machine once died of SIGSEGV on the way out)."""
    if not GUI_SCRIPT.exists():
        pytest.fail(f"{GUI_SCRIPT} is missing: install the package (pip install -e .) so the gui-script exists")
    home = tmp_path / "home"
    slow = home / ".virtualenvs" / "slow"
    (slow / "bin").mkdir(parents=True)
    (slow / "pyvenv.cfg").write_text(f"home = {Path(sys.executable).parent}\n")
    python = slow / "bin" / "python"
    python.write_text(f"#!/bin/sh\nsleep 3\nexec {sys.executable} \"$@\"\n")
    python.chmod(0o755)
    shot = tmp_path / "shot.png"
    env = {**_env(home), "QT_QPA_PLATFORM": "offscreen"}
    env.pop("CPUDOCTOR_PYTHON", None)                     # let the picker look for environments itself
    proc = subprocess.run([str(GUI_SCRIPT), "--screenshot", str(shot), "--screenshot-delay", "0", "--no-children"],
                          capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path)
    assert proc.returncode == 0, (proc.returncode, proc.stderr[-2000:])
    assert "Traceback" not in proc.stderr and shot.is_file()
