"""The peak-FLOPs table: every entry cited, and the right figure for the corpus machines."""

from __future__ import annotations

import pytest

from cpudoctor.lab import peak
from tests.conftest import MANIFEST, machine_root

# FLOP/cycle/core (fp32) expected for the corpus machines, from their micro-architecture
# (manifest ground truth) and brand: the reasons are in resources/peak_flops.json.
EXPECTED_FP32 = {
    "archspec-rhel7-zen": 16,                  # EPYC 7301: 2x 128-bit FMA
    "archspec-ubuntu20.04-zen3": 32,           # Ryzen 9 5950X
    "archspec-rocky8.5-zen4": 32,              # EPYC 9654: AVX-512 double-pumped on 256-bit units
    "archspec-rocky9-zen5": 64,                # Ryzen 9 9950X: full 512-bit datapath
    "archspec-scientific7-k10": 8,
    "archspec-scientificfermi6-bulldozer": 8,  # 16 per 2-core module
    "archspec-rhel6-piledriver": 8,
    "archspec-rhel7-skylake_avx512": 64,       # Gold 6132: two FMA-512 units
    "hwloc-32intel64-2p8co2t+8ve": 32,         # Silver 4108: one FMA-512 unit
    "archspec-centos7-cascadelake": 64,        # Platinum 8260M
    "hwloc-memorysidecaches": 64,              # Gold 6230
    "archspec-unknown-sapphirerapids": 64,
    "archspec-ubuntu26.04-arrowlake_s": 32,
    "hwloc-20em64t-hybrid-1p6c2t+2ca4co1t": 32,
    "hwloc-offline-cpu0-node0": 32,            # Haswell E5-2680 v3
    "hwloc-40intel64-2g2n4c+pcilocality": 8,   # Westmere
    "archspec-ubuntu22.04-neoverse_v2": 32,
    "archspec-rocky8-a64fx": 64,
    "archspec-rhel7-x86_64_v3": None,          # a generic level says nothing about FMA units
}


def _truth(name: str) -> tuple[str, str]:
    m = MANIFEST["machines"][name]
    return m["microarchitecture"]["name"], m.get("model_name", "")


@pytest.mark.parametrize("name", sorted(EXPECTED_FP32))
def test_corpus_machines_from_manifest_truth(name, manifest):
    uarch, brand = _truth(name)
    per = peak.flops_per_cycle(uarch, "fp32", brand)
    assert (per.flops_per_cycle if per else None) == EXPECTED_FP32[name]


# The CPU probe names some machines more precisely than archspec's generic level.
EXPECTED_VIA_PROBE = {**EXPECTED_FP32, "archspec-rhel7-x86_64_v3": 32,   # it is a Haswell E5-2680 v3
                      "hwloc-16amd64-8n2c": 4,                 # K8 Opteron 865: SSE in two 64-bit passes
                      "hwloc-128arm-2pa2n8cluster4co": 16}     # Kunpeng 920: 2x 128-bit FMA pipes


@pytest.mark.parametrize("name", sorted(EXPECTED_VIA_PROBE))
def test_corpus_machines_through_the_cpu_probe(name, manifest):
    from cpudoctor.probes import probe_cpu

    cpu = probe_cpu(machine_root(name))
    per = peak.flops_per_cycle(cpu.microarchitecture, "fp32", cpu.brand)
    assert (per.flops_per_cycle if per else None) == EXPECTED_VIA_PROBE[name], cpu.microarchitecture


def test_every_entry_has_reason_and_source():
    for name, entry in peak.table().items():
        assert entry["fp32"] > 0 and entry["reason"] and entry["source"], name
        for v in entry.get("variants", []):
            assert v["brand_regex"] and v["reason"] and v["source"], name


def test_precisions_and_variants():
    assert peak.flops_per_cycle("zen3", "fp64").flops_per_cycle == 16
    assert peak.flops_per_cycle("zen3", "fp64").basis == "half of fp32"
    bf = peak.flops_per_cycle("zen3", "bf16")
    assert bf.flops_per_cycle == 32 and bf.basis.startswith("fp32")
    assert peak.flops_per_cycle("zen4", "bf16").flops_per_cycle == 64
    assert peak.flops_per_cycle("sapphirerapids", "bf16").flops_per_cycle == 1024
    assert peak.flops_per_cycle("zen5", "fp32", "AMD Ryzen AI 9 HX 370 w/ Radeon 890M").flops_per_cycle == 32
    assert peak.flops_per_cycle("zen5", "fp32", "AMD RYZEN AI MAX+ 395 w/ Radeon 8060S").flops_per_cycle == 64
    assert peak.flops_per_cycle("zen5", "fp32", "AMD EPYC 9555 64-Core Processor").flops_per_cycle == 64
    assert peak.flops_per_cycle("skylake_avx512", "fp32", "Intel(R) Xeon(R) Gold 5122 CPU").flops_per_cycle == 64
    assert peak.flops_per_cycle("icelake", "fp32", "Intel(R) Core(TM) i7-1065G7").flops_per_cycle == 32
    assert peak.flops_per_cycle("nosuch", "fp32") is None and peak.flops_per_cycle(None) is None
    with pytest.raises(ValueError):
        peak.flops_per_cycle("zen3", "fp8")


def test_peak_uses_boost_then_base_then_cpuinfo_clock():
    p = peak.peak(16, "fp32", "zen3", max_mhz=4900.0, base_mhz=3400.0)
    assert p.gflops == pytest.approx(16 * 4.9 * 32 * 1000 / 1000) and "boost" in p.notes[0]
    assert peak.peak(2, "fp32", "zen5", fallback_mhz=2600.0).gflops == pytest.approx(2 * 2.6 * 64)
    unknown = peak.peak(2, "fp32", "zen5")
    assert unknown.gflops is None and "clock unknown" in unknown.notes


def test_cpuinfo_mhz_from_a_corpus_tree(corpus):
    assert peak.cpuinfo_mhz(machine_root("hwloc-offline-cpu0-node0")) == 2500.0
    assert peak.cpuinfo_mhz(corpus / "does-not-exist") is None
