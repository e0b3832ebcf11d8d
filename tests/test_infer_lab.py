"""The inference lab (``bench infer``): its plan on synthetic machines, its verdict on made-up figures, the
reasons a variant is not measured, and how every surface shows them. Quick: no torch, no child process."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cpudoctor.lab import infer
from cpudoctor.lab.infer import Cell, InferWorker, Plan, WorkerPlan, decide, plan
from cpudoctor.lab.results import read_outcome
from cpudoctor.lab.runner import JobOutcome
from cpudoctor.lab.settings import InferSettings, SettingsError
from cpudoctor.lab.stats import Figure
from cpudoctor.model import Affinity, Core, L3Domain, NumaNode, Topology

COMPILER = "/usr/bin/g++"


def make_topology(cores: int, ccx_cores: int | None = None) -> Topology:
    core_list = [Core(0, i, [i]) for i in range(cores)]
    ccx_cores = ccx_cores or cores
    l3 = [L3Domain(list(range(i, min(i + ccx_cores, cores)))) for i in range(0, cores, ccx_cores)]
    return Topology(packages=1, cores=cores, logical_cpus=cores, l3_domains=l3,
                    numa_nodes=[NumaNode(0, list(range(cores)))], online_cpus=list(range(cores)),
                    smt_threads_per_core=1, core_list=core_list,
                    affinity=Affinity(allowed_cpus=list(range(cores)), usable_cpus=cores),
                    vendor="AuthenticAMD", cpu_family=0x19)


def settings(**kw) -> InferSettings:
    return InferSettings(**{"model": "resnet18", "budget_s": 60.0, **kw}).validate()


def names(p: Plan) -> list[str]:
    return [v["name"] for w in p.workers for v in w.variants]


def skipped(p: Plan) -> dict[str, str]:
    return {s["name"]: s["reason"] for s in p.skipped}


# ----------------------------------------------------------------------------- the plan


def test_plan_on_a_small_machine_measures_the_levers_and_says_why_the_rest_does_not_apply():
    p = plan(settings(native_bf16=True), make_topology(2), compiler=COMPILER,
             allocators={"jemalloc": "/usr/lib/libjemalloc.so.2"}, env={})
    got = names(p)
    for name in ("inference_mode", "eager fp32", "1 thread", "2 threads", "channels_last", "bf16 autocast",
                 "int8 dynamic", "torch.compile", "OMP_WAIT_POLICY=PASSIVE", "OMP_WAIT_POLICY=ACTIVE",
                 "KMP_BLOCKTIME=0", "jemalloc (LD_PRELOAD)", "ONNX Runtime, 2 threads"):
        assert name in got
    assert got[0] == "inference_mode"                  # the baseline is prepared first
    keys = {w.key: w for w in p.workers}
    assert keys["torch.compile" if "torch.compile" in keys else "compile"].variants[0]["compile"]
    assert keys["OMP_WAIT_POLICY=PASSIVE"].env == {"OMP_WAIT_POLICY": "PASSIVE"}
    assert keys["jemalloc (LD_PRELOAD)"].env["LD_PRELOAD"].startswith("/usr/lib/libjemalloc.so.2")
    assert keys["KMP_BLOCKTIME=0"].deferred == "intel,llvm"     # started only for Intel/LLVM OpenMP
    assert "one CCX (pinned)" in skipped(p) and "one L3 cache" in skipped(p)["one CCX (pinned)"]


def test_no_compiler_no_bf16_no_allocator_each_say_why():
    p = plan(settings(native_bf16=False), make_topology(2), compiler=None, allocators={}, env={})
    why = skipped(p)
    assert "no C++ compiler" in why["torch.compile"] and "apt install g++" in why["torch.compile"]
    assert "no native bf16" in why["bf16 autocast"] and "AVX512_BF16" in why["bf16 autocast"]
    assert "neither jemalloc nor tcmalloc" in why["allocator (LD_PRELOAD)"]
    assert "torch.compile" not in names(p) and "bf16 autocast" not in names(p)


def test_a_setting_the_environment_already_has_is_not_measured_twice():
    p = plan(settings(), make_topology(2), compiler=COMPILER, allocators={"tcmalloc": "/x/libtcmalloc.so.4"},
             env={"OMP_WAIT_POLICY": "passive", "LD_PRELOAD": "/x/libtcmalloc.so.4", "KMP_BLOCKTIME": "1"})
    why = skipped(p)
    assert "already set" in why["OMP_WAIT_POLICY=PASSIVE"]
    assert "already preloaded" in why["tcmalloc (LD_PRELOAD)"]
    assert "KMP_BLOCKTIME=1" in why["KMP_BLOCKTIME=0"]
    assert "OMP_WAIT_POLICY=ACTIVE" in names(p)


def test_several_ccx_pin_one_with_its_own_threads():
    p = plan(settings(), make_topology(16, ccx_cores=8), compiler=COMPILER, allocators={}, env={})
    pinned = [w for w in p.workers if w.cpus]
    assert len(pinned) == 1 and pinned[0].cpus == list(range(8)) and pinned[0].threads == 8
    assert pinned[0].variants[0]["threads"] == 8 and "CPUs 0-7" in pinned[0].key
    ladder = [v["threads"] for v in p.workers[0].variants if v.get("group") == "threads"]
    assert ladder == [1, 2, 4, 8, 16]


def test_an_onnx_file_runs_in_onnx_runtime_only():
    p = plan(settings(source="onnx", target="m.onnx"), make_topology(2), compiler=COMPILER, allocators={}, env={})
    got = names(p)
    assert got[0] == "ONNX Runtime, no graph optimisation"        # its accuracy yardstick
    assert all("ONNX Runtime" in n for n in got)
    assert "torch.compile" not in skipped(p)


def test_settings_refuse_what_a_worker_could_only_fail_at():
    with pytest.raises(SettingsError, match="target"):
        InferSettings(source="module").validate()
    with pytest.raises(SettingsError, match="model"):
        InferSettings(model="vgg").validate()
    with pytest.raises(SettingsError, match="budget"):
        InferSettings(budget_s=2).validate()
    with pytest.raises(SettingsError, match="accuracy limit"):
        InferSettings(max_error=-1).validate()
    assert InferSettings(batches=[1, 1, 8]).validate().batches == [1, 8]


def test_the_compiler_and_allocators_are_found_where_the_loader_looks(tmp_path):
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "libjemalloc.so.2").write_bytes(b"")
    (tmp_path / "bin").mkdir()
    found = infer.find_allocators(str(tmp_path / "bin" / "python"), dirs=())
    if not infer.sys.platform.startswith("linux"):
        assert found == {}
    else:
        assert found == {"jemalloc": str(tmp_path / "lib" / "libjemalloc.so.2")}
    assert infer.find_compiler({"PATH": str(tmp_path)}) is None
    cxx = tmp_path / "g++"
    cxx.write_text("#!/bin/sh\n")
    cxx.chmod(0o755)
    assert infer.find_compiler({"PATH": str(tmp_path)}) == str(cxx)


# ----------------------------------------------------------------------------- the decision


def fig(median: float, spread: float = 0.02) -> Figure:
    return Figure(median, median * (1 - spread), median * (1 + spread), 6)


def test_the_fastest_accurate_variant_is_picked_when_it_stands_apart():
    d = decide({"a": fig(10), "b": fig(5), "c": fig(20)}, {"a": 1, "b": 4, "c": 0}, {"a": True, "b": True, "c": True})
    assert d["settled"] and d["pick"] == "b" and d["runner_up"] == "a"


def test_a_faster_variant_beyond_the_accuracy_limit_is_never_the_pick():
    d = decide({"ok": fig(10), "broken": fig(1)}, {"ok": 1, "broken": 3}, {"ok": True, "broken": False})
    assert d["pick"] == "ok" and d["settled"]


def test_overlapping_spreads_are_inconclusive_and_a_tie_goes_to_the_simpler_change():
    d = decide({"a": Figure(10, 8, 12, 6), "b": Figure(9.5, 7, 13, 6)}, {"a": 1, "b": 4}, {"a": True, "b": True})
    assert not d["settled"] and "within each other's spread" in d["reason"]
    tie = decide({"simple": fig(10.1, 0.01), "fancy": fig(10.0, 0.01)}, {"simple": 1, "fancy": 5},
                 {"simple": True, "fancy": True})
    assert tie["settled"] and tie["pick"] == "simple"


def _worker(key, specs, prepared, settings_, ready=None, env=None):
    w = InferWorker(WorkerPlan(key, specs, env=env or {}), settings_, None)
    w.prepared = {name: {"phase": "prepared", "variant": name, **data} for name, data in prepared.items()}
    w.ready = ready if ready is not None else {"torch": "2.13.0", "threads": 2, "openmp": "gnu", "model": "resnet18"}
    return w


ACCURATE = {"checked": True, "nonfinite": False, "max_abs": 1e-6, "max_rel": 1e-6, "top1_agreement": 1.0}
BROKEN = {"checked": True, "nonfinite": False, "max_abs": 3.0, "max_rel": 0.9, "top1_agreement": 0.0}


def fake_run(quiet: bool = True, broken_fastest: bool = True, max_error: float = 0.05,
             fresh: dict[int, list[float]] | None = None, fresh_skipped: str | None = None) -> dict:
    """A finished run's result, built by the orchestrator's own bookkeeping from made-up segments; ``fresh``: the
    segment medians (per new process) of the pick, '1 thread' at batch 1, measured again in new processes."""
    s = settings(native_bf16=False, max_error=max_error)
    p = plan(s, make_topology(2), compiler=None, allocators={}, env={})
    main = next(w for w in p.workers if w.key == infer.MAIN)
    prepared = {"inference_mode": {"status": "ok", "accuracy": ACCURATE},
                "eager fp32": {"status": "ok", "accuracy": ACCURATE},
                "1 thread": {"status": "ok", "accuracy": ACCURATE},
                "2 threads": {"status": "same", "reason": "the same setting as 'inference_mode'"},
                "channels_last": {"status": "ok", "accuracy": BROKEN if broken_fastest else ACCURATE},
                "int8 dynamic": {"status": "ok", "accuracy": ACCURATE, "int8_api": "torch.ao"},
                "ONNX Runtime, 1 thread": {"status": "skipped",
                                           "reason": "ONNX Runtime is not installed in this Python (pip install "
                                                     "onnxruntime)"},
                "ONNX Runtime, 2 threads": {"status": "skipped", "reason": "ONNX Runtime is not installed in this "
                                                                          "Python (pip install onnxruntime)"},
                "ONNX Runtime, basic graph optimisation": {"status": "skipped", "reason": "ONNX Runtime is not "
                                                           "installed in this Python (pip install onnxruntime)"}}
    workers = {infer.MAIN: _worker(infer.MAIN, main.variants, prepared, s)}
    latencies = {"inference_mode": 22.0, "eager fp32": 24.0, "1 thread": 12.0, "channels_last": 3.0,
                 "int8 dynamic": 21.0}
    share = 0.01 if quiet else 0.6
    cells = {}
    for name, ms in latencies.items():
        cell = Cell(name, 1, [ms * (1 + 0.01 * k) for k in (-1, 0, 1, 0, 1, -1)],
                    [{"cpus": [0, 1], "wall_s": 0.3, "other_share": share, "steal_share": 0.0}] * 6, 60)
        cells[(name, 1)] = cell
    workers[infer.MAIN].summary = [{"variant": n, "batch": 1, "p10_ms": ms * 0.95, "p25_ms": ms * 0.98,
                                    "p50_ms": ms, "p75_ms": ms * 1.02, "p90_ms": ms * 1.05, "p99_ms": ms * 1.3,
                                    "min_ms": ms * 0.9, "max_ms": ms * 1.5, "mean_ms": ms, "calls": 60,
                                    "sample_ms": [ms * 0.97, ms, ms * 1.04]} for n, ms in latencies.items()]
    for w in p.workers:
        if w.key != infer.MAIN:
            workers[w.key] = _worker(w.key, w.variants, {}, s, ready={})
            workers[w.key].ready = None
    state = {"status": "ok", "rounds": 6, "cells": cells, "unprepared": {}, "skipped_workers": {
        "KMP_BLOCKTIME=0": infer._openmp_words("gnu")}, "failed": {}, "segment_s": 0.3}
    for key in workers:
        if key not in (infer.MAIN, "KMP_BLOCKTIME=0"):
            state["unprepared"][key] = "not prepared within the 27 s the budget leaves for start-up and preparation"
    if fresh is not None:
        from cpudoctor.lab.infer_fresh import FreshCell

        state["fresh"] = {("1 thread", 1): FreshCell("1 thread", 1, fresh, [
            {"cpus": [0, 1], "wall_s": 0.5, "other_share": share, "steal_share": 0.0}] * 4, 400)}
        state["fresh_segment_s"] = 0.5
    if fresh_skipped:
        state["fresh_skipped"] = {("1 thread", 1): fresh_skipped}
    return infer._result(s, p, workers, state, 41.0)


def outcome(result: dict) -> JobOutcome:
    return JobOutcome(status="ok", result=json.loads(json.dumps(result)))


def test_a_deliberately_broken_variant_is_marked_and_never_recommended():
    result = fake_run()
    rec = result["recommendation"]
    assert rec["verdict"] == "recommended" and rec["variant"] == "1 thread"
    assert rec["faster_beyond_accuracy"] == ["channels_last"]
    broken = next(v for v in result["variants"] if v["name"] == "channels_last")
    assert broken["accurate"] is False
    # a looser limit lets it through: the limit, not the name, decides
    assert fake_run(max_error=1.0)["recommendation"]["variant"] == "channels_last"
    # the typed result, the terminal and the advisor agree
    r = read_outcome("infer", outcome(result), None)
    from cpudoctor.render.infer import text_lines

    text = "\n".join(text_lines(r.metrics()))
    assert "use '1 thread'" in text and "beyond the accuracy limit: 'channels_last'" in text
    assert "90 % (beyond 5 %)" in text
    assert "torch.set_num_threads(1)" in text
    assert "int8 dynamic: torch.ao.quantization.quantize_dynamic, deprecated" in text       # the API, named


def test_a_busy_machine_recommends_nothing_and_says_why():
    result = fake_run(quiet=False)
    d = result["decisions"][0]
    assert d["verdict"] == "inconclusive" and d["reason"].startswith("inconclusive: 60 % of the CPU")
    assert result["recommendation"] is None and d["best_measured"] == "1 thread"


def test_every_variant_not_measured_says_why_on_every_surface():
    from cpudoctor.render.infer import html_block, markdown_lines, skipped as not_measured, text_lines
    from cpudoctor.kits.escape import md_escape, md_fence

    metrics = read_outcome("infer", outcome(fake_run()), None).bench_run().metrics
    reasons = {name: why for names_, _how, why in not_measured(metrics) for name in names_.split("; ")}
    assert "ONNX Runtime is not installed" in reasons["ONNX Runtime, 2 threads"]
    assert "no C++ compiler" in reasons["torch.compile"]
    assert "no native bf16" in reasons["bf16 autocast"]
    assert "GNU OpenMP" in reasons["KMP_BLOCKTIME=0"]
    assert all(why for why in reasons.values())
    for text in ("\n".join(text_lines(metrics)), html_block(metrics),
                 "\n".join(markdown_lines(metrics, md_escape, md_fence))):
        for phrase in ("ONNX Runtime is not installed", "no C++ compiler", "no native bf16"):
            assert phrase in text
        assert "Traceback" not in text


def test_the_run_reaches_the_report_the_advisor_and_the_exports(tmp_path):
    from cpudoctor import advisor
    from cpudoctor.model import Report
    from cpudoctor.model.serde import from_data, to_data
    from cpudoctor.pipeline import with_lab_result
    from cpudoctor.render import render

    run = read_outcome("infer", outcome(fake_run()), None).bench_run()
    report = with_lab_result(Report(), run)
    again = from_data(Report, json.loads(json.dumps(to_data(report))))
    found = [f for f in advisor.diagnose(again, only={"INFER001"})]
    assert len(found) == 1 and found[0].severity == "info"
    assert "use '1 thread'" in found[0].title and "torch.set_num_threads(1)" in found[0].snippet
    assert "'channels_last'" in found[0].why and found[0].snippet_lang == "python"
    html = render(again, "html")
    assert "Inference latency per variant" in html and "<svg" in html and "channels_last" in html
    md = render(again, "md")
    assert "use '1 thread'" in md and "torch.set_num_threads(1)" in md


def test_an_inconclusive_run_tells_the_advisor_to_measure_again():
    from cpudoctor import advisor
    from cpudoctor.model import Report
    from cpudoctor.pipeline import with_lab_result

    run = read_outcome("infer", outcome(fake_run(quiet=False)), None).bench_run()
    found = advisor.diagnose(with_lab_result(Report(), run), only={"INFER001"})
    assert [f.severity for f in found] == ["info"]
    assert "no setting could be recommended" in found[0].title
    assert found[0].snippet.startswith("cpudoctor bench infer --model resnet18 --budget")


def test_the_code_of_each_kind_of_variant():
    from cpudoctor.lab.infer_code import variant_code

    assert "torch.inference_mode()" in variant_code({"spec": {"kind": "inference"}}).call
    cl = variant_code({"spec": {"kind": "inference", "channels_last": True}})
    assert "channels_last" in cl.setup and "contiguous(memory_format=torch.channels_last)" in cl.call
    assert "torch.autocast" in variant_code({"spec": {"kind": "inference", "autocast": "bf16"}}).call
    assert "quantize_dynamic" in variant_code({"spec": {"int8": True}, "int8_api": "torch.ao"}).setup
    assert "quantize_(model" in variant_code({"spec": {"int8": True}, "int8_api": "torchao"}).setup
    assert "took 12.5 s" in variant_code({"spec": {"compile": True}, "compile_s": 12.5}).setup
    ort = variant_code({"spec": {"kind": "onnxruntime", "ort_threads": 2, "ort_level": "basic"}})
    assert "intra_op_num_threads = 2" in ort.setup and "ORT_ENABLE_BASIC" in ort.setup
    env = variant_code({"spec": {"kind": "inference"}, "env": {"OMP_WAIT_POLICY": "PASSIVE"},
                        "preload_path": "/usr/lib/libjemalloc.so.2", "cpus": [0, 1, 2, 3]})
    assert env.command == "OMP_WAIT_POLICY=PASSIVE LD_PRELOAD=/usr/lib/libjemalloc.so.2 taskset -c 0-3 python serve.py"


def test_cli_refuses_bad_arguments_before_any_child(capsys):
    from cpudoctor.cli import main

    for argv in (["--model", "resnet18", "--onnx", "x.onnx"], ["--batch", "0"], ["--budget", "1"],
                 ["--max-error", "-1"], ["--model", "vgg"]):
        with pytest.raises(SystemExit) as stopped:
            main(["bench", "infer", *argv])
        assert stopped.value.code == 2
    assert "not allowed with argument" in capsys.readouterr().err


def test_the_onnx_runtime_variant_says_why_when_onnx_runtime_is_absent(monkeypatch):
    from cpudoctor.lab.jobs import infer as job

    monkeypatch.setattr(job, "_has_module", lambda name: False)
    v = job.Variant({"name": "ONNX Runtime", "kind": "onnxruntime", "ort_level": "all"})
    builder = job.Builder(job.Source(None, lambda b: None, False, "m"), job.InferWorkerSettings().validate(), 2, "/tmp")
    with pytest.raises(job.Skipped, match="ONNX Runtime is not installed in this Python"):
        builder.build(v, {})


@pytest.mark.slow
@pytest.mark.alongside
def test_a_real_run_never_recommends_its_broken_variant(tmp_path):
    """One short real ``bench infer`` (budget 20 s): a user module whose channels_last variant is fast and wrong."""
    import subprocess
    import sys
    import time

    out = tmp_path / "infer.json"
    began = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "cpudoctor", "bench", "infer", "--module",
                           str(Path(__file__).parent / "fixtures" / "infer_broken_model.py") + ":build",
                           "--budget", "20", "--python", sys.executable, "--json", "-o", str(out), "--quiet"],
                          capture_output=True, text=True, timeout=300)
    wall = time.monotonic() - began
    assert done.returncode in (0, 1), done.stderr
    data = json.loads(out.read_text())
    variants = {v["name"]: v for v in data["bench_run"]["metrics"]["variants"]}
    assert all(v.get("status") == "ok" or v.get("reason") for v in variants.values())     # each says why
    broken = variants["channels_last"]
    if broken.get("status") != "ok":
        pytest.skip(f"channels_last was not prepared on this machine: {broken.get('reason')} ({done.stderr[-300:]})")
    assert broken["accurate"] is False and broken["accuracy"]["max_rel"] > 0.5
    for d in data["bench_run"]["metrics"]["decisions"]:
        assert d.get("variant") != "channels_last"
    assert wall < 20 * 1.05 + 10, f"took {wall:.0f} s for a 20 s budget"     # + the CLI's own exit and reaping


@pytest.mark.parametrize("path, value", [
    (("variants", "1 thread", "points", 0, "latency_ms"), '"abc"'), (("variants", "1 thread", "name"), "5"),
    (("variants", "1 thread", "accuracy", "max_rel"), "[1]"), (("decisions", 0, "vs_eager_fp32"), '"2x"'),
    (("recommendation", "code"), '"print(1)"'), (("variants", "1 thread", "points", 0, "batch"), "null"),
    (("variants", "1 thread", "points", 0, "sample_ms"), '["x"]'), (("variants",), "{}")])
def test_a_saved_inference_run_fits_its_schema_and_a_damaged_one_is_left_out(path, value):
    """The run the lab saves passes resources/lab_metrics.schema.json; a figure of the wrong type is found there, so
    no surface (the table, the box plot, INFER001, the runs table) does arithmetic on it."""
    from cpudoctor.model.serde import to_data
    from cpudoctor.report_file import lab_run_problem

    run = to_data(read_outcome("infer", outcome(fake_run()), None).bench_run())
    assert lab_run_problem(run) is None
    parent = run["metrics"]
    for step in path[:-1]:
        parent = next(v for v in parent if v["name"] == step) if isinstance(step, str) and isinstance(parent, list) \
            else parent[step]
    parent[path[-1]] = json.loads(value)
    assert lab_run_problem(run), path


def test_compile_time_is_reported_apart_from_the_latency():
    from cpudoctor.render.infer import notes

    said = notes({"variants": [{"name": "torch.compile", "compile_s": 12.34, "points": [{"batch": 1, "latency_ms": 3}]},
                               {"name": "ONNX Runtime", "export_s": 2.0}]})
    assert said == ["torch.compile: the first call compiled for 12.3 s (not in its latency)",
                    "ONNX Runtime: exporting the model to ONNX took 2.0 s"]


@pytest.mark.parametrize("metrics", [
    {}, {"variants": "x"}, {"variants": [None, 3, {"name": 5}]},
    {"variants": [{"name": "a", "points": [{"batch": 1, "latency_ms": "abc", "segments": "x", "sample_ms": "y"}]}]},
    {"variants": [{"name": "a", "accuracy": {"checked": True, "max_rel": "big"}, "accurate": False,
                   "points": [{"batch": 1, "latency_ms": 1e308, "latency_ms_lo": -1, "p10_ms": None}]}],
     "decisions": [{"batch": 1, "verdict": "recommended", "variant": "a", "code": "not a dict"}, "junk"],
     "recommendation": {"code": {"snippet": 7, "command": None}}},
    {"variants": [{"name": "b", "points": [{"batch": 2, "latency_ms": 0.0, "p10_ms": 0, "p25_ms": 0, "p50_ms": 0,
                                            "p75_ms": 0, "p90_ms": 0}]}]},
])
def test_wrong_shaped_metrics_never_break_a_surface(metrics):
    from cpudoctor.kits.escape import md_escape, md_fence
    from cpudoctor.render.infer import batches_of, box_plot_svg, html_block, markdown_lines, text_lines

    text_lines(metrics)
    html_block(metrics)
    markdown_lines(metrics, md_escape, md_fence)
    for b in batches_of(metrics) or [1]:
        box_plot_svg(metrics, b)


def test_the_worker_compares_outputs_and_summarises_latencies_without_torch():
    import numpy as np

    from cpudoctor.lab.jobs import infer as job

    if "torch" in job.sys.modules:
        pytest.skip("torch is loaded in this test process: compare() takes its torch path")
    ref = np.array([[1.0, 4.0, -2.0], [0.5, 0.0, 3.0]])
    same = job.compare(ref.copy(), ref)
    assert same["max_abs"] == 0 and same["max_rel"] == 0 and same["top1_agreement"] == 1.0
    off = job.compare(ref + np.array([[0.0, -4.0, 0.0], [0.0, 0.0, 0.0]]), ref)
    assert off["max_abs"] == 4.0 and off["max_rel"] == 1.0 and off["top1_agreement"] == 0.5
    assert job.compare(ref * np.nan, ref)["nonfinite"] is True
    assert job.compare(ref[:1], ref)["shape_differs"] is True
    assert job.compare({"logits": ref, "aux": (ref,)}, {"aux": (ref,), "logits": ref})["max_abs"] == 0
    d = job.distribution([0.001 * k for k in range(1, 1001)])
    assert d["calls"] == 1000 and d["p50_ms"] == pytest.approx(500.5) and d["p99_ms"] == pytest.approx(990.01)
    assert len(d["sample_ms"]) == job.SAMPLE_POINTS and d["min_ms"] == 1.0 and d["max_ms"] == 1000.0


INT8_TRANSFORMER = """
import json, sys
sys.path.insert(0, sys.argv[1])
import torch
import infer as job
layer = torch.nn.TransformerEncoderLayer(32, 2, dim_feedforward=64, dropout=0.0, batch_first=True)
model = torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=False).eval()
source = job.Source(model, lambda b: torch.randn(b, 8, 32, generator=torch.Generator().manual_seed(0)), True, "t")
builder = job.Builder(source, job.InferWorkerSettings(int8_api="torch.ao").validate(), 2, "/tmp")
v = job.Variant({"name": "int8 dynamic", "kind": "inference", "int8": True})
builder.build(v, {})
x = source.make_input(2)
y = v.call(x)
print(json.dumps({"shape": list(y.shape), "fastpath_after": torch.backends.mha.get_fastpath_enabled(),
                  "facts": {k: v.facts[k] for k in ("mha_fastpath_off", "int8_api")}}))
"""


@pytest.mark.slow
@pytest.mark.alongside
def test_int8_of_a_transformer_encoder_runs_with_the_fused_path_off_and_its_code_says_so():
    """torch 2.13's nn.TransformerEncoderLayer checks ``linear1.weight.device`` on its fused path; a dynamically
    quantised Linear's weight is a method, so the int8 variant failed at its first call ("'function' object has no
    attribute 'device'") on the built-in transformer. The worker turns the path off around the int8 call only, and
    the printed code does the same."""
    import subprocess
    import sys

    from cpudoctor.lab.infer_code import variant_code

    jobs = Path(infer.__file__).parent / "jobs"
    done = subprocess.run([sys.executable, "-c", INT8_TRANSFORMER, str(jobs)], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["shape"] == [2, 8, 32] and got["fastpath_after"] is True       # other variants keep the fused path
    assert got["facts"] == {"mha_fastpath_off": True, "int8_api": "torch.ao"}
    code = variant_code({"spec": {"int8": True}, "int8_api": "torch.ao", "mha_fastpath_off": True})
    assert "torch.backends.mha.set_fastpath_enabled(False)" in code.setup
    assert "set_fastpath_enabled" not in variant_code({"spec": {"int8": True}, "int8_api": "torch.ao"}).setup
