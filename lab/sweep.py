"""Thread sweep: the training job at 1..N threads and in pinning variants, and the best setting.

``python -m cpudoctor.lab.sweep --json-args '{"seconds": 8, "train": {...}}'``
runs one fresh training child per variant (inter-op threads and the CPU set
can only be chosen before torch starts working), streams one progress line per
variant, and ends with the recommendation as a
:class:`cpudoctor.report.ThreadRecommendation`. The variants come from the
Topology: one CCX (L3 domain), each NUMA node, all cores with and without
SMT. This process never imports torch; its children do.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cpudoctor.lab import protocol
from cpudoctor.lab.settings import SettingsError, TrainSettings
from cpudoctor.probes._fs import format_cpulist
from cpudoctor.probes import Topology

TIE_TOLERANCE = 0.03    # within 3% of the best, fewer threads win: same speed, cores left free
NOISE_RATIO = 1.25      # two runs of one setting further apart than this: the machine was busy


@dataclass
class Variant:
    name: str
    threads: int | None           # None = PyTorch default
    cpus: list[int] | None        # None = not pinned
    group: str                    # default | threads | pinning

    def key(self) -> tuple:
        return (self.threads, tuple(self.cpus) if self.cpus is not None else None)


def usable_cpus(topo: Topology, allowed: list[int] | None = None) -> list[int]:
    """CPUs this process may use: the affinity mask, within the online CPUs when known."""
    allowed = allowed if allowed is not None else topo.affinity.allowed_cpus
    if allowed is None and hasattr(os, "sched_getaffinity"):
        allowed = sorted(os.sched_getaffinity(0))
    online = set(topo.online_cpus) if topo.online_cpus else None
    cpus = [c for c in (allowed or topo.online_cpus) if online is None or c in online]
    return sorted(set(cpus))


def _cores(topo: Topology, usable: list[int]) -> list[list[int]]:
    """Usable CPUs grouped by physical core (each CPU its own core when the topology is unknown)."""
    u = set(usable)
    groups = [sorted(c for c in core.cpus if c in u) for core in topo.core_list]
    groups = [g for g in groups if g]
    seen = {c for g in groups for c in g}
    groups += [[c] for c in usable if c not in seen]
    return sorted(groups, key=lambda g: g[0])


def thread_ladder(n: int, cores: int) -> list[int]:
    """1, 2, 4, ... up to n, plus the physical core count and n itself."""
    ladder = {1, n, cores}
    t = 2
    while t < n:
        ladder.add(t)
        t *= 2
    return sorted(x for x in ladder if 1 <= x <= n)


def derive_variants(topo: Topology, allowed: list[int] | None = None) -> list[Variant]:
    """The sweep's variants for this topology: defaults, a thread ladder, then pinning sets."""
    usable = usable_cpus(topo, allowed)
    if not usable:
        return [Variant("PyTorch defaults", None, None, "default")]
    cores = _cores(topo, usable)
    firsts = [g[0] for g in cores]
    smt = any(len(g) > 1 for g in cores)
    variants = [Variant("PyTorch defaults", None, None, "default")]
    # A cgroup CPU quota (containers) caps useful threads below the CPUs we may run on.
    quota = topo.affinity.usable_cpus
    limit = min(len(usable), quota) if quota else len(usable)
    for t in thread_ladder(limit, min(len(cores), limit)):
        variants.append(Variant(f"{t} thread{'s' if t > 1 else ''}", t, None, "threads"))

    def first_threads(cpus: set[int]) -> list[int]:
        return [g[0] for g in cores if g[0] in cpus]

    u = set(usable)
    l3s = [sorted(set(d.cpus) & u) for d in topo.l3_domains]
    l3s = [d for d in l3s if d]
    if len(l3s) > 1:
        ccx = l3s[0]
        fc = first_threads(set(ccx))
        variants.append(Variant(f"one CCX, no SMT (CPUs {format_cpulist(fc)})", len(fc), fc, "pinning"))
        if smt:
            variants.append(Variant(f"one CCX with SMT (CPUs {format_cpulist(ccx)})", len(ccx), ccx, "pinning"))
    kinds = getattr(topo, "cpu_kinds", None) or []
    if len(kinds) > 1:   # hybrid: OpenMP barriers wait for the efficiency cores; measure the P cores alone
        fast = sorted(set(kinds[-1].cpus) & u)
        fc = first_threads(set(fast))
        if len(fc) > 1:
            variants.append(Variant(f"performance cores, no SMT (CPUs {format_cpulist(fc)})", len(fc), fc, "pinning"))
            if len(fast) > len(fc):
                variants.append(Variant(f"performance cores with SMT (CPUs {format_cpulist(fast)})", len(fast), fast,
                                        "pinning"))
    nodes = [(n.id, sorted(set(n.cpus) & u)) for n in topo.numa_nodes]
    nodes = [(i, c) for i, c in nodes if c]
    if len(nodes) > 1:
        for node_id, cpus in nodes:
            fc = first_threads(set(cpus))
            variants.append(Variant(f"NUMA node {node_id}, no SMT (CPUs {format_cpulist(fc)})", len(fc), fc, "pinning"))
    if smt:
        variants.append(Variant(f"all cores, no SMT (CPUs {format_cpulist(firsts)})", len(firsts), firsts, "pinning"))
        variants.append(Variant(f"all cores with SMT (CPUs {format_cpulist(usable)})", len(usable), usable, "pinning"))
    out: list[Variant] = []
    seen: set[tuple] = set()
    for v in variants:
        if v.threads is not None and v.threads > limit:
            v.threads = limit
            v.name += f", {limit} threads (CPU quota)"
        # Pinning to every usable CPU with one thread each is what the unpinned run already does.
        key = v.key() if v.cpus != usable or smt else (v.threads, None)
        if key not in seen:
            seen.add(key)
            out.append(v)
    return out


def pinning_choices(topo: Topology, allowed: list[int] | None = None) -> list[tuple[str, list[int]]]:
    """CPU sets a person may pin a training run to: each CCX (L3), each NUMA node, all cores without SMT."""
    usable = usable_cpus(topo, allowed)
    u = set(usable)
    cores = _cores(topo, usable)
    choices: list[tuple[str, list[int]]] = []
    l3s = [sorted(set(d.cpus) & u) for d in topo.l3_domains]
    l3s = [d for d in l3s if d]
    if len(l3s) > 1:
        word = "CCX" if topo.l3_is_ccx() else "L3 domain"
        choices += [(f"{word} {i} (CPUs {format_cpulist(d)})", d) for i, d in enumerate(l3s)]
    kinds = getattr(topo, "cpu_kinds", None) or []
    if len(kinds) > 1:   # hybrid: the performance cores alone
        fast = sorted(set(kinds[-1].cpus) & u)
        if fast:
            choices.append((f"performance cores (CPUs {format_cpulist(fast)})", fast))
    nodes = [(n.id, sorted(set(n.cpus) & u)) for n in topo.numa_nodes]
    nodes = [(i, c) for i, c in nodes if c]
    if len(nodes) > 1:
        choices += [(f"NUMA node {i} (CPUs {format_cpulist(c)})", c) for i, c in nodes]
    if any(len(g) > 1 for g in cores):
        firsts = [g[0] for g in cores]
        choices.append((f"all cores, no SMT (CPUs {format_cpulist(firsts)})", firsts))
    return choices


def recommend(points: list[dict[str, Any]], model: str | None = None):
    """The best measured point as a ThreadRecommendation (fewest threads within TIE_TOLERANCE)."""
    from cpudoctor.report import ThreadRecommendation

    measured = [p for p in points if p.get("samples_per_s")]
    if not measured:
        return None
    best = max(p["samples_per_s"] for p in measured)
    close = [p for p in measured if p["samples_per_s"] >= best * (1 - TIE_TOLERANCE) and p.get("threads")]
    pick = min(close, key=lambda p: (p["threads"], -p["samples_per_s"])) if close else max(measured, key=lambda p: p["samples_per_s"])
    default = next((p["samples_per_s"] for p in measured if p.get("group") == "default"), None)
    return ThreadRecommendation(
        threads=int(pick.get("threads_used") or pick.get("threads") or 1),
        interop_threads=None,              # the sweep leaves inter-op threads at PyTorch's default
        cpus=pick.get("cpus"),
        variant=pick["variant"],
        samples_per_s=pick["samples_per_s"],
        default_samples_per_s=default,
        model=model,
    )


def noise_notes(points: list[dict[str, Any]]) -> list[str]:
    """Variants that ran the very same setting (e.g. "PyTorch defaults" and "N threads") but measured far apart.

    The sweep's ranking is only as good as its quietest run; when one setting
    measures 1.25x or more apart from itself, something else used the CPUs and
    the user should rerun rather than trust the recommendation.
    """
    groups: dict[tuple, list[dict[str, Any]]] = {}
    for p in points:
        threads = p.get("threads_used") or p.get("threads")
        if p.get("samples_per_s") and threads:
            groups.setdefault((threads, tuple(p.get("cpus") or ())), []).append(p)
    notes = []
    for (threads, _), same in groups.items():
        if len(same) < 2:
            continue
        lo = min(same, key=lambda p: p["samples_per_s"])
        hi = max(same, key=lambda p: p["samples_per_s"])
        ratio = hi["samples_per_s"] / lo["samples_per_s"]
        if ratio >= NOISE_RATIO:
            notes.append(f"'{hi['variant']}' and '{lo['variant']}' ran the same setting ({threads} thread"
                         f"{'' if threads == 1 else 's'}) but measured {hi['samples_per_s']:,.0f} vs "
                         f"{lo['samples_per_s']:,.0f} samples/s ({ratio:.1f}x apart): other programs used the "
                         "CPUs during the sweep, so rerun it on an idle machine before trusting the ranking")
    return notes


def run(args: dict[str, Any], stop: protocol.StopFlag, root: Path = Path("/")) -> dict[str, Any]:
    from cpudoctor.lab.runner import Job, job_command
    from cpudoctor.serde import to_data

    train = dict(args.get("train") or {})
    seconds = float(args.get("seconds", 8.0))
    train.update(seconds=seconds, steps=None, eval_samples=0)
    TrainSettings.from_dict({**train, "threads": None, "cpus": None})   # validate once, early
    if "topology" in args:
        from cpudoctor.serde import from_data

        topo = from_data(Topology, args["topology"])
    else:
        from cpudoctor.probes import probe_topology

        topo = probe_topology(root)
    variants = derive_variants(topo, args.get("allowed_cpus"))
    only = args.get("max_variants")
    if only:
        variants = variants[: int(only)]
    points: list[dict[str, Any]] = []
    start = time.perf_counter()
    status = "ok"
    failures: list[str] = []
    for i, v in enumerate(variants):
        if stop.is_set():
            status = "cancelled"
            break
        settings = {**train, "threads": v.threads, "cpus": v.cpus}
        job = Job(job_command("train", settings), what=f"the training run '{v.name}'").start()
        while job._proc is not None and job._proc.poll() is None:
            if stop.is_set():
                # Quicker than the parent's own stages, so this process can still send its partial result.
                job.stop(ask_wait=0.3, term_wait=0.1)
                break
            time.sleep(0.05)
        out = job.wait()
        if out.status == "cancelled" or stop.is_set():
            status = "cancelled"
            break
        res = out.result or {}
        point = {
            "variant": v.name, "group": v.group, "threads": v.threads, "cpus": v.cpus,
            "threads_used": res.get("threads"), "interop_threads": res.get("interop_threads"),
            "samples_per_s": res.get("samples_per_s"), "status": out.status,
        }
        if out.status != "ok":
            point["error"] = out.message
            failures.append(f"{v.name}: {out.message}")
        points.append(point)
        protocol.progress(step=i + 1, total=len(variants), elapsed=round(time.perf_counter() - start, 3), **point)
    rec = recommend(points, train.get("model", "simplecnn"))
    noise = noise_notes(points)
    return {
        "status": status,
        "points": points,
        "variants": len(variants),
        "recommendation": to_data(rec) if rec is not None else None,
        "failures": failures,
        "notes": noise,
        # Other programs used the CPUs while it ran: the ranking, and so the recommendation, may be wrong.
        "busy": bool(noise),
        "seconds_per_variant": seconds,
        "topology_notes": list(topo.notes),
        "elapsed": round(time.perf_counter() - start, 3),
        "settings": {"seconds": seconds, "train": train},
    }


def main(argv: list[str] | None = None) -> int:
    args, stop = protocol.parse_job_argv(argv)
    root = Path(args.pop("root", "/"))
    try:
        res = run(args, stop, root)
    except (SettingsError, TypeError, ValueError) as exc:
        protocol.error(str(exc), kind="settings")
        return 2
    protocol.result(**res)
    return 0


if __name__ == "__main__":
    sys.exit(main())
