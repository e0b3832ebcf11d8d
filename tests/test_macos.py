"""Macs on Linux: recorded ``sysctl`` listings (tests/fixtures/macos, see SOURCES.md there) through the probe facade."""

from __future__ import annotations

import json

from conftest import REPO, run_cli
from cpudoctor.advisor.pinning import MACOS_NO_PINNING, pinning_plan
from cpudoctor.probes import probe_cpu, probe_topology
from cpudoctor.probes.platforms import _macos, platform_of, probe_os

MACOS = REPO / "tests" / "fixtures" / "macos"
M3 = MACOS / "apple-m3-max"
MBP = MACOS / "macbookpro-2012-i7-3615qm"


def test_apple_silicon_performance_levels_and_caches():
    topo = probe_topology(M3)
    assert platform_of(M3).platform == "macos" and topo.source == "sysctl"
    assert (topo.packages, topo.cores, topo.logical_cpus, topo.smt_threads_per_core) == (1, 14, 14, 1)
    assert [(k.cpus, k.perf) for k in topo.cpu_kinds] == [([0, 1, 2, 3], 1), (list(range(4, 14)), 2)]
    assert "Efficiency" in topo.cpu_kinds[0].source and "Performance" in topo.cpu_kinds[1].source
    l2 = [(c.cpus, c.size_bytes) for c in topo.core_caches if c.name == "L2"]
    assert l2 == [([0, 1, 2, 3], 4 << 20), ([4, 5, 6, 7, 8], 16 << 20), ([9, 10, 11, 12, 13], 16 << 20)]
    l1d = {c.cpus[0]: c.size_bytes for c in topo.core_caches if c.name == "L1d"}
    assert l1d[0] == 64 << 10 and l1d[4] == 128 << 10
    assert topo.l3_domains == [] and topo.l3_known and [n.cpus for n in topo.numa_nodes] == [list(range(14))]
    cpu = probe_cpu(M3)
    assert (cpu.vendor, cpu.brand, cpu.arch, cpu.source) == ("Apple", "Apple M3 Max", "aarch64", "sysctl")
    assert {"asimd", "bf16", "i8mm", "asimddp", "fphp"} <= set(cpu.flags) and "sme" not in cpu.flags
    assert cpu.isa.vector_width_bits == 128


def test_intel_mac_counts_caches_and_flags():
    topo = probe_topology(MBP)
    assert (topo.cores, topo.logical_cpus, topo.smt_threads_per_core) == (4, 8, 2)
    assert [(d.cpus, d.size_bytes) for d in topo.l3_domains] == [(list(range(8)), 6 << 20)]
    assert [c.cpus for c in topo.core_caches if c.name == "L2"] == [[0, 1], [2, 3], [4, 5], [6, 7]]
    assert topo.cpu_kinds == [] and any("SMT siblings" in n for n in topo.notes)
    cpu = probe_cpu(MBP)
    assert (cpu.vendor_id, cpu.family, cpu.model, cpu.microarchitecture) == ("GenuineIntel", 6, 58, "ivybridge")
    assert {"avx", "sse4_2", "lm", "f16c", "fsgsbase"} <= set(cpu.flags) and "avx2" not in cpu.flags
    assert (cpu.isa.x86_64_level, cpu.isa.avx2, cpu.base_mhz) == (2, False, 2300.0)


def test_os_facts_and_rosetta():
    info, notes = probe_os(M3)
    assert (info.system, info.distro, info.mem_total_bytes) == ("Darwin", "macOS", 38654705664)
    assert any("kern.osproductversion" in n for n in notes)
    values = _macos.parse_sysctl((M3 / _macos.SYSCTL_FILE).read_text() + "kern.osproductversion: 15.1\n"
                                 "sysctl.proc_translated: 1\n")
    assert any("Rosetta 2" in n for n in _macos.cpu_from_sysctl(values).notes)
    assert _macos.parse_sysctl("hw.ncpu = 8\ngarbage line\n\x00\nhw.packages: 1") == {"hw.ncpu": "8", "hw.packages": "1"}
    assert _macos.topology_from_sysctl({"hw.logicalcpu": "3", "hw.physicalcpu": "2"}).logical_cpus is None


def test_no_pinning_on_a_mac():
    plan = pinning_plan([4, 5, 6], probe_topology(M3))
    assert plan.snippets == [] and plan.warnings == [MACOS_NO_PINNING] and plan.threads == 3


def test_report_root_of_a_mac_capture(capsys):
    code, out, err = run_cli(capsys, "doctor", "--root", str(M3), "--format", "json")
    assert code in (0, 1), err
    findings = {f["code"]: f for f in json.loads(out)["findings"]}
    hybrid = findings["TOPO003"]
    assert "macOS cannot pin" in hybrid["title"] and hybrid["snippet"] == "OMP_NUM_THREADS=10 python train.py"
