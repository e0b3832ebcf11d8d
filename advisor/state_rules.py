"""Rules over what the job is set to, read from inside it by its probe (``cpudoctor run``): EVID010-EVID018;
and EVID019, what the thread that drives the step did when it was not in the kernels.

Input is the evidence rules' :class:`~cpudoctor.advisor.evidence_rules.Evidence`;
these rules read its ``state`` (:class:`~cpudoctor.model.jobstate.JobState`: the
calls that set the job's global state with their file and line, the modes its
driving thread ran under, its model, DataLoaders and steps) and, where the state
and the samples say the same thing, the breakdown's shares of the job's own
samples. They are registered in the evidence rules' set (same codes, docs page
and ``explain``), in a module of their own.

None of them compares with an unloaded machine: what the job is set to and what
its own samples show hold on a busy machine too, so they speak there as usual
(the load stated). Where the script sets a thing itself, the fix is the change
to that line, never an environment variable the line would override
(:mod:`cpudoctor.advisor.code_settings`). The sources for why each setting costs
speed are named in docs/time_breakdown.md ("What the probe reads").
"""

from __future__ import annotations

import re

from cpudoctor.advisor.code_settings import CodeSetting, binding_settings, seen_threads, thread_change, thread_setting
from cpudoctor.advisor.evidence_rules import Evidence, _finding, consequence, drives_team, evidence_rule
from cpudoctor.advisor.serving import INFERENCE_FORWARDS
from cpudoctor.advisor.serving_rules import latency_words
from cpudoctor.kits.format import percent
from cpudoctor.kits.plural import plural
from cpudoctor.model import Finding
from cpudoctor.model.breakdown import COMPUTE, DATA, OPENMP, PYTHON, TimeBreakdown
from cpudoctor.model.jobstate import CodeLine, JobState

FLOAT64_PARAMS = 0.5          # float64 parameters at least this share of the model's
FLOAT64_FRAMES = 0.10         # or double-precision kernels at least this share of the driving thread's time
BUSY_WORKERS = 0.1            # DataLoader workers' main threads running less than this share of their samples mostly wait
DRIVER_ELSEWHERE = 0.5        # the driving thread's share outside the team's kernels and barriers
_NUMPY_BLAS = re.compile(r"openblas|libscipy|numpy", re.IGNORECASE)   # NumPy's and SciPy's own BLAS, not torch's
_DOUBLE_FRAME = re.compile(r"dgemm|dgemv|dsyrk|dtrsm|\bdouble\b|<double>|c10::complex<double>")
# Random-number kernels take their bounds as double while they fill float32 tensors (a model built again per
# request spends its time in uniform_kernel(..., double, double, ...) initialising its weights): not float64 compute
_RNG_FRAME = re.compile(r"uniform_kernel|normal_kernel|random_kernel|random_from_to|bernoulli|exponential_kernel|"
                        r"cauchy_kernel|geometric_kernel|log_normal_kernel|CPUGeneratorImpl")

_CATEGORY_WORDS = {PYTHON: "Python code", DATA: "data loading", "memory": "memory allocation and page faults",
                   "io_sleep": "blocking calls (I/O, sleep, a lock or a queue)", "gil": "waiting for the GIL",
                   "other": "PyTorch's own bookkeeping (the dispatcher, autograd, argument parsing)",
                   "compile": "compilation"}
_CATEGORY_FIX = {
    "other": ("Do more work per operation: larger batches, fewer and larger tensor operations (fuse small ones, or "
              "compile the step with torch.compile); the frames below show where the time goes."),
    "memory": ("Allocate less per step: reuse buffers (the out= argument, in-place operations), avoid copies "
               "(.clone(), .contiguous(), .numpy() round trips); preload jemalloc or tcmalloc."),
    "io_sleep": ("Move the blocking work out of the training thread: into DataLoader workers or a background thread "
                 "(the frames below show which call blocks)."),
    "gil": "Another Python thread holds the GIL: move its work into a process, or out of the training loop.",
}


def _state(ev: Evidence) -> JobState | None:
    return ev.state if ev.state is not None and ev.state.loaded else None


def _where(at: CodeLine | None) -> str:
    if at is None:
        return ""
    user = at.user_place()
    file, line = user if user else (at.file, at.line)
    return f"line {line} of {file}"


def _usable(ev: Evidence) -> int | None:
    return ev.usable_cpus()


def _last_setting(state: JobState, name: str) -> CodeSetting | None:
    call = state.last_call(name)
    return CodeSetting(call, call.at) if call is not None and call.at is not None else None


# --- what a step computes in -------------------------------------------------------------------------------------


@evidence_rule("EVID010", "float64-compute", category="precision", severity="warning",
               title="The step computes in float64 (double precision)")
def float64_compute(ev: Evidence) -> list[Finding]:
    """
    What it checks:
        What the job computes in: its model's parameter dtypes, its inputs' dtypes and PyTorch's default
        dtype (from the job's probe, `cpudoctor run`), and the double-precision kernels (MKL's dgemm,
        kernels instantiated for `double`) in the driving thread's own samples.

    Why it matters:
        A vector register holds half as many float64 values as float32 ones, so every GEMM and
        elementwise kernel does half the work per instruction, and moves twice the bytes. Nothing in
        deep learning needs float64; it usually comes from `torch.set_default_dtype(torch.float64)`,
        `.double()`, or tensors made from NumPy arrays (float64 by default).

    Fix:
        Compute in float32: remove the line that sets float64 (named in the finding), call
        `model.float()` and convert inputs with `.float()` (NumPy arrays with `.astype(np.float32)`).
    """
    state = _state(ev)
    model = state.model if state is not None else None
    params64 = (model.dtypes.get("float64", 0) / model.parameters) if model and model.parameters else 0.0
    inputs64 = bool(model and "float64" in model.input_dtypes)
    sample = state.latest() if state is not None else None
    default64 = bool(sample and sample.dtype == "float64")
    bd = ev.own_shares()
    frames = [f for f in (bd.driver_native if bd is not None else []) if f.category == COMPUTE
              and _DOUBLE_FRAME.search(f.frame) and not _RNG_FRAME.search(f.frame)]
    frames_share = sum(f.share for f in frames)
    if params64 < FLOAT64_PARAMS and not inputs64 and frames_share < FLOAT64_FRAMES and not (
            default64 and model is None):
        return []
    seen = []
    if params64 >= FLOAT64_PARAMS:
        seen.append(f"{percent(params64, fraction=True)} of the model's {model.parameters:,} parameters ({model.name}) are float64")
    if inputs64:
        seen.append(f"its inputs are {', '.join(model.input_dtypes)}")
    if default64:
        seen.append("PyTorch's default dtype is float64")
    if frames_share >= FLOAT64_FRAMES:
        seen.append(f"double-precision kernels took {percent(frames_share, fraction=True)} of the training thread's time "
                    f"({', '.join(_short_frame(f.frame).split(' (')[0] for f in frames[:3])})" + ev.load_note())
    setting = _last_setting(state, "torch.set_default_dtype") if state is not None else None
    if setting is not None and "float64" not in (setting.call.value or "") and "double" not in (setting.call.value or ""):
        setting = None
    why = ("The step computes in float64: " + "; ".join(seen) + ". Each vector instruction does half the float32 "
           "work on float64, and every tensor moves twice the bytes.")
    numpy_only = (frames and all(_NUMPY_BLAS.search(f.frame) for f in frames) and params64 < FLOAT64_PARAMS
                  and not inputs64 and not default64)
    if numpy_only:
        fix = ("Compute the NumPy part in float32: NumPy arrays are float64 unless told otherwise; create them with "
               "dtype=np.float32 (or .astype(np.float32) once, before the loop).")
        snippet = "x = np.asarray(x, dtype=np.float32)   # NumPy defaults to float64"
    elif setting is not None:
        fix = (f"Compute in float32: {setting.where_words()} makes every new tensor and module float64; delete it "
               "(or set torch.float32 there), and convert inputs made from NumPy arrays with .float().")
        snippet = f"# {setting.place()}:\ntorch.set_default_dtype(torch.float32)"
    else:
        fix = ("Compute in float32: call model.float() once and convert each batch with .float() (NumPy arrays: "
               ".astype(np.float32) before torch.from_numpy), and look for a .double() or "
               "torch.set_default_dtype(torch.float64) in the code.")
        snippet = "model = model.float()\nx = x.float()          # each batch (NumPy: x.astype(np.float32))"
    return [_finding("warning", "The step computes in float64 (double precision)", why, fix, snippet,
                     {"float64_parameters": round(params64, 3) if model else None, "inputs": model.input_dtypes
                      if model else None, "default_dtype": sample.dtype if sample else None,
                      "double_kernels_share": round(frames_share, 3) if frames else None,
                      "set_at": setting.short_place() if setting else None}, lang="python")]


# --- modes a debugging session leaves on -----------------------------------------------------------------------


@evidence_rule("EVID011", "anomaly-detection-on", category="torch", severity="warning",
               title="Autograd anomaly detection is on while the job trains")
def anomaly_detection_on(ev: Evidence) -> list[Finding]:
    """
    What it checks:
        Whether autograd's anomaly detection was on on the thread that drives the step
        (`torch.autograd.set_detect_anomaly(True)` or a `with torch.autograd.detect_anomaly():` block),
        read inside the job by its probe, and the line that switched it on.

    Why it matters:
        In anomaly mode autograd records a Python traceback for every operation of the forward pass
        and checks every gradient for NaN in the backward pass. PyTorch's documentation says it
        should be enabled only for debugging as it slows execution; users measured training 2-3x
        slower with it on (Lightning issue 12344, ignite pull request 219).

    Fix:
        Delete the call (named in the finding), or keep it behind a debug switch that is off for
        real runs.
    """
    state = _state(ev)
    if state is None:
        return []
    samples = [s for s in state.loop_samples() if s.anomaly is not None]
    on = [s for s in samples if s.anomaly]
    call = state.last_call("torch.set_anomaly_enabled")
    if not on and not (not samples and call is not None and (call.value or "").startswith("True")):
        return []
    setting = CodeSetting(call, call.at) if call is not None and call.at is not None else None
    share = f"in {len(on)} of {len(samples)} samples of the driving thread" if samples else "after the script's call"
    why = (f"Anomaly detection was on {share}"
           + (f", switched on by {setting.where_words()}" if setting else "")
           + ": autograd records a traceback for every operation and checks every gradient for NaN, which PyTorch "
           "documents as slowing execution (users measured 2-3x slower training).")
    if setting is not None:
        fix = f"Delete {setting.where_words()} (or put it behind a debug switch that is off for real runs)."
        snippet = f"# {setting.place()}: delete\n# {setting.statement()}"
    else:
        fix = "Remove torch.autograd.set_detect_anomaly(True) / the detect_anomaly() block from the training code."
        snippet = "torch.autograd.set_detect_anomaly(False)"
    return [_finding("warning", "Autograd anomaly detection is on", why, fix, snippet,
                     {"samples_on": len(on), "samples": len(samples) or None,
                      "set_at": setting.short_place() if setting else None}, lang="python")]


@evidence_rule("EVID012", "debugging-left-on", category="torch", severity="warning",
               title="A tracer, profiler or debugging mode is left on")
def debugging_left_on(ev: Evidence) -> list[Finding]:
    """
    What it checks:
        On the thread that drives the step, read by the job's probe: a trace or profile function
        (`sys.settrace`/`sys.setprofile`: a debugger, coverage), `sys.monitoring` tools, PyTorch's
        profiler, torch function or dispatch modes left on the stack (`torch.set_default_device`
        installs one), `tracemalloc`; and the interpreter's debug settings (`-X dev`,
        `PYTHONMALLOC=debug`, a debug build).

    Why it matters:
        Each one runs Python code for every line, call, allocation or tensor operation: a line tracer
        slows Python several times (CPython issues 93516, 107674), a torch function mode sends every
        torch call through Python (PyTorch issue 92701: `set_default_device`), and the profiler
        records every operator. They are debugging aids that a real run should not carry.

    Fix:
        Run without the debugger or coverage, end the profiler's block before training (or give it
        a schedule), remove `torch.set_default_device` (pass `device=` where tensors are made),
        stop `tracemalloc`, and run without `-X dev`.
    """
    state = _state(ev)
    if state is None:
        return []
    samples = state.loop_samples()
    items: list[str] = []
    fixes: list[str] = []

    def seen(attr: str) -> list[str]:
        values: list[str] = []
        for s in samples:
            value = getattr(s, attr)
            for v in (value if isinstance(value, list) else [value] if value else []):
                if v and v not in values:
                    values.append(str(v))
        return values

    for attr, words, fix in (("trace", "a trace function ({}) on the training thread (a debugger or coverage)",
                              "run without the debugger or coverage"),
                             ("profile", "a profile function ({}) on the training thread",
                              "run without the profiler that set it"),
                             ("monitoring", "sys.monitoring tools ({})", "run without the debugger or coverage")):
        values = seen(attr)
        if values:
            items.append(words.format(", ".join(values[:3])))
            fixes.append(fix)
    if any(s.profiler for s in samples):
        items.append("PyTorch's profiler recording every operator")
        fixes.append("end the profiler's with block before training, or give it a schedule (torch.profiler.schedule)")
    modes = seen("function_modes") + seen("dispatch_modes")
    if modes:
        device = _last_setting(state, "torch.set_default_device")
        items.append(f"torch modes left on ({', '.join(modes[:4])})"
                     + (f", one installed by {device.where_words()}" if device else ""))
        fixes.append(f"delete {device.where_words()} and pass device= where tensors are made" if device
                     else "leave the mode's with block before training")
    if any(s.tracemalloc for s in samples) or state.flags.tracemalloc:
        items.append("tracemalloc tracing every allocation")
        fixes.append("stop it (tracemalloc.stop(), or run without -X tracemalloc / PYTHONTRACEMALLOC)")
    if state.flags.dev_mode:
        items.append("Python's development mode (-X dev: debug hooks on every allocation)")
        fixes.append("run without -X dev (and PYTHONDEVMODE)")
    if state.flags.malloc and state.flags.malloc.endswith("debug"):
        items.append(f"PYTHONMALLOC={state.flags.malloc}")
        fixes.append("unset PYTHONMALLOC")
    if state.flags.debug_build:
        items.append("a debug build of Python")
        fixes.append("use a release build of Python")
    if not items:
        return []
    why = ("The job runs with " + "; ".join(items) + ". Each runs extra Python code for every line, call, "
           "allocation or tensor operation of the step, so the whole step slows, not one part of it.")
    fix = "; ".join(dict.fromkeys(fixes)).capitalize() + "."
    return [_finding("warning", f"Left on while training: {items[0].split(' (')[0]}"
                     + (f" (and {len(items) - 1} more)" if len(items) > 1 else ""), why, fix, "",
                     {"items": len(items)})]


# --- thread counts and binding set in the script -----------------------------------------------------------------


@evidence_rule("EVID013", "threads-set-in-code", category="threads", severity="warning",
               title="The script sets more threads than the job may use")
def threads_set_in_code(ev: Evidence) -> list[Finding]:
    """
    What it checks:
        The thread count the script sets itself (`torch.set_num_threads(n)`, or an `os.environ` write
        of OMP_NUM_THREADS before `import torch`), with its file and line, and the count the probe
        read on the driving thread, against the CPUs the job may use (affinity and cgroup quota).

    Why it matters:
        A call in the script wins over any variable set outside it: `OMP_NUM_THREADS=2 python
        train.py` changes nothing when line 12 says `torch.set_num_threads(8)`. Eight threads on two
        CPUs time-slice, and every barrier waits for a thread the scheduler put aside.

    Fix:
        Change the line that sets the count (named in the finding) to the usable CPUs, or to
        `len(os.sched_getaffinity(0))`, so it follows the CPUs the job is given.
    """
    state = _state(ev)
    setting = thread_setting(state)
    usable = _usable(ev)
    if setting is None or usable is None:
        return []
    seen = seen_threads(state)
    asked = seen if seen is not None else _int(setting.call.value)
    if asked is None or asked <= usable:
        return []
    fix, snippet = thread_change(setting, usable)
    why = (f"The script sets PyTorch's pool to {plural(asked, 'thread')} ({setting.where_words()}; read on the driving "
           f"thread: {seen if seen is not None else 'not sampled'}), but the job may use {plural(usable, 'CPU')}: the "
           "threads time-slice and each barrier waits for one the scheduler put aside. A variable set outside the "
           "script cannot change it: the call wins.")
    return [_finding("warning", f"{setting.short_place()} sets {plural(asked, 'thread')} on "
                     f"{plural(usable, 'usable CPU')}", why,
                     fix + " (len(os.sched_getaffinity(0)) follows the CPUs the job is given.)", snippet,
                     {"threads": asked, "usable_cpus": usable, "set_at": setting.short_place()}, lang="python")]


def _int(value: str | None) -> int | None:
    try:
        return int(str(value).split(",")[0].strip())
    except (TypeError, ValueError):
        return None


@evidence_rule("EVID014", "binding-set-in-code", category="topology", severity="warning",
               title="The script binds itself to fewer CPUs than it was given, before starting workers")
def binding_set_in_code(ev: Evidence) -> list[Finding]:
    """
    What it checks:
        Binding the script sets itself (an `os.environ` write of OMP_PROC_BIND, OMP_PLACES,
        GOMP_CPU_AFFINITY or KMP_AFFINITY before `import torch`, or `os.sched_setaffinity`), with its
        file and line, whether the job's own CPUs narrowed after it (read by the probe), and whether
        the job builds DataLoaders with worker processes, which inherit the narrowed set.

    Why it matters:
        OpenMP binding pins the main thread to one CPU when `import torch` loads the OpenMP runtime;
        every DataLoader worker forked afterwards inherits that one CPU and they take turns on it. An
        `env -u OMP_PROC_BIND` outside does nothing against a line that sets it inside.

    Fix:
        Delete the lines that set the binding (named in the finding) and choose the job's CPUs from
        outside with taskset or numactl; or give each worker every CPU back in `worker_init_fn`.
    """
    state = _state(ev)
    settings = binding_settings(state)
    if not settings:
        return []
    start = state.affinity_start or (sorted(ev.launch_affinity) if ev.launch_affinity else None)
    now = state.affinity_after_torch
    sample = state.latest()
    if sample is not None and sample.affinity:
        from cpudoctor.kits.cpulist import parse_cpulist

        now = parse_cpulist(sample.affinity) or now
    workers = max((x.num_workers or 0 for x in state.loaders), default=0)
    if not start or not now or len(now) >= len(start) or workers == 0:
        return []
    if ev.breakdown is not None and any(p.role == "dataloader_worker" and p.affinity is not None
                                        and len(p.affinity) < len(start) for p in ev.breakdown.processes):
        return []           # the workers were seen confined: EVID004 says so, naming these lines
    from cpudoctor.advisor.code_settings import binding_removal
    from cpudoctor.kits.cpulist import format_cpulist

    fix, snippet = binding_removal(settings)
    why = (f"{'; '.join(s.where_words() for s in settings)}: after it the job ran on CPU "
           f"{format_cpulist(now)} of the {len(start)} it was started with ({format_cpulist(start)}), and it builds "
           f"DataLoaders with {plural(workers, 'worker process', 'worker processes')}, which inherit that set and take "
           "turns on it.")
    return [_finding("warning", f"The script binds itself to {plural(len(now), 'CPU')} of {len(start)} before "
                     f"starting {plural(workers, 'worker')}", why, fix, snippet,
                     {"cpus_after": format_cpulist(now), "cpus_given": format_cpulist(start), "workers": workers,
                      "set_at": [s.short_place() for s in settings]}, lang="python")]


@evidence_rule("EVID015", "loader-workers-exceed-cpus", category="threads", severity="warning",
               title="A DataLoader starts more worker processes than the job has CPUs")
def loader_workers_exceed_cpus(ev: Evidence) -> list[Finding]:
    """
    What it checks:
        The `num_workers` of every DataLoader the job built (with the line that built it, from the
        job's probe) against the CPUs the job may use, and how much CPU its worker processes used.

    Why it matters:
        Busy workers beyond the CPUs do not load faster: they time-slice with each other and with
        the training threads, which then wait at every barrier, and each is a copy of the process
        in memory. More workers than CPUs only pays when the workers mostly wait (on disk or
        network): then they are seen blocked there and the rule stays silent. A worker blocked on
        its queue of indices was not asked for a batch, which says nothing of I/O: those samples
        are left out of the share.

    Fix:
        Set `num_workers` at the line that builds the loader to at most the usable CPUs (fewer when
        the training threads need them), e.g. `min(8, len(os.sched_getaffinity(0)))`.
    """
    state = _state(ev)
    usable = _usable(ev)
    if state is None or usable is None:
        return []
    loaders = [x for x in state.loaders if (x.num_workers or 0) > usable]
    if not loaders:
        return []
    busy = _workers_busy(ev.breakdown)
    if busy is not None and busy < BUSY_WORKERS:
        return []       # the workers mostly wait (on I/O, or for the loop to take their batches): no CPU lost to them
    loader = max(loaders, key=lambda x: x.num_workers or 0)
    place = _where(loader.at)
    why = (f"The DataLoader built {'at ' + place if place else 'by the job'} starts "
           f"{plural(loader.num_workers or 0, 'worker process', 'worker processes')} (batch size "
           f"{loader.batch_size if loader.batch_size is not None else '?'}) for {plural(usable, 'usable CPU')}"
           + (f"; they were busy {percent(busy, fraction=True)} of the time they had work" if busy is not None else "")
           + ": busy workers beyond the CPUs take turns with each other and with the training threads, so they cannot "
           "load faster than the CPUs allow, and each is a copy of the process in memory.")
    fix = (f"Set num_workers to at most {usable} {'at ' + place if place else 'where the DataLoader is built'}"
           " (or min(8, len(os.sched_getaffinity(0))), which follows the CPUs the job is given).")
    snippet = (f"# {place}:\n" if place else "") + f"loader = DataLoader(dataset, ..., num_workers={usable})"
    return [_finding("warning", f"{plural(loader.num_workers or 0, 'DataLoader worker')} on "
                     f"{plural(usable, 'usable CPU')}", why, fix, snippet,
                     {"num_workers": loader.num_workers, "usable_cpus": usable,
                      "workers_busy": round(busy, 3) if busy is not None else None,
                      "built_at": place or None}, lang="python")]


def _workers_busy(bd: TimeBreakdown | None) -> float | None:
    """The share of the DataLoader workers' samples with work to do in which their main thread ran, or None.

    A worker blocked on its queue of indices was not asked for anything (before the first batch, after the last,
    or while the loop was slower than the workers): that says nothing about whether it waits on I/O, the one case
    where more workers than CPUs pays. Counting it would let a short run, most of whose window is start-up, pass
    busy workers off as waiting ones. None when no sample of theirs had work (the state alone decides then).
    """
    if bd is None:
        return None
    running = waiting = 0
    for p in bd.processes:
        if p.role != "dataloader_worker":
            continue
        for t in p.threads:
            if t.tid == p.pid:
                running += t.samples
                waiting += max(0, t.idle_samples - t.work_wait_samples)
    return running / (running + waiting) if running + waiting else None


# --- inference -------------------------------------------------------------------------------------------------------


@evidence_rule("EVID016", "grad-in-inference-loop", category="torch", severity="warning",
               title="An inference loop records autograd graphs it never uses")
def grad_in_inference_loop(ev: Evidence) -> list[Finding]:
    """
    What it checks:
        A job that calls its model many times without any backward pass or optimizer step, while
        the driving thread had grad mode on and inference mode off and the model has trainable
        parameters (all read by the job's probe), with the latency of the model's calls as the
        probe timed them (p50, p99 of its last calls): a serving loop's cost per request.

    Why it matters:
        With grad mode on, every operation of the forward pass saves its inputs and builds a graph
        node for a backward pass that never comes: extra work, extra memory, and no in-place
        reuse. `torch.inference_mode()` skips all of it.

    Fix:
        Run the loop under `with torch.inference_mode():` (or `torch.no_grad()` when tensors made
        there are later used in autograd), and call `model.eval()`; `cpudoctor bench infer` measures
        what inference mode gives the model on this CPU (p50/p99 beside the plain call).
    """
    state = _state(ev)
    if state is None or state.model is None or not state.model.trainable:
        return []
    if state.forwards < INFERENCE_FORWARDS or state.steps or state.backwards:
        return []
    samples = [s for s in state.loop_samples() if not s.at_exit]
    recording = [s for s in samples if s.grad and not s.inference]
    if not samples or len(recording) * 2 < len(samples):
        return []
    place = _where(state.model.called_at)
    why = (f"The job called {state.model.name} {state.forwards:,} times with no backward pass and no optimizer step, "
           f"and grad mode was on in {len(recording)} of {len(samples)} samples of the driving thread"
           + (f" (the model is called at {place})" if place else "")
           + (f"; {latency_words(state)}" if latency_words(state) else "")
           + ": each forward pass saved its inputs and built an autograd graph for a backward pass that never came.")
    forward = state.serving.forward if state.serving is not None else None
    return [_finding("warning", f"{state.forwards:,} forward calls building autograd graphs, no backward pass", why,
                     "Run the loop under torch.inference_mode() (torch.no_grad() if its tensors later enter autograd), "
                     "with the model in eval mode; `cpudoctor bench infer` measures what it gives this model "
                     "(p50/p99 beside the plain call).",
                     (f"# around the loop that calls the model ({place}):\n" if place else "")
                     + "model.eval()\nwith torch.inference_mode():\n    out = model(x)",
                     {"forwards": state.forwards, "samples_recording": len(recording), "samples": len(samples),
                      "called_at": place or None, "p50_ms": forward.p50_ms if forward else None,
                      "p99_ms": forward.p99_ms if forward else None}, lang="python")]


# --- other global switches -------------------------------------------------------------------------------------


@evidence_rule("EVID017", "deterministic-algorithms", category="torch", severity="info",
               title="Deterministic algorithms are forced")
def deterministic_algorithms(ev: Evidence) -> list[Finding]:
    """
    What it checks:
        Whether `torch.use_deterministic_algorithms(True)` was in force on the driving thread (read by
        the job's probe), and the line that set it.

    Why it matters:
        It makes PyTorch pick deterministic versions of the operators that have them, some of them
        slower (scatter and index operations with accumulation), and raise for the ones that have
        none. On the CPU most kernels are deterministic already, so the cost is usually small;
        it is worth knowing when reproducibility was not the goal.

    Fix:
        Keep it when bitwise reproducibility is required; otherwise delete the call (named in the
        finding).
    """
    state = _state(ev)
    sample = state.latest() if state is not None else None
    if sample is None or not sample.deterministic:
        return []
    setting = _last_setting(state, "torch.use_deterministic_algorithms")
    why = ("torch.use_deterministic_algorithms(True) is in force"
           + (f" ({setting.where_words()})" if setting else "")
           + ": operators with a deterministic version use it, some slower (accumulating scatter and index "
           "operations); on the CPU most kernels are deterministic anyway.")
    return [_finding("info", "Deterministic algorithms are forced", why,
                     ("Keep it if results must be bitwise reproducible; otherwise delete "
                      + (setting.where_words() if setting else "the call") + "."), "",
                     {"set_at": setting.short_place() if setting else None})]


@evidence_rule("EVID018", "onednn-disabled", category="torch", severity="warning",
               title="oneDNN is switched off in the script")
def onednn_disabled(ev: Evidence) -> list[Finding]:
    """
    What it checks:
        `torch.backends.mkldnn.enabled` on the driving thread (read by the job's probe), and the line
        that switched it off.

    Why it matters:
        With oneDNN off, convolutions, bf16 matmuls and fused CPU kernels fall back to PyTorch's
        generic implementations (im2col plus GEMM for convolutions), several times slower for most
        shapes; the switch is meant for debugging numerical differences.

    Fix:
        Delete the line that sets `torch.backends.mkldnn.enabled = False` (named in the finding).
    """
    state = _state(ev)
    sample = state.latest() if state is not None else None
    if sample is None or sample.mkldnn is not False:
        return []
    setting = _last_setting(state, "torch.backends.mkldnn.enabled")
    why = ("oneDNN (torch.backends.mkldnn.enabled) was off on the driving thread"
           + (f", switched off by {setting.where_words()}" if setting else "")
           + ": convolutions, bf16 matmuls and fused CPU kernels run PyTorch's generic fallbacks instead.")
    return [_finding("warning", "oneDNN is switched off", why,
                     f"Delete {setting.where_words() if setting else 'the line that sets torch.backends.mkldnn.enabled = False'}.",
                     (f"# {setting.place()}: delete\n" if setting else "") + "# torch.backends.mkldnn.enabled = False",
                     {"set_at": setting.short_place() if setting else None}, lang="python")]


# --- the driving thread ------------------------------------------------------------------------------------------


@evidence_rule("EVID019", "driver-busy-elsewhere", category="threads", severity="warning",
               title="The thread that drives the step is busy outside the kernels")
def driver_busy_elsewhere(ev: Evidence) -> list[Finding]:
    """
    What it checks:
        The driving thread's own samples (the thread that runs the training loop, the critical
        path): how much of its time was outside the thread team's kernels and barriers, in which
        category, and in which native frames and Python lines; and the OpenMP waiting of the other
        threads meanwhile.

    Why it matters:
        The pool's threads can only work when the driving thread hands them a kernel. While it is
        busy elsewhere (PyTorch's bookkeeping, allocation, a blocking call) they wait, and their
        waiting looks like "too many threads" although fewer threads would not help. The cause is
        what the driving thread does; its top frames say it in the code's own words, also for
        causes no rule knows.

    Fix:
        Follow the driving thread's top frames named in the finding: more work per operation for
        bookkeeping, fewer allocations for memory, blocking calls out of the loop.
    """
    bd = ev.own_shares()
    if bd is None or bd.driver_thread() is None or drives_team(bd):
        return []
    driver = bd.driver_thread()
    shares = sorted((s for s in driver.shares if s.category not in (COMPUTE, OPENMP)), key=lambda s: -s.share)
    outside = sum(s.share for s in shares)
    if outside < DRIVER_ELSEWHERE or not shares:
        return []
    top = shares[0]
    if top.category in (PYTHON, DATA, "compile"):
        return []           # EVID006, EVID002 and EVID003 name those, with the pool's waiting as a consequence
    return [_driver_finding(ev, bd, top.category, top.share, outside)]


def _short_frame(frame: str, limit: int = 90) -> str:
    """A frame as a reader needs it: a C++ template's arguments cut (``vectorized_inner_sum<…> (libtorch_cpu.so)``)."""
    name, _, where = frame.rpartition(" (") if frame.endswith(")") else (frame, "", "")
    name = name or frame
    if "<" in name:
        name = name[:name.index("<")] + "<…>"
    text = f"{name} ({where}" if where else name
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _driver_finding(ev: Evidence, bd: TimeBreakdown, category: str, share: float, outside: float) -> Finding:
    frames = "; ".join(f"{_short_frame(f.frame)} {percent(f.share, fraction=True)}" for f in bd.driver_native[:4])
    lines = "; ".join(f"{_short_frame(f.frame)} {percent(f.share, fraction=True)}" for f in bd.driver_python[:3])
    why = (f"The thread that drives the step spent {percent(outside, fraction=True)} of its time outside the kernels, most of it "
           f"({percent(share, fraction=True)}) in {_CATEGORY_WORDS.get(category, category)}."
           + (f" Its top native frames: {frames}." if frames else "")
           + (f" Its top Python lines: {lines}." if lines else "")
           + consequence(bd) + (f" {ev.load_note().strip(' ()').capitalize()}." if ev.load_note() else ""))
    fix = _CATEGORY_FIX.get(category, "Follow the driving thread's top frames above: they are where the step's time "
                            "goes.")
    return _finding("warning", f"The training thread spends {percent(share, fraction=True)} in "
                    f"{_CATEGORY_WORDS.get(category, category).split(' (')[0]}", why, fix, "",
                    {"category": category, "driver_share": round(share, 3), "outside_kernels": round(outside, 3),
                     "openmp_wait_share": round(bd.share(OPENMP), 3), "driver_samples": bd.driver_samples})
