"""The roofline job's parent side: what it is told about the machine, and its result with the nominal peak.

The child (:mod:`cpudoctor.lab.jobs.roofline`) measures; this module gives it
what only the parent knows (the L3 size its in-cache multiplies must fit,
the NUMA nodes with their CPUs, a buffer size well beyond the caches, native
bf16/int8) and reads its result: each measured roof beside the nominal peak
(physical cores x clock x FLOP/cycle, with where the clock and the FLOP/cycle
came from: :mod:`cpudoctor.lab.peak`, resources/peak_flops.json) and their
ratio, and the seeds' claim that training reaches "about 90 % of the
theoretical compute" checked against the measured roof. No torch here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from cpudoctor.lab.peak import MachinePeak
from cpudoctor.lab.result_base import QUIET_LIMIT, Context, Interference, LabResult

CLAIM = 0.90            # "about 90 % of the theoretical compute", as the seeds promise on an AMD CPU
MIN_BUFFER_MIB = 256
MAX_BUFFER_MIB = 1024
_ROOF_KEYS = ("dtype", "threads", "gflops", "method", "median_gflops", "size", "error")
_MEMORY_KEYS = ("node", "kernel", "gbps", "method", "median_gbps", "threads", "cpus", "placement")


def machine_args(topology, allowed: list[int] | None = None, available_bytes: int | None = None) -> dict[str, Any]:
    """The child's view of the machine: in-cache size, NUMA nodes with usable CPUs, memory buffer size."""
    allowed = allowed or topology.affinity.allowed_cpus or topology.online_cpus or []
    usable = set(allowed)
    l3 = [d.size_bytes for d in topology.l3_domains if d.size_bytes and usable & set(d.cpus)]
    nodes = [{"node": n.id, "cpus": sorted(usable & set(n.cpus))} for n in topology.numa_nodes if usable & set(n.cpus)]
    per_node_l3 = max((sum(d.size_bytes or 0 for d in topology.l3_domains if set(d.cpus) & set(n["cpus"]))
                       for n in nodes), default=sum(l3))
    mib = max(MIN_BUFFER_MIB, min(MAX_BUFFER_MIB, 4 * per_node_l3 >> 20))
    if available_bytes:
        mib = max(16, min(mib, available_bytes // 8 >> 20))       # two buffers, leave most memory free
    out: dict[str, Any] = {"cache_bytes": max(l3) if l3 else None, "memory_mib": int(mib)}
    if nodes:
        out["nodes"] = nodes
    return out


def available_memory() -> int | None:
    try:
        import psutil

        return int(psutil.virtual_memory().available)
    except Exception:  # noqa: BLE001 - psutil missing or unsupported platform
        return None


def clock_source(peak: MachinePeak) -> tuple[float | None, str]:
    """The clock the nominal peak uses and where it came from (the order of :func:`cpudoctor.lab.peak.peak`)."""
    if peak.clock_mhz:
        return peak.clock_mhz, "given with --clock-mhz"
    if peak.max_mhz:
        return peak.max_mhz, "the highest boost clock (cpufreq cpuinfo_max_freq); all-core vector loads run lower"
    if peak.base_mhz:
        return peak.base_mhz, "the base clock (no boost clock known)"
    if peak.cpuinfo_mhz:
        return peak.cpuinfo_mhz, "'cpu MHz' in /proc/cpuinfo (in a VM a fixed nominal figure; cores may run faster)"
    return None, "unknown"


def nominal(peak: MachinePeak, dtype: str, threads: int) -> dict[str, Any]:
    """The nominal peak for ``dtype`` on the cores ``threads`` use, with its inputs and their sources."""
    pk = peak.peak(threads, dtype)
    clock, source = clock_source(peak)
    per = pk.per_cycle
    return {"dtype": dtype, "threads": threads, "cores": pk.cores,
            "gflops": round(pk.gflops, 1) if pk.gflops else None, "clock_mhz": clock, "clock_source": source,
            "flops_per_cycle": per.flops_per_cycle if per else None,
            "flops_per_cycle_basis": per.basis if per else None,
            "flops_per_cycle_source": (f"resources/peak_flops.json, {per.microarchitecture}: {per.reason} "
                                       f"({per.source})" if per else
                                       f"resources/peak_flops.json has no {dtype} figure for "
                                       f"{peak.microarchitecture or 'this micro-architecture'}")}


@dataclass
class RooflineResult(LabResult):
    kind: str = "roofline"
    compute: list[dict[str, Any]] = field(default_factory=list)     # {dtype, gflops, threads, method, nominal...}
    memory: list[dict[str, Any]] = field(default_factory=list)      # {node, kernel, gbps, method, ...}
    nominal: list[dict[str, Any]] = field(default_factory=list)
    claim: dict[str, Any] = field(default_factory=dict)
    gemm_points: list[dict[str, Any]] = field(default_factory=list)  # every in-cache multiply measured
    operators: list[dict[str, Any]] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def roof(self, dtype: str = "fp32", threads: int | None = None) -> dict[str, Any] | None:
        """The measured roof of ``dtype`` at ``threads`` (default: the headline roof, :func:`headline_roof`)."""
        rows = [c for c in self.compute if c.get("dtype") == dtype and c.get("gflops")]
        if threads is not None:
            rows = [c for c in rows if c.get("threads") == threads]
            return max(rows, key=lambda c: c["gflops"], default=None)
        return headline_roof(rows)

    def bandwidth(self, node: Any = "all", kernel: str = "copy") -> dict[str, Any] | None:
        return next((m for m in self.memory if m.get("node") == node and m.get("kernel") == kernel), None)

    def caveats(self) -> list[str]:
        return super().caveats() + [f"skipped (over the time budget): {', '.join(self.skipped)}"] * bool(self.skipped)

    def metrics(self) -> dict[str, Any]:
        return {"compute": self.compute, "memory": self.memory, "nominal": self.nominal, "claim": self.claim or None,
                "gemm_points": self.gemm_points or None, "operators": self.operators or None,
                "notes": self.notes or None}

    def json_extra(self) -> dict[str, Any]:
        return {**super().json_extra(), "nominal": self.nominal, "claim": self.claim}


def contended(row: dict[str, Any], limit: float = QUIET_LIMIT) -> bool:
    """Other programs took more of the CPUs than the lab's quiet limit while ``row`` was measured."""
    share = row.get("other_share")
    return isinstance(share, (int, float)) and share > limit


def headline_roof(rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The roof a headline states, of one dtype's measurements: the best of those measured while the machine was
    quiet (all of them when none was). A roof is the most a multiply reached: 2 threads measured at 21.7 GFLOP/s
    while another program ran, beside 1 thread at 103.5, says the machine was busy, not that its roof is 21.7."""
    rows = [r for r in rows if r.get("gflops")]
    quiet = [r for r in rows if not contended(r)] or rows
    return max(quiet, key=lambda r: (r["gflops"], r.get("threads") or 0), default=None)


def slower_with_more(rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    """More threads measured slower than fewer (the biggest such gap), with whether the slower one was contended;
    None when more threads were never slower."""
    worst = None
    for many in rows:
        for few in rows:
            if (many.get("threads") or 0) > (few.get("threads") or 0) and many.get("gflops") and few.get("gflops") \
                    and many["gflops"] < few["gflops"]:
                gap = few["gflops"] / many["gflops"]
                if worst is None or gap > worst[0]:
                    worst = (gap, many, few)
    if worst is None:
        return None
    _gap, many, few = worst
    return {"threads": many.get("threads"), "gflops": many["gflops"], "other_share": many.get("other_share"),
            "contended": contended(many), "fewer_threads": few.get("threads"), "fewer_gflops": few["gflops"]}


def _plain(entry: dict[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    out = {k: entry[k] for k in keys if entry.get(k) is not None}
    inter = Interference.read(entry.get("interference"))
    if inter is not None:
        out["other_share"] = round(inter.share, 4)
    return out


def read_roofline(r: dict[str, Any], progress: list[dict[str, Any]], base: dict[str, Any], ctx: Context) \
        -> RooflineResult:
    raw = r.get("compute") if r else [p for p in progress if p.get("phase") == "compute"]
    compute, nominals = [], []
    for entry in raw or []:
        row = _plain(entry, _ROOF_KEYS)
        if ctx.peak is not None and row.get("gflops"):
            nom = nominal(ctx.peak, row["dtype"], int(row["threads"]))
            nominals.append(nom)
            row["nominal_gflops"] = nom["gflops"]
            row["of_nominal"] = round(row["gflops"] / nom["gflops"], 4) if nom["gflops"] else None
        compute.append(row)
    memory = [_plain(m, _MEMORY_KEYS) for m in (r.get("memory") or [])]
    records = [e.get("interference") for e in (raw or []) + (r.get("memory") or [])]
    points = [p for e in raw or [] for p in e.get("points") or []]
    notes = list(r.get("operator_notes") or [])
    if ctx.native is not None:
        notes += [f"{d} not measured: this CPU computes it by emulation ({why})" for d, native, why in (
            ("bf16", ctx.native.bf16, "no AVX512_BF16 or AMX-BF16"), ("int8", ctx.native.int8, "no VNNI or AMX-INT8"))
            if native is False and d not in (r.get("dtypes") or [])]
    result = RooflineResult(**dict(base, interference=Interference.worst(records) or base["interference"]),
                            compute=compute, memory=memory, nominal=nominals, gemm_points=points,
                            operators=[_operator(o) for o in r.get("operators") or [] if isinstance(o, dict)],
                            skipped=list(r.get("skipped") or []), notes=notes)
    result.claim = claim(result)
    return result


def _operator(op: dict[str, Any]) -> dict[str, Any]:
    keys = ("op", "dtype", "shapes", "calls", "flop", "bytes", "seconds", "gflops", "intensity", "model", "run_dtype")
    return {k: op[k] for k in keys if k in op}


def claim(result: RooflineResult, operators: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """The seeds' "about 90 % of the theoretical compute" against what was measured here.

    ``measured_vs_nominal``: the fp32 roof on every usable CPU over the nominal
    peak of those cores; ``best_operator_vs_roof``: the micro-training's best
    fp32 operator over that roof (what training really reached).
    """
    roof = result.roof("fp32")
    if roof is None:
        return {}
    out: dict[str, Any] = {"claim": CLAIM, "roof_gflops": roof["gflops"], "threads": roof["threads"],
                           "nominal_gflops": roof.get("nominal_gflops"), "measured_vs_nominal": roof.get("of_nominal")}
    slower = slower_with_more([c for c in result.compute if c.get("dtype") == "fp32"])
    if slower is not None:
        out["slower_with_more"] = slower
    ops = [o for o in (operators if operators is not None else result.operators)
           if o.get("gflops") and o.get("dtype") == "fp32"]
    if ops:
        best = max(ops, key=lambda o: o["gflops"])
        out.update(best_operator=best.get("op"), best_operator_gflops=best["gflops"],
                   best_operator_vs_roof=round(best["gflops"] / roof["gflops"], 4))
    if out["measured_vs_nominal"] is not None:
        out["holds"] = out["measured_vs_nominal"] >= CLAIM
    return out
