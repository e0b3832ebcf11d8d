"""Kernels far under the roof for their intensity: what the job's shapes say about its achieved rate.

Three questions, one rule each, over the run's :class:`~cpudoctor.model.achieved.Utilisation` (each call's FLOPs
and bytes counted from the shapes its library printed, its time, the measured roofs) and its oneDNN log:

- EVID020 ``memory-bound-gemms``: matrix multiplies (linear layers, matmuls) whose intensity is below the ridge
  point of this CPU's roofline took a large share of the kernel time: at batch 8 a Linear layer reads its whole
  weight matrix for 8 rows of work, so the memory roof, not the arithmetic units, bounds it;
- EVID021 ``threads-split-small-gemms``: most GEMM time is in calls so small (a few MFLOP, tens of microseconds)
  that splitting each over several threads costs more in forking and waiting than it gains;
- EVID022 ``reorders-every-step``: oneDNN converted tensors between layouts around its convolutions on every
  step (several reorders per convolution), taking a large share of its time: the model runs in PyTorch's
  default NCHW layout while oneDNN computes in its blocked or channels-last one.

The shapes decide (intensity, call size, the count of reorders per convolution): they hold on a busy machine,
where the rates themselves are slowed by other programs; the rates are quoted with the load beside them.
"""

from __future__ import annotations

import statistics
from typing import Any

from cpudoctor.advisor.code_settings import thread_change, thread_setting
from cpudoctor.advisor.evidence_rules import Evidence, evidence_rule
from cpudoctor.kits.format import percent
from cpudoctor.model import Finding
from cpudoctor.model.achieved import KindUse, Utilisation

GEMM_KINDS = ("linear", "matmul", "batched matmul")
MEMORY_BOUND_SHARE = 0.25    # memory-bound GEMMs took at least this share of the timed kernel time ...
MEMORY_BOUND_WALL = 0.10     # ... and the timed kernels at least this share of the wall time
SMALL_GEMM_FLOP = 8e6        # a call under this many FLOPs (2 x 128x128x256) is too small to split well
SMALL_GEMM_SHARE = 0.50      # small multi-threaded calls took this share of the GEMM time ...
SMALL_GEMM_KERNELS = 0.25    # ... and this share of all the timed kernel time
REORDER_SHARE = 0.20         # reorders took this share of oneDNN's time ...
REORDERS_PER_CONV = 2.0      # ... with at least this many reorders per convolution call


def _finding(severity: str, title: str, why: str, fix: str, snippet: str = "", evidence: dict[str, Any] | None = None,
             lang: str = "python") -> Finding:
    ev = {k: v for k, v in (evidence or {}).items() if v is not None}
    return Finding(code="", symbol="", category="", severity=severity, title=title, why=why, fix=fix,
                   snippet=snippet, snippet_lang=lang, evidence=ev, fields_used=sorted(ev))


def _share(x: float | None) -> str:
    """A share of 1 in the one percent format ("48 %"), "?" when unknown."""
    return percent(x, "?", fraction=True)


def _load(ev: Evidence) -> str:
    """", while other programs used 1.6 of the 2 CPUs" when the breakdown measured others' load."""
    bd = ev.breakdown
    if bd is None or bd.others_cpus is None or bd.others_cpus < 0.2:
        return ""
    return f" (measured while other programs used {bd.others_cpus:.1f} of the {bd.online_cpus or bd.cpus or '?'} CPUs)"


def _rate(k: KindUse) -> str:
    of = f", {_share(k.of_roof)} of the {k.dtype} roof of {k.roof_gflops:,.1f}" if k.roof_gflops else ""
    return f"{k.gflops or 0:,.2f} GFLOP/s{of}"


def _smallest_side(u: Utilisation, kind: KindUse) -> int | None:
    """The smallest GEMM dimension of the kind's longest-running shape (for a Linear layer: its batch)."""
    dims: list[int] = []
    for word in kind.largest.replace(":", "x").replace(" ", "x").split("x"):
        if word.isdigit():
            dims.append(int(word))
    return min(dims) if dims else None


@evidence_rule("EVID020", "memory-bound-gemms", category="evidence", severity="warning",
               title="Matrix multiplies ran memory-bound, far under the compute roof")
def memory_bound_gemms(ev: Evidence) -> list[Finding]:
    """
    What it checks:
        The job's matrix multiplies (Linear layers and matmuls: oneMKL's GEMM calls and oneDNN's
        matmul and inner-product primitives, from their verbose lines, switched on by `cpudoctor
        run`): their arithmetic intensity (FLOPs per byte of their operands, counted from the shapes)
        against the ridge point of this CPU's measured roofline (compute roof over memory bandwidth).
        It fires when multiplies below the ridge took 25 % of the timed kernel time, and the kernels
        10 % of the wall time.

    Why it matters:
        A GEMM with one side as small as the batch (8 rows) reads its whole weight matrix for a few
        multiply-adds per element: memory bandwidth bounds it, and it reaches a few percent of what the
        arithmetic units can do whatever the threads or instruction set. Only more work per weight
        read (a larger batch, or several requests batched together for inference) moves it toward the
        compute roof.

    Fix:
        Raise the batch size (scale the learning rate with it), or for inference batch requests
        together; then run the job again and compare its intensity and samples per second.
    """
    u = ev.achieved
    if u is None or not u.kernel_ms or not u.wall_s:
        return []
    bound = [k for k in u.kinds if k.kind in GEMM_KINDS and k.memory_bound]
    ms = sum(k.time_ms for k in bound)
    if not bound or ms / u.kernel_ms < MEMORY_BOUND_SHARE or u.kernel_ms / 1e3 / u.wall_s < MEMORY_BOUND_WALL:
        return []
    k = max(bound, key=lambda k: k.time_ms)
    side = _smallest_side(u, k)
    batch = f" (their smallest dimension is {side}: the batch)" if side else ""
    why = (f"{k.kind.capitalize()} {k.dtype} took {_share(ms / u.kernel_ms)} of the timed kernel time at an intensity "
           f"of {k.intensity:,.1f} FLOP/byte{batch}, below this CPU's ridge point of {k.ridge:,.1f} FLOP/byte: "
           f"memory bound them at {k.attainable_gflops:,.1f} GFLOP/s, and they reached {_rate(k)}{_load(ev)}. "
           "Each call reads its whole weight matrix for a few rows of work.")
    return [_finding("warning", f"{k.kind.capitalize()} layers ran memory-bound at {k.intensity:,.1f} FLOP/byte "
                                f"({_share(k.of_roof)} of the compute roof)", why,
                     "Raise the batch size (more rows per weight read; scale the learning rate with it), or batch "
                     "requests together for inference; then compare samples per second.",
                     "loader = torch.utils.data.DataLoader(dataset, batch_size=128)   # was " + (str(side) if side else "8"),
                     {"kind": k.kind, "dtype": k.dtype, "intensity": round(k.intensity or 0, 2),
                      "ridge": round(k.ridge or 0, 2), "gflops": round(k.gflops or 0, 3),
                      "of_roof": round(k.of_roof, 4) if k.of_roof is not None else None,
                      "kernel_share": round(ms / u.kernel_ms, 3), "smallest_dim": side})]


@evidence_rule("EVID021", "threads-split-small-gemms", category="threads", severity="warning",
               title="Small matrix multiplies were split over several threads")
def threads_split_small_gemms(ev: Evidence) -> list[Finding]:
    """
    What it checks:
        The job's GEMM calls as its libraries printed them (oneMKL's `NThr`, oneDNN's thread count):
        it fires when calls of under 8 MFLOP each (twice a 128x128x256 multiply) ran on more than
        one thread and took half of the GEMM time and a quarter of all the timed kernel time.

    Why it matters:
        A call of a few MFLOP lasts tens of microseconds; splitting it over threads costs a fork, a
        barrier and cache traffic that take as long as the work. On small models one thread often
        trains several times faster than two (measured here: 17x on a tiny model), and the waiting
        shows as "OpenMP waiting" in the time breakdown.

    Fix:
        Run the job on one thread (torch.set_num_threads(1) at the top of the script, or
        OMP_NUM_THREADS=1 when the script sets none; at the line that sets the count when the script
        sets it, named in the finding), or raise the batch size so each call has work to share;
        compare samples per second.
    """
    u = ev.achieved
    if u is None:
        return []
    calls = _gemm_calls(ev)
    total = sum(ms for _f, ms, _t in calls)
    small = [(f, ms, t) for f, ms, t in calls if f < SMALL_GEMM_FLOP and (t or 1) > 1]
    small_ms = sum(ms for _f, ms, _t in small)
    if not small or total <= 0 or small_ms / total < SMALL_GEMM_SHARE or small_ms < SMALL_GEMM_KERNELS * u.kernel_ms:
        return []
    threads = max(t or 1 for _f, _ms, t in small)
    median = statistics.median(f for f, _ms, _t in small)
    median_us = statistics.median(ms for _f, ms, _t in small) * 1e3
    why = (f"{_share(small_ms / total)} of the GEMM time ({len(small):,} calls) went to multiplies of a median "
           f"{median / 1e6:,.2f} MFLOP ({median_us:,.0f} µs a call{_load(ev)}) split over {threads} threads: each "
           "call is too short to share, so the threads fork, wait at a barrier and pass data between caches for "
           "work one core does alone.")
    fix = ("Run this job on one thread: torch.set_num_threads(1) first thing in the script (a call in the script wins "
           "over any variable), or raise the batch size; compare samples per second.")
    snippet = "import torch\ntorch.set_num_threads(1)   # first thing in the script"
    setting = thread_setting(ev.state)
    if setting is not None:
        # the script sets its count itself: a call first thing would be overridden by that line; change it there
        fix, snippet = thread_change(setting, 1)
        fix += " Or raise the batch size; compare samples per second."
    return [_finding("warning", f"Small GEMMs ({median / 1e6:,.2f} MFLOP a call) were split over {threads} threads",
                     why, fix, snippet,
                     {"small_share": round(small_ms / total, 3), "calls": len(small), "threads": threads,
                      "median_mflop": round(median / 1e6, 3), "median_us": round(median_us, 1),
                      "suggested_threads": 1, "set_at": setting.short_place() if setting else None})]


def _gemm_calls(ev: Evidence) -> list[tuple[float, float, int | None]]:
    """(FLOPs, ms, threads) of each counted GEMM call: oneMKL's and oneDNN's matmul / inner product."""
    out: list[tuple[float, float, int | None]] = []
    for c in ev.mkl.calls if ev.mkl is not None else []:
        if c.flop:
            out.append((c.flop, c.time_ms, c.threads))
    log = ev.onednn
    for p in log.primitives if log is not None else []:
        if p.flop and p.time_ms is not None and p.kind in ("matmul", "inner_product", "gemm_api"):
            out.append((p.flop, p.time_ms, log.threads))
    return out


@evidence_rule("EVID022", "reorders-every-step", category="evidence", severity="warning",
               title="oneDNN converted layouts around its convolutions on every step")
def reorders_every_step(ev: Evidence) -> list[Finding]:
    """
    What it checks:
        oneDNN's verbose lines of the job: the time of its reorder primitives (copies of a tensor
        into another memory layout) against all of its time, and their count against the number of
        convolutions. It fires when reorders took 20 % of oneDNN's time with at least two per
        convolution call.

    Why it matters:
        oneDNN computes convolutions in a blocked or channels-last layout. A model kept in PyTorch's
        default NCHW layout has its activations copied into that layout before each convolution and
        back after it, on every step, forward and backward: pure memory traffic, often as long as
        the convolutions themselves on small images.

    Fix:
        Keep the model and its inputs in channels_last: model = model.to(memory_format=
        torch.channels_last) and x = x.contiguous(memory_format=torch.channels_last) (or in the data
        loader); oneDNN then reads them as they are. Run the job again and compare.
    """
    log = ev.onednn
    if log is None or not log.primitives:
        return []
    done = [p for p in log.primitives if p.stage == "exec" and p.time_ms is not None]
    total = sum(p.time_ms or 0.0 for p in done)
    reorders = [p for p in done if p.kind == "reorder"]
    convs = [p for p in done if p.kind in ("convolution", "deconvolution")]
    ms = sum(p.time_ms or 0.0 for p in reorders)
    if not convs or total <= 0 or ms / total < REORDER_SHARE or len(reorders) / len(convs) < REORDERS_PER_CONV:
        return []
    conv_ms = sum(p.time_ms or 0.0 for p in convs)
    why = (f"oneDNN ran {len(reorders):,} reorders ({len(reorders) / len(convs):.1f} per convolution call) taking "
           f"{_share(ms / total)} of its time ({ms / 1e3:,.2f} s, beside {conv_ms / 1e3:,.2f} s of convolutions"
           f"{_load(ev)}): the model's tensors are in PyTorch's NCHW layout and oneDNN copies them into its own "
           "layout and back around every convolution, on every step.")
    return [_finding("warning", f"Layout conversions took {_share(ms / total)} of oneDNN's time "
                                f"({len(reorders) / len(convs):.1f} reorders per convolution)", why,
                     "Keep the model and its inputs in channels_last, so oneDNN reads them as they are; compare "
                     "samples per second.",
                     "model = model.to(memory_format=torch.channels_last)\n"
                     "x = x.contiguous(memory_format=torch.channels_last)   # each batch, or in the data loader",
                     {"reorder_share": round(ms / total, 3), "reorders": len(reorders), "convolutions": len(convs),
                      "reorder_s": round(ms / 1e3, 3), "convolution_s": round(conv_ms / 1e3, 3)})]
