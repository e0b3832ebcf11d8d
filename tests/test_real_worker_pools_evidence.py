"""THR005 needs evidence that DataLoader workers run thread pools, not just numpy installed (issue 26).

Set up for real: a throw-away venv holding this project's real torch and numpy (and every other installed
package) but no OpenCV, probed by the doctor's own children. numpy's BLAS pool is there in every such
environment; it is no evidence that transforms use it, so THR005 stays quiet. Then OpenCV is installed into
that venv with pip (a wheel whose ``cv2`` has OpenCV's thread switches), and THR005 names it.
"""

from __future__ import annotations

import subprocess
import sysconfig
from pathlib import Path

import pytest
from fake_wheels import Venv, build_wheel
from real_situations import clean_environ, live_report, need_module

from cpudoctor.advisor import engine
from cpudoctor.kits.child.runner import ChildSpec, run_child
from cpudoctor.probes.child.scripts import script_argv
from cpudoctor.probes.software.stack import _numpy_info, probe_software

pytestmark = [pytest.mark.slow, pytest.mark.alongside]

OPENCV = ("cv2", "opencv")


def _venv_without_opencv(folder: Path) -> Venv:
    """A venv whose site-packages links to every package installed here except OpenCV's."""
    wheels = folder / "wheels"
    wheels.mkdir(parents=True)
    env = Venv(folder / "env", wheels)
    here = Path(sysconfig.get_paths()["purelib"])
    site = next((env.path / "lib").glob("python*/site-packages"))
    for entry in here.iterdir():
        if entry.name.lower().startswith(OPENCV) or (site / entry.name).exists():
            continue
        (site / entry.name).symlink_to(entry)
    return env


def _thr005(python: str):
    """THR005 for the venv of ``python``: its packages as the probe reads them, numpy's pools as the doctor's
    numpy child measures them there (the same child and reader as the doctor without torch facts)."""
    software = probe_software(Path("/"), children=False, environ=clean_environ(), cache=False, python=python)
    result = run_child(ChildSpec(script_argv("blas_facts", python=python), what="numpy/BLAS facts", timeout=120,
                                 env=clean_environ()))
    software.numpy = _numpy_info(result.data, result)
    software.loaded_libs = list(software.numpy.blas)
    report = live_report(clean_environ(), children=False)
    report.software = software
    return [f for f in engine.run_rules(report, only={"THR005"}, strict=True) if f.code == "THR005"], software


def test_numpy_alone_is_no_evidence_and_opencv_installed_is(tmp_path):
    need_module("torch")
    need_module("numpy")
    env = _venv_without_opencv(tmp_path)
    python = str(env.bin / "python")
    assert subprocess.run([python, "-c", "import numpy"], capture_output=True, timeout=240).returncode == 0
    assert subprocess.run([python, "-c", "import cv2"], capture_output=True, timeout=60).returncode != 0

    found, software = _thr005(python)
    blas = [lib for lib in software.loaded_libs if lib.user_api == "blas" and (lib.num_threads or 0) > 1]
    if not blas:
        pytest.skip("numpy's BLAS runs one thread here: there is no pool to judge")
    assert [f.severity for f in found] == ["ok"], [f.title for f in found]

    # OpenCV for the transforms: pip installs it (OpenCV's thread switches, no native code) into the same venv.
    build_wheel(env.wheels, "opencv-python-headless", "4.10.0.84", {
        "cv2/__init__.py": b"_n = __import__('os').cpu_count()\n"
                           b"def setNumThreads(n):\n    global _n\n    _n = n\n"
                           b"def getNumThreads():\n    return _n\n"})
    installed = env.shell("python -m pip install opencv-python-headless")
    assert installed.returncode == 0, installed.stderr
    found, _ = _thr005(python)
    [finding] = found
    assert finding.severity == "info" and "opencv-python-headless is installed" in finding.title
    assert "cv2.setNumThreads(1)" in finding.snippet
