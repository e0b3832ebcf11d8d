"""How much of the CPU a job's kernels used (issue 36): FLOPs and bytes from the libraries' verbose shapes, the rate
per layer kind against the measured roof, the findings the shapes give, the pictures, and the cost of watching.

The verbose logs under tests/fixtures/job_logs were recorded on this project's dev machine (oneDNN 3.12, oneMKL
2024.2, torch 2.13, 2 threads, a busy machine: their rates are low, their shapes are what the tests read); the
README there says how.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cpudoctor.advisor.evidence_rules import Evidence, run_evidence_rules
from cpudoctor.model.achieved import RoofFigure, Roofs, utilisation
from cpudoctor.probes.process.breakdown import build_breakdown
from cpudoctor.probes.process.classify import classify
from cpudoctor.probes.process.kernel_work import descriptor, dims_list, onednn_work
from cpudoctor.probes.process.mkl_verbose import parse_line as mkl_line
from cpudoctor.probes.process.mkl_verbose import parse_mkl_verbose
from cpudoctor.probes.process.onednn_verbose import parse_line, parse_onednn_verbose
from cpudoctor.probes.process.stacks import StackRecord, StackSample, parse_frame
from cpudoctor.probes.process.threadstates import ProcState, ThreadState, TreeStates
from cpudoctor.render import achieved as words

LOGS = Path(__file__).resolve().parent / "fixtures" / "job_logs"
ROOFS = Roofs([RoofFigure("fp32", 2, 100.0, nominal_gflops=160.0), RoofFigure("fp32", 1, 55.0),
               RoofFigure("bf16", 2, 400.0)], memory_gbps=12.0, source="saved", where="report.json",
              missing={"int8": "this CPU computes int8 by emulation (no VNNI or AMX-INT8)"})


def log(name: str) -> list[str]:
    return (LOGS / name).read_text(encoding="utf-8").splitlines()


def evidence(name: str, wall_s: float = 3.0, roofs: Roofs | None = ROOFS) -> Evidence:
    lines = log(name)
    onednn, mkl = parse_onednn_verbose(lines), parse_mkl_verbose(lines)
    return Evidence(onednn=onednn, mkl=mkl, achieved=utilisation(onednn, mkl, roofs, wall_s=wall_s),
                    cpu_flags={"avx2", "fma", "avx512f"}, command="python train.py")


# --- work from the shapes ------------------------------------------------------------------------


def test_convolution_flops_as_benchdnn_counts_them():
    f32 = {"src": "f32", "wei": "f32", "dst": "f32"}
    w = onednn_work("convolution", "forward_training", f32, "mb8_ic3oc16_ih32oh32kh3sh1dh0ph1_iw32ow32kw3sw1dw0pw1")
    assert w.flop == 2 * 8 * 16 * 32 * 32 * 3 * 3 * 3
    assert w.bytes == 4 * (8 * 3 * 32 * 32 + 16 * 3 * 9 + 8 * 16 * 32 * 32)
    # groups: ic and oc count every group's channels; a stride shrinks the output
    g = onednn_work("convolution", "backward_weights", f32, "g4mb8_ic16oc32_ih32oh15kh3sh2dh0ph0_iw32ow15kw3sw2dw0pw0")
    assert g.flop == 2 * 8 * 32 * 15 * 15 * (16 // 4) * 9
    # a deconvolution's products are counted from its (smaller) input
    d = onednn_work("deconvolution", "forward_training", f32, "mb8_ic16oc8_ih32oh65kh3sh2dh0ph0_iw32ow65kw3sw2dw0pw0")
    assert d.flop == 2 * 8 * 16 * 32 * 32 * 8 * 9
    # 3-D, with a name oneDNN printed
    three = onednn_work("convolution", "forward_inference", f32,
                        'mb1_ic2oc4_id8od6kd3_ih8oh6kh3_iw8ow6kw3n"conv3"')
    assert three.flop == 2 * 1 * 4 * 6 * 6 * 6 * 2 * 27
    assert descriptor('mb2ic4n"x y"') == {"mb": 2, "ic": 4}


def test_matmul_inner_product_and_int8_gemm():
    bf = {"src": "bf16", "wei": "bf16", "dst": "bf16"}
    assert onednn_work("matmul", "undef", bf, "8x784:784x512").flop == 2 * 8 * 784 * 512
    assert onednn_work("matmul", "undef", bf, "8x784:784x512").bytes == 2 * (8 * 784 + 784 * 512 + 8 * 512)
    # batch dimensions broadcast (a 1 takes the other's size)
    assert onednn_work("matmul", "undef", bf, "3x1x64x32:1x5x32x8").flop == 2 * 15 * 64 * 32 * 8
    ip = onednn_work("inner_product", "forward_training", {"src": "f32"}, "mb8ic512oc10")
    assert ip.flop == 2 * 8 * 512 * 10
    spatial = onednn_work("inner_product", "forward_training", {"src": "f32"}, "mb8ic16ih7iw7oc10")
    assert spatial.flop == 2 * 8 * 16 * 49 * 10
    (p,) = [parse_line(ln) for ln in log("mixed-fp32-bf16-int8.log") if ",gemm_api," in ln]
    assert (p.data_type, p.flop, p.bytes) == ("s8", 2 * 32 * 64 * 32, 32 * 64 + 64 * 32 + 4 * 32 * 32)


def test_kinds_without_flops_get_bytes_only_and_rnn_says_why():
    gelu = parse_line("onednn_verbose,v1,primitive,exec,cpu,eltwise,jit:avx512_core,forward_training,"
                      "data:bf16::blocked:abcd::f0,attr-scratchpad:user,alg:eltwise_gelu_erf alpha:0 beta:0,"
                      "8x16x32x32,0.0620117")
    assert (gelu.data_type, gelu.flop, gelu.bytes) == ("bf16", None, 2 * 2 * 8 * 16 * 32 * 32)
    add = onednn_work("binary", "forward", {"src": "f32"}, "8x16:8x16")
    assert (add.flop, add.bytes) == (None, 4 * (8 * 16 * 2 + 8 * 16))
    pool = onednn_work("pooling", "forward_training", {"src": "f32"}, "mb8ic16_ih32oh16kh2sh2dh0ph0_iw32ow16kw2sw2dw0pw0")
    assert pool.bytes == 4 * (8 * 16 * 32 * 32 + 8 * 16 * 16 * 16) and pool.flop is None
    assert onednn_work("rnn", "forward", {}, "l1t10mb8sic64").uncounted == "rnn"
    assert onednn_work("convolution", "forward", {}, "garbage").uncounted == "shape"
    assert dims_list("8x99999999999999:1") == [] and descriptor("mb99999999999999") == {}


def test_mkl_lines_give_sizes_time_and_threads():
    c = mkl_line("MKL_VERBOSE SGEMM(T,N,512,8,784,0x7ffd,0x7f28,784,0x5616,784,0x7ffd,0x5616,512) 52.86ms CNR:OFF "
                 "Dyn:0 FastMM:1 TID:0  NThr:2")
    assert (c.name, c.dtype, c.dims, c.flop, c.time_ms, c.threads) == ("SGEMM", "f32", (512, 8, 784),
                                                                        2 * 512 * 8 * 784, 52.86, 2)
    d = mkl_line("MKL_VERBOSE DGEMM(N,N,64,64,64,0x1,0x2,64,0x3,64,0x4,0x5,64) 12.5us CNR:OFF Dyn:1 NThr:1")
    assert (d.dtype, d.time_ms, d.bytes) == ("f64", pytest.approx(0.0125), 8 * 3 * 64 * 64)
    batch = mkl_line("MKL_VERBOSE SGEMM_BATCH(N,N,0x7ffd,0x7ffd,0x7ffd) 7.70ms CNR:OFF NThr:2")
    assert (batch.flop, batch.dims, batch.time_ms) == (None, (), 7.70)
    gemv = mkl_line("MKL_VERBOSE SGEMV(N,100,50,0x1,0x2,100,0x3,1,0x4,0x5,1) 3us NThr:1")
    assert gemv.flop == 2 * 100 * 50
    mixed = parse_mkl_verbose(log("mixed-fp32-bf16-int8.log"))
    assert mixed.version.startswith("oneMKL 2024.0") and {c.name for c in mixed.calls} == {"SGEMM", "SGEMM_BATCH"}
    assert mkl_line("MKL_VERBOSE garbage") is None and mkl_line("not mkl") is None


# --- against the roof ----------------------------------------------------------------------------


def test_mlp_at_batch_8_is_memory_bound_and_resnet_convolutions_compute_bound():
    mlp = evidence("mlp-batch8-fp32.log").achieved
    (linear,) = mlp.kinds
    assert (linear.kind, linear.dtype, linear.libraries) == ("linear", "fp32", ["oneMKL"])
    assert linear.intensity == pytest.approx(linear.flop / linear.bytes) and linear.intensity < 5
    assert linear.memory_bound and linear.attainable_gflops == pytest.approx(12.0 * linear.intensity)
    assert linear.of_roof == pytest.approx(linear.gflops / 100.0)
    big = evidence("mlp-batch128-fp32.log").achieved.kind("linear")
    assert big.intensity > 5 * linear.intensity and big.memory_bound is False
    conv = evidence("resnet-nchw-fp32.log").achieved.kind("convolution")
    assert conv.intensity > 20 and conv.memory_bound is False and conv.counted
    assert set(conv.directions) == {"forward", "backward_data", "backward_weights"}


def test_whole_job_share_is_kernel_time_times_efficiency():
    u = evidence("mlp-batch8-fp32.log", wall_s=4.0).achieved
    (k,) = u.kinds
    assert u.cpu_share() == pytest.approx(k.flop / (100e9 * 4.0))
    assert u.cpu_share() == pytest.approx(k.counted_ms / 1e3 / 4.0 * u.kernel_efficiency())
    assert u.kernel_efficiency() == pytest.approx(k.of_roof)


def test_per_step_figures_when_the_step_count_is_known():
    lines = log("mlp-batch8-fp32.log")
    u = utilisation(parse_onednn_verbose(lines), parse_mkl_verbose(lines), ROOFS, wall_s=3.0, steps=40)
    (text,) = [t for t in words.lines(u) if t.startswith("Per step")]
    assert "(40 steps observed)" in text and f"{u.flop / 40 / 1e9:,.3f} GFLOP counted" in text
    assert not [t for t in words.lines(evidence("mlp-batch8-fp32.log").achieved) if t.startswith("Per step")]


def test_int8_without_a_measured_roof_says_so_instead_of_guessing():
    u = evidence("mixed-fp32-bf16-int8.log").achieved
    assert u.no_roof == {"int8": "this CPU computes int8 by emulation (no VNNI or AMX-INT8)"}
    assert u.cpu_share() is None
    text = "\n".join(words.lines(u))
    assert "int8 has no measured roof: this CPU computes int8 by emulation" in text
    assert "matmul int8:" in text and "no measured int8 roof" in text
    assert "the CPU's compute it used is not stated: no measured roof for int8" in text
    assert "oneMKL's batched GEMMs" in text and "reorder" in text     # what was not counted, said
    bf16 = u.kind("linear", "bf16")
    assert bf16.roof_gflops == 400.0 and "bf16 roof on 2 threads" in words.kind_sentence(bf16)


def test_roof_at_the_jobs_threads_or_the_nearest_below():
    assert ROOFS.roof("fp32", 2).gflops == 100.0 and ROOFS.roof("fp32", 1).gflops == 55.0
    assert ROOFS.roof("fp32", 8).threads == 2          # measured on fewer threads: a floor of the roof
    busy = Roofs([RoofFigure("fp32", 2, 21.7, other_share=0.31), RoofFigure("fp32", 1, 103.5)])
    assert busy.roof("fp32", 2).gflops == 103.5        # 2 threads measured while another program ran
    assert ROOFS.roof("fp16", 2) is None
    saved = Roofs.of_roofline({"compute": [{"dtype": "fp32", "threads": 2, "gflops": 90.5, "nominal_gflops": 166.4}],
                               "memory": [{"node": "all", "kernel": "copy", "gbps": 11.2}],
                               "notes": ["int8 not measured: this CPU computes it by emulation (no VNNI or AMX-INT8)"]},
                              source="saved", where="r.json")
    assert (saved.roof("fp32", 2).nominal_gflops, saved.memory_gbps) == (166.4, 11.2)
    assert saved.missing == {"int8": "this CPU computes it by emulation (no VNNI or AMX-INT8)"}


def test_words_name_the_roof_the_bound_and_the_claim():
    u = evidence("mlp-batch8-fp32.log").achieved
    text = words.lines(u)
    assert text[0].startswith("linear fp32: ") and "of this CPU's fp32 roof on 2 threads" in text[0]
    assert "memory-bound (the memory roof allows" in text[0]
    assert any(t.startswith("Whole job: ") and "of this CPU's compute on 2 threads" in t for t in text)
    assert any(t.startswith("Guides say CPU training reaches about 90 %") for t in text)
    assert text[-1] == "Roof: the saved bench roofline (report.json)."
    none = evidence("mlp-batch8-fp32.log", roofs=None).achieved
    assert "no measured fp32 roof" in words.lines(none)[0] and words.lines(none)[-1].startswith("Roof: none measured")
    data = words.data(u)
    assert json.loads(json.dumps(data))["kinds"][0]["kind"] == "linear" and data["cpu_share"] > 0


def test_pictures_put_the_jobs_kernels_on_the_roofline_and_draw_bars():
    from cpudoctor.render.svg_roofline import render_bars, render_svg

    u = evidence("resnet-nchw-fp32.log").achieved
    svg = render_svg(words.picture(u))
    assert 'class="rf-point rf-job"' in svg and 'class="rf-roof"' in svg and 'class="rf-memory"' in svg
    assert "◆ this job" in svg
    bars = render_bars(words.bars(u))
    assert bars.count('class="ab-bar"') == len([k for k in u.kinds if k.counted]) and "% of roof" in bars
    assert render_bars([]) == ""


# --- findings: each rule on a bad and a good job -------------------------------------------------


@pytest.mark.parametrize("code,bad,good", [
    ("EVID020", "mlp-batch8-fp32.log", "mlp-batch128-fp32.log"),
    ("EVID021", "mlp-batch8-fp32.log", "mlp-batch128-fp32.log"),
    ("EVID022", "resnet-nchw-fp32.log", "resnet-channels-last-fp32.log"),
])
def test_roof_rules_fire_on_the_bad_job_and_not_on_its_fix(code, bad, good):
    found = run_evidence_rules(evidence(bad), {code}, strict=True)
    assert [f.code for f in found] == [code]
    assert run_evidence_rules(evidence(good), {code}, strict=True) == []


def test_the_findings_quote_the_jobs_numbers():
    (mem,) = run_evidence_rules(evidence("mlp-batch8-fp32.log"), {"EVID020"}, strict=True)
    assert "smallest dimension is 8: the batch" in mem.why and "FLOP/byte" in mem.title
    (split,) = run_evidence_rules(evidence("mlp-batch8-fp32.log"), {"EVID021"}, strict=True)
    assert "split over 2 threads" in split.why and "torch.set_num_threads(1)" in split.snippet
    (reorder,) = run_evidence_rules(evidence("resnet-nchw-fp32.log"), {"EVID022"}, strict=True)
    assert "per convolution" in reorder.title and "channels_last" in reorder.snippet
    one_thread = [ln.replace("NThr:2", "NThr:1") for ln in log("mlp-batch8-fp32.log")]
    onednn, mkl = parse_onednn_verbose(one_thread), parse_mkl_verbose(one_thread)
    ev = Evidence(onednn=onednn, mkl=mkl, achieved=utilisation(onednn, mkl, ROOFS, wall_s=3.0), cpu_flags={"avx2"})
    assert run_evidence_rules(ev, {"EVID021"}, strict=True) == []


def test_small_gemms_split_in_a_script_that_sets_its_count_name_that_line():
    """torch.set_num_threads(1) "first thing in the script" does nothing when a later line of the script sets the
    count itself (tests/jobs/serve_threads.py): the fix is that line."""
    import dataclasses

    from cpudoctor.model.jobstate import CodeLine, JobState, SettingCall

    call = SettingCall("torch.set_num_threads", "2", at=CodeLine("/srv/serve.py", 10, "<module>"), after_torch=True)
    ev = dataclasses.replace(evidence("mlp-batch8-fp32.log"), state=JobState(loaded=True, calls=[call]))
    (split,) = run_evidence_rules(ev, {"EVID021"}, strict=True)
    assert "line 10 of /srv/serve.py" in split.fix and split.snippet == "# line 10 of /srv/serve.py:\ntorch.set_num_threads(1)"
    assert split.evidence["set_at"] == "serve.py:10"


def test_no_verbose_lines_no_roof_findings():
    assert run_evidence_rules(Evidence(cpu_flags={"avx2"}), {"EVID020", "EVID021", "EVID022"}, strict=True) == []


# --- what watching costs -------------------------------------------------------------------------


LIBC = "libc.so.6"
TORCH = "libtorch_cpu.so"


def _stack(*frames: str) -> tuple:
    return tuple(parse_frame(f) for f in frames)


@pytest.mark.parametrize("frames", [
    (f"dnnl::impl::primitive_execute ({TORCH})", f"dnnl::impl::verbose_printf_impl ({TORCH})",
     f"__printf_chk ({LIBC})", f"_IO_file_write ({LIBC})", f"write ({LIBC})"),
    (f"sgemm_ ({TORCH})", f"mkl_serv_print_verbose_info ({TORCH})", f"mkl_serv_format_print ({TORCH})",
     f"mkl_puts ({TORCH})", f"_IO_file_xsputn ({LIBC})", f"write ({LIBC})"),
    (f"sgemm_ ({TORCH})", f"mkl_serv_dsecnd ({TORCH})"),
], ids=["onednn-printf", "mkl-print", "mkl-timer"])
def test_verbose_printing_is_instrumentation_not_compute(frames):
    """Seen with py-spy on a job of small calls: half its samples were the libraries printing their lines."""
    assert classify(_stack("step (t.py:3)", *frames)).category == "instrumentation"
    assert classify(_stack("step (t.py:3)", f"dnnl::impl::primitive_execute ({TORCH})")).category == "compute"


def test_cpu_doctors_own_code_in_the_job_is_instrumentation_but_the_work_under_it_is_not():
    window = "tick (/tmp/cpudoctor-probe-1/verbose_window.py:80)"
    assert classify(_stack("step (t.py:3)", window)).category == "instrumentation"
    assert classify(_stack("step (t.py:3)", "on_step (/tmp/cpudoctor-probe-x1/sitecustomize.py:390)")).category == \
        "instrumentation"
    under = _stack("on_step (/tmp/p/job_probe.py:390)", f"at::native::addmm_impl_cpu_ ({TORCH})",
                   f"mkl_blas_avx512_sgemm_kernel ({TORCH})")
    assert classify(under).category == "compute"


def test_instrumentation_is_counted_apart_from_the_shares():
    printing = _stack("step (t.py:3)", f"dnnl::impl::verbose_printf_impl ({TORCH})", f"write ({LIBC})")
    kernel = _stack("step (t.py:3)", f"dnnl::impl::cpu::x64::jit_uni_reorder_t::execute ({TORCH})")
    record = StackRecord(samples=[StackSample((10,), 10, "MainThread", printing, 30),
                                  StackSample((10,), 10, "MainThread", kernel, 70)], rate_hz=50, sampler="test")
    st = TreeStates(root_pid=10, rate_hz=10, window_s=2.0, samples=20, online_cpus=2, machine_busy_cpus=1.0)
    st.processes[10] = ProcState(10, 1, "python", is_python=True, affinity=[0, 1], cpu_seconds=2.0)
    st.threads[(10, 10)] = ThreadState(10, 10, "python", running=20)
    bd = build_breakdown(record, st)
    assert bd.instrumentation_samples == 30 and bd.samples == 70
    assert [s.category for s in bd.shares] == ["compute"] and bd.shares[0].share == 1.0
    from cpudoctor.render.breakdown import notes

    assert any("30 samples, 30 % of the job's: left out of the shares" in n for n in notes(bd))


def test_verbose_windows_switch_the_libraries_and_mark_the_time():
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "verbose_window", Path(__file__).resolve().parents[1] / "probes/child/scripts/verbose_window.py")
    vw = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(vw)
    assert vw.parse_plan("on=2,every=10") == (2.0, 10.0, 0.0) and vw.parse_plan("on=1,every=3,first=2")[2] == 2
    assert vw.parse_plan("on=10,every=2") is None and vw.parse_plan("garbage") is None

    levels: list[tuple[str, int]] = []

    class Verbose:
        def mkldnn_set_verbose(self, level):
            levels.append(("onednn", level))

        def mkl_set_verbose(self, level):
            levels.append(("mkl", level))

    torch = type("T", (), {"_C": type("C", (), {"_verbose": Verbose()})()})()
    marks: list[str] = []
    now = [100.0]
    late = vw.VerboseWindows(torch, 2.0, 10.0, 5.0, clock=lambda: now[0], write=[].append)
    assert late.state is False and levels == [("onednn", 0), ("mkl", 0)]     # off until its first window
    levels.clear()
    w = vw.VerboseWindows(torch, 2.0, 10.0, clock=lambda: now[0], write=marks.append)
    for t in (101.0, 102.5, 109.0, 110.2, 112.4):
        w.tick(t)
    now[0] = 113.0
    w.end()
    assert levels == [("onednn", 1), ("mkl", 1), ("onednn", 0), ("mkl", 0), ("onednn", 1), ("mkl", 1),
                      ("onednn", 0), ("mkl", 0)]
    parsed = parse_onednn_verbose(marks)
    assert [s for s, _t in parsed.windows] == ["on", "off", "on", "off", "end"]
    assert parsed.observed_s == pytest.approx(2.5 + 2.2) and parsed.primitives == []
    assert vw.install(torch, env={}) is None


def test_run_switches_mkl_verbose_on_and_keeps_its_lines_out_of_the_jobs_output():
    from cpudoctor.probes.process.observe import _keeper, diagnostic_env

    env, added = diagnostic_env({"PATH": "/bin"}, "on=2,every=10")
    assert added == {"ONEDNN_VERBOSE": "profile_exec", "MKL_VERBOSE": "1", "TORCH_LOGS": "+recompiles",
                     "PYTHONFAULTHANDLER": "1", "CPUDOCTOR_VERBOSE_WINDOWS": "on=2,every=10"}
    keep = _keeper(added)
    assert keep("MKL_VERBOSE SGEMM(N,N,1,1,1) 1us NThr:1\n") and keep("onednn_verbose,v1,info,x\n")
    assert not keep("epoch 1 loss 0.3\n")
    _env, mine = diagnostic_env({"MKL_VERBOSE": "2"})
    assert "MKL_VERBOSE" not in mine and not _keeper(mine)("MKL_VERBOSE SGEMM(N,N,1,1,1) 1us\n")


# --- where the roof comes from -------------------------------------------------------------------


def test_roofs_from_a_saved_report_and_from_the_windows_kept_runs(tmp_path, monkeypatch):
    import socket

    from cpudoctor.lab import job_roofs
    from cpudoctor.model import BenchRun
    from cpudoctor.model.serde import to_data

    run = BenchRun(kind="roofline", metrics={"compute": [{"dtype": "fp32", "threads": 2, "gflops": 88.0}],
                                             "memory": [{"node": "all", "kernel": "copy", "gbps": 9.5}]},
                   started_at="2026-12-01T10:00:00+00:00")
    kept = tmp_path / "CPU Doctor" / "lab-runs.json"
    kept.parent.mkdir()
    kept.write_text(json.dumps({"version": 1, "runs": {f"{socket.gethostname()} | X | py": [to_data(run)],
                                                       "elsewhere | X | py": [to_data(run)]}}))
    found = job_roofs.from_kept(kept)
    assert (found.source, found.roof("fp32", 2).gflops, found.memory_gbps) == ("saved", 88.0, 9.5)
    assert job_roofs.kept_runs_file({"XDG_CONFIG_HOME": str(tmp_path)}) == kept or not job_roofs.kept_runs_file({})
    roofs = job_roofs.find(["fp32", "int8"], 2, flags=["avx2", "avx512f"], kept=kept, measure=False)
    assert roofs.missing == {"int8": "this CPU computes int8 by emulation (no VNNI or AMX-INT8)"}
    empty = tmp_path / "none.json"
    assert job_roofs.find(["fp32"], 2, kept=empty, measure=False).source == "none"
    (tmp_path / "bad.json").write_text("{not json")
    assert job_roofs.from_kept(tmp_path / "bad.json") is None


def test_the_inspector_time_tab_shows_the_runs_kernels_against_the_roof(qtbot):
    from cpudoctor.gui.achieved_view import AchievedView

    view = AchievedView()
    qtbot.addWidget(view)
    assert not view.isVisible() and view.achieved is None
    u = evidence("resnet-nchw-fp32.log").achieved
    view.show_achieved(u)
    view.show()
    assert view.text.text().splitlines() == words.lines(u)
    assert 'class="ab-bar"' in view.bars.svg and 'rf-job' in view.roofline.svg
    assert view.bars.renderer().isValid() and view.roofline.renderer().isValid()
    view.show_achieved(None)
    assert view.isHidden()


def test_run_reports_carry_the_roof_in_every_format(tmp_path):
    from cpudoctor.model.evidence import RunObservation
    from cpudoctor.render import run_report

    lines = log("resnet-nchw-fp32.log")
    obs = RunObservation(command="python resnet_small.py", duration_s=3.0, onednn=parse_onednn_verbose(lines),
                         mkl=parse_mkl_verbose(lines))
    obs.achieved = utilisation(obs.onednn, obs.mkl, ROOFS, wall_s=3.0)
    text = run_report.render_text(obs, [])
    assert "Achieved     " in text and "convolution fp32: " in text and "oneMKL: 6 calls" in text
    assert "## Achieved against the roof" in run_report.render_md(obs, [])
    html = run_report.render_html(obs, [])
    assert 'class="ab-bar"' in html and "rf-job" in html
    data = json.loads(run_report.render_json(obs, []))
    assert data["achieved"]["roof"]["source"] == "saved" and data["kernels"]["mkl"]["calls"] == 6
    pdf = run_report.render_pdf(obs, [])
    assert pdf.startswith(b"%PDF") and len(pdf) > 2000


def test_the_quick_roof_measures_only_what_this_cpu_computes_natively(monkeypatch):
    """int8 on a CPU without VNNI: the quick measurement leaves it out and the job is told why, not a guess."""
    from cpudoctor.lab import job_roofs, session
    from cpudoctor.lab.result_base import Context
    from cpudoctor.model import BenchRun

    asked = {}

    class Result:
        def bench_run(self):
            return BenchRun(kind="roofline", metrics={"compute": [{"dtype": "fp32", "threads": 2, "gflops": 50.0}]},
                            started_at="2026-12-04T00:00:00+00:00")

    def fake_run(job, settings, **_kw):
        asked.update(settings)
        return None, Result()

    monkeypatch.setattr(session, "context_for", lambda job: Context(flags=["avx2", "fma", "avx512f"]))
    monkeypatch.setattr(session, "run", fake_run)
    roofs = job_roofs.quick(["fp32", "int8"], 2)
    assert asked["dtypes"] == ["fp32"] and asked["threads"] == [2, 1] and asked["operators"] is False
    assert roofs.missing == {"int8": "this CPU computes int8 by emulation (no VNNI or AMX-INT8)"}
    assert roofs.source == "quick" and "fp32 on 2 threads and 1" in roofs.where
    told = []
    found = job_roofs.find(["fp32"], 2, kept=Path("/nonexistent/lab-runs.json"), notify=told.append)
    assert found.source == "quick" and told and "--roof none" in told[0]


def test_a_job_the_user_stopped_or_that_crashed_is_not_kept_waiting_for_a_roof(monkeypatch):
    from cpudoctor import jobrun
    from cpudoctor.lab import job_roofs
    from cpudoctor.model.evidence import JobCrash, RunObservation

    seen = []
    monkeypatch.setattr(job_roofs, "find", lambda *a, **kw: seen.append(kw["measure"]) or Roofs())
    lines = log("mlp-batch8-fp32.log")
    for ended, measure in (("exit", True), ("interrupt", False), ("stopped", False), ("seconds", True)):
        obs = RunObservation(command="python t.py", duration_s=3.0, ended_by=ended, onednn=parse_onednn_verbose(lines),
                             mkl=parse_mkl_verbose(lines))
        assert jobrun.achieved(obs, jobrun.Machine()).kinds
        assert seen[-1] is measure, ended
    crashed = RunObservation(command="python t.py", duration_s=3.0, ended_by="exit", onednn=parse_onednn_verbose(lines),
                             mkl=parse_mkl_verbose(lines), crash=JobCrash(signal="SIGSEGV"))
    assert jobrun.achieved(crashed, jobrun.Machine()).kinds and seen[-1] is False      # a saved roof only
    assert jobrun.achieved(RunObservation(command="true"), jobrun.Machine()) is None     # no kernel timed
