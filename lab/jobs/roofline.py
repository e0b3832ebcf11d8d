"""Roofline job: ``python -I roofline.py --json-args '{...}'`` measures what this CPU reaches.

Compute roofs per dtype (fp32 always; bf16 and int8 where the parent's CPU
probe says they are native) through torch, with operands in cache, on every
usable CPU and on one core (:mod:`_roofs`); memory bandwidth per NUMA node
with the node's CPUs and memory, and over all usable CPUs; the kernels the
multiplies ran (:mod:`_libreports`); and the operators of a few SimpleCNN
training steps with their FLOP counts (:mod:`_opprofile`), the points of the
roofline picture. Every measured window carries its interference share.

The nominal peak (cores x clock x FLOP/cycle) and the ratio are the parent's
(:mod:`cpudoctor.lab.results`): this job only measures. Bounded by
``budget_s`` (default 45 s: with torch's start-up, within a minute): whatever did not fit is skipped and said so.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any, Dict, List, Optional

if __package__:
    from . import _cpumeter, _jobkit, _libreports, _opprofile, _roofs
    from ._settings import RooflineSettings
else:  # a standalone script: ``python -I`` leaves the script's folder off sys.path
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import _cpumeter
    import _jobkit
    import _libreports
    import _opprofile
    import _roofs
    from _settings import RooflineSettings


class Budget:
    def __init__(self, seconds: float):
        self.start = time.perf_counter()
        self.seconds = seconds
        self.skipped: List[str] = []

    @property
    def elapsed(self) -> float:
        return round(time.perf_counter() - self.start, 3)

    def left(self, share: float = 1.0) -> bool:
        return self.elapsed < self.seconds * share

    def allows(self, what: str, share: float = 1.0) -> bool:
        """Whether ``what`` may start: before ``share`` of the budget is spent. Each phase keeps room for the
        next and for a step that overruns on a busy machine: compute until 55 %, its refine until 65 %, memory
        until 80 %, the operators until 85 %."""
        if self.elapsed < self.seconds * share:
            return True
        self.skipped.append(what)
        return False


def _allowed() -> List[int]:
    return sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else list(range(os.cpu_count() or 1))


def compute(torch: Any, s: RooflineSettings, allowed: List[int], budget: Budget, stop: _jobkit.StopFlag,
            meter: _cpumeter.CpuMeter, census: _libreports.Census) -> List[Dict[str, Any]]:
    """Every dtype at every thread count, in two passes in opposite orders (ABC, CBA), half the time each,
    then the best size of each once more (:func:`_refine`).

    A burst of load elsewhere (on 2 shared CPUs one busy neighbour makes a 2-thread multiply wait at every
    barrier) then hits one pass of a setting, not both: each roof is the best window, with that window's
    interference share.
    """
    threads = s.threads or sorted({len(allowed), 1}, reverse=True)
    steps = [(d, t) for d in s.dtypes_used for t in threads]
    best: Dict[tuple, Dict[str, Any]] = {}
    for dtype in s.dtypes_used:                         # which kernels each dtype runs, once, before timing
        if stop.is_set():
            break
        torch.set_num_threads(threads[0])
        try:
            census.run(_roofs.matmul_op(torch, dtype, _roofs.ladder(dtype, s.cache_bytes, s.sizes)[0]))
        except RuntimeError as exc:                    # e.g. torch._int_mm missing in an old torch
            best[(dtype, None)] = {"dtype": dtype, "threads": None, "error": f"{type(exc).__name__}: {exc}"}
    failed = {d for (d, t) in best if t is None}
    total = 2 * len(steps)
    for pass_no, order in enumerate((steps, list(reversed(steps)))):
        for i, (dtype, t) in enumerate(order):
            what = f"{dtype} at {t} thread(s), pass {pass_no + 1}"
            if dtype in failed or stop.is_set() or not budget.allows(what, 0.55):
                continue
            sizes = _roofs.ladder(dtype, s.cache_bytes, s.sizes)
            try:
                roof = _roofs.compute_roof(torch, dtype, t, sizes, s.seconds_per_point / 2, stop, meter)
            except (RuntimeError, AttributeError) as exc:
                roof = {"dtype": dtype, "threads": t, "error": f"{type(exc).__name__}: {exc}"}
            old = best.get((dtype, t))
            if old is None or (roof.get("gflops") or 0) > (old.get("gflops") or 0):
                best[(dtype, t)] = dict(roof, points=_merge(old, roof))
            else:
                old["points"] = _merge(old, roof)
            _jobkit.progress(phase="compute", step=pass_no * len(steps) + i + 1, total=total, elapsed=budget.elapsed,
                             **{k: v for k, v in roof.items() if k != "points"})
    _refine(torch, s, steps, best, budget, stop, meter)
    order = {k: i for i, k in enumerate(steps)}
    return [v for k, v in sorted(best.items(), key=lambda kv: order.get(kv[0], -1))]


QUIET = 0.10           # a window where others took more of the CPUs than this is measured again if time allows


def _refine(torch: Any, s: RooflineSettings, steps: List[tuple], best: Dict[tuple, Dict[str, Any]], budget: Budget,
            stop: _jobkit.StopFlag, meter: _cpumeter.CpuMeter) -> None:
    """The best size of each setting once more: the roof is the best call, and the most time goes where it is.

    A setting whose best window was busy (others took more than 10 % of the CPUs) is measured again, round
    after round, while the compute share of the budget lasts: on a shared machine a quiet moment comes, and
    a roof measured in it is the CPU's, not the neighbours'. Optional work: nothing is listed as skipped.
    """
    rounds = 0
    while not stop.is_set() and budget.left(0.65 if rounds == 0 else 0.55):
        todo = [k for k in steps if (best.get(k) or {}).get("size") and (rounds == 0 or _busy(best[k]))]
        if not todo:
            return
        for key in todo:
            if stop.is_set() or (rounds and not budget.left(0.55)):
                return
            roof = best[key]
            again = _roofs.compute_roof(torch, key[0], key[1], [roof["size"]], s.seconds_per_point, stop, meter)
            if (again.get("gflops") or 0) > roof["gflops"]:
                best[key] = dict(again, points=_merge(roof, again))
            else:
                roof["points"] = _merge(roof, again)
        rounds += 1


def _busy(roof: Dict[str, Any]) -> bool:
    inter = roof.get("interference") or {}
    return float(inter.get("other_share") or 0) + float(inter.get("steal_share") or 0) > QUIET


def _merge(old: Optional[Dict[str, Any]], new: Dict[str, Any]) -> List[Dict[str, Any]]:
    """The best call of each size over both passes."""
    points: Dict[int, Dict[str, Any]] = {}
    for p in (old or {}).get("points", []) + new.get("points", []):
        if p["size"] not in points or p["gflops"] > points[p["size"]]["gflops"]:
            points[p["size"]] = p
    return [points[n] for n in sorted(points)]


def memory(torch: Any, s: RooflineSettings, allowed: List[int], budget: Budget, stop: _jobkit.StopFlag) \
        -> List[Dict[str, Any]]:
    """One entry per node and kernel (read, copy): ``{node, kernel, gbps, method, ...}``; node "all" = in total."""
    nodes = s.nodes or [{"node": None, "cpus": allowed}]
    nbytes = s.memory_mib << 20
    out: List[Dict[str, Any]] = []
    original = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    plans = [(n["node"], [c for c in n["cpus"] if c in allowed]) for n in nodes] if len(nodes) > 1 else []
    plans.append(("all", allowed))
    try:
        for node, cpus in plans:
            if not cpus or stop.is_set() or not budget.allows(f"memory of node {node}", 0.8):
                continue
            pin_error = _roofs.pin_all_threads(cpus) if node != "all" else None
            meter = _cpumeter.CpuMeter(cpus)
            bound = node if isinstance(node, int) else None
            got = _roofs.bandwidth(torch, nbytes, len(cpus), s.memory_seconds, stop, bound, meter)
            how = _placement_words(node, cpus, got, pin_error)
            names = [node] if node != "all" or len(nodes) > 1 else [nodes[0]["node"], "all"]
            for name in names:
                for kernel, fig in got["results"].items():
                    where = how if name != "all" or len(nodes) > 1 else f"the only NUMA node: {how}"
                    out.append({"node": name, "kernel": kernel, "gbps": fig["gbps"], "median_gbps": fig["median_gbps"],
                                "method": f"{kernel}: torch {fig['kernel']} over {s.memory_mib} MiB fp32 buffers, "
                                          f"{_threads_words(fig.get('threads', len(cpus)), len(cpus))}; {where}",
                                "threads": fig.get("threads", len(cpus)), "cpus": cpus, "bytes": nbytes, "placement": got["placement"],
                                "interference": got["interference"]})
            _jobkit.progress(phase="memory", node=node, elapsed=budget.elapsed,
                             **{k: v["gbps"] for k, v in got["results"].items()})
    finally:
        if original:
            _roofs.pin_all_threads(original)
    return out


def _threads_words(used: int, offered: int) -> str:
    """``2 thread(s)``, or which of the two thread counts a memory figure came from."""
    return f"{used} thread(s)" if offered <= 1 else f"{used} thread(s), the better of {offered} and 1"


def _placement_words(node: Any, cpus: List[int], got: Dict[str, Any], pin_error: Optional[str]) -> str:
    """How CPUs and memory were bound, and where the pages really were."""
    if node == "all" or node is None:
        words = "all usable CPUs, memory placed by first touch of the same threads"
    else:
        pinned = f"threads pinned to node {node}'s CPUs" + (f" (refused: {pin_error})" if pin_error else "")
        err = got.get("mbind_error")
        memory = (f"memory bound to node {node} with mbind(MPOL_BIND)" if not err
                  else f"memory placed by first touch (mbind refused: {err})")
        words = f"{pinned}, {memory}"
    where = got.get("placement")
    if where:
        words += "; pages on " + ", ".join(f"node {n}: {share:.0%}" for n, share in sorted(where.items()))
    return words


def operators(torch: Any, s: RooflineSettings, allowed: List[int], budget: Budget, stop: _jobkit.StopFlag) \
        -> Dict[str, Any]:
    """A few SimpleCNN training steps under the profiler: the operators' FLOP, bytes and time."""
    if not s.operators or stop.is_set() or not budget.allows("the micro-training's operators", 0.85):
        return {}
    try:
        _jobkit.require("numpy")
    except _jobkit.JobError as exc:
        return {"operator_notes": [f"no operator profile: {exc}"]}
    if __package__:
        from . import data
        from .models import build_model
    else:
        import data
        from models import build_model
    import torch.nn.functional as F  # noqa: PLC0415, N812

    torch.set_num_threads(len(allowed))
    torch.manual_seed(0)
    model = build_model("simplecnn")
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    batch = data.synthetic(64, seed=0)
    x, y = torch.from_numpy(batch.images), torch.from_numpy(batch.labels)
    out: Dict[str, Any] = {"operators": [], "operator_notes": []}
    for dtype in ["fp32"] + (["bf16"] if s.native_bf16 else []):
        def step(dtype: str = dtype) -> None:
            opt.zero_grad(set_to_none=True)
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=dtype == "bf16"):
                loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()

        for _ in range(2):
            step()
        ops, notes = _opprofile.profile_operators(torch, step)
        out["operators"] += [dict(o, model="simplecnn", run_dtype=dtype) for o in ops]
        out["operator_notes"] += notes
    return out


def run(args: Dict[str, Any], stop: _jobkit.StopFlag) -> Dict[str, Any]:
    s = RooflineSettings.from_dict(args)
    budget = Budget(s.budget_s)
    torch = _jobkit.require("torch")
    allowed = _allowed()
    census = _libreports.Census(torch)
    roofs = compute(torch, s, allowed, budget, stop, _cpumeter.CpuMeter(allowed), census)
    mem = memory(torch, s, allowed, budget, stop) if s.memory else []
    ops = operators(torch, s, allowed, budget, stop)
    torch.set_num_threads(len(allowed))
    return {
        "status": "cancelled" if stop.is_set() else "ok",
        "compute": roofs,
        "memory": mem,
        **ops,
        "allowed_cpus": allowed,
        "dtypes": s.dtypes_used,
        "skipped": budget.skipped,
        "library_reports": census.report(),
        "torch": torch.__version__,
        "elapsed": budget.elapsed,
        "settings": s.to_dict(),
    }


if __name__ == "__main__":
    _jobkit.exit_job(_jobkit.job_main(run))
