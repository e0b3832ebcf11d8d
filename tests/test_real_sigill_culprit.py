"""ISA003 set up for real (issue 26): which package lacks the instructions, on a guest and under emulation.

The import checks run on QEMU's emulation of a CPU model (``qemu-x86_64 -cpu
kvm64``: no SSSE3/SSE4.x/POPCNT, so no x86-64-v2), exactly as the doctor's own
children do (the import_check script, the child runner, faulthandler's report):

* a kvm64 guest (its /proc/cpuinfo written from the model's CPUID): ``import
  cv2`` dies only because OpenCV imports NumPy 2.4, which needs x86-64-v2. The
  finding must name NumPy and give NumPy's fix, never "upgrade OpenCV";
* qemu-user on this host: /proc/cpuinfo lists the host's flags while Python
  runs on kvm64 (the CPUID cross-check run on the emulated CPU says so, ISA007).
  ISA003 must judge the build against the CPU that runs it: no "needs
  x86-64-v2, this CPU has it", no "current releases run on this CPU".
"""

from __future__ import annotations

import platform

import pytest
from qemu_guest import QEMU, cpuid_under, guest_tree
from real_situations import clean_environ, live_report, need_module

from cpudoctor.advisor import engine
from cpudoctor.kits.child.runner import ChildSpec, run_child
from cpudoctor.probes import probe_cpu
from cpudoctor.probes.child.scripts import script_argv
from cpudoctor.probes.cpu.cpuid_check import CpuidResult, summarise
from cpudoctor.probes.software.importcheck import to_import_check
from cpudoctor.probes.software.isarisk import assess

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(QEMU is None or platform.machine() != "x86_64",
                                 reason="needs qemu-x86_64 (qemu-user) on an x86-64 machine")]
MODEL = "kvm64"


def _numpy_24() -> str:
    need_module("numpy")
    import numpy

    if tuple(int(x) for x in numpy.__version__.split(".")[:2]) < (2, 4):
        pytest.skip(f"needs NumPy 2.4 or later (x86-64-v2), this is {numpy.__version__}")
    return numpy.__version__


def _emulated_check(package: str, module: str):
    """``package``'s import check, run by the doctor's own child script on QEMU's kvm64."""
    result = run_child(ChildSpec([QEMU, "-cpu", MODEL, *script_argv("import_check", "--workload", module)],
                                 what=f"import {module}", timeout=300, env=clean_environ()))
    return to_import_check(package, module, result)


def _isa003(report):
    return [f for f in engine.run_rules(report, only={"ISA003"}, strict=True) if f.code == "ISA003"]


def _says_no_contradiction(finding) -> None:
    text = " ".join((finding.title, finding.why, finding.fix))
    assert "has it" not in text and "current releases run on this CPU" not in text, text
    assert "Upgrade" not in finding.fix, finding.fix


def test_kvm64_guest_opencv_dies_in_numpy_and_the_finding_names_numpy(tmp_path):
    version = _numpy_24()
    need_module("cv2")
    root = guest_tree(tmp_path / "guest", cpuid_under(MODEL))
    report = live_report(clean_environ(), children=False)
    report.cpu = probe_cpu(root)
    report.software.isa_risks = assess(report.cpu, report.software.packages)
    numpy_check, cv2_check = _emulated_check("numpy", "numpy"), _emulated_check("opencv-python", "cv2")
    assert (numpy_check.status, cv2_check.status) == ("crashed", "crashed"), (numpy_check, cv2_check)
    assert cv2_check.crashed_in == "numpy", "faulthandler's report shows import cv2 dying in numpy's code"
    report.software.import_checks = [numpy_check, cv2_check]
    report.software.children_ran = True

    [finding] = _isa003(report)
    assert finding.title.startswith("numpy crashes on import") and "opencv-python" in finding.title
    assert f"numpy {version} needs x86-64-v2" in finding.why and "opencv-python import" in finding.why
    assert finding.snippet == "python -m pip install 'numpy<2.4'"
    assert "opencv" not in finding.fix.lower() and "OpenCV" not in finding.snippet
    _says_no_contradiction(finding)

    # OpenCV alone (NumPy's own check not run): still NumPy's finding, OpenCV taken down with it.
    report.software.import_checks = [cv2_check]
    [alone] = _isa003(report)
    assert alone.title.startswith("numpy crashes") and alone.snippet == "python -m pip install 'numpy<2.4'"


def test_emulated_cpu_is_judged_by_the_cpu_that_runs_python_not_by_proc_cpuinfo():
    version = _numpy_24()
    report = live_report(clean_environ(), children=False)
    if "popcnt" not in report.cpu.flags or "sse4_2" not in report.cpu.flags:
        pytest.skip("this host itself lacks x86-64-v2: there is nothing for /proc/cpuinfo to overstate")
    # The CPUID cross-check, run on the emulated CPU as the doctor's child would be under qemu-user.
    emulated = cpuid_under(MODEL)
    report.cpu.cpuid_check = summarise(report.cpu, CpuidResult(**{k: v for k, v in emulated.items()
                                                                  if k in CpuidResult.__dataclass_fields__}))
    assert "popcnt" in report.cpu.cpuid_check.missing_flags
    report.software.isa_risks = assess(report.cpu, report.software.packages)   # the probe reads /proc/cpuinfo
    check = _emulated_check("numpy", "numpy")
    assert check.status == "crashed" and check.signal_name == "SIGILL"
    report.software.import_checks = [check]
    report.software.children_ran = True

    [finding] = _isa003(report)
    assert f"numpy {version} needs x86-64-v2, which the CPU that runs Python (emulated, see ISA007) lacks" in finding.why
    assert finding.fix.startswith("Run the job on the host CPU") and "numpy<2.4" in finding.fix
    assert finding.snippet == "python -m pip install 'numpy<2.4'"
    _says_no_contradiction(finding)
    codes = {f.code for f in engine.run_rules(report, strict=True) if f.severity == "error"}
    assert {"ISA003", "ISA007"} <= codes, "the emulation is named beside the crash"

