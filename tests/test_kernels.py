"""Kernels named: the libraries' own verbose reports parsed, and judged against a CPU's flags.

The logs are real (tests/fixtures/library_reports/README.md says where each
comes from); the CPUs are corpus machines' /proc/cpuinfo flags, so the
comparison is checked on CPUs this machine is not.
"""

from __future__ import annotations

import importlib.util
import json
import os
import types
from pathlib import Path

import pytest

from cpudoctor.lab.jobs import _libreports
from cpudoctor.probes import kernels as K
from tests.conftest import machine_root

LOGS = Path(__file__).parent / "fixtures" / "library_reports"


def log(name: str) -> list[str]:
    return (LOGS / name).read_text().splitlines()


def flags_of(machine: str) -> set[str]:
    from cpudoctor.probes import probe_cpu

    return set(probe_cpu(machine_root(machine)).flags)


ZEN4 = "archspec-rocky8.5-zen4"          # AVX-512 with BF16 and VNNI
ZEN3 = "archspec-ubuntu20.04-zen3"       # AVX2, no AVX-512
CASCADE = "archspec-centos7-cascadelake"  # AVX-512 and VNNI, no BF16
SPR = "archspec-unknown-sapphirerapids"  # AMX


# ----------------------------------------------------------------------------- parsing


def test_onednn3_exec_lines_become_kernels_with_time_shares():
    kernels = K.parse_onednn_verbose(log("zen4-kvm-onednn3.12-train-fp32-bf16.log"))
    conv = [k for k in kernels if k.primitive == "convolution"]
    assert {(k.impl, k.isa, k.dtype) for k in conv} == {("jit:avx512_core", "avx512_core", "fp32"),
                                                        ("jit_bf16:avx512_core_bf16", "avx512_core_bf16", "bf16")}
    assert sum(k.share for k in conv) == pytest.approx(1.0, abs=1e-3)
    # the shares are the time of each kind over the primitive's time, from the lines' own last field
    lines = [ln.split(",") for ln in log("zen4-kvm-onednn3.12-train-fp32-bf16.log") if ",exec,cpu,convolution," in ln]
    total = sum(float(f[-1]) for f in lines)
    fp32 = sum(float(f[-1]) for f in lines if "src:f32" in ",".join(f))
    assert next(k for k in conv if k.dtype == "fp32").share == pytest.approx(fp32 / total, abs=1e-3)
    matmul = [k for k in kernels if k.primitive == "matmul"]
    assert [(k.isa, k.dtype, k.share) for k in matmul] == [("avx512_core_bf16", "bf16", 1.0)]


def test_onednn2_lines_and_the_isa_line():
    lines = log("onednn2-avx2-docs.log")
    kernels = K.parse_onednn_verbose(lines)
    assert [(k.primitive, k.isa, k.dtype, k.calls) for k in kernels if k.primitive == "convolution"] == [
        ("convolution", "avx2", "fp32", 1)]
    assert {k.isa for k in kernels if k.primitive == "reorder"} == {None}       # jit:uni, simple:any: not named
    assert K.onednn_detected_isa(lines) == "Intel AVX2"
    assert K.detected_width("Intel AVX2") == 3
    assert K.detected_width(K.onednn_detected_isa(log("zen4-kvm-onednn3.12-train-fp32-bf16.log"))) == 4


@pytest.mark.parametrize("impl, isa", [("brg_conv_fwd:avx512_core", "avx512_core"), ("jit:avx2", "avx2"),
                                       ("brgemm:avx512_core_amx", "avx512_core_amx"), ("jit_bf16:avx512_core",
                                                                                        "avx512_core"),
                                       ("ref:any", "ref"), ("jit:uni", None), ("gemm:jit:bf16", None),
                                       ("jit_int8:avx512_core_vnni", "avx512_core_vnni"), ("", None),
                                       ("brg:avx10_1_512_amx", "avx10_1_512_amx"), ("jit:sse41", "sse41")])
def test_isa_in_an_implementation_name(impl, isa):
    assert K.onednn_isa(impl) == isa


def test_other_lines_are_ignored():
    noise = ["epoch 1 loss 0.3", "onednn_verbose,v1,info,cpu,runtime:OpenMP,nthr:2",
             "onednn_verbose,v1,primitive,create:cache_miss,cpu,convolution,jit:avx2,forward_training,,,,0.1",
             "onednn_verbose,v1,primitive,exec,cpu", "MKL_VERBOSE nonsense", ""]
    assert K.parse_onednn_verbose(noise) == [] and K.parse_mkl_verbose(noise) == []


def test_mkl_names_its_code_path_on_intel_and_nothing_elsewhere():
    assert [(k.primitive, k.isa, k.dtype, k.calls) for k in K.parse_mkl_verbose(log("mkl-intel-avx512.log"))] == [
        ("SGEMM", "avx512", "fp32", 2)]
    assert K.parse_mkl_verbose(log("mkl-intel-avx512.log"))[0].ms == pytest.approx(8.93 + 0.00113, rel=1e-3)
    assert K.mkl_isa(log("mkl-intel-ssse3.log")) == "ssse3"
    assert K.mkl_isa(log("mkl-intel-avx2.log")) == "avx2"
    amd = K.parse_mkl_verbose(log("zen4-kvm-onednn3.12-train-fp32-bf16.log"))
    assert amd and {k.isa for k in amd} == {None}        # "Intel(R) Architecture processors": not named


def test_a_jobs_reports_become_one_list():
    reports = {"onednn": log("onednn2-avx2-docs.log"), "mkl": log("mkl-intel-avx2.log"), "aten_capability": "AVX2",
               "blas": [{"internal_api": "openblas", "version": "0.3.27", "architecture": "Haswell"}],
               "quantized_engine": "x86"}
    got = {(k.library, k.isa) for k in K.from_reports(reports)}
    assert {("oneDNN", "avx2"), ("oneMKL", "avx2"), ("ATen", "avx2"), ("OpenBLAS", "haswell"),
            ("FBGEMM", None)} <= got
    assert all(set(k.to_dict()) >= {"library", "primitive", "isa", "share"} for k in K.from_reports(reports))
    assert K.from_reports(None) == [] and K.from_reports({"onednn": ["garbage"]}) == []


def test_the_child_and_the_parser_name_the_same_cap_variables():
    assert set(_libreports.CAP_VARIABLES) == set(K.ALL_CAP_VARIABLES)


# ----------------------------------------------------------------------------- against a CPU


def test_avx2_capped_kernels_are_below_an_avx512_cpu_and_the_cap_is_named():
    lines = log("zen4-kvm-onednn3.12-ONEDNN_MAX_CPU_ISA-AVX2.log")
    checks = K.check_kernels(K.parse_onednn_verbose(lines), flags_of(ZEN4), {"ONEDNN_MAX_CPU_ISA": "AVX2"},
                             K.onednn_detected_isa(lines))
    conv = next(c for c in checks if c.kernel.primitive == "convolution")
    assert conv.below and conv.ran == "AVX2" and conv.expected == "AVX-512"
    assert conv.cause == "cap" and conv.cap == "ONEDNN_MAX_CPU_ISA=AVX2"
    assert not any(c.below for c in checks if c.kernel.primitive == "reorder")


def test_the_same_kernels_are_the_best_a_zen3_runs():
    checks = K.check_kernels(K.parse_onednn_verbose(log("zen4-kvm-onednn3.12-ONEDNN_MAX_CPU_ISA-AVX2.log")),
                             flags_of(ZEN3))
    assert not any(c.below for c in checks)


def test_a_cpu_the_library_saw_smaller_is_hidden_not_capped():
    lines = log("onednn2-avx2-docs.log")          # oneDNN said "isa:Intel AVX2"; no cap variable set
    checks = K.check_kernels(K.parse_onednn_verbose(lines), flags_of(ZEN4), {}, K.onednn_detected_isa(lines))
    conv = next(c for c in checks if c.kernel.primitive == "convolution")
    assert conv.below and conv.cause == "hidden" and conv.cap is None


def test_without_cap_or_smaller_cpu_it_is_the_library():
    lines = log("onednn2-avx2-docs.log")
    checks = K.check_kernels(K.parse_onednn_verbose(lines), flags_of(ZEN4), {}, "Intel AVX-512 with Intel DL Boost")
    assert next(c for c in checks if c.kernel.primitive == "convolution").cause == "library"


def test_a_cap_set_to_its_no_cap_value_is_not_blamed():
    lines = log("onednn2-avx2-docs.log")
    checks = K.check_kernels(K.parse_onednn_verbose(lines), flags_of(ZEN4), {"ONEDNN_MAX_CPU_ISA": "ALL"},
                             K.onednn_detected_isa(lines))
    assert next(c for c in checks if c.kernel.primitive == "convolution").cause == "hidden"


def test_fp32_on_avx512_is_not_below_an_amx_cpu():
    """Width, not the newest extension: AMX computes bf16/int8, an fp32 convolution rightly runs AVX-512."""
    checks = K.check_kernels(K.parse_onednn_verbose(log("zen4-kvm-onednn3.12-train-fp32-bf16.log")), flags_of(SPR))
    assert not any(c.below for c in checks)
    assert not any(c.dtype_emulated for c in checks)          # avx512_core_bf16 computes bf16 natively


def test_bf16_without_bf16_instructions_is_emulated_and_why():
    lines = log("zen4-kvm-onednn3.12-ONEDNN_MAX_CPU_ISA-AVX512_CORE.log")
    kernels = K.parse_onednn_verbose(lines)
    on_zen4 = K.check_kernels(kernels, flags_of(ZEN4), {"ONEDNN_MAX_CPU_ISA": "AVX512_CORE"},
                              K.onednn_detected_isa(lines))
    bf16 = next(c for c in on_zen4 if c.kernel.dtype == "bf16" and c.kernel.isa)
    assert bf16.dtype_emulated and bf16.dtype_native_on_cpu and bf16.cause == "cap"
    assert not bf16.below                                      # same vector width: only the dtype is emulated
    on_cascade = K.check_kernels(kernels, flags_of(CASCADE))
    bf16 = next(c for c in on_cascade if c.kernel.dtype == "bf16" and c.kernel.isa)
    assert bf16.dtype_emulated and bf16.dtype_native_on_cpu is False and bf16.cause == "cpu"


def test_aten_mkl_and_openblas_are_judged_by_their_own_tables():
    zen4, zen3 = flags_of(ZEN4), flags_of(ZEN3)
    aten = K.aten_kernel("AVX2")
    assert K.check_kernels([aten], zen4)[0].below and not K.check_kernels([aten], zen3)[0].below
    mkl = K.parse_mkl_verbose(log("mkl-intel-ssse3.log"))
    assert K.check_kernels(mkl, zen3)[0].below                  # SSSE3 code on an AVX2 CPU
    blas = K.openblas_kernels([{"internal_api": "openblas", "architecture": "Prescott"}])
    assert K.check_kernels(blas, zen3)[0].below and K.check_kernels(blas, zen3)[0].expected == "AVX2"
    assert K.check_kernels(blas, set())[0].cpu_width is None    # unknown flags: nothing judged


@pytest.mark.parametrize("machine", [ZEN4, ZEN3, CASCADE, SPR, "archspec-scientific7-k10",
                                     "archspec-rhel7-skylake_avx512"])
def test_the_widest_kernels_follow_the_cpu_probes_verdict(machine):
    """Independent source: the CPU probe's own AVX-512 / AVX2 verdict for the same /proc/cpuinfo."""
    from cpudoctor.probes import probe_cpu

    cpu = probe_cpu(machine_root(machine))
    if cpu.isa.avx512_torch_kernels:
        expected = 4
    elif cpu.isa.avx2 and cpu.isa.fma:
        expected = 3
    else:      # oneDNN's oldest kernels need SSE4.1: below that it has none for this CPU
        expected = 2 if "avx" in cpu.flags else 1 if "sse4_1" in cpu.flags else None
    assert K.cpu_width(K.ONEDNN, cpu.flags) == expected


def test_summary_counts_time_below_and_emulated():
    lines = log("zen4-kvm-onednn3.12-ONEDNN_MAX_CPU_ISA-AVX2.log")
    checks = K.check_kernels(K.parse_onednn_verbose(lines), flags_of(ZEN4), {"ONEDNN_MAX_CPU_ISA": "AVX2"})
    s = K.summary(checks)
    assert s["below_share"] == pytest.approx(1.0) and s["caps"] == ["ONEDNN_MAX_CPU_ISA=AVX2"]
    assert s["below"][0]["ran"] == "AVX2" and s["emulated"] == []


@pytest.mark.parametrize("job", ["train", "sweep", "gemm", "quant", "roofline"])
def test_every_lab_result_carries_its_kernels_judged(job):
    """What a job's census sent (raw lines) arrives in its BenchRun as kernels, judged against the flags given."""
    from types import SimpleNamespace

    from cpudoctor.lab.results import Context, read_outcome

    lines = log("zen4-kvm-onednn3.12-ONEDNN_MAX_CPU_ISA-AVX2.log")
    reports = {"onednn": lines, "mkl": lines, "aten_capability": "AVX512", "caps": {"ONEDNN_MAX_CPU_ISA": "AVX2"}}
    outcome = SimpleNamespace(status="ok", result={"library_reports": reports}, progress=[], message="")
    result = read_outcome(job, outcome, {}, Context(flags=sorted(flags_of(ZEN4))))
    metrics = result.bench_run().metrics
    assert {(k["library"], k["isa"]) for k in metrics["kernels"]} >= {("oneDNN", "avx2"), ("ATen", "avx512")}
    assert metrics["kernel_check"]["caps"] == ["ONEDNN_MAX_CPU_ISA=AVX2"]
    assert result.json_extra()["kernels"] == metrics["kernels"]
    from cpudoctor.render.lab import outcome_text
    from cpudoctor.render.training import RUN_COLUMNS, run_cells

    row = dict(zip(RUN_COLUMNS, run_cells(result.bench_run())))
    assert "oneDNN convolution fp32: jit:avx2" in row["Result"][1]              # the Result cell's tooltip
    assert "oneDNN ran AVX2 kernels, this CPU runs AVX-512" in row["Note"][1]
    assert "below this CPU: oneDNN convolution ran AVX2" in outcome_text(result) or job == "sweep"
    nothing = read_outcome(job, SimpleNamespace(status="ok", result={}, progress=[], message=""), {}, Context())
    assert nothing.kernels == [] and "kernels" not in nothing.bench_run().metrics


# ----------------------------------------------------------------------------- a real training run


def _cpuinfo_flags() -> set[str]:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("flags"):
            return set(line.split(":", 1)[1].split())
    return set()


def _bench_train(tmp_path, capsys, name: str) -> dict:
    from tests.conftest import run_cli

    out = tmp_path / f"{name}.json"
    code, _stdout, err = run_cli(capsys, "bench", "train", "--steps", "12", "--json", "--quiet", "-o", str(out))
    assert code == 0, err
    return json.loads(out.read_text())


def _conv_isas(data: dict) -> set[str]:
    return {k["isa"] for k in data["result"]["kernels"]
            if k["library"] == "oneDNN" and k["primitive"] == "convolution" and k["isa"]}


AVX512_CORE = {"avx512f", "avx512bw", "avx512dq", "avx512vl"}


@pytest.mark.hardware
@pytest.mark.slow
@pytest.mark.alongside
def test_bench_train_names_the_kernels_this_cpu_runs_and_a_cap_below_it(tmp_path, capsys, monkeypatch):
    """Independent source: /proc/cpuinfo. AVX-512 kernels on an AVX-512 CPU, AVX2 on an AVX2 one; with
    ONEDNN_MAX_CPU_ISA=AVX2 exported, AVX2 kernels, and EVID007 says so where the CPU has more than AVX2."""
    if importlib.util.find_spec("torch") is None:       # never imported here: the GUI tests check this process
        pytest.skip("torch is not installed in this Python")
    flags = _cpuinfo_flags()
    if "avx2" not in flags or "fma" not in flags:
        pytest.skip("this CPU (as /proc/cpuinfo lists it) has no AVX2 with FMA: nothing to cap")
    for var in K.ALL_CAP_VARIABLES:
        monkeypatch.delenv(var, raising=False)
    plain = _bench_train(tmp_path, capsys, "plain")
    isas = _conv_isas(plain)
    assert isas, plain["result"]["kernels"]
    if AVX512_CORE <= flags:
        assert all(i.startswith(("avx512", "avx10")) for i in isas), isas
    else:
        assert all(i.startswith("avx2") for i in isas), isas
    assert not [f for f in plain["findings"] if f["code"] == "EVID007"]
    aten = next(k for k in plain["result"]["kernels"] if k["library"] == "ATen")
    assert aten["isa"] == ("avx512" if AVX512_CORE | {"fma"} <= flags else "avx2")

    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX2")
    capped = _bench_train(tmp_path, capsys, "capped")
    assert _conv_isas(capped) == {"avx2"}
    assert capped["result"]["kernel_check"]["caps_set"] == {"ONEDNN_MAX_CPU_ISA": "AVX2"}
    found = [f for f in capped["findings"] if f["code"] == "EVID007"]
    if AVX512_CORE <= flags:
        assert len(found) == 1 and found[0]["severity"] == "warning"
        assert "ONEDNN_MAX_CPU_ISA=AVX2" in found[0]["why"] and "AVX-512" in found[0]["title"]
        assert "unset ONEDNN_MAX_CPU_ISA" in found[0]["snippet"]
    else:
        assert not found                 # AVX2 is the best this CPU runs: the cap changes nothing


CENSUS_UNDER_QEMU = """
import json, sys, torch
sys.path.insert(0, sys.argv[1])
import _libreports
census = _libreports.Census(torch)
conv = torch.nn.Conv2d(1, 8, 3)
x = torch.randn(4, 1, 16, 16)
census.run(lambda: conv(x).sum().backward())
print(json.dumps(census.report()))
"""


@pytest.mark.hardware
@pytest.mark.slow
@pytest.mark.alongside
def test_an_emulated_cpu_runs_narrower_kernels_and_the_finding_says_why(tmp_path):
    """qemu-x86_64 emulates an older CPU for a real torch step; the kernels it reports are judged against this
    machine's /proc/cpuinfo (which qemu's user mode leaves as the host's): below it, cause "hidden" (the
    library saw a smaller CPU, no variable capped it), and EVID007 says the CPU is emulated (asked for by its old
    code, ISA010)."""
    import shutil
    import subprocess
    import sys

    from cpudoctor.advisor import diagnose
    from cpudoctor.lab.jobs import FOLDER
    from cpudoctor.lab.results import read_kernels
    from cpudoctor.model import BenchRun, Report
    from cpudoctor.probes import probe_cpu

    if shutil.which("qemu-x86_64") is None or importlib.util.find_spec("torch") is None:
        pytest.skip("needs qemu-x86_64 (apt qemu-user) and torch")
    flags = _cpuinfo_flags()
    if AVX512_CORE <= flags:
        model, narrower = "Haswell", "avx2"
    elif {"avx2", "fma"} <= flags:
        model, narrower = "Nehalem", "sse41"
    else:
        pytest.skip("this CPU has no AVX2: no older model with a narrower oneDNN kernel to emulate")
    env = {k: v for k, v in os.environ.items() if k not in K.ALL_CAP_VARIABLES}
    proc = subprocess.run(["qemu-x86_64", "-cpu", model, sys.executable, "-c", CENSUS_UNDER_QEMU, str(FOLDER)],
                          capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    reports = json.loads(proc.stdout.strip().splitlines()[-1])
    kernels, check = read_kernels(reports, sorted(flags))
    conv = {k["isa"] for k in kernels if k["library"] == "oneDNN" and k["primitive"] == "convolution"}
    assert conv == {narrower}
    assert check["below"] and check["causes"] == ["hidden"] and not check["caps"]
    report = Report(cpu=probe_cpu(), benchmarks=[BenchRun("train", {}, {"kernels": kernels, "kernel_check": check})])
    found = [f for f in diagnose(report, only={"ISA010"}) if f.severity != "ok"]
    assert len(found) == 1 and found[0].code == "EVID007" and "emulated CPU" in found[0].why


# ----------------------------------------------------------------------------- one parser (issue 24's) underneath

_CONV_AVX2 = ("onednn_verbose,v1,primitive,exec,cpu,convolution,jit:avx2,forward_training,src:f32:a:blocked:abcd::f0 "
              "wei:f32:a:blocked:Acdb8a::f0 dst:f32:a:blocked:aBcd8b::f0,attr-scratchpad:user,alg:convolution_direct,"
              "mb16_ic3oc32_ih64oh64kh3sh1dh0ph1_iw64ow64kw3sw1dw0pw1,30.0")
_REORDER_AVX2 = ("onednn_verbose,v1,primitive,exec,cpu,reorder,jit:avx2,undef,src:f32::blocked:abcd::f0 "
                 "dst:f32::blocked:aBcd8b::f0,,,16x3x64x64,2.0")
_MATMUL_AVX10 = ("onednn_verbose,v1,primitive,exec,cpu,matmul,brg_matmul:avx10_1_512_amx,undef,"
                 "src:bf16::blocked:ab::f0 wei:bf16::blocked:ab::f0 dst:bf16::blocked:ab::f0,,,256x256:256x256,1.5")


def test_a_reorder_is_a_layout_copy_not_held_against_the_cpus_width():
    """A convolution on AVX2 is below an AVX-512 CPU; a reorder that says avx2 is not (a copy has no roof)."""
    checks = K.check_kernels(K.parse_onednn_verbose([_CONV_AVX2, _REORDER_AVX2]), flags_of(ZEN4))
    by_kind = {c.kernel.primitive: c for c in checks}
    assert by_kind["reorder"].kernel.isa == "avx2" and not by_kind["reorder"].below
    assert by_kind["convolution"].below and by_kind["convolution"].cause == "library"
    assert [i["primitive"] for i in K.summary(checks)["below"]] == ["convolution"]


def test_avx10_1_kernels_are_read_by_the_one_parser_and_judged():
    from cpudoctor.knowledge import ISA_FORCING
    from cpudoctor.probes.process.onednn_verbose import isa_of

    # every name the parser knows comes from the one width table, and has a width there
    assert all(ISA_FORCING.width_of("DNNL_MAX_CPU_ISA", n) in (1, 2, 3, 4) for n in ISA_FORCING.onednn_names)
    assert isa_of("brg_matmul:avx10_1_512_amx") == "avx10_1_512_amx" and isa_of("jit:avx10_1_512") == "avx10_1_512"
    (kernel,) = K.parse_onednn_verbose([_MATMUL_AVX10])
    assert (kernel.isa, kernel.dtype, kernel.share) == ("avx10_1_512_amx", "bf16", 1.0)
    (check,) = K.check_kernels([kernel], flags_of(SPR))
    assert not check.below and not check.dtype_emulated


def test_a_kernel_line_names_each_thing_once():
    from cpudoctor.render.lab import kernels_lines

    kernels = [{"library": "oneDNN", "primitive": "gemm_api", "isa": None, "share": 1.0, "impl": "", "dtype": "int8"},
               {"library": "oneMKL", "primitive": "SGEMM", "isa": None, "share": 1.0, "impl": "SGEMM", "dtype": "fp32"},
               {"library": "oneDNN", "primitive": "matmul", "isa": "avx512_core_bf16", "share": 0.5,
                "impl": "brg_matmul:avx512_core_bf16", "dtype": "bf16"}]
    assert kernels_lines(kernels, None)[1:] == [
        "  oneDNN gemm_api int8 (instruction set not named, 100 % of its time)",
        "  oneMKL SGEMM fp32 (instruction set not named, 100 % of its time)",
        "  oneDNN matmul bf16: brg_matmul:avx512_core_bf16 (avx512_core_bf16, 50 % of its time)"]


def test_the_census_keeps_onednns_lines_under_each_of_its_names(monkeypatch):
    """oneDNN printed ``mkldnn_verbose``, then ``dnnl_verbose``, now ``onednn_verbose``: an older torch's
    lines must reach the one parser (which reads all three) instead of passing through as job output."""
    text = ("mkldnn_verbose,exec,cpu,convolution,jit:avx2,forward_training,src_f32::blocked:abcd:f0,,alg:convolution_direct,mb1,1.5\n"
            "dnnl_verbose,exec,cpu,reorder,simple:any,undef,src_f32::blocked:abcd:f0,,,1x1,0.1\n"
            "onednn_verbose,v1,primitive,exec,cpu,matmul,brg:avx512_core,undef,src_f32::blocked:ab:f0,,,2x2:2x2,0.2\n")
    monkeypatch.setattr(_libreports, "capture_stdout", lambda fn: text)
    census = _libreports.Census(types.SimpleNamespace(backends=types.SimpleNamespace(mkldnn=None, mkl=None)))
    census.run(lambda: None)
    assert [line.split(",", 1)[0] for line in census.onednn] == ["mkldnn_verbose", "dnnl_verbose", "onednn_verbose"]
