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
import subprocess

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
from cpudoctor.model.software import PackageInfo

pytestmark = [pytest.mark.slow, pytest.mark.alongside,
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

    # Issue 41 item 4: no green "Every installed package's ISA floor is met" beside the red crash.
    isa005 = [f for f in engine.run_rules(report, only={"ISA005"}, strict=True) if f.code == "ISA005"]
    assert not [f for f in isa005 if f.severity == "ok"], [(f.severity, f.title) for f in isa005]

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



# jaxlib's own CPU guard, as its release builds run it at import: CPUID leaf 1, ECX bit 28 (AVX), executed on the
# CPU that runs Python (under qemu-user, QEMU's model), then jaxlib's own words. The fake package carries only
# this guard (jaxlib itself is an 80 MB download); the message is jaxlib's (jaxlib/cpu_feature_guard.c).
JAXLIB_GUARD = b"""
import ctypes, mmap

def _ecx_of_leaf_1():
    code = bytes([0x53, 0xB8, 1, 0, 0, 0, 0x0F, 0xA2, 0x89, 0xC8, 0x5B, 0xC3])  # push rbx; cpuid(1); ecx; pop; ret
    page = mmap.mmap(-1, mmap.PAGESIZE, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
    page.write(code)
    return ctypes.CFUNCTYPE(ctypes.c_uint32)(ctypes.addressof(ctypes.c_char.from_buffer(page)))()

if not _ecx_of_leaf_1() >> 28 & 1:
    raise RuntimeError("This version of jaxlib was built using AVX instructions, which your CPU and/or operating "
                       "system do not support. You may be able work around this issue by building jaxlib from source.")
"""


def test_jaxlib_without_avx_names_jaxlib_its_floor_and_no_reinstall(tmp_path):
    """Issue 41 item 5: jaxlib on a CPU without AVX raised its own error on import and ISA004 said "Reinstall it in
    a clean virtual environment" (the same build fails again). The cause is known: jaxlib needs AVX. The import
    check runs on QEMU's kvm64 (no AVX) in a throw-away venv holding jaxlib's guard."""
    from fake_wheels import Venv, build_wheel

    report = live_report(clean_environ(), children=False)
    report.cpu = probe_cpu(guest_tree(tmp_path / "guest", cpuid_under(MODEL)))
    assert "avx" not in report.cpu.flags
    wheels = tmp_path / "wheels"
    build_wheel(wheels, "jaxlib", "0.4.30", {"jaxlib/__init__.py": JAXLIB_GUARD})
    venv = Venv(tmp_path / "env", wheels)
    subprocess.run([str(venv.bin / "python"), "-m", "pip", "install", "-q", "jaxlib"], env=venv.env(), check=True,
                   capture_output=True, timeout=300)
    python = str(venv.bin / "python")
    result = run_child(ChildSpec([QEMU, "-cpu", MODEL, *script_argv("import_check", "--workload", "jaxlib",
                                                                      python=python)],
                                 what="import jaxlib", timeout=300, env=clean_environ()))
    check = to_import_check("jaxlib", "jaxlib", result)
    assert check.status == "error" and "built using AVX" in check.message, check
    native = run_child(ChildSpec([*script_argv("import_check", "jaxlib", python=python)], what="import jaxlib",
                                 timeout=120, env=clean_environ()))
    assert to_import_check("jaxlib", "jaxlib", native).status == "ok", "this host has AVX: the guard passes"
    report.software.packages = [p for p in report.software.packages if p.name != "jaxlib"] + [
        PackageInfo(name="jaxlib", version="0.4.30")]
    report.software.isa_risks = assess(report.cpu, report.software.packages)
    report.software.import_checks = [check]
    report.software.children_ran = True
    found = engine.run_rules(report, only={"ISA004", "ISA005"}, strict=True)
    [isa004] = [f for f in found if f.code == "ISA004"]
    assert "jaxlib" in isa004.title and "needs avx" in isa004.title.lower(), isa004.title
    assert "jaxlib (JAX) 0.4.30 needs avx, which this CPU lacks" in isa004.why, isa004.why
    assert "clean virtual environment" not in isa004.fix and "fresh-env" not in isa004.snippet
    assert "No stock jaxlib (JAX) release runs on this CPU" in isa004.fix
    assert not [f for f in found if f.code == "ISA005" and "jaxlib" in f.title], "one finding for jaxlib: ISA004's"
