"""A guest's hypervisor is named from CPUID's hypervisor leaf (0x40000000) when DMI does not name it.

Issue 26: a KVM guest was never named KVM ("DMI does not name it") although CPUID said ``KVMKVMKVM``.
"""

from __future__ import annotations

import platform
import re
import shutil
import subprocess

import pytest

from cpudoctor.model import OsInfo
from cpudoctor.probes.child.scripts.cpuid import signature
from cpudoctor.probes.software.osinfo import UNNAMED_HYPERVISOR, hypervisor_from_cpuid, name_hypervisor

# lscpu's words for the hypervisors (util-linux sys-utils/lscpu-virt.c hv_vendors) -> ours
LSCPU = {"KVM": "kvm", "Microsoft": "hyperv", "VMware": "vmware", "Xen": "xen", "bhyve": "bhyve",
         "Parallels": "parallels", "ACRN": "acrn", "QNX": "qnx", "Apple": "apple"}


def _lscpu_vendor() -> str | None:
    if shutil.which("lscpu") is None:
        return None
    out = subprocess.run(["lscpu"], capture_output=True, text=True, env={"LC_ALL": "C", "PATH": "/usr/bin:/bin"})
    m = re.search(r"^Hypervisor vendor:\s*(\S+)", out.stdout, re.MULTILINE)
    return m.group(1) if m else None


def test_signatures_and_names():
    assert signature(b"KVMKVMKVM\0\0\0") == "KVMKVMKVM" and signature(b"\0" * 12) is None
    assert signature(b"Microsoft Hv") == "Microsoft Hv"
    assert hypervisor_from_cpuid("KVMKVMKVM") == "kvm" and hypervisor_from_cpuid("Microsoft Hv") == "hyperv"
    assert hypervisor_from_cpuid(" lrpepyh  vr") == "parallels" and hypervisor_from_cpuid("NoSuchHV") is None


def test_dmi_silent_cpuid_names_it_dmi_named_stays():
    os_info, notes = name_hypervisor(OsInfo(vm=True), ["other", UNNAMED_HYPERVISOR], "KVMKVMKVM")
    assert os_info.virtualization == "kvm" and os_info.vm is True
    assert notes == ["other", "which hypervisor: kvm, from CPUID's hypervisor leaf ('KVMKVMKVM'); DMI does not name it"]
    named, same = name_hypervisor(OsInfo(vm=True, virtualization="amazon"), [], "KVMKVMKVM")
    assert named.virtualization == "amazon" and same == []          # DMI's product name says more


def test_a_host_under_its_own_hypervisor_is_not_called_a_guest():
    """Windows with memory integrity, Hyper-V or WSL2 runs itself under Hyper-V: CPUID says 'Microsoft Hv' on
    bare metal. Where the OS's facts say bare metal (firmware names a real machine, macOS's hv_vmm_present 0)
    or a Windows machine's firmware is unknown, the leaf names no VM; a KVM signature on Windows still does."""
    for os_info in (OsInfo(system="Windows", vm=False), OsInfo(system="Windows"), OsInfo(system="Darwin", vm=False)):
        same, notes = name_hypervisor(os_info, [], "Microsoft Hv")
        assert same is os_info and notes == []
    guest, _ = name_hypervisor(OsInfo(system="Windows"), [], "KVMKVMKVM")
    assert guest.virtualization == "kvm" and guest.vm is True


@pytest.mark.hardware
@pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"), reason="CPUID is x86-only")
def test_this_guest_is_named_as_lscpu_names_it():
    """lscpu reads the same leaf with its own code: the independent source. A bare-metal machine has no leaf."""
    from cpudoctor.pipeline import _CpuidChild
    from tests.conftest import probe_tree

    vendor = _lscpu_vendor()
    report = _CpuidChild().checked(probe_tree())      # the pipeline's own way to run the check
    check = report.cpu.cpuid_check
    assert check is not None and check.error is None, check
    if vendor is None:
        assert check.hypervisor_vendor is None or report.cpu.hypervisor, check
        return
    if vendor not in LSCPU:
        pytest.skip(f"lscpu names a hypervisor this test has no name for: {vendor}")
    assert hypervisor_from_cpuid(check.hypervisor_vendor) == LSCPU[vendor], (check.hypervisor_vendor, vendor)
    os_info = report.software.os
    assert os_info.virtualization is not None and os_info.vm is True
    assert UNNAMED_HYPERVISOR not in report.software.notes
    from cpudoctor.render.cpu_facts import cpu_facts

    row = next(f for f in cpu_facts(report.cpu) if f.label == "Virtual machine")
    assert row.text.startswith(f"yes ({LSCPU[vendor]}, CPUID signature ")


@pytest.mark.parametrize("argv", [[], ["{"], ["[1, 2]"], ['{"avx2": "7.0.ebx"}'], ["x" * 100_000]])
def test_the_cpuid_script_answers_bad_arguments_with_one_error_line(argv):
    """The child script given no, broken or wrongly shaped flag bits prints one JSON error, never a traceback."""
    import json
    import sys

    from cpudoctor.probes.child.scripts import script_path

    proc = subprocess.run([sys.executable, "-I", "-B", str(script_path("cpuid")), *argv], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0 and proc.stderr == ""
    [line] = proc.stdout.splitlines()
    assert set(json.loads(line)) == {"error"}
