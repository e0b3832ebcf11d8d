"""A loop that serves a model (EVID016's latency, EVID025-EVID027), one bad and one good case each, run alone.

The states are what the job's probe records for a serving loop (tests/test_job_probe.py reads them from a real
job; tests/test_run_serving_jobs.py runs real serving loops through ``run``): the model's call latency and the
places that load, build or compile a model, with their lines and counts. Each bad case is one mistake, each good
case the same loop without it; EVID001 and EVID003, which would name the same cause by its symptom, stay silent
where these rules speak.
"""

from __future__ import annotations

import dataclasses

from test_state_rules import TRAIN, at, breakdown, evidence, found, sample, state

from cpudoctor.advisor.evidence_rules import run_evidence_rules
from cpudoctor.model.joblogs import Recompile, RecompileLog
from cpudoctor.model.jobstate import CodeLine, Latency, ModelInfo, RepeatedCall, Serving, SettingCall
from cpudoctor.probes.process.jobprobe import parse_probe
from cpudoctor.render import job_state

FORWARD = Latency(n=900, p50_ms=0.25, p90_ms=0.31, p99_ms=25.7, mean_ms=0.6)


def serving(*sites: RepeatedCall, calls: int = 900, interval: Latency | None = None) -> Serving:
    return Serving(calls=calls, forward=FORWARD, interval=interval, sites=list(sites))


def serve(*calls: SettingCall, batch: int = 1, threads: int = 2, sites=(), forwards: int = 900, **kw):
    """An inference loop: the model called ``forwards`` times at ``batch``, no backward pass, no step."""
    model = ModelInfo("Sequential", 530_000, 530_000, 6, {"float32": 530_000}, input_dtypes=["float32"],
                      input_shapes=[[batch, 512]], called_at=at(16))
    kw.setdefault("samples", [sample(threads=threads, grad=False, inference=True)])
    return state(*calls, model=model, steps=0, backwards=0, forwards=forwards,
                 serving=serving(*sites, calls=forwards), **kw)


WAITING = {"openmp_wait": 0.6, "compute": 0.3, "python": 0.1}      # the driving thread in the team, the pool waiting


def test_an_inference_loop_with_autograd_quotes_its_latency():
    bad = serve(samples=[sample(threads=1)], threads=1)
    (f,) = found("EVID016", evidence(bad))
    assert "each call of the model took 0.25 ms (p50; p99 25.7 ms, over its last 900 calls)" in f.why
    assert "cpudoctor bench infer" in f.fix and f.evidence["p99_ms"] == 25.7
    assert found("EVID016", evidence(serve(threads=1))) == []                  # inference mode on


def test_batch_one_on_every_thread_names_the_line_that_sets_them():
    line10 = SettingCall("torch.set_num_threads", "2", at=at(10), after_torch=True)
    ev = evidence(serve(line10), breakdown(WAITING))
    (f,) = found("EVID025", ev)
    assert f.severity == "warning" and f.title == "Batch 1 on 2 threads: OpenMP waiting 60 % of the time"
    assert "900 times at batch 1" in f.why and "0.25 ms (p50; p99 25.7 ms" in f.why
    assert f"line 10 of {TRAIN}" in f.fix and f.snippet == f"# line 10 of {TRAIN}:\ntorch.set_num_threads(1)"
    assert "cpudoctor bench infer --module train.py:FUNCTION" in f.fix and "OMP_NUM_THREADS=1" not in f.snippet
    assert found("EVID001", ev) == []                  # the symptom's rule leaves the serving loop to EVID025


def test_batch_one_without_a_line_gets_the_variables_for_the_command():
    (f,) = found("EVID025", evidence(serve(), breakdown(WAITING)))
    assert f.snippet.startswith("OMP_NUM_THREADS=1 MKL_NUM_THREADS=1") and "torch.set_num_threads(1)" in f.fix


def test_batch_one_is_silent_where_fewer_threads_are_not_the_answer():
    bd = breakdown(WAITING)
    assert found("EVID025", evidence(serve(batch=8), bd)) == []               # a batch: EVID001's question
    assert found("EVID001", evidence(serve(batch=8), bd)) != []
    assert found("EVID025", evidence(serve(threads=1), bd)) == []             # already fewer than the CPUs
    assert found("EVID025", evidence(serve(), None)) == []                    # no samples to judge
    assert found("EVID025", evidence(serve(), breakdown({"compute": 0.9, "openmp_wait": 0.1}))) == []
    assert found("EVID025", evidence(serve(), breakdown({"python": 0.7, "openmp_wait": 0.3}))) == []   # driver busy
    assert found("EVID025", evidence(state(samples=[sample(threads=2)]), bd)) == []   # a training loop
    assert found("EVID025", evidence(serve(), bd, usable=1)) == []


def test_batch_one_on_a_busy_machine_is_likely_not_a_warning():
    (f,) = found("EVID025", evidence(serve(), breakdown(WAITING, others=1.5)))
    assert f.severity == "info" and f.title.startswith("Likely: ") and "other programs" in f.why


def test_batch_one_read_from_the_dataloader_when_the_inputs_were_not_seen():
    from cpudoctor.model.jobstate import LoaderInfo

    st = serve(loaders=[LoaderInfo(num_workers=0, batch_size=1, at=at(12))])
    st.model.input_shapes = []
    assert found("EVID025", evidence(st, breakdown(WAITING)))


def _helper(line: int, via: int) -> CodeLine:
    return CodeLine("/home/user/project/model.py", line, "build", via_file=TRAIN, via_line=via)


RELOAD = (RepeatedCall("torch.load", "load", calls=79, after=78, seconds=0.148, forwards_first=1, at=at(24)),
          RepeatedCall("Module.load_state_dict", "load", calls=79, after=78, seconds=0.034, forwards_first=1,
                       at=at(24)),
          RepeatedCall("model built", "build", calls=78, after=78, forwards_first=1, at=_helper(11, 23)))


def test_a_model_loaded_and_built_per_request_names_each_line():
    (f,) = found("EVID026", evidence(serve(sites=RELOAD, forwards=79)))
    assert f.title == "The model is loaded again for 99 % of the requests (train.py:24)"
    assert "torch.load at line 24 of" in f.why and "ran 78 times in 79 calls of the model, 1.87 ms each" in f.why
    assert "Loading it once took 2.3 ms, 9x the model's own call" in f.why
    assert (f"line 24 of {TRAIN}" in f.fix and "line 11 of /home/user/project/model.py (in build(), called from "
            f"line 23 of {TRAIN})" in f.fix)
    assert "model.load_state_dict(torch.load(path))" in f.snippet
    bd = breakdown({"compute": 0.6, "python": 0.3, "io_sleep": 0.1},
                   python=[("compute", "build (/home/user/project/model.py:11)", 0.49),
                           ("compute", f"handle ({TRAIN}:24)", 0.33), ("compute", f"handle ({TRAIN}:27)", 0.1)])
    (f,) = found("EVID026", evidence(serve(sites=RELOAD, forwards=79), bd))
    assert f.why.endswith("The thread that calls the model spent 82 % of its samples on these lines (60 samples).")
    (built,) = found("EVID026", evidence(serve(sites=RELOAD[2:], forwards=79)))   # built again, weights kept
    assert built.title == "The model is built again for 99 % of the requests (model.py:11)"


def test_a_checkpoint_loaded_now_and_then_is_not_per_request():
    once = RepeatedCall("torch.load", "load", calls=1, after=0, seconds=0.01, at=at(5))        # before the loop
    per_epoch = RepeatedCall("Module.load_state_dict", "load", calls=4, after=4, seconds=0.01, forwards_first=100,
                             at=at(40))
    assert found("EVID026", evidence(serve(sites=(once, per_epoch), forwards=4000))) == []
    assert found("EVID026", evidence(serve())) == []


def test_a_model_traced_per_request_names_the_line():
    trace = RepeatedCall("torch.jit.trace", "compile", calls=57, after=56, seconds=1.72, forwards_first=2, at=at(15))
    (f,) = found("EVID027", evidence(serve(sites=(trace,), forwards=57)))
    assert f.title == "torch.jit.trace runs for 100 % of the requests (train.py:15)"
    assert "ran 56 times in 56 calls of the model, 30.2 ms each" in f.why and f"line 15 of {TRAIN}" in f.fix
    assert f.snippet.startswith("# once, at start-up") and "torch.jit.trace(model.eval(), example)" in f.snippet
    once = dataclasses.replace(trace, calls=1, after=0)
    assert found("EVID027", evidence(serve(sites=(once,), forwards=57))) == []


def test_torch_compile_per_request_says_it_compiles_at_the_first_call():
    comp = RepeatedCall("torch.compile", "compile", calls=30, after=30, seconds=0.003, forwards_first=1, at=at(9))
    bd = breakdown({"compile": 0.8, "compute": 0.2})
    ev = evidence(serve(sites=(comp,), forwards=30), bd)
    ev.recompiles = _recompiles(8, sizes=False)
    (f,) = found("EVID027", ev)
    assert "compiles at the first call of what it returns: Dynamo compiled again 8 times" in f.why
    assert "Compilation took 80 %" in f.why and "pays the first-call compilation" in f.why
    assert "torch.compile(model.eval())" in f.snippet
    ev.recompiles = None                       # the same model wrapped again: Dynamo's cache held, no recompile
    (f,) = found("EVID027", ev)
    assert "no recompilation logged" in f.why and "a new compiled wrapper and its guard checks" in f.why


def _recompiles(n: int, sizes: bool) -> RecompileLog:
    return RecompileLog([Recompile(i, i + 1, "forward", "model.py", 20, "___check_obj_id(L['self'], 1403)",
                                   tensor="L['x']" if sizes else None, dim=0 if sizes else None,
                                   actual=i + 2 if sizes else None) for i in range(n)])


def test_dynamo_compiling_again_per_request_is_evid027_and_a_changing_size_stays_evid003():
    ev = evidence(serve(forwards=24))
    ev.recompiles = _recompiles(8, sizes=False)
    out = {f.code for f in run_evidence_rules(ev, {"EVID003", "EVID027"}, strict=True)}
    assert out == {"EVID027"}
    (f,) = found("EVID027", ev)
    assert "Dynamo compiled again 8 times in 24 calls" in f.why and "___check_obj_id" in f.why
    ev.recompiles = _recompiles(8, sizes=True)
    assert {f.code for f in run_evidence_rules(ev, {"EVID003", "EVID027"}, strict=True)} == {"EVID003"}


def test_the_probes_serving_line_is_read_as_hostile_input():
    import json

    good = {"k": "serving", "pid": 7, "t": 2.0, "calls": 80, "forward": {"n": 79, "p50": 0.5, "p90": 0.7, "p99": 2.0,
                                                                         "mean": 0.6},
            "interval": {"n": 78, "p50": 4.5}, "sites": [
                {"name": "torch.load", "kind": "load", "calls": 80, "after": 79, "seconds": 0.15, "forwards_first": 1,
                 "at": {"file": "/srv/serve.py", "line": 24, "function": "handle"}},
                {"name": "x", "kind": "delete everything", "calls": 1},
                {"name": "torch.jit.trace", "kind": "compile", "calls": -3, "after": "many", "seconds": 1e30,
                 "at": {"file": "/srv/serve.py", "line": 15, "via_file": 12, "via_line": True}},
                "garbage"]}
    cut = {"k": "serving", "pid": 7, "t": 3.0, "cut": 20000}                  # too long: the probe wrote its size
    st = parse_probe([json.dumps(good).encode(), json.dumps(cut).encode(),
                      json.dumps({**good, "forward": "fast"}).encode()[:40]], 7)
    sv = st.serving
    assert sv.calls == 80 and sv.forward.p99_ms == 2.0 and sv.interval.p50_ms == 4.5 and sv.interval.p99_ms is None
    assert [(s.name, s.calls, s.after) for s in sv.sites] == [("torch.load", 80, 79), ("torch.jit.trace", 0, 0)]
    assert sv.sites[1].seconds == 0.0 and sv.sites[1].at.via_file is None and st.bad_lines == 1


def test_the_state_section_shows_the_requests():
    text = " ".join(line.strip() for line in job_state.text_lines(serve(sites=RELOAD, forwards=79)))
    assert "model call p50 0.25 ms, p90 0.31 ms, p99 26 ms (last 900 calls)" in text
    assert "torch.load ×78 in the loop (train.py:24, 1.9 ms each)" in text
    assert "serving loop pays per request" in job_state.OUTSIDE
