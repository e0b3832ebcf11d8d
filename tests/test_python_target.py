"""Describing another Python environment (``--python``): real venvs with fake packages, bad interpreters,
and the child scripts on every Python 3.8+ this machine has."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from cpudoctor.probes import probe_software
from cpudoctor.probes.child.scripts import FOLDER as SCRIPTS
from cpudoctor.probes.software.envs import discover

# A fake torch that answers the facts child like a real CPU build of the chosen version would.
FAKE_TORCH = '''
__version__ = "{version}"
class _Cpu:
    @staticmethod
    def get_cpu_capability():
        return "DEFAULT"
class _Flag:
    @staticmethod
    def is_available():
        return True
class backends:
    cpu = _Cpu
    mkl = _Flag
    mkldnn = _Flag
class __config__:
    @staticmethod
    def show():
        return "PyTorch built with:\\n  - Intel(R) Math Kernel Library Version 2020.0.2\\n"
    @staticmethod
    def parallel_info():
        return "ATen parallel backend: OpenMP\\n"
class version:
    cuda = None
    hip = None
def get_num_threads():
    return 1
def get_num_interop_threads():
    return 1
'''


def venv_with(path: Path, *, numpy: str | None = None, torch: str | None = None, sitecustomize: str = "") -> Path:
    """A real venv whose fake packages carry real dist-info metadata; returns its interpreter."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True, timeout=120)
    site = next(path.glob("lib/python3*/site-packages"))
    for name, version, body in (("numpy", numpy, f"__version__ = '{numpy}'\n"),
                                ("torch", torch, FAKE_TORCH.format(version=torch))):
        if version is None:
            continue
        (site / name).mkdir()
        (site / name / "__init__.py").write_text(body)
        if name == "torch":
            (site / "torch" / "version.py").write_text(f"__version__ = '{version}'\ncuda = None\nhip = None\n")
        info = site / f"{name}-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    if sitecustomize:
        (site / "sitecustomize.py").write_text(textwrap.dedent(sitecustomize))
    return path / "bin" / "python"


def _cli(*args: str, cwd: Path, home: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "HOME": str(home), "CPUDOCTOR_CACHE_DIR": str(home / "cache")}
    env.pop("CPUDOCTOR_PYTHON", None)
    return subprocess.run([sys.executable, "-m", "cpudoctor", *args], capture_output=True, text=True, cwd=cwd,
                          env=env, timeout=300)


@pytest.fixture(scope="module")
def envs(tmp_path_factory):
    base = tmp_path_factory.mktemp("targets")
    return {
        "base": base,
        "numpy_only": venv_with(base / "numpy_only", numpy="1.26.4"),
        "old_torch": venv_with(base / "old_torch", numpy="1.23.5", torch="1.13.1+cpu"),
    }


@pytest.mark.slow
@pytest.mark.alongside
def test_report_describes_the_chosen_environment(envs):
    out = _cli("report", "--python", str(envs["numpy_only"]), "--format", "json", cwd=envs["base"],
               home=envs["base"])
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    py = report["software"]["python"]
    assert py["chosen_by"] == "--python" and py["own"] is False and py["env_name"] == "numpy_only"
    assert {p["name"]: p["version"] for p in report["software"]["packages"]} == {"numpy": "1.26.4"}
    assert report["software"]["torch"]["status"] == "not_installed"
    assert {f["code"]: f["severity"] for f in report["findings"]}["TORCH001"] == "warning"
    text = _cli("doctor", "--python", str(envs["numpy_only"]), "--fast", cwd=envs["base"], home=envs["base"])
    assert "Python environment: numpy_only (venv" in text.stdout and "chosen with --python" in text.stdout


@pytest.mark.slow
@pytest.mark.alongside
def test_children_run_in_the_target_and_never_share_answers(envs, tmp_path):
    """The torch facts come from the target's (fake) torch; the cache keeps the two environments apart."""
    target = probe_software(python=str(envs["old_torch"]), cache=tmp_path)
    assert target.torch.status == "ok" and target.torch.version == "1.13.1+cpu", target.torch
    assert target.torch.cpu_capability == "DEFAULT" and target.torch.mkl_version == "2020.0.2"
    assert target.python.executable == str(envs["old_torch"]) and not target.python.own
    again = probe_software(python=str(envs["old_torch"]), cache=tmp_path)
    assert again.children_cached and again.torch.version == "1.13.1+cpu"
    other = probe_software(python=str(envs["numpy_only"]), cache=tmp_path)
    assert not other.children_cached and other.torch.status == "not_installed"


@pytest.mark.parametrize("bad, words", [
    ("/nonexistent/bin/python", "no such file"),
    ("no-such-env", "no environment of that name"),
])
def test_bad_python_is_one_line_exit_2(envs, bad, words):
    out = _cli("doctor", "--python", bad, "--fast", cwd=envs["base"], home=envs["base"])
    assert out.returncode == 2 and words in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1 and "Traceback" not in out.stderr


def test_python_with_a_captured_tree_or_saved_report_is_a_usage_error(envs, tmp_path):
    saved = tmp_path / "r.json"
    saved.write_text("{}")
    for extra in (["--root", str(tmp_path)], ["--from-report", str(saved)]):
        out = _cli("doctor", "--python", str(envs["numpy_only"]), *extra, cwd=envs["base"], home=envs["base"])
        assert out.returncode == 2 and "--python" in out.stderr and "Traceback" not in out.stderr


@pytest.mark.slow
@pytest.mark.alongside
def test_an_interpreter_that_hangs_at_start_costs_a_timeout_not_the_report(tmp_path):
    hang = venv_with(tmp_path / "hangs", numpy="1.26.4", sitecustomize="import time\ntime.sleep(600)\n")
    sw = probe_software(python=str(hang), timeout=3.0, cache=False)
    assert sw.python.executable == str(hang) and sw.python.version          # described from its files
    assert [p.name for p in sw.packages] == ["numpy"]
    check = {c.package: c for c in sw.import_checks}["numpy"]
    assert check.status == "timeout", check


def test_default_is_the_likely_training_environment_not_cpu_doctors_own(envs, tmp_path):
    """In a folder whose .venv has torch, that .venv is described, not CPU Doctor's own environment."""
    project = tmp_path / "project"
    project.mkdir()
    venv_with(project / ".venv", torch="2.1.0+cpu")
    out = _cli("report", "--fast", "--format", "json", "--no-findings", cwd=project, home=tmp_path)
    assert out.returncode == 0, out.stderr
    py = json.loads(out.stdout)["software"]["python"]
    assert py["chosen_by"] == "working-folder" and py["own"] is False
    assert py["prefix"] == "~/project/.venv"                    # the home folder is redacted, like every path


def _pythons_38_plus() -> list[str]:
    found = [e for e in discover(run_conda=False, cache=False) if e.usable]
    return sorted({e.python for e in found})


@pytest.mark.slow
@pytest.mark.alongside
@pytest.mark.parametrize("script, args, expect", [
    ("import_check.py", ["json"], "seconds"),
    ("torch_facts.py", [], "torch"),                  # its facts, or torch_error where it is not installed
    ("blas_facts.py", [], "numpy"),
])
def test_child_scripts_run_on_every_python_38_plus_found_here(script, args, expect):
    """The scripts run in the user's environment, whatever its Python (3.8 to 3.14): each one found on this
    machine runs each script isolated (-I) and answers in JSON (a missing torch or numpy is an answer)."""
    pythons = _pythons_38_plus()
    assert pythons, "not even CPU Doctor's own interpreter was found"
    for python in pythons:
        out = subprocess.run([python, "-I", str(SCRIPTS / script), *args], capture_output=True, text=True,
                             timeout=120, env={"PATH": os.environ.get("PATH", "")})
        lines = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
        keys = {k for obj in lines for k in obj}
        assert any(k.startswith(expect) for k in keys), (python, out.stdout, out.stderr[-800:])
        assert "Traceback" not in out.stderr or "ModuleNotFoundError" in out.stderr, (python, out.stderr[-800:])


@pytest.mark.slow
@pytest.mark.alongside
def test_the_training_job_runs_in_a_second_real_venv(tmp_path):
    """`bench train --python OTHER` trains in that interpreter: a second real venv that sees this torch through
    a .pth file (as a shared site folder would). The job runs there by path and imports nothing of CPU Doctor
    (tests/test_lab_jobs_standalone.py checks the scripts themselves)."""
    import site

    other = tmp_path / "other"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(other)], check=True, timeout=120)
    own_site = next(p for p in site.getsitepackages() if (Path(p) / "torch").is_dir())
    other_site = next(other.glob("lib/python3*/site-packages"))
    (other_site / "shared.pth").write_text(own_site + "\n")
    python = other / "bin" / "python"
    out = subprocess.run([sys.executable, "-m", "cpudoctor", "bench", "train", "--python", str(python), "--steps", "6",
                          "--seconds", "600", "--json", "--quiet"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    data = json.loads(out.stdout)
    assert data["status"] == "ok", data["message"]
    assert data["result"]["python"] == str(python) and data["result"]["steps"] == 6
    assert data["environment"].startswith("other (venv")
