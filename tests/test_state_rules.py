"""The rules over a job's own state (EVID010-EVID019), one bad and one good case each, run alone (``only``).

The states are what the probe records (tests/test_job_probe.py reads them from real jobs); each bad case is one
mistake, each good case the same job without it. Fixes that touch a setting the script makes itself name the
script's line and never print an environment variable the line would override.
"""

from __future__ import annotations

import dataclasses

import pytest

from cpudoctor.advisor.evidence_rules import Evidence, run_evidence_rules
from cpudoctor.advisor.process_rules import run_process_rules
from cpudoctor.model.breakdown import ProcessTime, Share, ThreadTime, TimeBreakdown, TopFrame
from cpudoctor.model.inspection import Inspection
from cpudoctor.model.jobstate import (CodeLine, JobState, LoaderInfo, ModelInfo, ModeSample, PythonFlags,
                                      SettingCall)

TRAIN = "/home/user/project/train.py"


def at(line: int, library: str | None = None) -> CodeLine:
    if library:
        return CodeLine(f"/v/site-packages/{library}/x.py", 88, "f", library=library, user_file=TRAIN, user_line=line)
    return CodeLine(TRAIN, line, "<module>")


def sample(**kw) -> ModeSample:
    base = dict(t_s=3.0, main_thread=True, grad=True, inference=False, anomaly=False, threads=2, interop=2,
                dtype="float32", deterministic=False, matmul="highest", mkldnn=True, affinity="0-1")
    return ModeSample(**{**base, **kw})


def state(*calls: SettingCall, samples=None, model=None, loaders=(), steps=200, forwards=200, backwards=200,
          **kw) -> JobState:
    kw.setdefault("affinity_after_torch", [0, 1])
    return JobState(loaded=True, pid=10, python="3.11.7", torch_version="2.13.0", affinity_start=[0, 1],
                    calls=list(calls), samples=list(samples or [sample()]),
                    model=model or ModelInfo("Net", 1000, 1000, 4, {"float32": 1000}, input_dtypes=["float32"],
                                             input_shapes=[[8, 10]], called_at=at(30)),
                    loaders=list(loaders), steps=steps, forwards=forwards, backwards=backwards, **kw)


def evidence(st: JobState | None, bd: TimeBreakdown | None = None, usable: int = 2) -> Evidence:
    insp = Inspection(pid=10, usable_cpus=usable, affinity=list(range(usable)))
    return Evidence(command="python train.py", state=st, breakdown=bd, process=insp,
                    launch_affinity=list(range(usable)))


def found(code: str, ev: Evidence):
    out = run_evidence_rules(ev, {code}, strict=True)
    assert all(f.code == code for f in out)
    return out


def breakdown(driver: dict[str, float], job_openmp: float = 0.0, others: float = 0.0,
              native=(), python=()) -> TimeBreakdown:
    """A breakdown whose driving thread has ``driver`` shares (60 samples) and whose job-wide OpenMP waiting is
    ``job_openmp`` (the pool threads' waiting)."""
    shares = [Share(c, v * 6, v, int(v * 60)) for c, v in driver.items()]
    thread = ThreadTime(10, 10, "MainThread", "driver", "stacks", samples=60, seconds=6.0, shares=shares)
    job = {**driver}
    if job_openmp:
        job = {c: v * (1 - job_openmp) for c, v in driver.items()}
        job["openmp_wait"] = job.get("openmp_wait", 0.0) + job_openmp
    proc = ProcessTime(10, 1, "python", "python train.py", "main", True, True, affinity=[0, 1], samples=120,
                       threads=[thread], shares=[Share(c, v * 12, v, int(v * 120)) for c, v in job.items()])
    return TimeBreakdown(pid=10, window_s=6.0, sampler="py-spy test", observer="run", stack_rate_hz=10, samples=120,
                         seconds=12.0, shares=proc.shares, processes=[proc], driver="10/10", driver_samples=60,
                         job_cpus=1.5, others_cpus=others, online_cpus=2, cpus=2,
                         driver_native=[TopFrame(c, f, 1.0, s) for c, f, s in native],
                         driver_python=[TopFrame(c, f, 1.0, s) for c, f, s in python])


# --- one bad and one good case per rule -------------------------------------------------------------------------


def test_float64_named_at_the_line_that_sets_it():
    call = SettingCall("torch.set_default_dtype", "torch.float64", at=at(8), after_torch=True)
    bad = state(call, samples=[sample(dtype="float64")], model=ModelInfo("Net", 1000, 1000, 4, {"float64": 1000},
                                                                         input_dtypes=["float64"]))
    (f,) = found("EVID010", evidence(bad))
    assert "100 % of the model's 1,000 parameters" in f.why and "line 8 of " + TRAIN in f.fix
    assert f.snippet == f"# line 8 of {TRAIN}:\ntorch.set_default_dtype(torch.float32)"
    assert found("EVID010", evidence(state())) == []


def test_float64_seen_only_in_the_driving_threads_kernels():
    bd = breakdown({"compute": 0.7, "python": 0.3}, native=[("compute", "mkl_blas_avx512_dgemm_kernel (libtorch_cpu.so)",
                                                             0.6)])
    (f,) = found("EVID010", evidence(None, bd))
    assert "double-precision kernels took 60 %" in f.why and "model.float()" in f.fix
    fp32 = breakdown({"compute": 0.7, "python": 0.3}, native=[("compute", "mkl_blas_avx512_sgemm_kernel (x.so)", 0.6)])
    assert found("EVID010", evidence(None, fp32)) == []
    # a model built per request initialises float32 weights in a random kernel whose bounds are double
    init = breakdown({"compute": 0.7, "python": 0.3}, native=[(
        "compute", "c10::function_ref<void (char**, long const*, long, long)>::callback_fn<at::TensorIteratorBase::"
        "loop_2d_from_1d<at::native::AVX2::cpu_serial_kernel<at::native::templates::cpu::(anonymous namespace)::"
        "uniform_kernel<at::CPUGeneratorImpl*>(at::TensorIteratorBase&, double, double, at::CPUGeneratorImpl*)", 0.3)])
    assert found("EVID010", evidence(None, init)) == []


def test_anomaly_detection_left_on():
    call = SettingCall("torch.set_anomaly_enabled", "True, True", at=dataclasses.replace(at(11, "torch"),
                                                                                         function="__init__"))
    (f,) = found("EVID011", evidence(state(call, samples=[sample(anomaly=True)])))
    assert "torch.autograd.set_detect_anomaly(True) at line 11 of " + TRAIN in f.fix
    assert found("EVID011", evidence(state())) == []


def test_debugging_aids_left_on():
    bad = state(SettingCall("torch.set_default_device", "'cpu'", at=at(5), after_torch=True),
                samples=[sample(trace="pydevd.SafeCallWrapper", function_modes=["DeviceContext"], profiler=True)],
                flags=PythonFlags(dev_mode=True))
    (f,) = found("EVID012", evidence(bad))
    for words in ("trace function (pydevd.SafeCallWrapper)", "DeviceContext", "line 5 of", "profiler", "-X dev"):
        assert words in f.why + f.fix, words
    assert found("EVID012", evidence(state())) == []


def test_threads_set_in_code_above_the_usable_cpus_get_the_line_not_a_variable():
    call = SettingCall("torch.set_num_threads", "8", at=at(12), after_torch=True)
    (f,) = found("EVID013", evidence(state(call, samples=[sample(threads=8)])))
    assert f.title.startswith("train.py:12 sets 8 threads on 2 usable CPUs")
    assert f.snippet == f"# line 12 of {TRAIN}:\ntorch.set_num_threads(2)" and "OMP_NUM_THREADS=" not in f.snippet
    assert found("EVID013", evidence(state(call, samples=[sample(threads=8)]), usable=16)) == []
    assert found("EVID013", evidence(state())) == []


def test_threads_set_through_an_environment_write_before_import():
    call = SettingCall("os.environ", "16", key="OMP_NUM_THREADS", at=at(3), after_torch=False)
    (f,) = found("EVID013", evidence(state(call, samples=[sample(threads=16)])))
    assert f.snippet == f'# line 3 of {TRAIN}:\nos.environ["OMP_NUM_THREADS"] = "2"'


def test_threads_set_by_a_library_name_the_library_and_the_users_line():
    call = SettingCall("torch.set_num_threads", "8", at=at(40, "lightning"), after_torch=True)
    (f,) = found("EVID013", evidence(state(call, samples=[sample(threads=8)])))
    assert "lightning sets the thread count" in f.fix and "after line 40 of" in f.fix


def test_binding_in_code_before_forking_workers():
    calls = [SettingCall("os.environ", "true", key="OMP_PROC_BIND", at=at(4)),
             SettingCall("os.environ", "cores", key="OMP_PLACES", at=at(5))]
    loader = LoaderInfo(num_workers=2, batch_size=8, at=at(20))
    bad = state(*calls, loaders=[loader], affinity_after_torch=[0], samples=[sample(affinity="0")])
    (f,) = found("EVID014", evidence(bad))
    assert "line 4 of" in f.fix and "line 5 of" in f.fix and "env -u" not in f.snippet
    assert found("EVID014", evidence(dataclasses.replace(bad, loaders=[]))) == []          # no workers to inherit it
    assert found("EVID014", evidence(state(*calls, loaders=[loader]))) == []               # the CPUs did not narrow


def test_children_confined_by_the_scripts_own_binding_name_its_lines():
    calls = [SettingCall("os.environ", "true", key="OMP_PROC_BIND", at=at(4))]
    bd = breakdown({"compute": 0.5, "data": 0.5})
    bd.processes.append(ProcessTime(11, 10, "python", "python train.py", "dataloader_worker", True, True,
                                    affinity=[0], samples=10))
    (f,) = found("EVID004", evidence(state(*calls), bd))
    assert "the script binds itself" in f.why and "line 4 of" in f.fix and not f.snippet.startswith("env -u")
    # no probe, no binding variable, the main process kept both CPUs: narrowed inside the child, given back there
    (plain,) = found("EVID004", evidence(None, bd))
    assert "what set it could not be seen" in plain.why and plain.snippet.startswith("DataLoader(")


def test_loader_workers_beyond_the_cpus():
    loader = LoaderInfo(num_workers=8, batch_size=16, at=at(25))
    (f,) = found("EVID015", evidence(state(loaders=[loader])))
    assert "line 25 of" in f.fix and f.snippet.endswith("num_workers=2)")
    assert found("EVID015", evidence(state(loaders=[dataclasses.replace(loader, num_workers=2)]))) == []


def _with_workers(n: int, running: int, idle: int, work_wait: int) -> TimeBreakdown:
    """A breakdown with ``n`` DataLoader workers whose main threads had these sample counts each."""
    bd = breakdown({"compute": 0.5, "data": 0.5})
    for i in range(n):
        pid = 20 + i
        main = ThreadTime(pid, pid, "MainThread", "python", "stacks", samples=running, idle_samples=idle,
                          work_wait_samples=work_wait)
        bd.processes.append(ProcessTime(pid, 10, "python", "python train.py", "dataloader_worker", True, True,
                                        samples=running, idle_samples=idle, threads=[main]))
    return bd


def test_loader_workers_beyond_the_cpus_judged_on_the_time_they_had_work():
    loader = LoaderInfo(num_workers=8, batch_size=16, at=at(25))
    st = state(loaders=[loader])
    # blocked on disk or network most of the time they had work: more workers than CPUs pays, silent
    assert found("EVID015", evidence(st, _with_workers(8, running=5, idle=95, work_wait=0))) == []
    # the same idle samples, but waiting for their next index (a short run's start and end, a slow loop): they ran
    # whenever they had work, so they take turns on the CPUs
    (f,) = found("EVID015", evidence(st, _with_workers(8, running=5, idle=95, work_wait=95)))
    assert "busy 100 % of the time they had work" in f.why and f.evidence["workers_busy"] == 1.0
    # never asked for anything at all in the window: the loader's settings alone decide
    (f,) = found("EVID015", evidence(st, _with_workers(8, running=0, idle=40, work_wait=40)))
    assert f.evidence.get("workers_busy") is None and "of the time they had work" not in f.why


def test_an_inference_loop_that_records_autograd():
    bad = state(steps=0, backwards=0, forwards=500)
    (f,) = found("EVID016", evidence(bad))
    assert "500 times" in f.why and "line 30 of" in f.why and "inference_mode" in f.snippet
    assert found("EVID016", evidence(state(steps=0, backwards=0, forwards=500,
                                           samples=[sample(inference=True, grad=False)]))) == []
    assert found("EVID016", evidence(state())) == []                           # a training loop


def test_deterministic_and_onednn_switches():
    det = state(SettingCall("torch.use_deterministic_algorithms", "True", at=at(7)),
                samples=[sample(deterministic=True)])
    (f,) = found("EVID017", evidence(det))
    assert f.severity == "info" and "line 7 of" in f.fix
    off = state(SettingCall("torch.backends.mkldnn.enabled", "False", at=at(9)), samples=[sample(mkldnn=False)])
    (g,) = found("EVID018", evidence(off))
    assert "torch.backends.mkldnn.enabled = False at line 9 of" in g.fix
    assert found("EVID017", evidence(state())) == found("EVID018", evidence(state())) == []


def test_the_driving_thread_busy_elsewhere_is_the_cause_and_the_pools_waiting_its_consequence():
    bd = breakdown({"other": 0.55, "compute": 0.25, "memory": 0.2}, job_openmp=0.5,
                   native=[("other", "c10::Dispatcher::call<at::Tensor, long> (libtorch_cpu.so)", 0.3)],
                   python=[("other", "step (train.py:31)", 0.8)])
    (f,) = found("EVID019", evidence(None, bd))
    assert "55 %" in f.title and "c10::Dispatcher::call<…> (libtorch_cpu.so) 30 %" in f.why
    assert "step (train.py:31) 80 %" in f.why and "fewer threads would not help" in f.why
    assert [x.code for x in run_evidence_rules(evidence(None, bd), {"EVID001"}, strict=True)] == []
    team = breakdown({"openmp_wait": 0.6, "compute": 0.3, "python": 0.1}, job_openmp=0.6)
    assert found("EVID019", evidence(None, team)) == []
    assert [x.code for x in run_evidence_rules(evidence(None, team), {"EVID001"}, strict=True)] == ["EVID001"]


def test_a_busy_machine_judges_the_drivers_own_work_outside_its_openmp_waiting():
    """Beside other programs the team's barrier waits grow; data loading's share of the rest does not."""
    bd = breakdown({"openmp_wait": 0.5, "data": 0.28, "compute": 0.22}, others=1.6)
    (f,) = found("EVID002", evidence(None, bd))
    assert f.severity == "warning" and "56 %" in f.title and "1.6 of the 2 CPUs meanwhile" in f.why
    quiet = breakdown({"openmp_wait": 0.5, "data": 0.28, "compute": 0.22})
    assert found("EVID002", evidence(None, quiet)) == []


def test_workers_that_cannot_keep_up_on_full_cpus_are_not_told_to_add_workers():
    bd = breakdown({"data": 0.6, "compute": 0.4})
    for pid in (11, 12):
        bd.processes.append(ProcessTime(pid, 10, "python", "", "dataloader_worker", True, True, cpu_percent=90.0))
    (f,) = found("EVID002", evidence(None, bd))
    assert "every CPU already has one" in f.fix and f.snippet == ""
    (g,) = found("EVID002", evidence(None, bd, usable=8))
    assert "give more workers than 2" in g.fix


@pytest.mark.parametrize("code", ["PROC001"])
def test_process_rules_name_the_line_when_the_script_sets_the_threads(code):
    insp = Inspection(pid=10, usable_cpus=2, affinity=[0, 1], runnable_mean=7.5, runnable_max=8, wait_percent=300.0,
                      num_threads=9, cmdline="python train.py", argv=["python", "train.py"])
    call = SettingCall("torch.set_num_threads", "8", at=at(12), after_torch=True)
    (f,) = [x for x in run_process_rules(insp, None, {code}, strict=True, state=state(call))]
    assert f.snippet == f"# line 12 of {TRAIN}:\ntorch.set_num_threads(2)" and "OMP_NUM_THREADS" not in f.snippet
    (plain,) = run_process_rules(insp, None, {code}, strict=True)
    assert "OMP_NUM_THREADS=2" in plain.snippet


def test_a_relaunch_that_sets_threads_by_variable_names_the_scripts_own_line_too():
    """PROC010's relaunch sets OMP_NUM_THREADS; when the script sets its count itself the command sets none (the line
    would beat it: `make test` caught `taskset -c 0 env OMP_NUM_THREADS=1 ... python threads_in_code.py`), and the
    fix says to set the count at that line."""
    from cpudoctor.model.inspection import ThreadInfo

    insp = Inspection(pid=10, usable_cpus=4, affinity=[0, 1, 2, 3], window_s=4.0, samples=20, cmdline="python train.py",
                      argv=["python", "train.py"],
                      threads=[ThreadInfo(10 + i, "python", "R", cpu_percent=90.0, last_cpu=i, migrations=12)
                               for i in range(2)])
    call = SettingCall("torch.set_num_threads", "2", at=at(12), after_torch=True)
    (f,) = run_process_rules(insp, None, {"PROC010"}, strict=True, state=state(call))
    assert "OMP_NUM_THREADS" not in f.snippet and "taskset" in f.snippet and "env  " not in f.snippet
    assert "torch.set_num_threads(2) at line 12 of" in f.fix and "set 2 at that line" in f.fix
    (plain,) = run_process_rules(insp, None, {"PROC010"}, strict=True)
    assert "line 12" not in plain.fix and "OMP_NUM_THREADS=2" in plain.snippet


def test_a_child_narrowed_by_a_call_the_probe_saw_names_that_call():
    """The main process kept its CPUs and the script narrowed a worker by its PID: EVID004 names the line (41.8)."""
    bd = breakdown({"compute": 0.5, "data": 0.5})
    bd.processes.append(ProcessTime(11, 10, "python", "python train.py", "dataloader_worker", True, True,
                                    affinity=[0], samples=10))
    (f,) = found("EVID004", evidence(state(SettingCall("os.sched_setaffinity", "0", key="11", at=at(9))), bd))
    assert "it was set by os.sched_setaffinity(11, {0}) at line 9 of" in f.why, f.why
    assert f.evidence["set_by"].startswith("os.sched_setaffinity(11")
