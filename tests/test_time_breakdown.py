"""The time breakdown's parts without a job: py-spy's raw format, the classification rules (data + schema),
the accounting of shares, oneDNN's verbose lines, PyTorch's recompile log, the refusal line, the renderers
and the evidence rules' gates. The real jobs are in tests/test_run_jobs.py."""

from __future__ import annotations

import json

import fastjsonschema
import pytest

from cpudoctor.advisor.evidence_rules import EVIDENCE_RULES, Evidence, run_evidence_rules
from cpudoctor.advisor.job_verdict import judge_breakdown
from cpudoctor.probes.process.attach import access_facts
from cpudoctor.probes.process.breakdown import build_breakdown
from cpudoctor.probes.process.classify import classify
from cpudoctor.probes.process.onednn_verbose import isa_of, parse_onednn_verbose
from cpudoctor.probes.process.stacks import StackRecord, classify_failure, parse_frame, parse_raw
from cpudoctor.probes.process.threadstates import ProcState, ThreadState, TreeStates
from cpudoctor.probes.process.torch_logs import parse_recompiles
from cpudoctor.render.breakdown import label, refusal_text, render_html, render_md, render_text, text_bar, verdict_text
from cpudoctor.resources import load_json

SITE = "/v/lib/python3.11/site-packages"
LIBC = "/usr/lib/x86_64-linux-gnu/libc.so.6"
TORCH = f"{SITE}/torch/lib/libtorch_cpu.so"


def stack(*frames: str) -> tuple:
    return tuple(parse_frame(f) for f in frames)


def py(name: str, file: str, line: int = 1) -> str:
    return f"{name} ({file}:{line})"


# --- data file and schema ----------------------------------------------------------------------


def test_rules_file_matches_its_schema_and_names_known_categories():
    data = load_json("sample_rules.json")
    fastjsonschema.compile(load_json("sample_rules.schema.json"))(data)
    cats = {c["id"] for c in data["categories"]}
    libs = {lib["id"] for lib in data["libraries"]}
    assert {"compute", "openmp_wait", "python", "data", "compile", "memory", "io_sleep", "gil", "other",
            "instrumentation"} == cats
    for r in data["rules"]:
        assert r["category"] in cats, r["id"]
        assert r.get("library") is None or r["library"] in libs, r["id"]
        assert r.get("process") or r.get("where") in ("blocking", "leaf1-python") or any(
            r.get(k) for k in ("frame", "module", "file")), r["id"]
    assert len({r["id"] for r in data["rules"]}) == len(data["rules"])


def test_schema_rejects_an_unknown_place():
    bad = json.loads(json.dumps(load_json("sample_rules.json")))
    bad["rules"][0]["where"] = "somewhere"
    with pytest.raises(fastjsonschema.JsonSchemaException):
        fastjsonschema.compile(load_json("sample_rules.schema.json"))(bad)


# --- py-spy's raw format -----------------------------------------------------------------------


def test_raw_lines_with_processes_threads_and_native_frames():
    lines = [
        f'process 10:"python train.py";thread (10): MainThread;0x7f00 ({LIBC});<module> (/t/train.py:15);'
        f'mkl_blas_def_sgemm_kernel_0_zen ({TORCH}) 78\n',
        f'process 10:"python train.py";process 11:"python train.py";thread (12): QueueFeederThread;'
        f'Queue._feed (/usr/lib/python3.11/multiprocessing/queues.py:231);poll ({LIBC}) 3\n',
        "garbage without a count\n",
        'thread (0x7f3a): MainThread;<module> (x.py:1) 2\n',
    ]
    samples, commands = parse_raw(lines)
    assert [(s.pids, s.tid, s.thread, s.count) for s in samples] == [
        ((10,), 10, "MainThread", 78), ((10, 11), 12, "QueueFeederThread", 3), ((), 0x7F3A, "MainThread", 2)]
    assert commands == {10: "python train.py", 11: "python train.py"}
    leaf = samples[0].frames[-1]
    assert (leaf.name, leaf.module, leaf.python) == ("mkl_blas_def_sgemm_kernel_0_zen", "libtorch_cpu.so", False)
    assert samples[0].frames[1].python and samples[0].frames[1].line == 15
    assert samples[2].pid == 0


def test_a_command_with_newlines_spans_lines():
    text = 'process 5:"python -c import time\nwhile 1: pass";thread (5): MainThread;<module> (<string>:2) 40\n'
    samples, commands = parse_raw(text.splitlines(keepends=True))
    assert [(s.pid, s.count, s.frames[-1].python) for s in samples] == [(5, 40, True)]
    assert commands[5] == "python -c import time\nwhile 1: pass"


def test_failures_are_told_apart():
    assert classify_failure("Error: Permission denied (os error 13)") == "denied"
    assert classify_failure("Error: Operation not permitted (os error 1)") == "denied"
    assert classify_failure("Error: Failed to find python version from target process") == "not_python"
    assert classify_failure("Error: No such process (os error 3)") == "gone"
    assert classify_failure("something else") == "failed"


# --- classification ------------------------------------------------------------------------------

CASES = [
    ("compute", "mkl", stack(py("<module>", "t.py"), f"at::native::addmm_impl_cpu_ ({TORCH})",
                            f"mkl_blas_def_sgemm_kernel_0_zen ({TORCH})")),
    ("compute", "onednn", stack(py("_conv_forward", f"{SITE}/torch/nn/modules/conv.py"), "0x7f31d162c92f (?)")),
    ("compute", "onednn", stack(py("f", "t.py"), f"dnnl::impl::cpu::x64::jit_blk_reorder_t::execute ({TORCH})")),
    ("compute", "aten", stack(py("f", "t.py"), f"at::native::(anonymous namespace)::add_kernel ({TORCH})",
                             f"at::vec::AVX512::map ({TORCH})")),
    ("compute", "openblas", stack(py("f", "t.py"), "dgemm_kernel_HASWELL (libscipy_openblas64_.so)")),
    ("openmp_wait", None, stack(py("f", "t.py"), f"dnnl::impl::parallel ({TORCH})", "0x7f31ef61ca9d (libgomp.so.1)")),
    ("openmp_wait", None, stack(py("f", "t.py"), "__kmp_wait_template (libiomp5.so)")),
    ("python", None, stack(py("<module>", "t.py"), py("step", "t.py", 9))),
    ("python", None, stack(py("f", "t.py"), "gc_collect_main (libpython3.11.so.1.0)")),
    ("data", None, stack(py("<module>", "t.py"), py("__next__", f"{SITE}/torch/utils/data/dataloader.py"),
                         py("_next_data", f"{SITE}/torch/utils/data/dataloader.py"), f"poll ({LIBC})")),
    ("data", None, stack(py("_worker_loop", f"{SITE}/torch/utils/data/_utils/worker.py"), py("getitem", "d.py"))),
    ("compile", None, stack(py("f", "t.py"), py("_compile", f"{SITE}/torch/_dynamo/convert_frame.py"),
                            py("run", f"{SITE}/torch/_dynamo/symbolic_convert.py"))),
    ("memory", None, stack(py("f", "t.py"), f"c10::alloc_cpu ({TORCH})", f"posix_memalign ({LIBC})",
                           f"_int_malloc ({LIBC})", f"mmap ({LIBC})")),
    ("io_sleep", None, stack(py("f", "t.py"), "pysleep (libpython3.11.so.1.0)", f"clock_nanosleep ({LIBC})")),
    ("gil", None, stack(py("f", "t.py"), "gil_scoped_acquire (libtorch_python.so)", f"pthread_cond_timedwait ({LIBC})",
                        f"0x7f2c152a3f16 ({LIBC})")),
    ("other", None, stack(py("f", "t.py"), f"c10::Dispatcher::callBoxed ({TORCH})")),
]


@pytest.mark.parametrize("category,library,frames", CASES, ids=[f"{c}-{lib}" for c, lib, _ in CASES])
def test_classify(category, library, frames):
    v = classify(frames)
    assert (v.category, v.library) == (category, library), v.rule


def test_compiler_process_is_compilation_without_frames():
    assert classify((), "cc1plus").category == "compile"


def test_import_is_startup_not_a_share():
    v = classify(stack(py("<module>", "t.py"), py("_find_and_load", "<frozen importlib._bootstrap>"),
                       py("<module>", f"{SITE}/torch/_dynamo/variables/builder.py")))
    assert v.startup and v.category == "python"


# --- accounting ---------------------------------------------------------------------------------


def _states(window=2.0, others=0.0, online=2):
    st = TreeStates(root_pid=10, rate_hz=10, window_s=window, samples=20, online_cpus=online,
                    machine_busy_cpus=1.0 + others)
    st.processes[10] = ProcState(10, 1, "python", is_python=True, affinity=[0, 1], cpu_seconds=2.0)
    st.threads[(10, 10)] = ThreadState(10, 10, "python", running=20)
    st.threads[(10, 11)] = ThreadState(10, 11, "python", running=10, waiting=10)     # an OpenMP worker
    return st


def _record(counts: dict[str, int]) -> StackRecord:
    by = {c: f for c, _, f in CASES if c in counts}
    lines = []
    from cpudoctor.probes.process.stacks import StackSample
    for cat, n in counts.items():
        lines.append(StackSample((10,), 10, "MainThread", by[cat], n))
    return StackRecord(samples=lines, rate_hz=50, sampler="py-spy test")


def test_shares_add_up_and_workers_follow_their_master():
    bd = build_breakdown(_record({"compute": 60, "openmp_wait": 20, "python": 20}), _states())
    assert abs(sum(s.share for s in bd.shares) - 1) < 1e-3
    main = bd.process(10)
    worker = next(t for t in main.threads if t.tid == 11)
    assert worker.role == "native" and worker.source == "states" and worker.idle_samples == 10
    # 1 s running: at most as long as the master computed (1.2 s), in the master's library
    assert [s.category for s in worker.shares] == ["compute"]
    driver = next(t for t in main.threads if t.role == "driver")
    assert driver.samples == 100 and bd.driver_samples == 100 and judge_breakdown(bd).verdict == "ok"


def test_busy_machine_and_thin_evidence_are_inconclusive():
    busy = build_breakdown(_record({"openmp_wait": 90, "compute": 10}), _states(others=1.5))
    assert judge_breakdown(busy).verdict == "busy" and "1.5 of the 2 CPUs" in verdict_text(busy)
    thin = build_breakdown(_record({"python": 5}), _states())
    assert judge_breakdown(thin).verdict == "thin"
    assert [f.code for f in run_evidence_rules(Evidence(breakdown=thin), strict=True)] == ["EVID009"]
    # busy: waiting is a comparison with an unloaded machine, so it is only "likely" (never a warning), with the load
    found = {f.code: f for f in run_evidence_rules(Evidence(breakdown=busy), strict=True)}
    assert set(found) == {"EVID001", "EVID009", "EVID010"}
    assert found["EVID001"].severity == "info" and found["EVID001"].title.startswith("Likely: ")
    # the job's own samples (its compute here is OpenBLAS's dgemm: float64) are judged as usual, the load stated
    assert found["EVID010"].severity == "warning" and "1.5 of the 2 CPUs meanwhile" in found["EVID010"].why
    assert "np.float32" in found["EVID010"].fix
    assert "other programs used 1.5 of the 2 CPUs" in found["EVID001"].why
    assert found["EVID009"].title == "Busy machine: other programs used 1.5 of the 2 CPUs"


def test_a_job_and_others_that_fill_the_machine_together_are_inconclusive():
    """0.8 CPUs of other programs beside a job whose team spans both CPUs: every barrier waits for the
    descheduled member, so OpenMP waiting is no evidence against the job (a healthy MLP showed 60 % of it in
    a suite run beside another test and got EVID001). The same others on a machine with room are no reason."""
    crowded = build_breakdown(_record({"openmp_wait": 60, "compute": 40}), _states(others=0.8))
    assert crowded.job_cpus == 1.0                  # 0.8 + 1.0 fill 90 % of 2 CPUs; 0.8 is below the 1-CPU floor
    assert judge_breakdown(crowded).verdict == "busy" and "together they filled the machine" in verdict_text(crowded)
    assert {(f.code, f.severity) for f in run_evidence_rules(Evidence(breakdown=crowded), strict=True)} == {
        ("EVID009", "info"), ("EVID010", "warning")}      # no warning from the waiting; the dgemm share still counts
    roomy = build_breakdown(_record({"openmp_wait": 60, "compute": 40}), _states(others=0.8, online=8))
    assert judge_breakdown(roomy).verdict == "ok"


def test_openmp_finding_quotes_this_runs_numbers():
    bd = build_breakdown(_record({"openmp_wait": 70, "compute": 20, "python": 10}), _states())
    (f,) = [f for f in run_evidence_rules(Evidence(breakdown=bd, command="python t.py"), strict=True)
            if f.code == "EVID001"]
    assert f.severity == "warning" and f"{bd.samples} samples" in f.why and (
        "OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 python t.py" == f.snippet)


def test_renderers_show_every_category_once():
    bd = build_breakdown(_record({"compute": 50, "data": 30, "python": 20}), _states())
    bar = text_bar(bd.shares, 40)
    assert len(bar) == 42 and set(bar[1:-1]) <= set("KDP")
    text = "\n".join(render_text(bd))
    for label in ("Compute kernels", "Data loading", "Python code"):
        assert label in text and label in "\n".join(render_md(bd)) and label in render_html(bd)


# --- oneDNN verbose and the recompile log --------------------------------------------------------

ONEDNN = """onednn_verbose,v1,info,oneDNN v3.12.0 (commit 80afa71049cd69a3df32adcccb623b12cd7baa22)
onednn_verbose,v1,info,cpu,runtime:OpenMP,nthr:2
onednn_verbose,v1,info,cpu,isa:Intel AVX2
onednn_verbose,v1,primitive,exec,cpu,convolution,jit:avx2,forward_training,src:f32:a:blocked:abcd::f0 wei:f32:a:blocked:Acdb16a::f0 dst:f32:a:blocked:aBcd16b::f0,attr-scratchpad:user,alg:convolution_direct,mb16_ic3oc32_ih64oh64kh3sh1dh0ph1_iw64ow64kw3sw1dw0pw1,37.5
onednn_verbose,v1,primitive,exec,cpu,convolution,brg_conv_fwd:avx512_core_bf16,forward_training,src:bf16::blocked:acdb::f0 wei:bf16:a:blocked:Acdb16a::f0 dst:bf16::blocked:acdb::f0,,alg:convolution_direct,mb1_ic3oc8,2.5
dnnl_verbose,exec,cpu,inner_product,ref:any,forward_inference,src_f32::blocked:ab:f0 wei_f32::blocked:ab:f0 dst_f32::blocked:ab:f0,,,mb2ic4oc4,1.0
steps 35
"""


def test_onednn_lines_new_and_old():
    log = parse_onednn_verbose(ONEDNN.splitlines())
    assert (log.version, log.runtime, log.threads, log.max_isa) == ("v3.12.0", "OpenMP", 2, "Intel AVX2")
    assert [(p.kind, p.isa, p.data_type, p.time_ms) for p in log.primitives] == [
        ("convolution", "avx2", "f32", 37.5), ("convolution", "avx512_core_bf16", "bf16", 2.5),
        ("inner_product", None, "f32", 1.0)]
    assert log.primitives[2].reference and not log.primitives[0].reference
    assert isa_of("jit:uni") is None and isa_of("gemm:jit") is None and isa_of("brg:avx512_core_amx") == "avx512_core_amx"


def test_lower_isa_names_the_cap_variable():
    log = parse_onednn_verbose(ONEDNN.splitlines())
    flags = {"avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512_bf16", "sse4_1", "avx"}
    found = run_evidence_rules(Evidence(onednn=log, cpu_flags=flags, env={"ONEDNN_MAX_CPU_ISA": "AVX2"},
                                        command="python t.py"), strict=True)
    (f,) = [f for f in found if f.code == "EVID007"]
    assert "ONEDNN_MAX_CPU_ISA=AVX2" in f.why and "AVX-512" in f.title and "94 % of the timed kernel time" in f.why   # conv on AVX2, and reference code
    assert f.snippet.splitlines()[-1] == "env -u ONEDNN_MAX_CPU_ISA python t.py"
    # the same kernels on an AVX2 CPU are no finding
    assert not [f for f in run_evidence_rules(Evidence(onednn=log, cpu_flags={"avx2", "avx"}), strict=True)
                if f.code == "EVID007"]



LAYOUT_COPIES = """onednn_verbose,v1,info,oneDNN v3.12.0 (commit 80afa71049cd69a3df32adcccb623b12cd7baa22)
onednn_verbose,v1,primitive,exec,cpu,convolution,brg_conv_fwd:avx512_core,forward_training,src:f32::blocked:acdb::f0 wei:f32:a:blocked:Acdb16a::f0 dst:f32::blocked:acdb::f0,,alg:convolution_direct,mb16_ic3oc32,1.0
onednn_verbose,v1,primitive,exec,cpu,reorder,simple:any,undef,src:f32::blocked:abcd::f0 dst:f32::blocked:acdb::f0,,,16x3x64x64,4.0
onednn_verbose,v1,primitive,exec,cpu,reorder,jit:avx2,undef,src:f32::blocked:abcd::f0 dst:bf16::blocked:acdb::f0,,,16x32x64x64,4.0
"""


def test_layout_copies_are_neither_a_lower_isa_nor_reference_code():
    """Reorders (simple:any, even a named jit:avx2) copy between layouts: most of the time here, and still no
    EVID007 (lower ISA) or EVID008 (reference code) on an AVX-512 CPU whose convolution ran AVX-512."""
    log = parse_onednn_verbose(LAYOUT_COPIES.splitlines())
    assert [(p.kind, p.layout_copy, p.reference) for p in log.primitives] == [
        ("convolution", False, False), ("reorder", True, False), ("reorder", True, False)]
    flags = {"avx2", "avx512f", "avx512bw", "avx512vl", "avx512dq", "sse4_1", "avx"}
    found = run_evidence_rules(Evidence(onednn=log, cpu_flags=flags, command="python t.py"), strict=True)
    assert not [f.code for f in found if f.code in ("EVID007", "EVID008")]
    # the same time in a convolution on AVX2 is a finding: the rules still look
    slow = LAYOUT_COPIES.replace("reorder,jit:avx2", "convolution,jit:avx2")
    found = run_evidence_rules(Evidence(onednn=parse_onednn_verbose(slow.splitlines()), cpu_flags=flags,
                                        command="python t.py"), strict=True)
    assert [f.code for f in found if f.code == "EVID007"] == ["EVID007"]

RECOMPILES = """V1201 15:50:06.136000 16178 torch/_dynamo/guards.py:5396] [0/1] [__recompiles] Recompiling function forward in /t/m.py:67
V1201 15:50:06.136000 16178 torch/_dynamo/guards.py:5396] [0/1] [__recompiles]     triggered by the following guard failure(s):
V1201 15:50:06.136000 16178 torch/_dynamo/guards.py:5396] [0/1] [__recompiles]     - 0/0: tensor 'x' size mismatch at index 0. expected 1, actual 2
V1201 15:50:06.323000 16178 torch/_dynamo/guards.py:5396] [0/2] [__recompiles] Recompiling function forward in /t/m.py:67
V1201 15:50:06.323000 16178 torch/_dynamo/guards.py:5396] [0/2] [__recompiles]     - 0/1: tensor 'x' size mismatch at index 0. expected 2, actual 3
V1201 15:50:06.323000 16178 torch/_dynamo/guards.py:5396] [0/2] [__recompiles]     - 0/0: tensor 'x' size mismatch at index 0. expected 1, actual 3
V1201 15:50:06.457000 16178 torch/_dynamo/guards.py:5396] [0/3] [__recompiles] Recompiling function forward in /t/m.py:67
V1201 15:50:06.457000 16178 torch/_dynamo/guards.py:5396] [0/3] [__recompiles]     - 0/2: tensor 'x' size mismatch at index 0. expected 3, actual 4
an ordinary line
"""


def test_recompile_log_and_finding():
    log = parse_recompiles(RECOMPILES.splitlines())
    assert [(r.count, r.tensor, r.dim, r.actual) for r in log.recompiles] == [(1, "x", 0, 2), (2, "x", 0, 3),
                                                                             (3, "x", 0, 4)]
    (f,) = run_evidence_rules(Evidence(recompiles=log), strict=True)
    assert f.code == "EVID003" and "dim 0 of x changed (2, 3, 4)" in f.why and "mark_dynamic(x, 0)" in f.snippet


# --- refusal lines ----------------------------------------------------------------------------------


@pytest.mark.parametrize("scope,words", [("1", "only a parent may trace"), ("2", "only administrators"),
                                         ("3", "no tracing at all")])
def test_refusal_names_the_yama_setting(tmp_path, monkeypatch, scope, words):
    import os

    (tmp_path / "proc/sys/kernel/yama").mkdir(parents=True)
    (tmp_path / "proc/sys/kernel/yama/ptrace_scope").write_text(scope + "\n")
    me = os.geteuid()
    (tmp_path / "proc/77").mkdir(parents=True)
    (tmp_path / "proc/77/status").write_text(f"Name:\tpython\nUid:\t{me}\t{me}\t{me}\t{me}\n")
    (tmp_path / f"proc/{os.getpid()}").mkdir(parents=True, exist_ok=True)
    (tmp_path / f"proc/{os.getpid()}/status").write_text("CapEff:\t000001ffffffffff\n")
    line = refusal_text(77, "denied", "", access_facts(77, tmp_path), "cpudoctor inspect 77")
    assert words in line and "\n" not in line


def test_every_evidence_rule_is_documented():
    from pathlib import Path

    from cpudoctor.render.rules import render_evidence_rules_md

    path = Path(__file__).resolve().parents[1] / "docs" / "evidence_rules.md"
    assert path.read_text(encoding="utf-8") == render_evidence_rules_md(), (
        "docs/evidence_rules.md is out of date: run `python -m cpudoctor.render.rules evidence > "
        "docs/evidence_rules.md`")
    # EVID001-009: the time breakdown and the kernels; EVID010-019: the job's own state; EVID020-022: against the
    # roof; EVID023-024: a crash, a window before training; EVID025-027: a serving loop; EVID030-035: the job's memory
    assert [r.code for r in EVIDENCE_RULES.all()] == [f"EVID{i:03d}" for i in (*range(1, 28), *range(30, 36))]
    assert label("gil") == "Waiting for the GIL"


F16_REFERENCE = """onednn_verbose,v1,info,oneDNN v3.12.0 (commit 80afa71049cd69a3df32adcccb623b12cd7baa22)
onednn_verbose,v1,info,cpu,isa:Intel AVX10.1 and Intel AMX with bfloat16 and 8-bit integer support
onednn_verbose,v1,primitive,exec,cpu,convolution,ref:any,backward_weights,src:f16::blocked:abcd::f0 wei:f16::blocked:abcd::f0 dst:f16::blocked:abcd::f0,,alg:convolution_direct,mb16_ic16oc32_ih32oh32kh3sh1dh0ph1_iw32ow32kw3sw1dw0pw1,3355.2
onednn_verbose,v1,primitive,exec,cpu,convolution,brg_conv_fwd:avx10_1_512,forward_training,src:f16::blocked:acdb::f0 wei:f16::blocked:Acdb16a::f0 dst:f16::blocked:acdb::f0,,alg:convolution_direct,mb16_ic16oc32,16.8
"""


def test_a_reduced_dtype_in_reference_code_is_one_finding():
    """Seen on an AVX512_FP16 CPU (oneDNN 3.12): an f16 convolution's backward pass ran ref:any, 99 % of the kernel
    time. That is the dtype's question (EVID008, with fp32 as the fix), not also a vector-width finding."""
    flags = {"avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512_bf16", "avx512_fp16", "amx_bf16",
             "amx_int8", "amx_tile"}
    found = run_evidence_rules(Evidence(onednn=parse_onednn_verbose(F16_REFERENCE.splitlines()), cpu_flags=flags,
                                        command="python conv.py"), strict=True)
    assert [f.code for f in found if f.code in ("EVID007", "EVID008")] == ["EVID008"]
    (f,) = [f for f in found if f.code == "EVID008"]
    assert "reference code" in f.title and "ref:any" in f.why and "fp32 or bf16" in f.fix


# --- DataLoader workers: idle for want of requests, or waiting on I/O --------------------------------------------

MP = "/py/lib/python3.11/multiprocessing"
WORKER = f"{SITE}/torch/utils/data/_utils/worker.py"
# a worker blocked on its queue of indices (as py-spy dumps it): nobody asked it for a batch
ASKED_NOTHING = stack(py("_bootstrap", f"{MP}/process.py"), py("_worker_loop", WORKER, 334),
                      py("get", f"{MP}/queues.py", 113), py("_poll", f"{MP}/connection.py", 440),
                      py("wait", f"{MP}/connection.py", 947), f"poll ({LIBC})")
# a worker blocked reading a file inside the dataset: waiting on I/O with work in hand
READING = stack(py("_bootstrap", f"{MP}/process.py"), py("_worker_loop", WORKER, 349),
                py("fetch", f"{SITE}/torch/utils/data/_utils/fetch.py", 52), py("__getitem__", "train.py", 30),
                py("read", "/py/lib/python3.11/_pyio.py", 9), f"read ({LIBC})")
DECODING = stack(py("_bootstrap", f"{MP}/process.py"), py("_worker_loop", WORKER, 349),
                 py("fetch", f"{SITE}/torch/utils/data/_utils/fetch.py", 52), py("__getitem__", "train.py", 31))


def test_a_worker_waiting_for_its_next_index_is_told_from_one_waiting_on_io():
    from cpudoctor.probes.process.classify import waits_for_work

    assert waits_for_work(ASKED_NOTHING) and classify(ASKED_NOTHING).blocking
    assert not waits_for_work(READING) and classify(READING).blocking
    assert not waits_for_work(DECODING)
    # a queue read elsewhere (the training loop's own queue) is no worker loop waiting for work
    assert not waits_for_work(stack(py("main", "train.py"), py("get", f"{MP}/queues.py"), f"poll ({LIBC})"))


def test_worker_samples_count_their_waits_for_work_apart():
    from cpudoctor.probes.process.stacks import StackSample

    st = _states()
    st.processes[20] = ProcState(20, 10, "python", is_python=True, affinity=[0, 1], cpu_seconds=1.0)
    st.threads[(20, 20)] = ThreadState(20, 20, "python", running=10, waiting=10)
    by = {c: f for c, _, f in CASES}
    record = StackRecord(samples=[StackSample((10,), 10, "MainThread", by["compute"], 50),
                                  StackSample((10, 20), 20, "MainThread", DECODING, 10),
                                  StackSample((10, 20), 20, "MainThread", READING, 4),
                                  StackSample((10, 20), 20, "MainThread", ASKED_NOTHING, 30)],
                         rate_hz=50, sampler="py-spy test")
    bd = build_breakdown(record, st)
    worker = bd.process(20)
    assert worker.role == "dataloader_worker"
    (main,) = [t for t in worker.threads if t.tid == 20]
    assert (main.samples, main.idle_samples, main.work_wait_samples) == (10, 34, 30)
