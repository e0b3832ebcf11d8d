"""The ISA-floor table and the risk verdicts, checked against real machines' flags."""

from __future__ import annotations

import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest
from conftest import MACHINES, MANIFEST, machine_root
from live_sources import kernel_cpuinfo

from cpudoctor.advisor.floors import fix_for
from cpudoctor.knowledge import FLOORS, LEVELS
from cpudoctor.knowledge.versions import parse_version
from cpudoctor.model import CpuInfo
from cpudoctor.probes.software.isarisk import assess, shortfall
from cpudoctor.model import PackageInfo
from cpudoctor.probes.software.stack import cpu_for_risk

OPTERON = "hwloc-16amd64-8n2c"           # Opteron 865 (K8): no SSE4, no AVX
HASWELL = "hwloc-offline-cpu0-node0"     # Xeon E5-2680 v3: AVX2, no AVX-512


def risks(cpu, packages=()):
    return {r.package: r for r in assess(cpu, list(packages))}


def test_table_is_well_formed():
    table = FLOORS.data
    levels = {f"x86-64-v{e['level']}" for e in LEVELS.rows}
    assert levels == {"x86-64-v1", "x86-64-v2", "x86-64-v3", "x86-64-v4"}
    names = [p["name"] for p in table["packages"]]
    assert len(names) == len(set(names))
    for pkg in table["packages"]:
        assert pkg["module"] and pkg["distributions"]
        for floor in pkg["floors"]:
            assert floor["reason"], pkg["name"]
            assert floor["confidence"] in ("documented", "reported", "unverified")
            assert floor["failure"] in ("sigill", "import_error")
            if floor["confidence"] == "unverified":
                assert "unverified" in floor["reason"]
            for need in floor["needs"]:
                assert need in levels or need.islower() and " " not in need
    assert set(FLOORS.packages) >= {"torch", "tensorflow", "onnxruntime", "jaxlib", "numpy",
                                                  "intel-extension-for-pytorch", "zentorch", "scipy"}


def test_levels_and_versions():
    v2 = set(LEVELS.expand(["x86-64-v2"]))
    assert {"sse4_2", "popcnt", "ssse3"} <= v2 and "sse2" not in v2
    assert LEVELS.x86_64_level(set()) is None and LEVELS.level_counting_sse2_as_v1(set()) is None
    flags = set(LEVELS.expand(["x86-64-v1"])) | v2
    assert LEVELS.x86_64_level(flags) == 2 and LEVELS.level_counting_sse2_as_v1(flags) == 2
    # The two meanings differ on a CPU with SSE2 that lacks a baseline flag (a 32-bit CPU has no lm).
    assert LEVELS.x86_64_level(flags - {"lm"}) is None and LEVELS.level_counting_sse2_as_v1(flags - {"lm"}) == 1
    assert LEVELS.missing_for(["x86-64-v2", "avx"], {"sse2"})[0].startswith("x86-64-v2 (")
    assert str(parse_version("2.4.0rc1+cpu")) == "2.4.0" and parse_version(None) is None
    assert parse_version("not a version") is None


def test_old_opteron_without_avx(corpus):
    cpu = cpu_for_risk(machine_root(OPTERON))
    assert "avx" not in cpu.flags and "sse2" in cpu.flags
    r = risks(cpu, [PackageInfo("tensorflow", "2.16.1"), PackageInfo("numpy", "2.4.6")])
    assert r["tensorflow"].installed and r["tensorflow"].at_risk and r["tensorflow"].missing == ["avx"]
    assert "Illegal instruction" in r["tensorflow"].note
    assert r["numpy"].at_risk and r["numpy"].missing[0].startswith("x86-64-v2 (")
    assert r["numpy"].safe_versions == "<2.4" and r["numpy"].confidence == "documented"
    assert shortfall(cpu, "numpy", "2.4.6").startswith("numpy 2.4.6 needs x86-64-v2; this CPU lacks x86-64-v2 (")
    assert fix_for("numpy", r["numpy"].safe_versions)[1] == "python -m pip install 'numpy<2.4'"
    # Not installed, still flagged: installing them would fail here.
    assert not r["jaxlib"].installed and r["jaxlib"].at_risk
    assert r["intel-extension-for-pytorch"].at_risk and r["zentorch"].at_risk
    assert not r["torch"].at_risk  # the x86-64 baseline with run-time dispatch
    assert "x86-64-v1" in shortfall(cpu, "torch", "2.13.0") and "without avx" in shortfall(cpu, "torch", "2.13.0")
    # numpy before 2.4 only needed SSE3, which this Opteron has.
    assert not risks(cpu, [PackageInfo("numpy", "2.3.5")])["numpy"].at_risk


def test_haswell_runs_avx2_builds_not_old_ipex(corpus):
    cpu = cpu_for_risk(machine_root(HASWELL))
    r = risks(cpu, [PackageInfo("intel-extension-for-pytorch", "1.9.0")])
    assert r["intel-extension-for-pytorch"].at_risk  # pre-1.10 forced AVX-512
    assert "x86-64-v4" in r["intel-extension-for-pytorch"].missing[0]
    r = risks(cpu, [PackageInfo("intel-extension-for-pytorch", "2.8.0")])
    assert not any(x.at_risk for x in r.values())


X86 = [m for m in MACHINES if MANIFEST["machines"][m].get("cpuinfo", {}).get("vendor_id") in ("AuthenticAMD", "GenuineIntel", "HygonGenuine")]


@pytest.mark.parametrize("name", X86)
def test_corpus_ground_truth(corpus, name):
    truth = MANIFEST["machines"][name]["cpuinfo"]
    avx2 = truth["flags_key"]["avx2"]
    avx = truth.get("flags_extra", {}).get("avx", avx2)
    r = risks(cpu_for_risk(machine_root(name)))
    assert r["tensorflow"].at_risk == (not avx)
    assert r["jaxlib"].at_risk == (not avx)
    assert r["intel-extension-for-pytorch"].at_risk == (not avx2)
    if not truth.get("flags_extra", {}).get("sse4_2", True):
        assert r["numpy"].at_risk


def test_arm_tree_is_not_judged_by_x86_floors(corpus):
    cpu = cpu_for_risk(machine_root("hwloc-128arm-2pa2n8cluster4co"))
    r = risks(cpu)
    assert not any(x.at_risk for x in r.values())
    assert "not x86" in r["tensorflow"].note


def test_unknown_flags_never_claim_risk():
    r = risks(CpuInfo())
    assert not any(x.at_risk for x in r.values()) and "unknown" in r["tensorflow"].note


@pytest.mark.hardware
def test_this_machines_verdicts_agree_with_what_really_imports_here():
    """Two independent witnesses on this machine: torch and numpy really import in a child (so the
    installed builds cannot be at risk here), and every flag a verdict calls missing is absent
    from the kernel's /proc/cpuinfo while every present one is listed there."""
    kernel = kernel_cpuinfo()
    cpu = cpu_for_risk(Path("/"))
    installed = [PackageInfo(name, metadata.version(name)) for name in ("torch", "numpy")]
    child = subprocess.run([sys.executable, "-c", "import numpy, torch"], capture_output=True, text=True,
                           timeout=300)
    assert child.returncode == 0, child.stderr[-2000:]
    r = risks(cpu, installed)
    assert not r["torch"].at_risk and not r["numpy"].at_risk
    assert all(not r[p.name].missing for p in installed)
    for risk in r.values():
        flags = LEVELS.expand(risk.needs)
        lacking = [f for f in flags if f not in kernel.flags]
        if "vendor_id" in kernel.first:         # on ARM no x86 floor applies (checked on the corpus)
            assert risk.at_risk is bool(lacking), (risk.package, lacking)
            assert all(f in " ".join(risk.missing) for f in lacking), (risk.package, risk.missing)
