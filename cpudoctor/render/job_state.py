"""The job's own state (what its probe read inside it) in words: ``run``'s State section, the Inspector's caption.

The probe's facts are :class:`~cpudoctor.model.jobstate.JobState`; this says them:
the thread settings and the line that set each, what the step computes in, the
modes the driving thread ran under, the model, the loop's rates, the DataLoaders.
For ``inspect`` (no probe) :data:`OUTSIDE` says what is seen from outside and what
needs ``run``.
"""

from __future__ import annotations

import os

from cpudoctor.advisor.code_settings import CodeSetting
from cpudoctor.kits.escape import html_escape, md_escape
from cpudoctor.model.jobstate import BINDING_VARS, THREAD_VARS, CodeLine, JobState, ModeSample

WHY_NOT = {
    "off": "the probe was turned off (--no-probe)",
    "not_python": "the command does not start Python (an interpreter, a .py file or a script whose #! line names "
                  "Python), so no probe was put in it",
    "not_loaded": "the job's Python did not load the probe (started with -I, -E or -S, or it ended first)",
    "unreadable": "the probe's file could not be read",
    "unavailable": "the probe could not be put in place (a temporary folder could not be made)",
}
OUTSIDE = ("seen from outside: the thread variables the job started with, its threads, CPUs (affinity, quota) and "
           "libraries; what the script sets in its own code and where (threads, binding, dtypes, modes such as "
           "anomaly detection or grad mode, DataLoaders, optimizer steps, FLOPs), and what a serving loop pays per "
           "request (its model's call latency, the model loaded, built or compiled again and where) is read inside "
           "the job by `cpudoctor run -- COMMAND`")


def place(at: CodeLine | None) -> str:
    """``train.py:12`` (the user's line, also when a torch helper made the call; a library's:
    ``lightning trainer.py:88 from train.py:40``)."""
    if at is None:
        return "?"
    user = at.user_place()
    mine = f"{os.path.basename(user[0])}:{user[1]}" if user else None
    if at.library in (None, "torch", "python") and mine:
        return mine
    own = f"{at.library} {os.path.basename(at.file)}:{at.line}"
    return own + (f" from {mine}" if mine else "")


def _on(value: bool | None, what: str) -> str:
    return f"{what} {'?' if value is None else 'on' if value else 'off'}"


def _modes(s: ModeSample) -> str:
    parts = [_on(s.grad, "grad"), _on(s.inference, "inference mode"),
             f"autocast {s.autocast}" if s.autocast else "autocast off", _on(s.anomaly, "anomaly detection"),
             _on(s.deterministic, "deterministic"), _on(s.mkldnn, "oneDNN")]
    if s.profiler:
        parts.append("profiler ON")
    if s.trace or s.profile or s.monitoring:
        parts.append("tracer ON (" + ", ".join(x for x in (s.trace, s.profile, *s.monitoring) if x) + ")")
    if s.function_modes or s.dispatch_modes:
        parts.append("torch modes " + ", ".join([*s.function_modes, *s.dispatch_modes]))
    if s.tracemalloc:
        parts.append("tracemalloc ON")
    return ", ".join(parts)


def _settings(state: JobState) -> list[str]:
    """Each thread, binding and torch setting the script made, with its line (the last of each)."""
    last: dict[str, str] = {}
    for c in state.calls:
        if c.failed or c.at is None:
            continue
        if c.name == "os.environ":
            if c.key not in THREAD_VARS + BINDING_VARS and not (c.key or "").startswith(("ONEDNN_", "DNNL_", "KMP_")):
                continue
            when = "" if c.after_torch else ", before import torch"
            last[c.label] = (f"{c.key}={c.value} ({place(c.at)}{when})" if c.value is not None
                             else f"{c.key} unset ({place(c.at)})")
        else:
            last[c.label] = f"{CodeSetting(c, c.at).statement()} ({place(c.at)})"
    return list(last.values())


def text_lines(state: JobState | None, width: int = 100) -> list[str]:
    """``run``'s State section: one fact a line, under a heading that says where it comes from."""
    from cpudoctor.kits.format import wrap

    if state is None:
        return []
    if not state.loaded:
        return [f"State        not read: {WHY_NOT.get(state.why_not, state.why_not or 'no probe')}"]
    head = (f"State        read inside the job by its probe (Python {state.python or '?'}"
            + (f", torch {state.torch_version}" if state.torch_version else ", torch not imported")
            + "; --no-probe turns it off)")
    out = [head]

    def row(label: str, text: str) -> None:
        out.extend(wrap(f"{label:<11}{text}", width, indent=2, hang=13))

    sample = state.latest()
    if sample is not None:
        row("threads", f"{sample.threads if sample.threads is not None else '?'} intra-op, "
                       f"{sample.interop if sample.interop is not None else '?'} inter-op; CPUs {sample.affinity or '?'}")
        row("modes", _modes(sample))
        row("computes", f"default dtype {sample.dtype or '?'}; float32 matmul precision {sample.matmul or '?'}")
    settings = _settings(state)
    if settings:
        row("code sets", "; ".join(settings))
    if state.model is not None and state.model.name:
        m = state.model
        dtypes = ", ".join(f"{k} {v:,}" for k, v in m.dtypes.items()) or "?"
        text = f"{m.name}, {m.parameters:,} parameters ({dtypes})"
        if m.input_dtypes:
            text += "; inputs " + ", ".join(f"{d} {list(s)}" for d, s in zip(m.input_dtypes, m.input_shapes))
        if m.forward_flops is not None:
            text += f"; one forward pass {flops_text(m.forward_flops)}"
        if m.compiled:
            text += "; compiled"
        row("model", text)
    loop = [f"{state.steps:,} optimizer steps" + (f" ({state.step_rate():.1f}/s)" if state.step_rate() else ""),
            f"{state.forwards:,} forward calls", f"{state.backwards:,} backward passes"]
    if state.optimizers:
        loop.append(", ".join(state.optimizers))
    row("loop", "; ".join(loop))
    serving = serving_text(state)
    if serving:
        row("requests", serving)
    for x in state.loaders[:4]:
        row("DataLoader", f"{x.num_workers if x.num_workers is not None else '?'} workers, batch "
                          f"{x.batch_size if x.batch_size is not None else '?'}"
                          + (", pin_memory" if x.pin_memory else "") + (", persistent" if x.persistent_workers else "")
                          + f" ({place(x.at)})")
    if state.other_pids:
        row("note", f"{len(state.other_pids)} other Python processes of the job loaded the probe too; this is "
                    f"process {state.pid}")
    if state.bad_lines or state.truncated:
        row("note", f"{state.bad_lines} lines of the probe's file were not its own"
                    + ("; the file was cut at CPU Doctor's limit" if state.truncated else ""))
    return out


OUTSIDE_SHORT = ("State inside the job (threads set in code and where, dtypes, modes, DataLoaders, steps, a serving "
                 "loop's latency and what it reloads or compiles per request): read only when CPU Doctor starts it "
                 "(Run a script…, or cpudoctor run).")


def summary(state: JobState | None) -> str:
    """One line for a caption: ``State (its probe): 2 threads, grad on, anomaly detection on, ...; set in code: ...``."""
    if state is None:
        return OUTSIDE_SHORT
    if not state.loaded:
        return f"State not read: {WHY_NOT.get(state.why_not, state.why_not or 'no probe')}."
    parts = []
    sample = state.latest()
    if sample is not None:
        parts.append(f"{sample.threads if sample.threads is not None else '?'} threads, default dtype "
                     f"{sample.dtype or '?'}, {_modes(sample)}")
    if state.model is not None and state.model.main_dtype:
        parts.append(f"parameters {state.model.main_dtype}")
    parts.append(f"{state.steps:,} optimizer steps, {state.forwards:,} forward calls")
    settings = _settings(state)
    text = "State (read inside the job by its probe): " + "; ".join(parts)
    return text + (f". Set in code: {'; '.join(settings[:4])}" if settings else "") + "."


def serving_text(state: JobState) -> str:
    """``model call p50 0.25 ms, p90 0.4 ms, p99 26 ms (last 2,048 calls); a call every 0.3 ms (p50); torch.load ×78
    (serve.py:24, 1.9 ms each)``: the model's call latency and what the loop loads, builds or compiles again."""
    serving = state.serving
    if serving is None:
        return ""
    parts = []
    f, i = serving.forward, serving.interval
    if f is not None:
        parts.append(f"model call p50 {_ms(f.p50_ms)}, p90 {_ms(f.p90_ms)}, p99 {_ms(f.p99_ms)} (last {f.n:,} calls)")
    if i is not None:
        parts.append(f"a call every {_ms(i.p50_ms)} (p50)")
    for site in sorted(serving.sites, key=lambda s: -s.after)[:4]:
        if not site.after:
            continue
        each = f", {_ms(site.seconds / site.calls * 1e3)} each" if site.seconds and site.calls else ""
        parts.append(f"{site.name} ×{site.after} in the loop ({place(site.at)}{each})")
    return "; ".join(parts)


def _ms(value: float | None) -> str:
    if value is None:
        return "?"
    return f"{value:.2g} ms" if value < 10 else f"{value:,.0f} ms"


def flops_text(flops: int) -> str:
    """``0.14 MFLOP``, ``3.2 GFLOP``."""
    for unit, scale in (("TFLOP", 1e12), ("GFLOP", 1e9), ("MFLOP", 1e6), ("kFLOP", 1e3)):
        if flops >= scale:
            return f"{flops / scale:.3g} {unit}"
    return f"{flops} FLOP"


def md_lines(state: JobState | None) -> list[str]:
    lines = text_lines(state)
    if not lines:
        return []
    return ["## The job's own state", "", md_escape(lines[0].split(None, 1)[1]), "",
            *[f"- {md_escape(ln.strip())}" for ln in lines[1:]], ""]


def html(state: JobState | None) -> str:
    lines = text_lines(state)
    if not lines:
        return ""
    items = "".join(f"<li>{html_escape(ln.strip())}</li>" for ln in lines[1:])
    return f"<h2>The job's own state</h2><p>{html_escape(lines[0].split(None, 1)[1])}</p><ul>{items}</ul>"


