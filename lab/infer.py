"""``bench infer``: a model's inference variants, measured in interleaved segments until one can be recommended.

The orchestrator runs in the parent (CPU Doctor's own interpreter, no torch), like the thread sweep: the
CLI calls :func:`run_infer`, the window starts ``python -m cpudoctor.lab.infer``. It plans the variants
that apply on this machine (:func:`plan`), each with the reason when it does not apply (no C++ compiler for
``torch.compile``, no native bf16, no jemalloc/tcmalloc to preload, one L3 domain to pin to); ONNX Runtime,
torchao and the model's own layers are judged by the worker, in the user's environment.

Variants that need a process of their own get one worker each (an environment variable read at start-up,
a preloaded allocator, a CPU set, ``torch.compile``, which may outlast the preparation time); the rest share
the main worker (:mod:`cpudoctor.lab.jobs.infer`). All workers start at once and prepare (warm-up and the
accuracy check against fp32 included) until a share of the budget; then every (variant, batch) cell is
measured for one short segment in turn, the order reversed each round (ABC CBA ...), so a burst of load
elsewhere hits every variant alike. Each segment records the share of the CPUs other programs took.

The recommendation per batch size: among the variants whose outputs stay within the accuracy limit, the
fastest median (of the segments' medians), taking the simplest change among those within 3 % of it, when
it is faster than every other beyond both spreads (or tied precisely); otherwise "inconclusive" with the
reason, as the sweep says it. A faster variant beyond the accuracy limit is shown and marked, never
recommended.
"""

from __future__ import annotations

import json
import os
import queue
import shutil
import sys
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

from cpudoctor.kits.cpulist import format_cpulist
from cpudoctor.kits.format import percent
from cpudoctor.kits.plural import plural
from cpudoctor.lab import infer_fresh, protocol
from cpudoctor.lab import verdicts as words
from cpudoctor.lab.infer_code import variant_code
from cpudoctor.lab.jobs._cpumeter import CpuMeter
from cpudoctor.lab.settings import InferSettings
from cpudoctor.lab.stats import Figure, summarize, tied
from cpudoctor.lab.sweep import interference_share
from cpudoctor.lab.variants import _cores, thread_ladder, usable_cpus
from cpudoctor.model import Topology

PREP_SHARE = 0.45        # workers start and prepare until this share of the budget; the rest measures
TARGET_ROUNDS = 8        # the segment length is planned so that this many rounds fit
MIN_SEGMENT_S = 0.05
MAX_SEGMENT_S = 1.0
SETTLE_S = 0.05          # pause between segments: the last variant's thread pool stops spinning
REPORT_S = 4.0           # kept at the end of the budget: the workers' distributions (2 s at most), then their end
FRESH_MIN_S = 6.0        # the least time worth starting the check in new processes with (start, prepare, measure)
FRESH_END_S = 1.5        # kept at the end of the budget: the new processes' end
SUMMARY_S = 2.0
TIE_TOLERANCE = 0.03     # within 3 % of the fastest, the simpler change wins
PRECISE = 0.10
BUSY_STOP = 2.0
MAIN = "main"

# Groups of variants, for people and for the drawing's order.
GROUPS = ("reference", "mode", "threads", "pinning", "openmp", "allocator", "layout", "precision", "compile",
          "onnxruntime")

ALLOCATORS = {
    "jemalloc": ("libjemalloc.so.2", "libjemalloc.so"),
    "tcmalloc": ("libtcmalloc_minimal.so.4", "libtcmalloc.so.4", "libtcmalloc_minimal.so", "libtcmalloc.so"),
}
LIB_DIRS = ("/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib", "/usr/local/lib",
            "/lib/x86_64-linux-gnu", "/lib64")


# --------------------------------------------------------------------------- what this machine offers


def find_compiler(env: dict[str, str] | None = None) -> str | None:
    """The C++ compiler torch.compile's CPU backend (inductor) would use: ``$CXX``, else g++ (clang++ on macOS)."""
    env = os.environ if env is None else env
    wanted = env.get("CXX") or ("clang++" if sys.platform == "darwin" else "g++")
    if sys.platform == "win32":
        wanted = env.get("CXX") or "cl"
    return shutil.which(wanted, path=env.get("PATH"))


def find_allocators(python: str | None = None, dirs: tuple[str, ...] = LIB_DIRS) -> dict[str, str]:
    """jemalloc / tcmalloc shared libraries on this machine (the chosen environment's own lib folder first: a
    conda environment brings its own), by name -> path. Linux only: LD_PRELOAD is the dynamic loader's."""
    if not sys.platform.startswith("linux"):
        return {}
    folders: list[str] = []
    if python:
        folders.append(str(Path(python).resolve().parent.parent / "lib"))
    folders += list(dirs)
    found: dict[str, str] = {}
    for name, files in ALLOCATORS.items():
        for folder in folders:
            hit = next((os.path.join(folder, f) for f in files if os.path.isfile(os.path.join(folder, f))), None)
            if hit:
                found[name] = hit
                break
    return found


# --------------------------------------------------------------------------- the plan


@dataclass
class WorkerPlan:
    """One worker process: how it starts (environment, CPU set, preloaded allocator) and what it measures."""

    key: str
    variants: list[dict[str, Any]] = field(default_factory=list)     # specs for the child
    env: dict[str, str] = field(default_factory=dict)                # set on top of the user's environment
    cpus: list[int] | None = None
    threads: int | None = None
    preload: str | None = None                                        # allocator name, e.g. "jemalloc"
    preload_path: str | None = None
    deferred: str | None = None                                       # started only when the main worker's
                                                                      # OpenMP runtime is one of these (comma list)


@dataclass
class Plan:
    workers: list[WorkerPlan]
    skipped: list[dict[str, Any]]          # {name, group, reason}: decided before any worker started


def _spec(name: str, group: str, effort: int, **kw: Any) -> dict[str, Any]:
    return {"name": name, "group": group, "effort": effort, "kind": kw.pop("kind", "inference"), **kw}


def plan(settings: InferSettings, topology: Topology, allowed: list[int] | None = None, *,
         compiler: str | None = None, allocators: dict[str, str] | None = None,
         env: dict[str, str] | None = None) -> Plan:
    """The variants worth measuring here, grouped into workers, and the ones that do not apply, with why."""
    env = dict(os.environ) if env is None else env
    allocators = allocators or {}
    usable = usable_cpus(topology, allowed)
    cores = _cores(topology, usable) if usable else []
    quota = topology.affinity.usable_cpus
    limit = min(len(usable), quota) if quota and usable else len(usable)
    ladder = thread_ladder(limit, min(len(cores), limit)) if limit else []
    main = WorkerPlan(MAIN)
    workers = [main]
    skipped: list[dict[str, Any]] = []
    torch_model = settings.source != "onnx"
    if torch_model:
        # the baseline first: when preparation time runs out, what is prepared is measured
        main.variants += [_spec("inference_mode", "mode", 1), _spec("eager fp32", "reference", 0, kind="eager")]
        main.variants += [_spec(plural(t, "thread"), "threads", 2, threads=t, same_threads_as="inference_mode")
                          for t in ladder]
        main.variants.append(_spec("channels_last", "layout", 3, channels_last=True))
        if settings.native_bf16 is False:
            skipped.append({"name": "bf16 autocast", "group": "precision",
                            "reason": "this CPU has no native bf16 (no AVX512_BF16 or AMX-BF16): autocast would emulate "
                                      "it, converting every operation to fp32 and back"})
        else:
            main.variants.append(_spec("bf16 autocast", "precision", 4, autocast="bf16"))
        main.variants.append(_spec("int8 dynamic", "precision", 4, int8=True))
        if compiler is None:
            skipped.append({"name": "torch.compile", "group": "compile",
                            "reason": "no C++ compiler found (" + ("$CXX" if env.get("CXX") else "g++") + " on PATH): "
                                      "torch.compile's CPU code generator needs one (Debian/Ubuntu: apt install g++)"})
        else:
            workers.append(WorkerPlan("compile", [_spec("torch.compile", "compile", 5, compile=True)]))
    else:
        main.variants.append(_spec("ONNX Runtime, no graph optimisation", "reference", 0, kind="onnxruntime",
                                   ort_level="disable"))
    ort_threads = ladder or [None]
    main.variants += [_spec("ONNX Runtime" + (f", {plural(t, 'thread')}" if t else ""), "onnxruntime", 5,
                            kind="onnxruntime", ort_threads=t, ort_level="all") for t in ort_threads]
    main.variants.append(_spec("ONNX Runtime, basic graph optimisation", "onnxruntime", 5, kind="onnxruntime",
                               ort_threads=ort_threads[-1], ort_level="basic"))
    base = "inference_mode" if torch_model else "ONNX Runtime"
    base_spec = (lambda name, group, effort: _spec(name, group, effort)) if torch_model else \
        (lambda name, group, effort: _spec(name, group, effort, kind="onnxruntime", ort_level="all",
                                           ort_threads=ort_threads[-1]))
    if torch_model:
        for policy in ("PASSIVE", "ACTIVE"):
            name = f"OMP_WAIT_POLICY={policy}"
            if str(env.get("OMP_WAIT_POLICY", "")).upper() == policy:
                skipped.append({"name": name, "group": "openmp", "reason": f"already set in this environment, so "
                                f"'{base}' runs with it"})
                continue
            workers.append(WorkerPlan(name, [base_spec(name, "openmp", 2)], env={"OMP_WAIT_POLICY": policy}))
        if "KMP_BLOCKTIME" in env:
            skipped.append({"name": "KMP_BLOCKTIME=0", "group": "openmp",
                            "reason": f"KMP_BLOCKTIME={env['KMP_BLOCKTIME']} is already set in this environment"})
        else:
            workers.append(WorkerPlan("KMP_BLOCKTIME=0", [base_spec("KMP_BLOCKTIME=0", "openmp", 2)],
                                      env={"KMP_BLOCKTIME": "0"}, deferred="intel,llvm"))
    if not sys.platform.startswith("linux"):
        skipped.append({"name": "allocator (LD_PRELOAD)", "group": "allocator",
                        "reason": "preloading an allocator with LD_PRELOAD needs Linux"})
    elif not allocators:
        skipped.append({"name": "allocator (LD_PRELOAD)", "group": "allocator",
                        "reason": "neither jemalloc nor tcmalloc is installed (Debian/Ubuntu: apt install libjemalloc2 "
                                  "or libtcmalloc-minimal4; conda: conda install jemalloc)"})
    else:
        preloaded = env.get("LD_PRELOAD", "")
        for name, path in sorted(allocators.items()):
            label = f"{name} (LD_PRELOAD)"
            if name in preloaded:
                skipped.append({"name": label, "group": "allocator",
                                "reason": f"already preloaded in this environment, so '{base}' runs with it"})
                continue
            workers.append(WorkerPlan(label, [base_spec(label, "allocator", 3)],
                                      env={"LD_PRELOAD": (path + " " + preloaded).strip()}, preload=name,
                                      preload_path=path))
    l3s = [sorted(set(d.cpus) & set(usable)) for d in topology.l3_domains]
    l3s = [d for d in l3s if d]
    if len(l3s) > 1:
        firsts = [g[0] for g in cores if g[0] in set(l3s[0])]
        word = "CCX" if topology.l3_is_ccx() else "L3 domain"
        name = f"one {word} (CPUs {format_cpulist(firsts)}), {plural(len(firsts), 'thread')}"
        spec = base_spec(name, "pinning", 2)
        spec["threads" if torch_model else "ort_threads"] = len(firsts)
        workers.append(WorkerPlan(name, [spec], cpus=firsts, threads=len(firsts) if torch_model else None))
    else:
        skipped.append({"name": "one CCX (pinned)", "group": "pinning",
                        "reason": "one L3 cache (CCX) serves every usable CPU here, so there is no smaller one to pin to"
                        if usable else "the usable CPUs are unknown"})
    return Plan(workers, skipped)


# --------------------------------------------------------------------------- workers


class InferWorker:
    """One ``infer.py`` worker behind the lab's job runner: prepares its variants, then measures on command."""

    def __init__(self, wp: WorkerPlan, settings: InferSettings, python: str | None):
        self.plan = wp
        self.settings = settings
        self.python = python
        self.job = None
        self.prepared: dict[str, dict[str, Any]] = {}
        self.ready: dict[str, Any] | None = None
        self.summary: list[dict[str, Any]] | None = None
        self.started_at: float | None = None
        self.paused = False
        self._ready = threading.Event()
        self._summary = threading.Event()
        self._segments: queue.Queue = queue.Queue()

    def args(self) -> dict[str, Any]:
        s = self.settings
        return {"source": s.source, "model": s.model, "target": s.target, "cwd": s.cwd, "input_shape": s.input_shape,
                "batches": s.batches, "variants": self.plan.variants, "threads": self.plan.threads,
                "cpus": self.plan.cpus, "native_bf16": s.native_bf16, "int8_api": s.int8_api,
                "preload": self.plan.preload}

    def start(self) -> "InferWorker":
        from cpudoctor.lab.jobs import script_path
        from cpudoctor.lab.runner import Job, job_command

        env = {**os.environ, **self.plan.env} if self.plan.env else None
        self.started_at = time.monotonic()
        # by path: "infer" names the orchestrator (this module); its workers are the script lab/jobs/infer.py
        self.job = Job(job_command(str(script_path("infer")), self.args(), self.python), self._on_message, env=env,
                       what=f"the inference worker '{self.plan.key}'").start()
        return self

    def _on_message(self, msg: protocol.Message) -> None:
        if msg.type != protocol.PROGRESS:
            return
        phase = msg.data.get("phase")
        if phase == "prepared" and msg.data.get("variant"):
            self.prepared[str(msg.data["variant"])] = msg.data
        elif phase == "ready":
            self.ready = msg.data
            self._ready.set()
        elif phase == "segment":
            self._segments.put(msg.data)
        elif phase == "summary":
            self.summary = [c for c in msg.data.get("cells") or [] if isinstance(c, dict)]
            self._summary.set()

    @property
    def alive(self) -> bool:
        proc = getattr(self.job, "_proc", None)
        return proc is not None and proc.poll() is None

    def failure(self) -> str | None:
        if self.job is None or self.alive:
            return None
        outcome = self.job.wait(5)
        return outcome.message if outcome.status != "ok" else "the worker ended"

    def wait_ready(self, stop, deadline: float) -> bool:
        while not self._ready.is_set():
            if stop.is_set() or time.monotonic() > deadline or (self.job is not None and not self.alive):
                return self._ready.is_set()
            self._ready.wait(0.05)
        return True

    def measure(self, variant: str, batch: int, seconds: float, stop, until: float) -> dict[str, Any] | None:
        if self.job is None or not self.job.send(
                f"{protocol.MEASURE_COMMAND} " + json.dumps({"variant": variant, "batch": batch, "seconds": seconds})):
            return None
        deadline = min(until, time.monotonic() + max(60.0, seconds * 20))
        while time.monotonic() < deadline:
            try:
                return self._segments.get(timeout=0.05)
            except queue.Empty:
                if stop.is_set() or not self.alive:
                    return None
        return None

    def _signal(self, name: str) -> bool:
        """SIGSTOP / SIGCONT to the worker and its descendants through the kit's runner (the worker has a process
        group of its own, never ours); False where the signal does not exist (Windows) or the worker is gone."""
        import signal

        sig = getattr(signal, name, None)
        if sig is None or self.job is None or not self.alive:
            return False
        self.job.signal(sig)
        self.paused = name == "SIGSTOP"
        return True

    def pause(self) -> bool:
        """Freeze the worker while others measure: an idle OpenMP pool that spins (OMP_WAIT_POLICY=ACTIVE spins
        for ever) or ONNX Runtime's spinning threads would otherwise take the CPUs from the variant measured."""
        return self._signal("SIGSTOP")

    def resume(self) -> None:
        if self.paused:
            self._signal("SIGCONT")

    def go(self) -> None:
        """Preparation time is over: serve what is prepared."""
        if self.job is not None and self.alive:
            self.resume()
            self.job.send("go")

    def ask_summary(self) -> None:
        if self.job is not None and self.alive:
            self.resume()
            self.job.send("report")

    def wait_summary(self, until: float) -> None:
        while not self._summary.is_set() and time.monotonic() < until and self.alive:
            self._summary.wait(0.05)

    def request_stop(self) -> None:
        if self.job is not None:
            self.resume()                   # a frozen worker cannot read "stop"
            self.job.request_stop()

    def reap(self) -> None:
        if self.job is not None:
            self.job.stop(ask_wait=0.25, term_wait=0.5)


# --------------------------------------------------------------------------- the decision


@dataclass
class Cell:
    """One variant at one batch size: its segments' medians and their interference."""

    variant: str
    batch: int
    medians: list[float] = field(default_factory=list)
    interference: list[dict[str, Any]] = field(default_factory=list)
    calls: int = 0

    @property
    def figure(self) -> Figure | None:
        return summarize(self.medians)


def below(a: Figure, b: Figure) -> bool:
    """Latency ``a`` is lower than ``b`` beyond both spreads."""
    return a.hi < b.lo


def decide(figures: dict[str, Figure], effort: dict[str, int], accurate: dict[str, bool],
           tolerance: float = TIE_TOLERANCE, precise: float = PRECISE) -> dict[str, Any]:
    """The pick at one batch size among the accurate variants: settled or not, with the runner-up and why."""
    candidates = {n: f for n, f in figures.items() if accurate.get(n)}
    if not candidates:
        return {"settled": False, "pick": None, "runner_up": None,
                "reason": "no variant within the accuracy limit was measured"}
    best = min(f.median for f in candidates.values())
    close = [n for n, f in candidates.items() if f.median <= best * (1 + tolerance)]
    pick = min(close, key=lambda n: (effort.get(n, 9), candidates[n].median))
    others = sorted((n for n in candidates if n != pick), key=lambda n: candidates[n].median)
    fp = candidates[pick]
    for n in others:
        if below(fp, candidates[n]) or tied(fp, candidates[n], tolerance, precise):
            continue
        if candidates[n].median < fp.median * (1 + tolerance) and effort.get(n, 9) > effort.get(pick, 9) \
                and fp.relative_spread <= precise and candidates[n].relative_spread <= precise:
            continue      # as fast within the tolerance, and the pick is the simpler change
        return {"settled": False, "pick": pick, "runner_up": n,
                "reason": words.within_spread(f"'{pick}'", f"'{n}'")}
    return {"settled": True, "pick": pick, "runner_up": others[0] if others else None, "reason": ""}


def accurate_enough(accuracy: dict[str, Any] | None, limit: float) -> bool | None:
    """Within the accuracy limit (True), beyond it (False), or not checked (None)."""
    if not isinstance(accuracy, dict) or not accuracy.get("checked"):
        return None
    if accuracy.get("nonfinite") or accuracy.get("shape_differs"):
        return False
    rel = accuracy.get("max_rel")
    return isinstance(rel, (int, float)) and rel <= limit


# --------------------------------------------------------------------------- the run


def run_infer(settings: InferSettings, topology: Topology, allowed: list[int] | None = None,
              on_progress: Callable[[dict[str, Any]], None] | None = None, stop=None,
              on_result: Callable[[dict[str, Any]], None] | None = None, started: float | None = None,
              python: str | None = None) -> dict[str, Any]:
    """Plan, prepare and measure; the result says what it can honestly recommend per batch size."""
    stop = stop or threading.Event()
    emit = on_progress or (lambda data: None)
    start = time.monotonic() if started is None else min(started, time.monotonic())
    the_plan = plan(settings, topology, allowed, compiler=find_compiler(),
                    allocators=find_allocators(python or settings.python))
    workers = {wp.key: InferWorker(wp, settings, python or settings.python) for wp in the_plan.workers}
    meter = CpuMeter(usable_cpus(topology, allowed))
    whole = meter.start()
    state: dict[str, Any] = {"status": "ok", "rounds": 0, "cells": {}, "unprepared": {}, "skipped_workers": {},
                             "failed": {}, "segment_s": None}
    emit({"phase": "plan", "variants": [v["name"] for wp in the_plan.workers for v in wp.variants],
          "skipped": the_plan.skipped, "budget_s": settings.budget_s, "elapsed": 0.0})
    try:
        _prepare(settings, workers, stop, emit, start, state)
        if state["status"] == "ok":
            _measure(settings, workers, stop, emit, start, state)
        _collect_summaries(workers, start, settings)
    finally:
        for w in workers.values():
            w.request_stop()
    state["whole"] = meter.since(whole)
    if state["status"] == "ok" and state["cells"] and not stop.is_set():
        _reap(list(workers.values()))       # the new processes start on a machine the lab's workers have left
        _fresh(settings, workers, stop, emit, start, state, python or settings.python)
    result = _result(settings, the_plan, workers, state, time.monotonic() - start)
    if on_result is not None:
        on_result(result)
    _reap(list(workers.values()))
    return result


def _prepare(settings: InferSettings, workers: dict[str, InferWorker], stop, emit, start: float,
             state: dict[str, Any]) -> None:
    """Start the workers and wait until they are prepared or the preparation time is over.

    Each worker is frozen once ready (:meth:`InferWorker.pause`), so the others prepare on a quiet machine. The
    compile worker starts last, when every other worker is ready: compiling keeps both CPUs of a small machine
    busy for tens of seconds, and the time left is what it gets.
    """
    prep_end = start + PREP_SHARE * settings.budget_s
    late = [w for w in workers.values() if w.plan.deferred or w.plan.key == "compile"]
    main = workers[MAIN]
    main.start()                    # first: it prepares most variants; the single-variant workers follow
    second = [w for w in workers.values() if w not in late and w is not main]
    # the others when the main worker is ready, or at 60 % of the preparation time: on a busy machine they would
    # otherwise take the CPU the baseline needs to get prepared at all
    second_at = time.monotonic() + 0.6 * max(0.0, prep_end - time.monotonic())
    seen: set[str] = set()

    def report_prepared() -> None:
        for w in workers.values():
            for name, data in list(w.prepared.items()):
                if name not in seen:
                    seen.add(name)
                    emit({"phase": "prepared", "elapsed": round(time.monotonic() - start, 3), **data})

    decided_deferred = False
    while time.monotonic() < prep_end and not stop.is_set():
        report_prepared()
        if second and (main.ready is not None or not main.alive or time.monotonic() > second_at):
            for w in second:
                w.start()
            second = []
        for w in workers.values():
            if w.ready is not None and not w.paused and w.alive:
                w.pause()
        if not decided_deferred and (main.ready is not None or (main.job is not None and not main.alive)):
            decided_deferred = True
            _skip_deferred(late, main, state)
        started = [w for w in workers.values() if w.job is not None]
        settled = not second and all(w.ready is not None or not w.alive for w in started)
        if settled and decided_deferred:
            waiting = [w for w in late if w.job is None]
            if not waiting:
                break
            for w in waiting:
                w.start()
        time.sleep(0.05)
    def finishing(w: InferWorker) -> bool:
        """Worth a short wait: it prepared something, or it is the main worker (busy with its baseline)."""
        return w.job is not None and w.ready is None and w.alive and (bool(w.prepared) or w is main)

    for w in workers.values():           # time is up: serve what is prepared (the variant under way finishes)
        if finishing(w):
            w.go()
    grace = time.monotonic() + min(5.0, 0.05 * settings.budget_s)
    while time.monotonic() < grace and not stop.is_set() and any(finishing(w) for w in workers.values()):
        time.sleep(0.05)
    report_prepared()
    if stop.is_set():
        state["status"] = "cancelled"
        return
    if not decided_deferred:
        _skip_deferred(late, main, state)
    late_ones: list[InferWorker] = []
    for w in workers.values():
        if w.ready is not None and w.alive:
            w.pause()
            continue
        if w.plan.key in state["skipped_workers"]:
            continue
        why = w.failure() if w.job is not None else None
        if why is None:
            waited = time.monotonic() - (w.started_at or prep_end)
            window = f"the {PREP_SHARE * settings.budget_s:.0f} s the budget leaves for start-up and preparation"
            more = f"; rerun with a larger --budget (e.g. {max(120, int(settings.budget_s * 3))}) to measure it"
            if w.job is None:
                why = f"not started: preparing the other variants took {window}{more}"
            elif w.plan.key == "compile":
                why = f"still compiling after {waited:.0f} s, when {window} ended{more}"
            else:
                why = f"not prepared within {window} ({waited:.0f} s so far){more}"
            late_ones.append(w)
        state["unprepared"][w.plan.key] = why
    _reap(late_ones)        # now: a worker still compiling or importing would take the CPUs from the measurement


def _reap(workers: list[InferWorker]) -> None:
    """Stop workers in parallel (each within a second: ask, terminate, kill)."""
    threads = [threading.Thread(target=w.reap, daemon=True) for w in workers if w.job is not None]
    for t in threads:
        t.start()
    for t in threads:
        t.join(3.0)


def _skip_deferred(late: list[InferWorker], main: InferWorker, state: dict[str, Any]) -> None:
    """Workers started only for some OpenMP runtimes (KMP_BLOCKTIME: Intel's and LLVM's): skipped, with why,
    when the main worker runs another one."""
    runtime = (main.ready or {}).get("openmp")
    for w in list(late):
        if w.plan.deferred and runtime not in (w.plan.deferred or "").split(","):
            state["skipped_workers"][w.plan.key] = _openmp_words(runtime if main.ready else "unknown")
            late.remove(w)


def _openmp_words(runtime: str | None) -> str:
    if runtime == "gnu":
        return ("torch here runs GNU OpenMP (libgomp), which does not read KMP_BLOCKTIME (OMP_WAIT_POLICY is its "
                "setting, measured above)")
    if runtime == "unknown":
        return "the main worker was not ready in time to tell which OpenMP runtime torch uses here"
    if runtime is None:
        return "the OpenMP runtime torch uses here could not be told, so KMP_BLOCKTIME was not measured"
    return f"torch here runs {runtime} OpenMP, which the plan does not cover"


def _cells(workers: dict[str, InferWorker], batches: list[int]) -> list[tuple[str, str, int]]:
    """(worker, variant, batch) of every variant prepared and measurable, in plan order."""
    out = []
    for key, w in workers.items():
        if w.ready is None or not w.alive:
            continue
        for spec in w.plan.variants:
            data = w.prepared.get(spec["name"]) or {}
            if data.get("status") == "ok":
                out += [(key, spec["name"], b) for b in batches]
    return out


def _measure(settings: InferSettings, workers: dict[str, InferWorker], stop, emit, start: float,
             state: dict[str, Any]) -> None:
    cells = _cells(workers, settings.batches)
    if not cells:
        return
    hard = start + settings.budget_s * 1.05
    end = start + settings.budget_s - REPORT_S - fresh_reserve(settings.budget_s)
    left = end - time.monotonic()
    segment = min(MAX_SEGMENT_S, max(MIN_SEGMENT_S, left / (len(cells) * TARGET_ROUNDS) - SETTLE_S))
    state["segment_s"] = round(segment, 3)
    measured: dict[tuple[str, int], Cell] = state["cells"]
    steps = 0
    while True:
        order = cells if state["rounds"] % 2 == 0 else list(reversed(cells))
        for key, name, batch in order:
            if stop.is_set():
                state["status"] = "cancelled"
                return
            cell = measured.setdefault((name, batch), Cell(name, batch))
            guess = (cell.figure.median / 1000 if cell.figure else 0.0)
            if time.monotonic() + segment + guess + SETTLE_S > end:
                return
            worker = workers[key]
            worker.resume()
            seg = worker.measure(name, batch, segment, stop, until=hard)
            worker.pause()
            if seg is None or seg.get("error"):
                if stop.is_set():
                    state["status"] = "cancelled"
                    return
                if seg is None and time.monotonic() >= hard and worker.alive:
                    state["cut_off"] = (f"the budget ended during a segment of '{name}' at batch {batch} (one call "
                                        "took longer than the time left), which is not counted")
                    return
                if seg is None:
                    cells = [c for c in cells if c[0] != key]
                    why = worker.failure() or "the worker stopped answering"
                    for spec in worker.plan.variants:
                        state["failed"].setdefault(spec["name"], why)
                else:
                    cells = [c for c in cells if c[1:] != (name, batch)]
                    state["failed"].setdefault(name, str(seg["error"]))
                continue
            if seg.get("median_ms"):
                cell.medians.append(float(seg["median_ms"]))
                cell.calls += int(seg.get("calls") or 0)
            cell.interference.append(seg.get("interference") or {})
            steps += 1
            fig = cell.figure
            emit({"phase": "segment", "round": state["rounds"] + 1, "step": steps, "variant": name, "batch": batch,
                  "elapsed": round(time.monotonic() - start, 3), "budget_s": settings.budget_s,
                  "segment_median_ms": seg.get("median_ms"), "calls": seg.get("calls"),
                  "median_ms": round(fig.median, 4) if fig else None,
                  "other_share": (seg.get("interference") or {}).get("other_share")})
            stop.wait(SETTLE_S)
        state["rounds"] += 1
        if not cells:
            return
        if state["rounds"] >= settings.min_rounds:
            decisions = _decisions(settings, workers, measured)
            if all(d["settled"] for d in decisions.values()):
                return
            noise = interference_share([r for c in measured.values() for r in c.interference])
            if noise and noise["share"] > BUSY_STOP * settings.quiet_limit:
                return


def fresh_reserve(budget_s: float) -> float:
    """The seconds the interleaved rounds leave for the check in new processes when they would run to the end:
    :data:`infer_fresh.SHARE` of the budget, or none when that is too short to start a process and measure
    (a short budget is spent ranking; the check then runs only when the rounds settle early)."""
    share = infer_fresh.SHARE * budget_s
    return share if share >= FRESH_MIN_S else 0.0


def _fresh(settings: InferSettings, workers: dict[str, InferWorker], stop, emit, start: float,
           state: dict[str, Any], python: str | None) -> None:
    """Each batch size's pick, measured again in new processes of its own (:mod:`cpudoctor.lab.infer_fresh`)."""
    facts = _variant_facts(workers)
    picks = [infer_fresh.Pick(d["pick"], b, facts[d["pick"]]["spec"], facts[d["pick"]]["worker"].plan)
             for b, d in _decisions(settings, workers, state["cells"]).items() if d.get("pick") in facts]
    if not picks:
        return
    until = start + settings.budget_s - FRESH_END_S
    left = until - time.monotonic()
    if left < FRESH_MIN_S:
        state["fresh_skipped"] = {(p.variant, p.batch): (
            f"the interleaved rounds left {max(0.0, left):.0f} s of the {settings.budget_s:g} s budget, and starting "
            f"new processes and measuring them needs about {FRESH_MIN_S:.0f} s (rerun with a larger --budget)")
            for p in picks}
        return
    def said(data: dict[str, Any]) -> None:
        emit({**data, "budget_s": settings.budget_s})

    said({"phase": "fresh", "elapsed": round(time.monotonic() - start, 3),
          "variants": sorted({p.variant for p in picks})})

    def make(wp: WorkerPlan, batches: list[int]) -> InferWorker:
        return InferWorker(wp, replace(settings, batches=batches), python)

    outcome = infer_fresh.check(picks, make, until, stop, said, started=start)
    state["fresh"] = outcome.cells
    state["fresh_skipped"] = outcome.skipped
    state["fresh_segment_s"] = outcome.segment_s


def _collect_summaries(workers: dict[str, InferWorker], start: float, settings: InferSettings) -> None:
    for w in workers.values():
        if w.ready is not None:
            w.ask_summary()
    until = min(time.monotonic() + SUMMARY_S, start + settings.budget_s * 1.05)
    for w in workers.values():
        if w.ready is not None:
            w.wait_summary(until)


def _variant_facts(workers: dict[str, InferWorker]) -> dict[str, dict[str, Any]]:
    out = {}
    for w in workers.values():
        for spec in w.plan.variants:
            out[spec["name"]] = {"worker": w, "spec": spec, "prepared": w.prepared.get(spec["name"])}
    return out


def _decisions(settings: InferSettings, workers: dict[str, InferWorker],
               measured: dict[tuple[str, int], Cell]) -> dict[int, dict[str, Any]]:
    facts = _variant_facts(workers)
    out = {}
    for b in settings.batches:
        figs = {n: c.figure for (n, batch), c in measured.items() if batch == b and c.figure is not None}
        effort = {n: int(facts[n]["spec"].get("effort") or 0) for n in figs if n in facts}
        accurate = {n: bool(accurate_enough((facts[n]["prepared"] or {}).get("accuracy"), settings.max_error))
                    for n in figs if n in facts}
        out[b] = decide(figs, effort, accurate)           # type: ignore[arg-type]
    return out


def _result(settings: InferSettings, the_plan: Plan, workers: dict[str, InferWorker], state: dict[str, Any],
            elapsed: float) -> dict[str, Any]:
    measured: dict[tuple[str, int], Cell] = state["cells"]
    summaries = {(c.get("variant"), c.get("batch")): c for w in workers.values() for c in w.summary or []}
    main_ready = workers[MAIN].ready or {}
    torch_version = main_ready.get("torch")
    variants = []
    for w in workers.values():
        for spec in w.plan.variants:
            prepared = w.prepared.get(spec["name"]) or {}
            status = str(prepared.get("status") or "unprepared")
            reason = str(prepared.get("reason") or "")
            if w.plan.key in state["skipped_workers"]:
                status, reason = "skipped", state["skipped_workers"][w.plan.key]
            elif not prepared or (w.plan.key in state["unprepared"] and status == "ok"):
                reason = state["unprepared"].get(w.plan.key) or (
                    "not prepared: the run was cancelled" if state["status"] == "cancelled" else "not prepared")
                status = "unprepared"
            elif spec["name"] in state["failed"]:
                status, reason = "error", state["failed"][spec["name"]]
            accuracy = prepared.get("accuracy")
            ok = accurate_enough(accuracy, settings.max_error)
            entry: dict[str, Any] = {
                "name": spec["name"], "group": spec.get("group"), "effort": spec.get("effort"), "worker": w.plan.key,
                "status": status, "reason": reason, "spec": spec,
                "env": {k: v for k, v in w.plan.env.items() if k != "LD_PRELOAD"},
                "cpus": w.plan.cpus, "preload": w.plan.preload, "preload_path": w.plan.preload_path,
                "worker_threads": (w.ready or {}).get("threads"), "accuracy": accuracy, "accurate": ok,
                **{k: prepared[k] for k in ("compile_s", "export_s", "prepare_s", "int8_api", "int8_warnings",
                                            "mha_fastpath_off", "torchao_installed", "onnxruntime", "ort_level",
                                            "same_as")
                   if prepared.get(k) is not None},
            }
            points = []
            for b in settings.batches:
                cell = measured.get((spec["name"], b))
                fig = cell.figure if cell else None
                if fig is None:
                    continue
                point: dict[str, Any] = {"batch": b, **fig.to_fields("latency_ms"), "segments": len(cell.medians),
                                         "other_share": _median_share(cell.interference)}
                dist = summaries.get((spec["name"], b))
                if dist:
                    point.update({k: dist[k] for k in ("min_ms", "p10_ms", "p25_ms", "p50_ms", "p75_ms", "p90_ms",
                                                       "p99_ms", "max_ms", "mean_ms", "calls", "sample_ms")
                                  if k in dist})
                mean = point.get("mean_ms") or fig.median
                point["samples_per_s"] = round(b * 1000.0 / mean, 2) if mean else None
                points.append(point)
            entry["points"] = points
            entry["code"] = variant_code(entry, torch_version=torch_version,
                                         onnx_file=settings.target if settings.source == "onnx" else None).to_dict()
            variants.append(entry)
    for s in the_plan.skipped:
        variants.append({"name": s["name"], "group": s["group"], "status": "skipped", "reason": s["reason"],
                         "points": [], "spec": {}, "effort": None})
    decisions = _decisions(settings, workers, measured) if measured else {}
    noise = interference_share([r for c in measured.values() for r in c.interference]) or \
        interference_share([state.get("whole")])
    recs = []
    for b in settings.batches:
        d = decisions.get(b) or {"settled": False, "pick": None, "runner_up": None, "reason": ""}
        verdict, reason = _verdict(settings, state, d, noise, any(c.medians for c in measured.values()))
        if state.get("cut_off"):
            reason = f"{reason}; {state['cut_off']}"
        rec = _recommendation(b, verdict, reason, d, variants)
        rec.update(_fresh_fields(d.get("pick"), b, state, measured))
        recs.append(rec)
    return {
        "status": state["status"],
        "variants": variants,
        "decisions": recs,
        "recommendation": next((r for r in recs if r["verdict"] == "recommended"), None),
        "rounds": state["rounds"],
        "segment_s": state["segment_s"],
        "budget_s": settings.budget_s,
        "max_error": settings.max_error,
        "quiet_limit": settings.quiet_limit,
        "interference": noise,
        "model": main_ready.get("model") or settings.model or settings.target,
        "parameters": main_ready.get("parameters"),
        "torch": torch_version,
        "openmp": main_ready.get("openmp"),
        "threads": main_ready.get("threads"),
        "onnxruntime_installed": main_ready.get("onnxruntime_installed"),
        "torchao_installed": main_ready.get("torchao_installed"),
        "main_worker": None if workers[MAIN].ready else (state["unprepared"].get(MAIN) or workers[MAIN].failure()),
        "elapsed": round(elapsed, 3),
        "settings": {k: v for k, v in settings.to_dict().items() if k not in ("python",)},
    }


def _fresh_fields(pick: str | None, batch: int, state: dict[str, Any],
                 measured: dict[tuple[str, int], Cell]) -> dict[str, Any]:
    """A decision's ``fresh`` figure (its pick in new processes of its own) or ``fresh_skipped``, the reason."""
    if not pick:
        return {}
    cell = (state.get("fresh") or {}).get((pick, batch))
    lab = measured.get((pick, batch))
    fields = cell.fields(lab.medians if lab else [], infer_fresh.PROCESSES, state.get("fresh_segment_s")) \
        if cell is not None else {}
    why = (state.get("fresh_skipped") or {}).get((pick, batch))
    if fields and not why:
        return {"fresh": fields}
    if why:
        return {"fresh_skipped": why}
    return {}


def _median_share(records: list[dict[str, Any]]) -> float | None:
    shares = sorted(float(r.get("other_share") or 0) + float(r.get("steal_share") or 0) for r in records if r)
    return round(shares[len(shares) // 2], 4) if shares else None


def _verdict(settings: InferSettings, state: dict[str, Any], d: dict[str, Any], noise: dict[str, float] | None,
             anything: bool) -> tuple[str, str]:
    share = noise["share"] if noise else None
    if state["status"] == "cancelled":
        return "inconclusive", words.inconclusive("cancelled", rounds=state["rounds"]).replace("the sweep",
                                                                                              "the measurement")
    if share is not None and share > settings.quiet_limit:
        return "inconclusive", words.inconclusive("busy", share=share)
    if not anything:
        return "inconclusive", words.inconclusive("nothing")
    if not d.get("settled"):
        return "inconclusive", words.inconclusive("unsettled", why=d.get("reason") or "", rounds=state["rounds"],
                                                  budget_s=settings.budget_s)
    if d.get("runner_up") is None:
        return "recommended", words.only_setting(str(d["pick"]))
    return "recommended", f"'{d['pick']}' vs '{d['runner_up']}': faster beyond both spreads, or as fast within " \
                          f"{percent(TIE_TOLERANCE, fraction=True)} with the simpler change"


def _recommendation(batch: int, verdict: str, reason: str, d: dict[str, Any],
                    variants: list[dict[str, Any]]) -> dict[str, Any]:
    by_name = {v["name"]: v for v in variants}

    def point(name: str | None) -> dict[str, Any] | None:
        v = by_name.get(name or "")
        return next((p for p in (v or {}).get("points", []) if p["batch"] == batch), None)

    pick = d.get("pick")
    out: dict[str, Any] = {"batch": batch, "verdict": verdict, "reason": reason,
                           "variant": pick if verdict == "recommended" else None,
                           "best_measured": pick, "runner_up": d.get("runner_up")}
    p = point(pick)
    if p is not None:
        out.update(latency_ms=p.get("latency_ms"), latency_ms_lo=p.get("latency_ms_lo"),
                   latency_ms_hi=p.get("latency_ms_hi"), p99_ms=p.get("p99_ms"), samples_per_s=p.get("samples_per_s"))
    for base in ("eager fp32", "inference_mode"):
        q = point(base)
        if p is not None and q is not None and p.get("latency_ms"):
            out[f"vs_{base.replace(' ', '_')}"] = round(q["latency_ms"] / p["latency_ms"], 3)
    if pick in by_name:
        out["code"] = by_name[pick].get("code")
    faster_wrong = [v["name"] for v in variants if v.get("accurate") is False and point(v["name"]) is not None
                    and p is not None and point(v["name"])["latency_ms"] < p["latency_ms"]]
    if faster_wrong:
        out["faster_beyond_accuracy"] = faster_wrong
    return out


# --------------------------------------------------------------------------- as a child process


def main(argv: list[str] | None = None) -> int:
    """``python -m cpudoctor.lab.infer --json-args '{...}' --control stdin``: the window's way to run it."""
    from cpudoctor.lab.orchestrator import orchestrator_main

    return orchestrator_main(argv, InferSettings, run_infer)


if __name__ == "__main__":
    sys.exit(main())
