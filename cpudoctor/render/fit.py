"""``cpudoctor fit``'s plan in words: what a training step needs, part by part, against what it may use, and the
strategies ranked: text for the terminal, Markdown, JSON, and the rows the window's Memory fit page shows."""

from __future__ import annotations

from typing import Any

from cpudoctor.kits.format import percent, size
from cpudoctor.model.fit import FitPlan, MemoryBudget, Strategy

PARTS = {
    "framework": "PyTorch and Python",
    "parameters": "parameters and buffers",
    "optimizer": "optimizer state",
    "gradients": "gradients",
    "activations": "activations kept for the backward pass",
    "workspace": "the step's workspace (activation gradients, kernel buffers)",
    "dataset": "dataset in memory",
    "workers": "DataLoader workers' own memory",
    "trainer": "the trainer's peak (the run)",
}
HOW = {"measured": "measured", "counted": "counted", "given": "given", "assumed": "typical, not measured",
       "computed": "computed"}
BINDING = {"available": "the memory available now", "cgroup": "the room left in its cgroup", "given": "the limit given",
           "wsl2": "the memory available in the WSL2 VM"}


def part_label(part: str) -> str:
    return PARTS.get(part, part)


def speed_words(s: Strategy) -> str:
    c = s.speed_cost
    if c is None:
        return "unknown"
    if abs(c) < 0.005:
        return "none"
    word = f"+{percent(c, fraction=True)} time" if c > 0 else f"{percent(-c, fraction=True)} faster"
    return word + (" (measured)" if s.speed_measured else " (typical)")


def strategy_title(s: Strategy) -> str:
    d = s.detail
    if s.id == "accumulation":
        return (f"Batch {d['micro_batch']} with {d['steps']}-step gradient accumulation (the update of batch "
                f"{d['batch']})")
    if s.id == "checkpointing":
        if not s.applicable:
            return "Activation checkpointing: no repeated blocks found to checkpoint"
        if d.get("block"):
            return f"Activation checkpointing of the {d.get('blocks') or ''} {d['block']} blocks".replace("  ", " ")
        return "Activation checkpointing of the model's repeated blocks"
    if s.id == "optimizer":
        from cpudoctor.advisor.fit import knowledge

        labels = {k: v["label"] for k, v in knowledge()["optimizers"].items()}
        return (f"{labels.get(str(d['to']), d['to'])} instead of {labels.get(str(d['from']), d['from'])}: state of "
                f"{size(d['state_bytes'])}")
    if s.id == "autocast":
        native = d.get("native")
        tail = " (the CPU computes bf16 natively)" if native else (" (emulated on this CPU: slower)" if native is False
                                                                   else "")
        return "bf16 autocast for the forward pass" + tail
    if s.id == "bf16-weights":
        return "Parameters, gradients and optimizer state in bf16"
    if s.id == "mmap-data":
        return "Memory-map the dataset (and the weights) from a file"
    if s.id == "shared-dataset":
        return f"The dataset in tensors the {d.get('workers', '')} workers share, not Python objects".replace("  ", " ")
    if s.id == "raise-limit":
        return (f"Give WSL2 {d['gib']} GB in .wslconfig" if d.get("kind") == "wsl2"
                else f"Raise the cgroup's limit to {d['gib']} GiB")
    if s.id == "offload":
        return "Parameters and optimizer state on NVMe (DeepSpeed ZeRO-Infinity)"
    if s.id == "swap":
        return f"zram or swap of {d.get('gib')} GiB (last resort)"
    return s.id


EXPLAIN = {
    "accumulation": "The gradients of several smaller batches add up before one optimizer step: the same update, "
                    "less memory. BatchNorm's statistics see the smaller batch.",
    "checkpointing": "Each block keeps only its input for the backward pass and runs its forward again when the "
                     "gradients reach it: one more forward pass of the blocks per step.",
    "optimizer": "A different optimizer trains differently: tune its learning rate and compare the loss curve.",
    "autocast": "Matrix multiplies and convolutions compute and keep their outputs in bf16, the weights stay fp32. "
                "Fast only where the CPU computes bf16 itself (AVX512_BF16, AMX, Arm BF16).",
    "bf16-weights": "Halves the model's state; bf16 keeps 8 bits of mantissa, so small updates to large weights round "
                    "away: check the loss against fp32.",
    "mmap-data": "The file's pages are read when used and dropped under pressure instead of held: they count as page "
                 "cache, which the kernel reclaims before it kills.",
    "shared-dataset": "Indexing an array or a tensor writes nothing to its pages, so the workers keep sharing them; "
                      "gc.freeze() keeps the collector from copying the objects the workers inherited.",
    "raise-limit": "The step fits the machine but not the limit set for it.",
    "offload": "Needs DeepSpeed's CPU build (gcc 9+, numactl; NVMe offload: libaio-dev), a fast NVMe drive and the "
               "deepspeed launcher; every step reads and writes the state from disk.",
    "swap": "Pages that do not fit go to compressed memory (zram, 2-3x) or to disk: steps that touch them wait. Under "
            "a cgroup, swap must be allowed too (memory.swap.max, --memory-swap).",
}


def verdict(plan: FitPlan) -> str:
    room = plan.room_bytes
    if plan.total_bytes is None:
        return "The need is unknown."
    if room is None:
        return f"A training step needs about {size(plan.total_bytes)}; the memory it may use is unknown."
    at = f" at batch {plan.batch}" if plan.batch else ""
    if plan.fits:
        return (f"It fits: a training step{at} needs about {size(plan.total_bytes)}, and {size(room)} may be used "
                f"({percent(plan.margin, fraction=True)} of {size(plan.budget.usable_bytes)} kept free).")
    return (f"It does not fit: a training step{at} needs about {size(plan.total_bytes)}, {size(room)} may be used: "
            f"{size(plan.total_bytes - room)} short.")


def budget_text(b: MemoryBudget) -> str:
    if b.usable_bytes is None:
        return "unknown"
    parts = [f"{size(b.usable_bytes)}: {BINDING.get(b.binding, b.binding)}"]
    if b.cgroup_limit_bytes:
        parts.append(f"cgroup {b.cgroup_path or '/'} limit {size(b.cgroup_limit_bytes)}, "
                     f"{size(b.cgroup_used_bytes)} in use")
    if b.available_bytes is not None and b.binding != "available":
        parts.append(f"{size(b.available_bytes)} available")
    if b.wsl == 2 and b.total_bytes:
        parts.append(f"the WSL2 VM has {size(b.total_bytes)}")
    return "; ".join(parts)


def largest_text(plan: FitPlan) -> str | None:
    if plan.largest_batch is None:
        return None
    if plan.largest_batch == 0:
        text = "not even a batch of 1 fits as it is"
    else:
        text = f"{plan.largest_batch}"
    if plan.largest_batch_checkpointed:
        text += f" (with activation checkpointing: {plan.largest_batch_checkpointed})"
    return text


def _source_line(plan: FitPlan) -> str:
    m = plan.measurement
    if m is not None:
        params = f"{m.parameters:,} parameters, " if m.parameters is not None else ""
        batches = ", ".join(str(p.batch) for p in m.points) or "none"
        return (f"{m.model}: {params}input {m.input}, optimizer {m.optimizer}; measured in {m.python or 'Python'} "
                f"(torch {m.torch or '?'}, {m.threads or '?'} threads) at batch {batches}")
    return {"run": "from a saved run", "parameters": "from the parameter count and the optimizer (not measured)",
            "probe": "from the job's own account"}.get(plan.source, plan.source)


def render_text(plan: FitPlan) -> str:
    out = [f"cpudoctor fit: {_source_line(plan)}", ""]
    out.append(verdict(plan))
    out.append(f"May use       {budget_text(plan.budget)}")
    largest = largest_text(plan)
    if largest:
        out.append(f"Largest batch {largest}")
    out.append("")
    out.append(f"Memory of one training step{f' at batch {plan.batch}' if plan.batch else ''}:")
    for p in plan.parts:
        out.append(f"  {size(p.bytes):>11}  {part_label(p.part)} ({HOW.get(p.how, p.how)})")
    out.append(f"  {size(plan.total_bytes):>11}  in all")
    useful = [s for s in plan.strategies if s.applicable]
    if useful:
        out.append("")
        out.append("Ways to need less (or have more), best first:")
        for i, s in enumerate(useful, 1):
            saves = f"saves {size(s.saves_bytes)}" if s.saves_bytes is not None else "saves: depends on the job"
            after = ""
            if s.total_bytes is not None:
                after = f" -> {size(s.total_bytes)}, " + ("fits" if s.fits else "still short")
            out.append(f"{i:>2}. {strategy_title(s)}")
            if s.applicable:
                out.append(f"    {saves}{after}; speed: {speed_words(s)}")
            if EXPLAIN.get(s.id):
                out.append(f"    {EXPLAIN[s.id]}")
            if s.snippet:
                out.extend(f"      {line}" for line in s.snippet.splitlines())
    for s in plan.strategies:
        if not s.applicable:
            out.append(f"Not for this model: {strategy_title(s)}")
    for note in plan.notes + (plan.measurement.notes if plan.measurement else []) + plan.budget.notes:
        out.append(f"Note: {note}")
    return "\n".join(out) + "\n"


def render_md(plan: FitPlan) -> str:
    from cpudoctor.kits.escape import md_escape

    out = [f"# cpudoctor fit: {md_escape(_source_line(plan))}", "", md_escape(verdict(plan)), "",
           f"May use: {md_escape(budget_text(plan.budget))}", ""]
    largest = largest_text(plan)
    if largest:
        out += [f"Largest batch: {largest}", ""]
    out += ["| Part | Memory | How |", "|---|---:|---|"]
    out += [f"| {part_label(p.part)} | {size(p.bytes)} | {HOW.get(p.how, p.how)} |" for p in plan.parts]
    out += [f"| **in all** | **{size(plan.total_bytes)}** | |", ""]
    if plan.strategies:
        out += ["## Ways to need less", "", "| # | Strategy | Saves | Then | Speed |", "|---:|---|---:|---|---|"]
        for i, s in enumerate(plan.strategies, 1):
            then = f"{size(s.total_bytes)}, {'fits' if s.fits else 'short'}" if s.total_bytes is not None else ""
            out.append(f"| {i} | {md_escape(strategy_title(s))} | {size(s.saves_bytes, '-')} | {then} | "
                       f"{speed_words(s) if s.applicable else '-'} |")
        out.append("")
        for i, s in enumerate(plan.strategies, 1):
            if s.snippet:
                out += [f"{i}. {md_escape(strategy_title(s))}", "", f"```{s.snippet_lang}", s.snippet, "```", ""]
    out += [f"- {md_escape(n)}" for n in plan.notes + (plan.measurement.notes if plan.measurement else [])]
    return "\n".join(out) + "\n"


def plan_data(plan: FitPlan) -> dict[str, Any]:
    from cpudoctor.model.serde import to_data

    data = to_data(plan)
    data["verdict"] = verdict(plan)
    data["room_bytes"] = plan.room_bytes
    for s, d in zip(plan.strategies, data["strategies"]):
        d["title"], d["speed"], d["explain"] = strategy_title(s), speed_words(s), EXPLAIN.get(s.id, "")
    for p in data["parts"]:
        p["label"] = part_label(p["part"])
    return data


def render_json(plan: FitPlan) -> str:
    from cpudoctor.model.report import json_text

    return json_text({"kind": "cpudoctor-fit", "plan": plan_data(plan)}) + "\n"


RENDERERS = {"text": render_text, "md": render_md, "json": render_json}


def render_check(rows) -> str:
    """The lab's check (``cpudoctor fit --model M --check B1,B2``): each training run's peak against fit's estimate."""
    out = [f"{'model':<30} {'batch':>6} {'checkpoint':>10} {'estimate':>10} {'measured':>10} {'error':>7}  "
           f"{'from <= batch/4':>15}"]
    for r in rows:
        err = percent(r.error_share, fraction=True, digits=1) if r.error_share is not None else "?"
        small = size(r.estimate_small_bytes, "-")
        out.append(f"{r.model[:30]:<30} {r.batch:>6} {'yes' if r.checkpoint else 'no':>10} "
                   f"{size(r.estimate_bytes, '?'):>10} {size(r.measured_bytes, '?'):>10} {err:>7}  {small:>15}"
                   + (f"  ({r.error})" if r.error else ""))
    shares = [abs(r.error_share) for r in rows if r.error_share is not None]
    if shares:
        out.append(f"largest error {percent(max(shares), fraction=True, digits=1)} over {len(shares)} runs "
                   "(estimate: fit's need at the batch; measured: the training process's peak resident memory)")
    return "\n".join(out) + "\n"
