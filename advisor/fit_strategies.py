"""The ways to need less memory (or to have more), each with the bytes it saves at the job's batch, its cost in speed
and the exact code or command: ranked, the ones that make the step fit and cost least first, swap last.

Bytes and costs are measured on the model where ``fit``'s child measured them (checkpointing, bf16 autocast,
the smaller batch), computed where they are exact sizes (optimizer state, bf16 weights, the dataset), and
typical figures from knowledge (resources/training_memory.json) otherwise, flagged ``measured=False``.
The words are render's (:mod:`cpudoctor.render.fit`); here only figures, ids and code.
"""

from __future__ import annotations

import math

from cpudoctor.advisor.fit_basis import StepLine, knowledge, optimizer_states
from cpudoctor.kits.format import size
from cpudoctor.model.fit import FitPlan, Strategy
from cpudoctor.model.memory import TrainingMemory

LAST = ("offload", "swap")         # ranked after everything else, swap last of all


def _cost(name: str) -> float:
    return float(knowledge()["costs"][name]["value"])


def _part(plan: FitPlan, name: str) -> int:
    return sum(p.bytes for p in plan.parts if p.part == name)


def _finish(plan: FitPlan, s: Strategy) -> Strategy:
    if s.saves_bytes is not None and plan.total_bytes is not None:
        s.total_bytes = max(0, plan.total_bytes - s.saves_bytes)
        room = plan.room_bytes
        s.fits = s.total_bytes <= room if room is not None else None
    return s


def strategies(plan: FitPlan, shape, line, training: TrainingMemory | None = None) -> list[Strategy]:
    """Every strategy that applies to this plan, ranked."""
    found = [s for s in (
        accumulation(plan, shape, line),
        checkpointing(plan, shape, line),
        smaller_optimizer(plan, training),
        autocast(plan, shape, line),
        bf16_weights(plan),
        mmap_data(plan, shape),
        shared_dataset(plan, shape),
        raise_limit(plan),
        offload(plan),
        swap(plan),
    ) if s is not None]
    return rank([_finish(plan, s) for s in found])


def rank(found: list[Strategy]) -> list[Strategy]:
    """Those that make the step fit first, cheapest first; then by bytes saved; offload and swap last."""
    def key(s: Strategy):
        last = LAST.index(s.id) + 1 if s.id in LAST else 0
        fits = 0 if s.fits else 1
        cost = s.speed_cost if s.speed_cost is not None else 1.0
        return (not s.applicable, last, fits, cost if s.fits else 0.0, -(s.saves_bytes or 0))

    return sorted(found, key=key)


# --- the strategies ---------------------------------------------------------------------------------------


def accumulation(plan: FitPlan, shape, line) -> Strategy | None:
    """A smaller batch per step, the gradients of several added before the optimizer's step: the same update."""
    b = plan.largest_batch
    if not b or shape.batch <= 1 or b >= shape.batch:
        return None
    k = math.ceil(shape.batch / b)
    micro = math.ceil(shape.batch / k)
    act = _part(plan, "activations") + _part(plan, "workspace")
    if line:
        saves = (line.delta(shape.batch) or 0) - (line.delta(micro) or 0)
        measured = True
    else:
        saves = int(act * (1 - micro / shape.batch))
        measured = False
    cost = None
    if line:
        a, big = line.seconds_per_sample(micro), line.seconds_per_sample(shape.batch)
        near = {p.batch for p in line.points}
        if a and big and len({min(near, key=lambda b: abs(b - micro)), min(near, key=lambda b: abs(b - shape.batch))}) == 2:
            cost = round(a / big - 1, 3)     # measured at two batch sizes, not the same point twice
    speed_measured = cost is not None
    if cost is None:
        cost = _cost("accumulation")
    return Strategy("accumulation", saves_bytes=max(0, saves), speed_cost=cost, measured=measured,
                    speed_measured=speed_measured,
                    detail={"batch": shape.batch, "micro_batch": micro, "steps": k},
                    snippet=accumulation_snippet(micro, k))


def accumulation_snippet(micro: int, k: int) -> str:
    return (f"accum = {k}                      # one optimizer step per {k} batches of {micro}: the same update\n"
            f"loader = DataLoader(dataset, batch_size={micro}, shuffle=True)\n"
            "opt.zero_grad(set_to_none=True)\n"
            "for i, (x, y) in enumerate(loader):\n"
            "    loss = loss_fn(model(x), y) / accum   # the mean over the whole batch, as before\n"
            "    loss.backward()                       # gradients add up until the step\n"
            "    if (i + 1) % accum == 0:\n"
            "        opt.step()\n"
            "        opt.zero_grad(set_to_none=True)")


def checkpointing(plan: FitPlan, shape, line) -> Strategy | None:
    m = plan.measurement
    if m is None:
        act = _part(plan, "activations")
        if not act:
            return None
        return Strategy("checkpointing", saves_bytes=None, speed_cost=_cost("checkpointing"),
                        detail={"block": None}, snippet=checkpoint_snippet(None))
    if not m.checkpoint_block:
        return Strategy("checkpointing", applicable=False, detail={"block": None})
    ck = StepLine(m.checkpoint_points)
    detail = {"block": m.checkpoint_block, "blocks": m.checkpoint_blocks}
    if len(ck.points) < 2 or not line:       # one batch cannot tell the step's fixed part from what scales
        return Strategy("checkpointing", saves_bytes=None, speed_cost=_cost("checkpointing"), detail=detail,
                        snippet=checkpoint_snippet(m.checkpoint_block))
    saves = max(0, (line.delta(shape.batch) or 0) - (ck.delta(shape.batch) or 0))
    cost = _measured_cost(ck, line)
    if cost is not None and cost < 0:
        cost = None                          # recomputing cannot be faster: the timing was noise (a busy machine)
        detail["timing_noisy"] = True
    detail["measured_batch"] = ck.points[-1].batch
    if plan.largest_batch_checkpointed is not None:
        detail["largest_batch"] = plan.largest_batch_checkpointed
    return Strategy("checkpointing", saves_bytes=saves, speed_cost=cost if cost is not None else _cost("checkpointing"),
                    measured=True, speed_measured=cost is not None, detail=detail,
                    snippet=checkpoint_snippet(m.checkpoint_block))


def _measured_cost(variant: StepLine, line: StepLine) -> float | None:
    """Extra time per step of a variant against the plain step at the largest batch both measured."""
    for p in reversed(variant.points):
        plain = next((q for q in line.points if q.batch == p.batch and q.step_s), None)
        if plain is not None and p.step_s:
            return round(p.step_s / plain.step_s - 1, 3)
    return None


def checkpoint_snippet(block: str | None) -> str:
    name = block or "Block"
    note = "" if block else "   # your model's repeated block (a transformer layer, a ResNet block)"
    return ("from torch.utils.checkpoint import checkpoint\n\n"
            f"for block in [m for m in model.modules() if type(m).__name__ == \"{name}\"]:{note}\n"
            "    block._plain_forward = block.forward\n"
            "    # keep only the block's input; run its forward again when the backward pass reaches it\n"
            "    block.forward = lambda *a, _b=block, **k: checkpoint(_b._plain_forward, *a, use_reentrant=False, **k)")


def smaller_optimizer(plan: FitPlan, training: TrainingMemory | None) -> Strategy | None:
    m = plan.measurement
    states = _part(plan, "optimizer")
    if states <= 0:
        return None
    name = m.optimizer if m is not None else (training.optimizer if training is not None else None)
    trainable = (m.trainable_bytes if m is not None else None) or (m.param_bytes if m is not None else None)
    if trainable is None and training is not None:
        trainable = training.param_bytes or 4 * (training.parameters or 0)
    options = []
    factored = m.factored_state_bytes if m is not None else None
    if factored is not None and name != "adafactor":
        options.append(("adafactor", factored, True))
    if trainable and (optimizer_states(name) or 0) > 1:
        options.append(("sgd-momentum", trainable, m is not None))
    if not options:
        return None
    alt, alt_bytes, exact = min(options, key=lambda o: o[1])
    saves = states - alt_bytes
    if saves <= 0:
        return None
    snippet = ("opt = torch.optim.Adafactor(model.parameters(), lr=1e-2)   # torch 2.5+; tune lr for it"
               if alt == "adafactor" else
               "opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)   # tune lr for it")
    return Strategy("optimizer", saves_bytes=saves, speed_cost=0.0, measured=exact,
                    detail={"from": name, "to": alt, "state_bytes": alt_bytes}, snippet=snippet)


def autocast(plan: FitPlan, shape, line) -> Strategy | None:
    m = plan.measurement
    native = plan.budget.native_bf16
    if m is None or not m.bf16_points or not line:
        if native:
            return Strategy("autocast", saves_bytes=None, speed_cost=None, detail={"native": native},
                            snippet=autocast_snippet())
        return None
    bf = StepLine(m.bf16_points)
    if len(bf.points) < 2:
        cost = _measured_cost(bf, line)
        return Strategy("autocast", saves_bytes=None, speed_cost=cost, speed_measured=cost is not None,
                        detail={"native": native}, snippet=autocast_snippet())
    saves = max(0, (line.delta(shape.batch) or 0) - (bf.delta(shape.batch) or 0))
    cost = _measured_cost(bf, line)
    return Strategy("autocast", saves_bytes=saves, speed_cost=cost, measured=True, speed_measured=cost is not None,
                    applicable=saves > 0,
                    detail={"native": native}, snippet=autocast_snippet())


def autocast_snippet() -> str:
    return ("with torch.autocast(\"cpu\", dtype=torch.bfloat16):   # matmuls and convolutions in bf16, weights fp32\n"
            "    loss = loss_fn(model(x), y)\n"
            "loss.backward()\n"
            "opt.step()")


def bf16_weights(plan: FitPlan) -> Strategy | None:
    state = _part(plan, "parameters") + _part(plan, "gradients") + _part(plan, "optimizer")
    if not plan.total_bytes or state < 0.25 * plan.total_bytes:
        return None
    return Strategy("bf16-weights", saves_bytes=state // 2, speed_cost=None, measured=False,
                    detail={"native": plan.budget.native_bf16},
                    snippet=("model = model.to(torch.bfloat16)   # parameters, gradients and the optimizer's state in "
                             "bf16\nopt = torch.optim.AdamW(model.parameters(), lr=1e-4)\n"
                             "# bf16 keeps 8 bits of mantissa: small updates to large weights round away; compare "
                             "the loss curve with fp32"))


def mmap_data(plan: FitPlan, shape) -> Strategy | None:
    if not shape.dataset_bytes:
        return None
    return Strategy("mmap-data", saves_bytes=shape.dataset_bytes, speed_cost=0.0, measured=False,
                    snippet=("import numpy as np\n"
                             "np.save(\"train_x.npy\", x)                       # once: the array to a file\n"
                             "x = np.load(\"train_x.npy\", mmap_mode=\"r\")       # then: pages read when used, dropped "
                             "under pressure\n"
                             "state = torch.load(\"weights.pt\", mmap=True)     # weights too (torch 2.1+)"))


def shared_dataset(plan: FitPlan, shape) -> Strategy | None:
    workers = _part(plan, "workers")
    if not shape.workers or not shape.workers_copy_dataset or not workers:
        return None
    own = int(knowledge()["worker_bytes"]["value"]) * shape.workers
    return Strategy("shared-dataset", saves_bytes=max(0, workers - own), speed_cost=0.0, measured=False,
                    detail={"workers": shape.workers}, snippet=shared_dataset_snippet())


def shared_dataset_snippet() -> str:
    return ("import gc\n"
            "import numpy as np\n\n"
            "class Samples(torch.utils.data.Dataset):\n"
            "    def __init__(self, rows, labels):\n"
            "        self.x = torch.from_numpy(np.asarray(rows, dtype=np.float32))   # one buffer, not a Python "
            "object per sample\n"
            "        self.y = torch.as_tensor(labels)\n"
            "    def __len__(self):\n"
            "        return len(self.y)\n"
            "    def __getitem__(self, i):\n"
            "        return self.x[i], self.y[i]                # reading writes nothing: the workers keep sharing "
            "its pages\n\n"
            "gc.freeze()   # before the DataLoader forks: the collector no longer touches (and copies) inherited objects")


def raise_limit(plan: FitPlan) -> Strategy | None:
    b = plan.budget
    if plan.fits or plan.total_bytes is None or b.binding not in ("cgroup", "wsl2"):
        return None
    need = int(plan.total_bytes / (1 - plan.margin)) + (b.cgroup_used_bytes or 0 if b.binding == "cgroup" else 0)
    gib = max(1, math.ceil(need / 2**30))
    if b.binding == "wsl2":
        snippet = ("# %UserProfile%\\.wslconfig on Windows:\n[wsl2]\n"
                   f"memory={gib}GB\n# then, in PowerShell: wsl --shutdown")
        return Strategy("raise-limit", speed_cost=0.0, detail={"kind": "wsl2", "gib": gib}, snippet=snippet,
                        snippet_lang="ini")
    snippet = (f"systemd-run --user --scope -p MemoryMax={gib}G python train.py   # a shell's own job\n"
               f"docker run --memory {gib}g ...                                   # a container\n"
               f"# Kubernetes: resources.limits.memory: {gib}Gi")
    return Strategy("raise-limit", speed_cost=0.0, detail={"kind": "cgroup", "gib": gib,
                                                           "limit": size(b.cgroup_limit_bytes)},
                    snippet=snippet, snippet_lang="bash")


def offload(plan: FitPlan) -> Strategy | None:
    state = _part(plan, "parameters") + _part(plan, "gradients") + _part(plan, "optimizer")
    if plan.fits or not plan.total_bytes or state < 0.3 * plan.total_bytes:
        return None
    config = ('{"train_micro_batch_size_per_gpu": 8,\n'
              ' "zero_optimization": {"stage": 3,\n'
              '   "offload_param": {"device": "nvme", "nvme_path": "/mnt/nvme"},\n'
              '   "offload_optimizer": {"device": "nvme", "nvme_path": "/mnt/nvme"}}}')
    snippet = ("# DeepSpeed ZeRO-Infinity: parameters and optimizer state on an NVMe drive (pip install deepspeed;\n"
               "# its CPU build needs gcc 9+ and numactl, NVMe offload needs libaio-dev: DS_BUILD_AIO=1)\n"
               f"cat > ds_config.json <<'EOF'\n{config}\nEOF\n"
               "deepspeed --bind_cores_to_rank train.py --deepspeed --deepspeed_config ds_config.json")
    return Strategy("offload", saves_bytes=int(state * 0.9), speed_cost=_cost("offload"), measured=False,
                    snippet=snippet, snippet_lang="bash")


def swap(plan: FitPlan) -> Strategy | None:
    if plan.fits or plan.total_bytes is None or plan.room_bytes is None:
        return None
    short = plan.total_bytes - plan.room_bytes
    gib = max(1, math.ceil(short * 1.25 / 2**30))
    snippet = ("# zram first: swap compressed in memory (2-3x), far faster than a disk\n"
               "sudo modprobe zram && dev=$(sudo zramctl --find --size " f"{gib * 2}G)\n"
               "sudo mkswap \"$dev\" && sudo swapon -p 100 \"$dev\"\n"
               "# or a swap file on the fastest disk\n"
               f"sudo fallocate -l {gib}G /swapfile && sudo chmod 600 /swapfile\n"
               "sudo mkswap /swapfile && sudo swapon /swapfile")
    return Strategy("swap", saves_bytes=None, speed_cost=_cost("swap"), measured=False,
                    detail={"short": short, "gib": gib, "in_cgroup": plan.budget.binding == "cgroup"},
                    snippet=snippet, snippet_lang="bash")
