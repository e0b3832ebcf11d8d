"""ISA floors, set up for real: pip installs a package into a throw-away venv, CPU Doctor reads what pip wrote,
the advisor prints a fix, the fix is run exactly as printed, and the finding is gone.

The CPU is a real machine's (the corpus K10 Opteron: no SSSE3/SSE4.x, no AVX); the packages are fake wheels
with real metadata (tests/fake_wheels.py), so nothing below its floor is ever imported here.
"""

from __future__ import annotations

import pytest
from conftest import machine_root
from fake_wheels import Venv, build_wheel

from cpudoctor import advisor
from conftest import probe_tree
from cpudoctor.knowledge import FLOORS
from cpudoctor.probes.software.isarisk import assess
from cpudoctor.model import Software
from cpudoctor.probes.software.packages import compiled_distributions, probe_packages

K10 = "archspec-scientific7-k10"


def report_for(root, venv: Venv):
    """A report of the machine under ``root`` with the packages installed in ``venv``."""
    report = probe_tree(root, software=False)
    dists = venv.distributions()
    packages = probe_packages(dists)
    report.software = Software(packages=packages, isa_risks=assess(report.cpu, packages),
                               compiled_unknown=FLOORS.compiled_without_floor(compiled_distributions(dists)))
    return report


def by_code(report):
    out: dict[str, list] = {}
    for f in advisor.diagnose(report, only={"ISA005", "ISA008"}):
        out.setdefault(f.code, []).append(f)
    return out


@pytest.mark.slow
@pytest.mark.alongside
def test_numpy_24_below_its_floor_then_the_printed_fix(tmp_path, corpus):
    wheels = tmp_path / "wheels"
    for version in ("2.3.5", "2.4.0"):
        build_wheel(wheels, "numpy", version)
    build_wheel(wheels, "fastthing", "1.0", {"fastthing/_core.cpython-311-x86_64-linux-gnu.so": b"not code"})
    venv = Venv(tmp_path / "venv", wheels)
    installed = venv.shell("python -m pip install numpy==2.4.0 fastthing")
    assert installed.returncode == 0, installed.stderr

    found = by_code(report_for(machine_root(K10), venv))
    error = found["ISA005"][0]
    assert error.severity == "error" and error.title.startswith("numpy 2.4.0 needs x86-64-v2 (")
    assert "numpy.org" in error.why                         # the floor's source goes with the finding
    assert error.snippet == "python -m pip install 'numpy<2.4'"

    fixed = venv.shell(error.snippet)                        # the fix, exactly as printed
    assert fixed.returncode == 0, fixed.stderr

    found = by_code(report_for(machine_root(K10), venv))
    ok = found["ISA005"][0]
    assert ok.severity == "ok"
    assert "1 other compiled package unknown (fastthing)" in ok.title   # compiled, not in the table: unknown
    trap = [f for f in found["ISA008"] if f.severity == "warning"]
    assert [f.title for f in trap] == ["NumPy 2.3.5 runs here, but NumPy 2.4 and later will not"]


@pytest.mark.slow
@pytest.mark.alongside
def test_a_package_whose_current_releases_run_is_told_to_upgrade(tmp_path, corpus):
    """torch 1.6.0 shipped AVX in its default path (pytorch#43300): on a CPU without AVX the fix is an upgrade."""
    wheels = tmp_path / "wheels"
    for version in ("1.6.0", "1.7.0"):
        build_wheel(wheels, "torch", version)
    venv = Venv(tmp_path / "venv", wheels)
    assert venv.shell("python -m pip install torch==1.6.0").returncode == 0
    error = by_code(report_for(machine_root(K10), venv))["ISA005"][0]
    assert error.severity == "error" and "avx" in error.title and "43300" in error.why
    # PyTorch from its CPU index, as everywhere (a bare upgrade on Linux pulls the CUDA build; issue 26).
    assert error.snippet == "python -m pip install --upgrade torch --index-url https://download.pytorch.org/whl/cpu"
    assert venv.shell(error.snippet).returncode == 0
    assert by_code(report_for(machine_root(K10), venv))["ISA005"][0].severity == "ok"


def test_a_first_computation_that_died_in_numpy_names_numpy_s_floor(corpus):
    """Issue 41 item 5 (KERNEL001): torch imported, its first computation died of SIGILL inside NumPy's code (NumPy
    2.4 on the K10, which has no x86-64-v2). KERNEL001 said "a CPU-detection or build bug ... Update torch"; the
    cause is known: NumPy 2.4 needs x86-64-v2, and the release that runs is named, as ISA003 does."""
    from cpudoctor.model.software import ImportCheck, PackageInfo

    report = probe_tree(machine_root(K10), software=False)
    packages = [PackageInfo("numpy", "2.4.0"), PackageInfo("torch", "2.9.1", build="cpu")]
    report.software = Software(packages=packages, isa_risks=assess(report.cpu, packages), children_ran=True,
                               import_checks=[ImportCheck("torch", "torch", status="ok", stage="workload torch",
                                                          workload_status="crashed", signal=4, signal_name="SIGILL",
                                                          crashed_in="numpy")])
    found = advisor.diagnose(report, only={"KERNEL001", "ISA005"})
    [kernel] = [f for f in found if f.code == "KERNEL001"]
    assert "NumPy 2.4.0 needs x86-64-v2" in kernel.title and "which this CPU lacks" in kernel.why
    assert kernel.snippet == "python -m pip install 'numpy<2.4'" and "Update torch" not in kernel.fix
    assert not [f for f in found if f.code == "ISA005" and "numpy" in f.title], "one finding for NumPy: KERNEL001's"
