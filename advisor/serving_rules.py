"""Rules over a loop that serves a model (``cpudoctor run``): what each request pays that it need not.

Input is the evidence rules' :class:`~cpudoctor.advisor.evidence_rules.Evidence`; these read the job's own
state (its probe's :class:`~cpudoctor.model.jobstate.Serving`: the model's call latencies, and the places that
load, build or compile a model, with their lines and counts) and, for the thread count, the breakdown's OpenMP
share. Registered in the evidence rules' set (codes, docs page, ``explain``), loaded like the state rules:

- EVID025 ``batch-one-all-threads``: an inference loop at batch 1 on every CPU while the pool mostly waits;
- EVID026 ``model-loaded-per-request``: the model loaded or built again for every request;
- EVID027 ``compiled-per-request``: ``torch.compile``/``torch.jit.script``/``torch.jit.trace`` called for every
  request, or Dynamo compiling again per request.

An inference loop that records autograd graphs is EVID016 (:mod:`cpudoctor.advisor.state_rules`), with the
same latency figures. The counts and lines hold on a busy machine; only EVID025's OpenMP share is a
comparison with a quiet one, so there it becomes "Likely: …" as EVID001 does. The lab's ``cpudoctor bench
infer`` measures the alternatives on the user's model (thread counts, inference mode, compile), so every fix
names it to confirm.
"""

from __future__ import annotations

import os
import re

from cpudoctor.advisor.code_settings import thread_change, thread_setting
from cpudoctor.advisor.evidence_rules import Evidence, _finding, drives_team, evidence_rule
from cpudoctor.advisor.job_verdict import busy, load_words
from cpudoctor.advisor.serving import (REPEATS, PerRequest, batch_one_threads, per_request,
                                       recompiles_per_request, requests)
from cpudoctor.advisor.thread_vars import thread_count_env, with_thread_count
from cpudoctor.kits.format import percent
from cpudoctor.kits.plural import plural
from cpudoctor.model import Finding
from cpudoctor.model.breakdown import COMPILE, COMPUTE, OPENMP
from cpudoctor.model.jobstate import CodeLine, JobState, Latency

OPENMP_AT_BATCH_ONE = 0.20    # the pool's OpenMP waiting at least this share of the job's thread time

_LOAD_WORDS = {"torch.load": "torch.load", "torch.jit.load": "torch.jit.load",
               "Module.load_state_dict": "load_state_dict", "model built": "the model built again"}


def _place(at: CodeLine | None) -> str:
    """``line 14 of serve.py`` (a library's call: the user's line that led there; a line in the user's own helper:
    ``line 11 of model.py (in build(), called from line 23 of serve.py)``)."""
    if at is None:
        return ""
    user = at.user_place()
    file, line = user if user else (at.file, at.line)
    text = f"line {line} of {file}"
    if at.via_file and at.via_line:
        text += f" (in {at.function}(), called from line {at.via_line} of {at.via_file})"
    return text


def _short(at: CodeLine | None) -> str:
    if at is None:
        return "?"
    user = at.user_place()
    file, line = user if user else (at.file, at.line)
    return f"{os.path.basename(file)}:{line}"


def _ms(value: float | None) -> str:
    if value is None:
        return "?"
    return f"{value:.3g} ms" if value < 100 else f"{value:,.0f} ms"


def latency_words(state: JobState) -> str:
    """``each call of the model took 0.91 ms (p50; p99 1.4 ms, last 2,048 calls), one call every 18 ms (p50)``."""
    serving = state.serving
    if serving is None or serving.forward is None:
        return ""
    f: Latency = serving.forward
    text = f"each call of the model took {_ms(f.p50_ms)} (p50; p99 {_ms(f.p99_ms)}, over its last {f.n:,} calls)"
    i = serving.interval
    if i is not None and i.p50_ms is not None and f.p50_ms is not None and i.p50_ms > 1.5 * f.p50_ms:
        text += f", and one call started every {_ms(i.p50_ms)} (p50): the rest of each request is outside the model"
    return text


_FRAME_PLACE = re.compile(r"\(([^()]*):(\d+)\)$")


def lines_share(ev: Evidence, found: list[PerRequest]) -> str:
    """`` The thread that calls the model spent 82 % of its samples on these lines.`` from the driving thread's top
    Python lines, when its samples may be judged (its own samples: a busy machine too)."""
    bd = ev.own_shares()
    if bd is None or not bd.driver_python:
        return ""
    places = set()
    for p in found:
        at = p.site.at
        if at is None:
            continue
        user = at.user_place()
        for file, line in ((at.file, at.line), user or (None, None), (at.via_file, at.via_line)):
            if file and line:
                places.add((os.path.basename(file), line))
    share = 0.0
    for frame in bd.driver_python:
        m = _FRAME_PLACE.search(frame.frame)
        if m and (os.path.basename(m.group(1)), int(m.group(2))) in places:
            share += frame.share
    if share < 0.05:
        return ""
    return (f" The thread that calls the model spent {percent(share, fraction=True)} of its samples on these lines"
            f" ({bd.driver_samples} samples{ev.load_note()}).")


def _bench_hint(state: JobState, at: CodeLine | None = None) -> str:
    """How to measure the alternatives on this model with the lab (the script: where the model is called, else
    ``at``)."""
    called = state.model.called_at if state.model is not None and state.model.called_at is not None else at
    script = os.path.basename(called.user_place()[0]) if called is not None and called.user_place() else "serve.py"
    return (f"`cpudoctor bench infer --module {script}:FUNCTION` (FUNCTION returns the model, or the model and an "
            "example input) measures p50/p99 per thread count, with inference_mode and compiled, on this CPU")


# --- threads at batch 1 ----------------------------------------------------------------------------------------


@evidence_rule("EVID025", "batch-one-all-threads", category="threads", severity="warning",
               title="An inference loop runs batch 1 on every thread while the pool waits")
def batch_one_all_threads(ev: Evidence) -> list[Finding]:
    """
    What it checks:
        A loop that calls its model without training (no backward pass, no optimizer step), at batch
        1 (the first input's first dimension, else the DataLoader's batch size, read by the job's
        probe), with PyTorch's pool on every usable CPU, while the job's own samples show the pool's
        threads waiting in OpenMP (the thread that drives the calls in the kernels, not elsewhere);
        and the line that set the count when the script sets it.

    Why it matters:
        One sample's kernels are small: a matrix-vector product or a small convolution is over in
        microseconds, shorter than waking the pool and meeting at its barrier. Each extra thread adds
        a fork, a join and a spinning waiter, and on a machine where anything else runs, a pool
        thread displaced from its CPU holds up every barrier (the inference lab measured a 2-thread
        pool 10-30x slower than one thread beside a busy neighbour). Fewer threads, often one, give
        lower latency; several single-threaded workers give more throughput.

    Fix:
        Serve with fewer threads: change the line that sets the count (named in the finding), else
        `torch.set_num_threads(1)` before the loop or `OMP_NUM_THREADS=1`; confirm the count with
        `cpudoctor bench infer`, which measures p50/p99 per thread count on the model.
    """
    state = ev.state if ev.state is not None and ev.state.loaded else None
    usable = ev.usable_cpus()
    threads = batch_one_threads(state, usable)
    bd = ev.own_shares()
    if threads is None or bd is None or not drives_team(bd):
        return []
    omp, comp = bd.share(OPENMP), bd.share(COMPUTE)
    if omp < OPENMP_AT_BATCH_ONE:
        return []
    target = 1 if threads <= 2 or omp >= 2 * comp else max(1, threads // 2)
    latency = latency_words(state)
    why = (f"The job called {state.model.name if state.model else 'its model'} {requests(state):,} times at batch 1 "
           f"without training, on {plural(threads, 'thread')} ({plural(usable, 'usable CPU')})"
           + (f"; {latency}" if latency else "")
           + f". {percent(omp, fraction=True)} of the job's thread time was OpenMP waiting and "
           f"{percent(comp, fraction=True)} compute kernels: one sample's kernels are too short to split over "
           f"{plural(threads, 'thread')}, so the pool forks, joins and spins more than it computes.")
    setting = thread_setting(state)
    if setting is not None:
        fix, snippet = thread_change(setting, target)
        lang = "python"
    else:
        job_env = dict(ev.env)
        assign, _ = thread_count_env(target, job_env)
        fix = (f"Serve with {plural(target, 'thread')}: torch.set_num_threads({target}) before the loop, or "
               f"{' '.join(f'{k}={v}' for k, v in assign.items())} for the command.")
        snippet, lang = with_thread_count(target, job_env, ev.cmd()), "bash"
    fix += f" Then compare the latency: {_bench_hint(state)}."
    title = f"Batch 1 on {plural(threads, 'thread')}: OpenMP waiting {percent(omp, fraction=True)} of the time"
    severity = "warning"
    if busy(bd):
        severity, title = "info", f"Likely: {title} (confirm on a quiet machine)"
        why += (f" But {load_words(bd)}: a pool thread they displaced holds every barrier too, which is itself "
                "the reason a server sharing its CPUs runs better on fewer threads.")
    return [_finding(severity, title, why, fix, snippet,
                     {"threads": threads, "usable_cpus": usable, "batch": 1, "calls": requests(state),
                      "openmp_wait_share": round(omp, 3), "compute_share": round(comp, 3),
                      "suggested_threads": target, "p50_ms": _p50(state), "p99_ms": _p99(state),
                      "set_at": setting.short_place() if setting else None}, lang=lang)]


def _p50(state: JobState) -> float | None:
    return state.serving.forward.p50_ms if state.serving is not None and state.serving.forward else None


def _p99(state: JobState) -> float | None:
    return state.serving.forward.p99_ms if state.serving is not None and state.serving.forward else None


# --- the model loaded or built per request ---------------------------------------------------------------------


def _site_words(p: PerRequest) -> str:
    s = p.site
    what = _LOAD_WORDS.get(s.name, s.name)
    each = f", {_ms(s.seconds / s.calls * 1e3)} each" if s.seconds and s.calls else ""
    return (f"{what} at {_place(s.at) or 'an unknown line'} ran {plural(s.after, 'time')} in "
            f"{plural(p.requests, 'call')} of the model{each}")


@evidence_rule("EVID026", "model-loaded-per-request", category="torch", severity="warning",
               title="The model is loaded or built again for every request")
def model_loaded_per_request(ev: Evidence) -> list[Finding]:
    """
    What it checks:
        The places that load a model (`torch.load` of a module or a state dict, `torch.jit.load`,
        `load_state_dict`) or build one (a new module of the model's kind, a `from_pretrained`),
        counted by the job's probe with their file and line: how often each ran after the model
        first ran, against the model's calls since (once per five calls or more often), and the time
        each took against the model's own call.

    Why it matters:
        Loading reads and unpickles every weight, and building allocates and initialises every
        layer; both cost far more than one inference call of a small model, and each new model
        starts cold (its first calls pay oneDNN's primitive creation and allocations again). A
        request should only run the model.

    Fix:
        Load and build the model once, before the loop (at start-up of the server), keep it in
        eval mode and reuse it for every request; reload only when the checkpoint changes.
    """
    state = ev.state if ev.state is not None and ev.state.loaded else None
    found = per_request(state, "load") + per_request(state, "build")
    if not found:
        return []
    found.sort(key=lambda p: (-p.site.after, p.site.kind != "load"))
    worst = found[0]
    latency = latency_words(state)
    timed = [p for p in found if p.site.seconds and p.site.calls]
    forward = _p50(state)
    each_ms = sum(p.site.seconds / p.site.calls for p in timed) * 1e3 if timed else None   # one of each, per request
    why = ("; ".join(_site_words(p) for p in found[:3]) + (f"; {latency}" if latency else "")
           + (f". Loading it once took {_ms(each_ms)}"
              + (f", {each_ms / forward:.0f}x the model's own call" if forward and each_ms and each_ms > forward else "")
              if each_ms else "")
           + ". Every request reads (or builds) the whole model again before it can run it, and a fresh model "
           "starts cold." + lines_share(ev, found))
    places = list(dict.fromkeys(_place(p.site.at) for p in found if p.site.at is not None))
    fix = ("Load and build the model once, before the loop, and reuse it for every request"
           + (f": move {', '.join(places)} out of the request path" if places else "")
           + "; keep it in eval mode under torch.inference_mode(), and reload only when the checkpoint changes.")
    snippet = ("# once, at start-up (out of the request loop):\n"
               "model = build_model()\nmodel.load_state_dict(torch.load(path))\nmodel.eval()\n\n"
               "def handle(x):                # per request: only the call\n"
               "    with torch.inference_mode():\n        return model(x)")
    again = "loaded again" if worst.site.kind == "load" else "built again"
    return [_finding("warning", f"The model is {again} for {percent(worst.ratio, fraction=True)} of the "
                     f"requests ({_short(worst.site.at)})", why, fix, snippet,
                     {"loads": worst.site.after, "requests": worst.requests, "per_request": round(worst.ratio, 3),
                      "load_ms": round(each_ms, 3) if each_ms else None, "p50_ms": _p50(state),
                      "at": [_short(p.site.at) for p in found[:4]]}, lang="python")]


# --- compiled per request ------------------------------------------------------------------------------------------


@evidence_rule("EVID027", "compiled-per-request", category="torch", severity="warning",
               title="The model is compiled again for every request")
def compiled_per_request(ev: Evidence) -> list[Finding]:
    """
    What it checks:
        Calls of `torch.compile`, `torch.jit.script` and `torch.jit.trace` counted by the job's probe
        with their file and line: how often each ran after the model first ran, against the model's
        calls since (once per five calls or more often), and their time; or, in a loop that only
        infers, Dynamo recompiling (TORCH_LOGS=recompiles) once per five calls or more often for
        inputs of unchanged shapes.

    Why it matters:
        Compiling traces the model and generates code: tens of milliseconds for TorchScript, seconds
        for torch.compile's default backend, many times one call. A compiled model is a thing to
        build once and call many times; made again per request, every request pays the first-call
        cost and none runs the compiled code twice. `torch.compile` returns at once and compiles at
        the first call of what it returns, so its cost shows in the request, not in the line.

    Fix:
        Compile once, before the loop, and call the compiled model for every request (warm it up
        with one example input at start-up); with torch.compile keep one compiled object for one
        model rather than wrapping a new one per request.
    """
    state = ev.state if ev.state is not None and ev.state.loaded else None
    found = per_request(state, "compile")
    recompiles = ev.recompiles if recompiles_per_request(state, ev.recompiles) else None
    if not found and recompiles is None:
        return []
    bd = ev.breakdown
    compile_share = bd.share(COMPILE) if bd is not None and bd.seconds > 0 else 0.0
    latency = latency_words(state)
    logged = len(ev.recompiles.recompiles) if ev.recompiles is not None else 0
    parts = []
    for p in found[:3]:
        s = p.site
        each = f", {_ms(s.seconds / s.calls * 1e3)} each" if s.seconds and s.calls else ""
        lazy = ""
        if s.name == "torch.compile":
            lazy = (f" (it compiles at the first call of what it returns: Dynamo compiled again "
                    f"{plural(logged, 'time')})" if logged >= REPEATS else
                    " (Dynamo's cache served each new wrapper of the same model: no recompilation logged)")
        parts.append(f"{s.name} at {_place(s.at) or 'an unknown line'} ran {plural(s.after, 'time')} in "
                     f"{plural(p.requests, 'call')} of the model{each}{lazy}")
    compiled_again = recompiles is not None or logged >= REPEATS or any(p.site.name != "torch.compile" for p in found)
    if recompiles is not None:
        newest = recompiles.recompiles[-1].guard_failure or "not given"
        parts.append(f"Dynamo compiled again {plural(len(recompiles.recompiles), 'time')} in "
                     f"{plural(requests(state), 'call')} of the model with inputs of unchanged shapes (newest guard "
                     f"failure: {newest[:160]})")
    why = ("; ".join(parts) + (f"; {latency}" if latency else "")
           + (f". Compilation took {percent(compile_share, fraction=True)} of the job's sampled time" if compile_share
              else "")
           + (". Every request pays the first-call compilation and no compiled code runs twice." if compiled_again
              else ". Every request pays for a new compiled wrapper and its guard checks, and a new model (or a "
              "cache that fills) compiles again.") + lines_share(ev, found))
    places = list(dict.fromkeys(_place(p.site.at) for p in found if p.site.at is not None))
    fix = ("Compile once, before the loop, and call the compiled model for every request"
           + (f": move {', '.join(places)} out of the request path" if places else
              ": keep one compiled object for one model (a new model or a new torch.compile wrapper per request "
              "compiles again)")
           + "; warm it up with one example input at start-up. Then "
           + _bench_hint(state, found[0].site.at if found else None) + ".")
    first = found[0].site if found else None
    snippet = ("# once, at start-up (out of the request loop):\n"
               + ("compiled = torch.jit.trace(model.eval(), example)\n" if first and first.name == "torch.jit.trace"
                  else "compiled = torch.jit.script(model.eval())\n" if first and first.name == "torch.jit.script"
                  else "compiled = torch.compile(model.eval())\n")
               + "compiled(example)              # the first call compiles\n\n"
               "def handle(x):                # per request: only the call\n"
               "    with torch.inference_mode():\n        return compiled(x)")
    title = (f"{first.name} runs for {percent(found[0].ratio, fraction=True)} of the requests ({_short(first.at)})"
             if first else f"Dynamo compiles again {plural(len(recompiles.recompiles), 'time')} for unchanged shapes")
    return [_finding("warning", title, why, fix, snippet,
                     {"compiles": first.after if first else len(recompiles.recompiles),
                      "requests": found[0].requests if found else requests(state),
                      "compile_ms": round(first.seconds / first.calls * 1e3, 3) if first and first.calls else None,
                      "compile_share": round(compile_share, 3) if compile_share else None, "p50_ms": _p50(state),
                      "at": [_short(p.site.at) for p in found[:4]] or None}, lang="python")]
