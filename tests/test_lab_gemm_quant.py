"""GEMM and int8 jobs: small real runs in child processes, the parent's peak and native facts, their words."""

from __future__ import annotations

import pytest

from cpudoctor.lab import runner
from cpudoctor.lab.native import native_support
from cpudoctor.lab.peak import MachinePeak, clock_notes, flops_per_cycle
from cpudoctor.lab.results import Context, read_outcome
from cpudoctor.model import CpuInfo, IsaVerdict, Topology


def _zen5_peak() -> MachinePeak:
    return MachinePeak(microarchitecture="zen5", brand="AMD Ryzen 9 9950X", max_mhz=2500.0, physical_cores=2)


def test_small_gemm_run_with_an_emulated_path():
    """One child: the automatic size, numpy and torch, a bf16 path faked as emulated (native_bf16 comes from the
    parent's CPU probe, whatever this CPU has), each point with its spread and the interference measured."""
    settings = {"max_size": 256, "threads": [1], "backends": ["torch-fp32", "torch-bf16", "numpy-fp64"],
                "min_seconds": 0.05, "native_bf16": False, "emulated_size": 64}
    out = runner.run_job("gemm", settings, timeout=180)
    assert out.status == "ok", out.message
    pts = out.result["points"]
    assert [(p["backend"], p["threads"], p["size"], p["emulated"]) for p in pts] == [
        ("torch-fp32", 1, 256, False), ("torch-bf16", 1, 64, True), ("numpy-fp64", 1, 256, False)]
    assert all(p["gflops"] > 0 and p["reps"] >= 3 and p["gflops_lo"] <= p["gflops"] <= p["gflops_hi"] for p in pts)
    assert all(0 <= p["interference"]["other_share"] <= 1 for p in pts)     # measured, whatever its value
    assert out.progress[-1]["total"] == 3
    # the peak is the parent's: a Zen 5 at 2.5 GHz has 160 GFLOP/s per core in fp32
    context = Context(peak=_zen5_peak(), native=native_support(CpuInfo(arch="x86_64", flags=["avx2", "fma"])))
    result = read_outcome("gemm", out, settings, context)
    fp32 = result.points[0]
    assert fp32["peak_gflops"] == 160.0 and fp32["cores"] == 1
    assert fp32["utilisation"] == pytest.approx(fp32["gflops"] / 160.0, rel=1e-3)
    assert result.emulated == ["torch-bf16"]
    assert any("torch-bf16 at n = 64: emulated on this CPU" in n for n in result.notes)
    assert result.bench_run().metrics["points"][0]["other_share"] >= 0


def test_cores_and_clock_notes():
    peak = MachinePeak(microarchitecture="zen5", max_mhz=2500.0, physical_cores=8)
    assert peak.cores_for_threads(16) == 8 and peak.cores_for_threads(4) == 4
    notes = clock_notes([{"backend": "torch-bf16", "threads": 1, "utilisation": 1.31},
                         {"backend": "torch-fp32", "threads": 1, "utilisation": 0.66}])
    assert len(notes) == 1 and "1.31x the clock assumed" in notes[0]
    assert clock_notes([{"utilisation": 0.9}]) == []
    assert flops_per_cycle("zen5", "fp32", "AMD Ryzen 9 9950X").flops_per_cycle == 64


def test_machine_peak_from_the_probes_counts_physical_cores():
    from cpudoctor.model import Affinity, Core

    topo = Topology(core_list=[Core(0, 0, [0, 2]), Core(0, 1, [1, 3])], affinity=Affinity(allowed_cpus=[0, 1, 2, 3]))
    peak = MachinePeak.from_probe(CpuInfo(microarchitecture="zen4"), topo)
    assert peak.physical_cores == 2 and peak.cores_for_threads(4) == 2


def test_small_quant_run_compares_int8_with_fp32_in_the_same_job():
    """Without VNNI (faked: the parent says native_int8 False) the MLP is measured small and the words say why."""
    settings = {"batches": [1, 4], "min_seconds": 0.05, "native_int8": False}
    out = runner.run_job("quant", settings, timeout=180)
    assert out.status == "ok", out.message
    r = out.result
    assert [p["batch"] for p in r["points"]] == [1, 4] and r["hidden"] == 256 and r["emulated"] is True
    assert all(p["fp32_ms"] > 0 and p["int8_ms"] > 0 and p["int8_p10_ms"] <= p["int8_p90_ms"] for p in r["points"])
    assert all(p["fp32_calls"] >= 10 and p["int8_calls"] >= 10 for p in r["points"])
    assert 0.5 < r["top1_agreement"] <= 1.0               # int8 keeps the fp32 decisions mostly
    assert r["api"] in ("torchao", "torch.ao", "torch.quantization") and r["api_name"]
    # The words of a quiet run (this machine may be busy: a busy run is inconclusive, tests/test_lab_quant_noise.py)
    quiet = {"quiet_limit": 1.0}
    result = read_outcome("quant", out, settings, Context(native=native_support(CpuInfo(flags=["avx2", "fma"])),
                                                          **quiet))
    run = result.bench_run()
    assert run.metrics["vnni"] is False and run.metrics["api"] == r["api_name"]
    assert "no VNNI or AMX-INT8" in result.precision_why and "measured small, hidden width 256" in result.precision_why
    with_vnni = read_outcome("quant", out, settings, Context(native=native_support(_cpu_with(["avx512_vnni"])),
                                                             **quiet))
    assert "this CPU has AVX512_VNNI" in with_vnni.precision_why


def _cpu_with(extra: list[str]) -> CpuInfo:
    flags = ["avx2", "fma", "avx512f", "avx512cd", *extra]
    isa = IsaVerdict(avx512_vnni="avx512_vnni" in extra, avx512_bf16="avx512_bf16" in extra,
                     amx=[f.split("_")[1] for f in extra if f.startswith("amx_")])
    return CpuInfo(arch="x86_64", flags=flags, isa=isa)


def test_native_paths_from_the_cpu_flags():
    """Both branches with faked flags: Sapphire Rapids-like (native bf16/int8) and Zen 3 (neither)."""
    spr = native_support(_cpu_with(["avx512_bf16", "amx_bf16", "amx_int8", "avx512_vnni"]))
    assert spr.bf16 is True and spr.bf16_via == ["AVX512_BF16", "AMX-BF16"]
    assert spr.int8 is True and spr.int8_via == ["AVX512_VNNI", "AMX-INT8"]
    zen3 = native_support(CpuInfo(arch="x86_64", flags=["avx2", "fma", "sse4_2"]))
    assert (zen3.bf16, zen3.int8) == (False, False)
    assert native_support(CpuInfo()).bf16 is None                      # flags unknown: neither
    arm = native_support(CpuInfo(arch="aarch64", flags=["asimd", "asimddp", "bf16"]))
    assert arm.bf16 is True and arm.int8_via == ["SDOT dot product"]
    assert zen3.job_args("gemm") == {"native_bf16": False} and spr.job_args("quant") == {"native_int8": True}


def test_native_paths_of_corpus_machines(corpus):
    from cpudoctor.probes import probe_cpu
    from tests.conftest import machine_root

    assert native_support(probe_cpu(machine_root("hwloc-memorysidecaches"))).int8 is True        # Cascade Lake
    assert native_support(probe_cpu(machine_root("archspec-rhel7-skylake_avx512"))).int8 is False
    assert native_support(probe_cpu(machine_root("archspec-ubuntu20.04-zen3"))).bf16 is False


def test_quant_api_choice():
    from cpudoctor.lab.jobs import quant

    assert quant.choose_api("auto", lambda name: True) == "torchao"
    assert quant.choose_api("auto", lambda name: name != "torchao") == "torch.ao"
    assert quant.choose_api("torch.ao", lambda name: True) == "torch.ao"
    assert quant.choose_api("auto", lambda name: False) == "torch.quantization"
    with pytest.raises(quant.QuantError, match="torchao is not installed"):
        quant.choose_api("torchao", lambda name: False)


def test_precision_words_for_both_branches():
    from cpudoctor.lab.verdicts import bf16_why, int8_why

    assert bf16_why(False, [], 0.35) == ("bf16 ran 0.35× fp32 (2.9× slower) in this job: bf16 is emulated on this "
                                         "CPU (no AVX512_BF16 or AMX-BF16), so every operation converts to fp32 and back")
    native = bf16_why(True, ["AVX512_BF16", "AMX-BF16"], 0.98)
    assert "native on this CPU (AVX512_BF16, AMX-BF16)" in native and "outside the large matrix multiplies" in native
    assert "1.63× as fast as fp32" in bf16_why(True, ["AMX-BF16"], 1.63)
    text = int8_why(True, ["AVX512_VNNI"], {1: 0.6, 64: 6.0}, 1024, False)
    assert text.startswith("int8 ran 0.60× at batch 1, 6.00× at batch 64 fp32's speed: this CPU has AVX512_VNNI")
    assert "at batch 1 the time goes to quantising activations" in text
