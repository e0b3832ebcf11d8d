"""Thread placement across CCXs (L3 domains) and NUMA nodes."""

from __future__ import annotations

from cpudoctor.advisor import machine, measured, snippets
from cpudoctor.advisor.engine import Facts, rule
from cpudoctor.kits.cpulist import format_cpulist
from cpudoctor.kits.format import cache_size
from cpudoctor.model import Finding, Report


def _pinned_by(f: Facts) -> str | None:
    for name in machine.PINNING_VARS:
        value = machine.env(f, name)
        if value:
            return f"{name}={value}"
    return None


def _spanned(groups: list[list[int]], usable: list[int] | None) -> int:
    if not usable:
        return len(groups)
    u = set(usable)
    return sum(1 for g in groups if u.intersection(g))


@rule("TOPO001", "numa-unpinned", category="topology", severity="warning",
      title="Threads may spread over several NUMA nodes without pinning")
def numa_unpinned(report: Report) -> list[Finding]:
    """What it checks:
        Machines with more than one NUMA node (multi-socket, EPYC in NPS2/NPS4, Xeon SNC) where the
        process may run on CPUs of several nodes and no OpenMP binding (``OMP_PLACES``,
        ``OMP_PROC_BIND``, ``GOMP_CPU_AFFINITY``, ``KMP_AFFINITY``) is set.

    Why it matters:
        Memory is allocated on the node of the thread that first touches it. Unbound threads
        migrate between nodes and then read their tensors over the inter-socket or inter-die link,
        at roughly 1.5-2x the latency and a fraction of local bandwidth (see the node distances).
        One job per NUMA node, bound with ``numactl``, usually trains faster than one job over all.

    Fix:
        Bind the job to one node (``numactl --cpunodebind=N --membind=N``), or run one process per
        node (DistributedDataParallel with the gloo backend), with ``OMP_PLACES=cores
        OMP_PROC_BIND=close``.
    """
    f = Facts(report)
    nodes = [n for n in (f.get("topology.numa_nodes", record=False) or []) if n.cpus]
    machine.numa_count(f)
    usable = machine.usable_cpu_list(f)
    orphans = _nodeless(f, nodes, usable)
    if orphans:
        return orphans
    if len(nodes) < 2:
        return [f.finding("ok", "One NUMA node: no cross-node memory traffic")] if nodes else []
    spanned = _spanned([n.cpus for n in nodes], usable)
    pinned = _pinned_by(f)
    if spanned < 2:
        return [f.finding("ok", f"The process is confined to one of the {len(nodes)} NUMA nodes")]
    if pinned:
        return [f.finding("ok", f"Threads are bound ({pinned}) across {spanned} NUMA nodes")]
    dist = nodes[0].distances
    far = max(dist) if dist else None
    near = min(dist) if dist else None
    ratio = f" Remote memory here is {far / near:.1f}x the local distance ({near} vs {far})." if far and near else ""
    if not machine.env_known(f):
        return [f.finding(
            "info", f"{spanned} NUMA nodes: bind each job to one",
            why=(f"The CPUs span {spanned} NUMA nodes. This report has no environment (a captured tree), so whether "
                 f"the job binds its threads is unknown; unbound threads read memory on other nodes.{ratio}"),
            fix="Run one job per NUMA node, bound with numactl (CPUs and memory).",
            snippet=snippets.pinned_launches(report))]
    return [f.finding(
        "warning", f"Threads can spread over {spanned} NUMA nodes unpinned",
        why=(f"The process may run on {len(usable or [])} CPUs over {spanned} NUMA nodes and no OpenMP binding is set, "
             f"so threads migrate and read memory allocated on other nodes.{ratio}"),
        fix="Run one job per NUMA node, bound with numactl (CPUs and memory).",
        snippet=snippets.pinned_launches(report))]


def _nodeless(f: Facts, nodes, usable: list[int] | None) -> list[Finding]:
    """CPUs whose NUMA node is offline (or memory-less and not listed): every access of theirs is remote."""
    if not nodes or not usable:
        return []
    homed = {c for n in nodes for c in n.cpus}
    orphans = sorted(set(usable) - homed)
    if not orphans:
        return []
    f.record("topology.numa_nodes", [f"node {n.id}: {format_cpulist(n.cpus)}" for n in nodes])
    local = [n for n in nodes if set(n.cpus) & set(usable)]
    targets = [snippets.PinTarget("numa", n.id, sorted(set(n.cpus) & set(usable)),
                                  f"NUMA node {n.id} (CPUs {format_cpulist(sorted(set(n.cpus) & set(usable)))})")
               for n in local]
    snippet = snippets.launch_lines(f.report, targets)
    where = ", ".join(str(n.id) for n in local)
    return [f.finding(
        "warning", f"{len(orphans)} of {len(usable)} CPUs have no local memory (their NUMA node is offline)",
        why=(f"CPUs {format_cpulist(orphans)} belong to no online NUMA node, so every memory access they make goes to "
             f"node {where} over the inter-socket link, while CPUs {format_cpulist(sorted(homed & set(usable)))} "
             "read it locally. Threads on the first set run slower and hold back every OpenMP barrier."),
        fix=(f"Run training on the CPUs of node {where} with its memory (numactl), and check the BIOS/firmware "
             "settings that took the other node's memory offline."),
        snippet=snippet)]


@rule("TOPO002", "ccx-unpinned", category="topology", severity="info",
      title="Threads spread over several L3 caches (CCXs) without pinning")
def ccx_unpinned(report: Report) -> list[Finding]:
    """What it checks:
        CPUs with more than one L3 cache domain (AMD CCXs: two per CCD on Zen2, one per CCD on
        Zen3 and later) where the process may run on several and no OpenMP binding is set, and no
        thread sweep recommendation chose a CPU set.

    Why it matters:
        Each CCX has its own L3; data shared between threads on different CCXs travels through the
        Infinity Fabric at several times the L3 latency, and unbound threads migrate and lose their
        warm cache. Small models whose working set fits one L3 often train faster on one CCX than
        spread over all of them — the thread sweep measures it.

    Fix:
        Bind threads (``OMP_PLACES=cores OMP_PROC_BIND=close``) and, for small jobs, pin to one CCX
        with ``taskset``; or run the thread sweep and use its pinning.
    """
    f = Facts(report)
    doms = f.get("topology.l3_domains", record=False) or []
    n = machine.l3_count(f)
    if n < 2:
        return [f.finding("ok", "One L3 cache: every core shares it")] if n == 1 else []
    usable = machine.usable_cpu_list(f)
    spanned = _spanned([d.cpus for d in doms], usable)
    if spanned < 2:
        return [f.finding("ok", f"The process is confined to one of the {n} L3 domains")]
    pinned = _pinned_by(f)
    rec = measured.sweep_choice(report, f)
    if pinned:
        return [f.finding("ok", f"Threads are bound ({pinned}) across {spanned} L3 domains")]
    if rec is not None and rec.cpus:
        return [f.finding("ok", f"The thread sweep recommends pinning to CPUs {format_cpulist(rec.cpus)}")]
    sizes = sorted({d.size_bytes for d in doms if d.size_bytes})
    if len(sizes) == 1:
        size = f" of {cache_size(sizes[0])} each"
    elif sizes:
        size = f" ({' and '.join(cache_size(s) for s in sizes)})"
    else:
        size = ""
    counts = sorted({len(d.cpus) for d in doms})
    per = " or ".join(str(c) for c in counts)
    zen = f.get("cpu.vendor") in ("AMD", "Hygon") and (f.get("cpu.microarchitecture") or "").startswith("zen")
    # CCX and Infinity Fabric are Zen terms; K8/K10/Bulldozer Opterons link their dies by HyperTransport.
    domain = "L3 domains (CCXs)" if zen else "L3 domains"
    if zen:
        link = "the Infinity Fabric"
    elif f.get("cpu.vendor") == "AMD":
        link = "HyperTransport"
    else:
        link = {"Intel": "the ring/mesh and the socket link (QPI/UPI)"}.get(f.get("cpu.vendor") or "", "the chip's interconnect")
    return [f.finding(
        "info", f"Threads can spread over {spanned} {domain} unpinned",
        why=(f"This CPU has {n} L3 caches{size}, {per} CPUs per L3. Unbound threads migrate between them and share "
             f"data over {link} instead of a common L3; small models often train faster on one L3 domain."),
        fix="Bind threads to cores, and try one L3 domain per job (the thread sweep measures which is faster).",
        snippet=snippets.pinned_launches(report))]


@rule("TOPO003", "hybrid-cores-unpinned", category="topology", severity="info",
      title="Hybrid CPU: compute threads may land on the efficiency cores")
def hybrid_cores_unpinned(report: Report) -> list[Finding]:
    """What it checks:
        Hybrid chips (Intel P/E cores since Alder Lake and Lakefield, Arm big.LITTLE such as the
        GB10's Cortex-X925/A725), told apart by per-CPU ``cpu_capacity`` or
        ``acpi_cppc/highest_perf`` in sysfs, where the process may run on both kinds and no
        OpenMP binding is set.

    Why it matters:
        OpenMP and oneDNN split each operator into equal chunks, one per thread. A thread on an
        efficiency core finishes its chunk later, and every other thread waits for it at the
        barrier, so the whole step runs at the pace of the slowest core. Pinning the compute
        threads to the performance cores is often faster than using every core; the thread sweep
        measures both.

    Fix:
        Run the training job on the performance cores only (``taskset``, one thread per physical
        P-core), and leave the efficiency cores to DataLoader workers and the desktop.
    """
    f = Facts(report)
    split = machine.hybrid_split(f)
    if split is None:
        return []
    if split.kinds_used < 2:
        return [f.finding("ok", "The process may run on one core kind only")]
    pinned = _pinned_by(f)
    if pinned:
        return [f.finding("ok", f"Threads are bound ({pinned}) on a hybrid CPU")]
    rec = measured.sweep_choice(report, f)
    if rec is not None and rec.cpus:
        return [f.finding("ok", f"The thread sweep recommends pinning to CPUs {format_cpulist(rec.cpus)}")]
    if rec is not None and rec.threads:
        # The sweep ran the performance cores alone too (lab/sweep.py) and measured something else as faster.
        what = f" ({rec.variant})" if rec.variant else ""
        return [f.finding("ok", f"The thread sweep measured {rec.threads} threads{what} as fastest here, "
                                "performance cores alone included")]
    if machine.performance_cores(f) is None:   # Lakefield: one Sunny Cove core next to four Tremonts
        return [f.finding("ok", f"Hybrid CPU with {split.fast_cores} performance core: pinning to it would leave "
                                "most of the compute idle")]
    pcpus, slow = split.fast_cpus, split.slow_cpus
    if snippets.report_os(report) == "macos":
        return [_hybrid_on_macos(f, split)]
    target = snippets.PinTarget("cpus", 0, pcpus, f"performance cores (CPUs {format_cpulist(pcpus)})")
    return [f.finding(
        "info", f"Hybrid CPU: pin training to the performance cores (CPUs {format_cpulist(pcpus)})",
        why=(f"This CPU mixes core kinds: CPUs {format_cpulist(pcpus)} are performance cores and CPUs "
             f"{format_cpulist(slow)} are slower efficiency cores ({split.source}: {split.fast_perf} vs "
             f"{split.slow_perf}). OpenMP gives every thread an equal share of each operator, so threads on "
             "efficiency cores make the others wait at every barrier."),
        fix=(f"Run the job on the {split.fast_cores} performance cores, one thread per physical core, and compare "
             "with all cores (cpudoctor bench sweep). CPU Doctor's thread settings and launch script already do this."),
        snippet=f"# {target.label}\n{snippets.pinned_command(report, target)}")]


def _hybrid_on_macos(f: Facts, split) -> Finding:
    """A Mac cannot pin: one thread per performance core is what can be set (and macOS then favours them)."""
    return f.finding(
        "info", f"Hybrid CPU: use {split.fast_cores} threads, one per performance core (macOS cannot pin)",
        why=(f"This CPU has {split.fast_cores} performance cores and {split.slow_cores} efficiency cores "
             f"({split.source}: {split.fast_perf} vs {split.slow_perf}). OpenMP gives every thread an equal share of "
             "each operator, so a thread the scheduler puts on an efficiency core makes the others wait at every "
             "barrier. macOS has no CPU affinity, but with no more threads than performance cores it keeps busy "
             "threads on them."),
        fix=(f"Set the thread count to {split.fast_cores} and compare with all cores (cpudoctor bench sweep)."),
        snippet=f"OMP_NUM_THREADS={split.fast_cores} python train.py")
