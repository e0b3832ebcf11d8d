"""GEMM and int8 jobs: small real runs in child processes, and their pure helpers."""

from __future__ import annotations

import pytest

from cpudoctor.lab import gemm, runner
from cpudoctor.lab.peak import flops_per_cycle


def test_small_gemm_run_reports_gflops_and_peak():
    out = runner.run_job("gemm", {"size": 128, "min_seconds": 0.05, "threads": [1],
                                  "backends": ["torch-fp32", "numpy-fp64"]}, timeout=120)
    assert out.status == "ok", out.message
    pts = out.result["points"]
    assert [(p["backend"], p["threads"]) for p in pts] == [("torch-fp32", 1), ("numpy-fp64", 1)]
    assert all(p["gflops"] > 0 and p["reps"] >= 3 and p["cores"] == 1 for p in pts)
    m = out.result["machine"]
    if flops_per_cycle(m["microarchitecture"], "fp32", m["brand"]) and (m["max_mhz"] or m["base_mhz"] or m["cpuinfo_mhz"]):
        assert pts[0]["peak_gflops"] > 0
        assert pts[0]["utilisation"] == pytest.approx(pts[0]["gflops"] / pts[0]["peak_gflops"], rel=1e-3)
    assert len(out.progress) == 2 and out.progress[-1]["total"] == 2


def test_small_quant_run_compares_int8_with_fp32():
    out = runner.run_job("quant", {"hidden": 64, "batches": [1, 8], "min_seconds": 0.05}, timeout=120)
    assert out.status == "ok", out.message
    r = out.result
    assert [p["batch"] for p in r["points"]] == [1, 8]
    assert all(p["fp32_ms"] > 0 and p["int8_ms"] > 0 and p["int8_p10_ms"] <= p["int8_p90_ms"] for p in r["points"])
    assert 0.5 < r["top1_agreement"] <= 1.0               # int8 keeps the fp32 decisions mostly
    assert r["vnni"] in (True, False, None) and r["vnni_note"]


def test_threads_beyond_the_cores_add_no_peak():
    assert gemm.cores_for_threads(16, 8) == 8 and gemm.cores_for_threads(4, 8) == 4


def test_clock_note_when_a_point_beats_its_peak():
    notes = gemm._clock_notes([{"backend": "torch-bf16", "threads": 1, "utilisation": 1.31},
                               {"backend": "torch-fp32", "threads": 1, "utilisation": 0.66}])
    assert len(notes) == 1 and "1.31x the clock assumed" in notes[0]
    assert gemm._clock_notes([{"utilisation": 0.9}]) == []


def test_quant_vnni_flags_from_a_corpus_tree(corpus):
    from cpudoctor.lab.quant import vnni_flags
    from tests.conftest import machine_root

    assert vnni_flags(machine_root("hwloc-memorysidecaches"))["avx512_vnni"] is True      # Cascade Lake
    assert vnni_flags(machine_root("archspec-rhel7-skylake_avx512"))["avx512_vnni"] is False
    assert vnni_flags(corpus / "no-such-machine") == {"avx512_vnni": None, "avx_vnni": None, "amx_int8": None}
