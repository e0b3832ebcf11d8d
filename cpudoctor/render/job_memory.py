"""A job's memory in words: the trainer and its workers (unique, shared, swap), growth, the cgroup, pressure.

One set of rows (:func:`memory_rows`) for every surface: ``inspect``'s and ``run``'s text (:func:`memory_lines`),
their Markdown, and the Inspector's Memory card.
"""

from __future__ import annotations

from cpudoctor.kits.format import percent, size
from cpudoctor.kits.escape import html_escape
from cpudoctor.model.memory import JobMemory, MemoryPressure, TrainingMemory
from cpudoctor.render.words import plural

UNKNOWN = "?"


def _size(n: int | None) -> str:
    return size(n, UNKNOWN)


def _rate(v: float | None) -> str:
    return UNKNOWN if v is None else f"{v:g}/s"


def trainer_text(mem: JobMemory) -> str:
    job = mem.job
    rss = _size(mem.rss_bytes)
    peak = f" (peak {_size(mem.peak_rss_bytes)})" if mem.peak_rss_bytes else ""
    own = f", {_size(job.uss_bytes)} of its own" if job is not None and job.uss_bytes is not None else ""
    return f"RSS {rss}{peak}{own}; swap {_size(mem.swap_bytes)}"


def workers_text(mem: JobMemory) -> str | None:
    workers = [w for w in mem.workers if not w.exited_in_window] or mem.workers
    if not workers:
        return None
    own = [w.uss_bytes for w in workers if w.uss_bytes is not None]
    text = plural(len(workers), "worker")
    if own:
        text += f": {_size(sum(own))} of their own ({', '.join(_size(v) for v in own[:6])}" + \
                (", ..." if len(own) > 6 else "") + ")"
    growing = [w.uss_growth_bytes_per_s for w in workers if w.uss_growth_bytes_per_s and w.uss_growth_bytes_per_s > 0]
    if growing:
        text += f", growing {_size(max(growing))}/s"
    shared = [w.shared_bytes for w in workers if w.shared_bytes is not None]
    if shared:
        text += f"; {_size(max(shared))} shared with the trainer"
    if mem.worker_generations > 1:
        text += f"; {plural(mem.worker_generations, 'set')} started (one per epoch)"
    return text


def together_text(mem: JobMemory) -> str:
    parts = [f"{_size(mem.total_pss_bytes)} (PSS: shared pages counted once)" if mem.total_pss_bytes is not None
             else f"RSS summed {_size(mem.total_rss_bytes)} (shared pages counted in each process)"]
    if mem.growth_bytes_per_s is not None and mem.growth_window_s:
        parts.append(f"the trainer grew {_size(mem.growth_bytes_per_s)}/s over the last {mem.growth_window_s:g} s")
    if mem.major_faults_per_s is not None:
        parts.append(f"major page faults {_rate(mem.major_faults_per_s)}")
    return "; ".join(parts)


def pressure_text(p: MemoryPressure | None) -> str | None:
    if p is None:
        return None
    if p.some_share is not None:
        some, full = percent(p.some_share, fraction=True), percent(p.full_share or 0, fraction=True)
        return f"stalled on memory {some} (some tasks), {full} (all) of the window ({p.source})"
    return f"stalled on memory {percent(p.some_avg10)} (some), {percent(p.full_avg10)} (all) over 10 s ({p.source})"


def cgroup_text(mem: JobMemory) -> str | None:
    cg = mem.cgroup
    if cg is None:
        return None
    limit = f"limit {_size(cg.limit_bytes)}" + (f" (set at {cg.limit_at})" if cg.limit_at and cg.limit_at != cg.path
                                                else "") if cg.limit_bytes else "no memory limit"
    parts = [limit, f"using {_size(cg.current_bytes)}"]
    if cg.file_bytes:
        parts[-1] += f" ({_size(cg.file_bytes)} page cache)"
    if cg.high_bytes:
        parts.append(f"memory.high {_size(cg.high_bytes)}")
    if cg.peak_bytes:
        parts.append(f"peak {_size(cg.peak_bytes)}")
    if cg.events_in_window:
        parts.append("while watched: " + ", ".join(f"{k} {v}" for k, v in sorted(cg.events_in_window.items())))
    return f"{cg.path or '/'} (v{cg.version}): " + ", ".join(parts)


def machine_text(mem: JobMemory) -> str | None:
    s = mem.system
    if s is None:
        return None
    what = "the WSL2 VM" if s.wsl == 2 else "the machine"
    text = f"{_size(s.available_bytes)} available of {_size(s.total_bytes)} ({what})"
    if s.swap_total_bytes:
        text += f"; swap {_size((s.swap_total_bytes or 0) - (s.swap_free_bytes or 0))} used of {_size(s.swap_total_bytes)}"
        text += f", {_rate(s.swap_in_per_s)} pages in"
    if s.oom_kills_in_window:
        text += f"; {plural(s.oom_kills_in_window, 'OOM kill')} while watched"
    return text


def memory_rows(mem: JobMemory) -> list[tuple[str, str]]:
    """(label, value) rows: the Inspector's Memory card, and the lines of the text pages."""
    rows = [("Trainer", trainer_text(mem))]
    workers = workers_text(mem)
    if workers:
        rows.append(("Workers", workers))
    rows.append(("Together", together_text(mem)))
    for label, text in (("cgroup", cgroup_text(mem)), ("Pressure", pressure_text(
            mem.cgroup.pressure if mem.cgroup is not None and mem.cgroup.pressure is not None and mem.cgroup.version == 2
            else (mem.system.pressure if mem.system is not None else None))), ("Machine", machine_text(mem))):
        if text:
            rows.append((label, text))
    if mem.training is not None:
        rows.append(("Training", training_text(mem.training)))
    return rows


UNKNOWN_ACTIVATIONS = {"hooks": "? (kept by checkpointing or other saved-tensor hooks: not in the graph the probe "
                                "reads; cpudoctor fit --model measures them)",
                       "incomplete": "? (the forward pass's graph was too large to read in full)"}
TRAINING_SOURCES = {"probe": "counted by the job's probe", "fit": "measured by fit", "given": "given"}


def training_parts(t: TrainingMemory) -> list[tuple[str, int | None]]:
    """(what, bytes) of what the training holds at its batch: the parts the memory rules name too."""
    params = None if t.param_bytes is None else t.param_bytes + (t.buffer_bytes or 0)
    acts = t.activation_bytes_per_sample * t.batch_size if t.activation_bytes_per_sample and t.batch_size else None
    return [("parameters", params), ("gradients", t.grad_bytes), ("optimizer state", t.optimizer_state_bytes),
            ("activations", acts)]


def training_text(t: TrainingMemory) -> str:
    """One line: each part's bytes, the activations per sample at the batch, and which part is the largest."""
    params = f"parameters {_size(t.param_bytes)}" + (f" ({t.parameters:,})" if t.parameters else "")
    if t.buffer_bytes:
        params += f" and buffers {_size(t.buffer_bytes)}"
    state = f"optimizer state {_size(t.optimizer_state_bytes)}" + (f" ({t.optimizer})" if t.optimizer else "")
    if t.activation_bytes_per_sample is None:
        acts = "activations " + UNKNOWN_ACTIVATIONS.get(t.activations_unknown or "", "?")
    elif t.batch_size:
        acts = (f"activations {_size(t.activation_bytes_per_sample * t.batch_size)} at batch {t.batch_size} "
                f"({_size(t.activation_bytes_per_sample)} per sample)")
    else:
        acts = f"activations {_size(t.activation_bytes_per_sample)} per sample"
    text = f"{params}, gradients {_size(t.grad_bytes)}, {state}, {acts}"
    known = [(n, b) for n, b in training_parts(t) if b]
    if len(known) >= 2:
        name, most = max(known, key=lambda nb: nb[1])
        text += f"; of these the largest: {name} ({percent(most / sum(b for _, b in known), fraction=True)})"
    source = TRAINING_SOURCES.get(t.source)
    return text + (f" ({source})" if source else "")


def memory_html(mem: JobMemory) -> str:
    """The memory section of an HTML page (``run``'s HTML and PDF): the same rows as a table."""
    rows = "".join(f"<tr><th align=\"left\">{html_escape(name)}</th><td>{html_escape(text)}</td></tr>"
                   for name, text in memory_rows(mem))
    return f"<h2>Memory</h2><table>{rows}</table>"


def memory_lines(mem: JobMemory, label: str = "Memory") -> list[str]:
    """The memory block of a text page: the first row after ``label``, the others indented under it."""
    out = []
    for i, (name, text) in enumerate(memory_rows(mem)):
        head = f"{label:<13}" if i == 0 else " " * 13
        out.append(f"{head}{name.lower()}: {text}")
    return out
