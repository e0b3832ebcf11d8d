"""The one generator of pinning snippets: taskset, numactl, OpenMP and Python variants.

Given a set of logical CPUs and the machine's Topology, say how to run a job
on exactly those CPUs, in each of the forms people paste into a shell or a
launcher script. The topology map (selection), the advisor (recommendations)
and the process inspector all call :func:`pinning_plan`, so the snippets look
the same everywhere.

Why several forms: ``taskset`` only restricts the process; ``numactl`` also
places memory (``--membind``), which matters as soon as a set spans or
excludes NUMA nodes; OpenMP's ``OMP_PLACES``/``OMP_PROC_BIND`` pin each
worker thread to one core, which keeps PyTorch's intra-op threads from
migrating across CCXs (each L3 is private to its CCX on AMD, so a migrating
thread refills its cache from memory). ``GOMP_CPU_AFFINITY`` is libgomp's
older, per-thread list (PyTorch wheels on Linux use libgomp).

Thread count: one OpenMP thread per *physical core* of the set. SMT siblings
share the core's vector units, so a second GEMM thread on the sibling only
competes with the first (PyTorch's own launcher and Intel's tuning guides do
the same).

Inherited binding variables: a ``GOMP_CPU_AFFINITY=0`` or ``OMP_PROC_BIND=true``
left in the shell overrides the CPU set a command asks for (the OpenMP
runtime binds the main thread to its first place when ``import torch`` loads
it, and DataLoader workers forked later inherit that one CPU). Every command
here therefore clears them (``env -u``, ``unset``, ``os.environ.pop``) unless
it sets them itself: the ones set in ``environ`` when the caller knows the
environment, all of them when it does not.

Pure functions returning dataclasses; no Qt, no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import shlex

from cpudoctor.advisor import winpin
from cpudoctor.kits.cpulist import format_cpulist
from cpudoctor.kits.plural import plural
from cpudoctor.model import Topology

DEFAULT_COMMAND = "python train.py"

KINDS = ("taskset", "numactl", "openmp", "gomp", "python")
# What a Windows machine gets instead: cmd's start, PowerShell, Intel OpenMP places, psutil.
WINDOWS_KINDS = ("cmd", "powershell", "openmp", "python")
MACOS_NO_PINNING = ("macOS cannot pin threads to CPUs: it has no affinity call (thread affinity tags are hints, "
                    "and Apple silicon ignores them), so the kernel decides where every thread runs. Set the thread "
                    "count instead: OMP_NUM_THREADS or torch.set_num_threads, on Apple silicon the number of "
                    "performance cores.")

# Variables that bind OpenMP threads to CPUs. Inherited from the shell they override the CPU set a
# relaunch asks for, and they pin the main thread at `import torch` (forked workers inherit it).
AFFINITY_VARS: tuple[str, ...] = ("OMP_PLACES", "OMP_PROC_BIND", "GOMP_CPU_AFFINITY", "KMP_AFFINITY")


def affinity_vars_to_clear(environ: Mapping[str, str] | None, sets: Iterable[str] = ()) -> list[str]:
    """The binding variables a command must clear: those set in ``environ`` (all when it is unknown), minus ``sets``."""
    keep = set(sets)
    return [v for v in AFFINITY_VARS if v not in keep and (environ is None or v in environ)]


def env_unset(names: Iterable[str]) -> str:
    """``env -u A -u B`` (GNU and BSD env) for a one-line command, or "" when nothing is to be cleared."""
    names = list(names)
    return " ".join(["env", *[f"-u {n}" for n in names]]) if names else ""


@dataclass(frozen=True)
class Snippet:
    """One way to pin: ``text`` is what to paste, ``note`` says when to use it."""

    kind: str              # one of KINDS (Linux) or WINDOWS_KINDS
    label: str             # tab title: "taskset", "numactl", "OpenMP", ...
    text: str
    note: str = ""
    prefix: str = ""       # the launcher alone ("numactl --cpunodebind=1 --membind=1"), no env, no command


@dataclass
class PinningPlan:
    """Everything about one CPU set: where it lies, how many threads, and the snippets."""

    cpus: list[int]
    cpulist: str                                   # "0-7,64-71"
    threads: int                                   # OMP_NUM_THREADS: physical cores in the set
    cores: list[list[int]] = field(default_factory=list)        # the set's CPUs grouped by core
    numa_nodes: list[int] = field(default_factory=list)         # nodes the set touches
    whole_numa_nodes: bool = False                 # the set is exactly the CPUs of those nodes
    l3_domains: list[int] = field(default_factory=list)         # indexes into topology.l3_domains
    snippets: list[Snippet] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def snippet(self, kind: str) -> Snippet:
        for s in self.snippets:
            if s.kind == kind:
                return s
        raise KeyError(f"no {kind!r} snippet; kinds: {', '.join(s.kind for s in self.snippets)}")


# ---------------------------------------------------------------------------
# CPU sets the GUI and advisor offer as one-click selections


def l3_cpu_sets(topo: Topology) -> list[list[int]]:
    """One CPU set per L3 domain (= per CCX on AMD), in the topology's order."""
    return [list(d.cpus) for d in topo.l3_domains]


def numa_cpu_sets(topo: Topology) -> dict[int, list[int]]:
    """NUMA node id -> its CPUs; CPU-less nodes (memory only) are left out."""
    return {n.id: list(n.cpus) for n in topo.numa_nodes if n.cpus}


def package_cpu_sets(topo: Topology) -> dict[int, list[int]]:
    """physical_package_id -> its CPUs."""
    return {p.id: list(p.cpus) for p in topo.package_list}


def cores_of(cpus: list[int] | set[int], topo: Topology) -> list[list[int]]:
    """The set's CPUs grouped by physical core (cores in first-CPU order).

    CPUs the topology does not know (no core list: psutil/cpuinfo sources)
    count as one core each.
    """
    wanted = set(cpus)
    groups: list[list[int]] = []
    known: set[int] = set()
    for core in topo.core_list:
        members = [c for c in core.cpus if c in wanted]
        known.update(core.cpus)
        if members:
            groups.append(members)
    groups.extend([c] for c in sorted(wanted - known))
    groups.sort(key=lambda g: g[0])
    return groups


def one_thread_per_core(cpus: list[int] | set[int], topo: Topology) -> list[int]:
    """The first hardware thread of each core in the set: no two CPUs share a core."""
    return [g[0] for g in cores_of(cpus, topo)]


# ---------------------------------------------------------------------------
# Snippets


def _omp_places(groups: list[list[int]]) -> str:
    """OpenMP place list, compressed with the ``{a,b}:count:stride`` interval form.

    Consecutive places that are the previous place shifted by the same stride
    collapse into one interval, so 64 cores of a CCD-ordered EPYC become
    ``{0,64}:32:1,...`` rather than a 64-item list.
    """
    out: list[str] = []
    i = 0
    while i < len(groups):
        base = groups[i]
        j = i + 1
        stride = None
        while j < len(groups) and len(groups[j]) == len(base):
            delta = groups[j][0] - groups[j - 1][0]
            if delta <= 0 or any(b - a != delta for a, b in zip(groups[j - 1], groups[j])):
                break
            if stride is None:
                stride = delta
            elif delta != stride:
                break
            j += 1
        place = "{" + ",".join(map(str, base)) + "}"
        count = j - i
        if count >= 3:
            out.append(f"{place}:{count}:{stride}" if stride != 1 else f"{place}:{count}")
            i = j
        else:
            out.append(place)
            i += 1
    return ",".join(out)


def _nodes_of(cpus: set[int], topo: Topology) -> tuple[list[int], bool]:
    touched = [n.id for n in topo.numa_nodes if cpus & set(n.cpus)]
    node_cpus = {c for n in topo.numa_nodes if n.id in touched for c in n.cpus}
    whole = bool(touched) and node_cpus == cpus
    return touched, whole


def pinning_plan(cpus: list[int] | set[int], topo: Topology, command: str = DEFAULT_COMMAND, *,
                 environ: Mapping[str, str] | None = None, posix: bool = False) -> PinningPlan:
    """Pinning snippets for running ``command`` on exactly ``cpus``.

    ``environ`` is the environment the command will inherit (the report's
    thread variables, the inspected process's): binding variables set there
    are cleared by every snippet that does not set them itself; None (not
    known) clears all of them. An empty set gives a plan with no snippets and
    a warning, never an error: the GUI calls this on every selection change.

    The snippets are for the topology's OS: Windows gets cmd, PowerShell, OpenMP and
    psutil forms (:data:`WINDOWS_KINDS`), a Mac none (it cannot pin: a warning says so).
    ``posix=True`` asks for the Linux forms whatever the OS: the advisor writes its
    snippets in bash and translates them for the report's OS afterwards.
    """
    wanted = sorted(set(cpus))
    plan = PinningPlan(cpus=wanted, cpulist=format_cpulist(wanted), threads=0)
    if topo.source == "sysctl" and not posix:     # a Mac (live or captured): nothing can pin
        plan.cores = cores_of(wanted, topo)
        plan.threads = len(plan.cores)
        plan.warnings.append(MACOS_NO_PINNING)
        return plan
    if not wanted:
        plan.warnings.append("no CPUs selected: click a core, an L3 domain or a NUMA node")
        return plan
    wanted_set = set(wanted)
    plan.cores = cores_of(wanted, topo)
    plan.threads = len(plan.cores)
    plan.numa_nodes, plan.whole_numa_nodes = _nodes_of(wanted_set, topo)
    plan.l3_domains = [i for i, d in enumerate(topo.l3_domains) if wanted_set & set(d.cpus)]
    _add_warnings(plan, wanted_set, topo)
    if winpin.is_windows(topo) and not posix:
        plan.snippets = _windows_snippets(plan, topo, command, environ)
    else:
        _linux_snippets(plan, wanted, topo, command, environ)
    return plan


def _linux_snippets(plan: PinningPlan, wanted: list[int], topo: Topology, command: str,
                    environ: Mapping[str, str] | None) -> None:
    """taskset, numactl, OpenMP places, GOMP_CPU_AFFINITY and sched_setaffinity forms (Linux)."""
    cl = plan.cpulist
    n = plan.threads
    firsts = [g[0] for g in plan.cores]
    nodes = format_cpulist(plan.numa_nodes)
    smt_note = (f" ({len(wanted)} hardware threads on {n} cores: one thread per core, "
                "SMT siblings left for the OS)" if len(wanted) > n else "")

    clear = env_unset(affinity_vars_to_clear(environ))
    env_part = f"{clear} OMP_NUM_THREADS={n}" if clear else f"OMP_NUM_THREADS={n}"
    cleared_note = (" The inherited OpenMP binding variables are cleared: they would override the CPU set."
                    if clear else "")

    taskset = f"taskset -c {cl}"
    plan.snippets.append(Snippet(
        "taskset", "taskset",
        f"{env_part} {taskset} {command}",
        "Restricts the process (and all its threads) to these CPUs. Memory is not placed."
        + smt_note + cleared_note, taskset))

    if not topo.numa_nodes:
        numactl = f"numactl --physcpubind={cl}"
        note = "NUMA layout unknown: only the CPUs are bound."
    elif plan.whole_numa_nodes:
        numactl = f"numactl --cpunodebind={nodes} --membind={nodes}"
        note = (f"The set is exactly {'NUMA nodes' if len(plan.numa_nodes) > 1 else 'NUMA node'} {nodes}: "
                "bind both the CPUs and the memory to it.")
    elif len(plan.numa_nodes) == 1:
        numactl = f"numactl --physcpubind={cl} --membind={nodes}"
        note = f"All CPUs are on NUMA node {nodes}: allocate memory there too."
    else:
        numactl = f"numactl --physcpubind={cl} --localalloc"
        note = ("The set spans NUMA nodes " + (nodes or "?") + " partly: each thread allocates "
                "on its own node (--localalloc).")
    plan.snippets.append(Snippet("numactl", "numactl", f"{env_part} {numactl} {command}", note + cleared_note, numactl))

    # Binding makes the runtime pin the main thread to the first place at `import torch`: processes it
    # forks later (DataLoader workers) start on that one CPU unless they widen their own affinity.
    inherit_note = (" The main thread is bound to the first place as soon as torch loads the runtime, and "
                    "DataLoader workers forked later inherit that one CPU: give them the set back in "
                    f"worker_init_fn with os.sched_setaffinity(0, {_py_cpus(wanted)}).")
    places = _omp_places(plan.cores)
    omp_unset = affinity_vars_to_clear(environ, sets=("OMP_PLACES", "OMP_PROC_BIND"))
    plan.snippets.append(Snippet(
        "openmp", "OpenMP",
        "\n".join(([f"unset {' '.join(omp_unset)}"] if omp_unset else []) + [
            f"export OMP_NUM_THREADS={n}",
            f'export OMP_PLACES="{places}"',
            "export OMP_PROC_BIND=close",
            f"{command}",
        ]),
        "One place per physical core; OMP_PROC_BIND=close keeps thread i on place i. "
        "Works for libgomp (PyTorch) and Intel OpenMP." + inherit_note))

    gomp_clear = env_unset(affinity_vars_to_clear(environ, sets=("GOMP_CPU_AFFINITY",)))
    plan.snippets.append(Snippet(
        "gomp", "GOMP",
        (f"{gomp_clear} " if gomp_clear else "")
        + f'OMP_NUM_THREADS={n} GOMP_CPU_AFFINITY="{format_cpulist(firsts).replace(",", " ")}" {command}',
        "libgomp only (PyTorch Linux wheels): thread i runs on the i-th CPU listed, "
        "the first hardware thread of each core." + inherit_note))

    py_clear = affinity_vars_to_clear(environ)
    plan.snippets.append(Snippet(
        "python", "Python",
        "\n".join(["import os"] + ([
            f"for name in ({', '.join(repr(v) for v in py_clear)}{',' if len(py_clear) == 1 else ''}):",
            "    os.environ.pop(name, None)  # inherited binding would pin the main thread at import torch",
        ] if py_clear else []) + [
            f"os.sched_setaffinity(0, {_py_cpus(wanted)})",
            "import torch  # after setting affinity, before any parallel work",
            f"torch.set_num_threads({n})",
        ]),
        "Inside the script, before torch starts its thread pool (Linux only)."))


def _windows_snippets(plan: PinningPlan, topo: Topology, command: str,
                      environ: Mapping[str, str] | None) -> list[Snippet]:
    """cmd's ``start /node /affinity``, PowerShell, Intel OpenMP places and psutil, for a Windows machine."""
    n = plan.threads
    try:
        words = shlex.split(command, posix=False) or ["python"]
    except ValueError:
        words = command.split() or ["python"]
    clear = affinity_vars_to_clear(environ)
    pin = winpin.windows_pin(plan.cpus, topo)
    groups_note = " ".join(pin.notes)
    switches = pin.start_switches()
    where = (f"start {switches} runs the process on these CPUs" + (
        f" (NUMA node {pin.node}'s processor group; the mask counts from the node's first CPU)"
        if pin.node is not None and pin.mask is not None else "") + "." if switches else
        "Nothing to pin: the set is every CPU the process gets anyway.")
    cleared = (" The inherited OpenMP binding variables are cleared: they would override the CPU set."
               if clear else "")
    cmd_lines = [f"set {v}=" for v in clear] + [f"set OMP_NUM_THREADS={n}", winpin.cmd_launch(words, pin)
                                                if switches else winpin.command_line(words)]
    ps_lines = ([f"Remove-Item Env:{v} -ErrorAction SilentlyContinue" for v in clear]
                + [f"$env:OMP_NUM_THREADS = '{n}'"] + winpin.powershell_launch(words, pin))
    out = [
        Snippet("cmd", "cmd.exe", "\n".join(cmd_lines),
                " ".join(x.strip() for x in (where, groups_note, cleared) if x), f"start {switches}".strip()),
        Snippet("powershell", "PowerShell", "\n".join(ps_lines),
                ("Start-Process, then ProcessorAffinity: the mask of the process's own processor group."
                 if pin.absolute_mask is not None and pin.node is None else
                 "Start-Process cannot choose a NUMA node or processor group, so this goes through cmd's start.")
                + (" " + groups_note if groups_note else "") + cleared),
    ]
    # Intel OpenMP numbers a processor 64 x group + bit (hwloc does too): the same as the report's numbers
    # unless a group holds fewer than 64.
    intel = {c: 64 * g.id + (c - g.first_cpu) for g in topo.processor_groups for c in g.cpus}
    places = _omp_places([[intel.get(c, c) for c in core] for core in plan.cores])
    omp_clear = affinity_vars_to_clear(environ, sets=("OMP_PLACES", "OMP_PROC_BIND"))
    out.append(Snippet(
        "openmp", "OpenMP",
        "\n".join([f"Remove-Item Env:{v} -ErrorAction SilentlyContinue" for v in omp_clear] + [
            f"$env:OMP_NUM_THREADS = '{n}'",
            f"$env:OMP_PLACES = '{places}'",
            "$env:OMP_PROC_BIND = 'close'",
            f"& {winpin.command_line(words)}"]),
        "One place per physical core; OMP_PROC_BIND=close keeps thread i on place i. PyTorch's Windows wheels use "
        "Intel OpenMP (libiomp5md.dll), which binds within the process's processor group."))
    bits = winpin.python_affinity(pin)
    if bits is not None:
        out.append(Snippet(
            "python", "Python",
            "\n".join(["import psutil", bits + "  # bits of this process's processor group",
                        "import torch  # after setting affinity, before any parallel work",
                        f"torch.set_num_threads({n})"]),
            "Inside the script, before torch starts its thread pool. psutil sets the mask of the process's own "
            "processor group (Windows has no call that spans groups)."))
    return out


def _py_cpus(cpus: list[int]) -> str:
    """A Python set literal of ``cpus``, as unions of ranges when long."""
    return "{" + ", ".join(map(str, cpus)) + "}" if len(cpus) <= 16 else _py_set(cpus)


def launch_prefix(topo: Topology, cpus: list[int] | set[int], numa_node: int | None = None) -> str:
    """Only the launcher part (``numactl ...`` or ``taskset -c ...``) for ``cpus``.

    For callers that build their own environment and command line (the
    process inspector). With ``numa_node`` the memory is bound to that node
    (numactl); without, only the CPUs are restricted (taskset), and the
    caller's threads allocate on first touch, which stays local when they
    are pinned inside one node.
    """
    if numa_node is not None:
        node = next((nd for nd in topo.numa_nodes if nd.id == numa_node), None)
        if node is not None and (not cpus or set(cpus) == set(node.cpus)):
            return f"numactl --cpunodebind={numa_node} --membind={numa_node}"
        return f"numactl --physcpubind={format_cpulist(cpus)} --membind={numa_node}"
    plan = pinning_plan(cpus, topo, posix=True)
    if not plan.snippets:
        raise ValueError("no CPUs to pin to")
    return plan.snippet("taskset").prefix


def _py_set(cpus: list[int]) -> str:
    """A compact Python expression for a CPU set: unions of ranges."""
    parts = []
    for chunk in format_cpulist(cpus).split(","):
        if "-" in chunk:
            lo, hi = chunk.split("-")
            parts.append(f"*range({lo}, {int(hi) + 1})")
        else:
            parts.append(chunk)
    return "{" + ", ".join(parts) + "}"


def _add_warnings(plan: PinningPlan, wanted: set[int], topo: Topology) -> None:
    if topo.online_cpus:
        missing = wanted - set(topo.online_cpus)
        if missing:
            plan.warnings.append(f"CPUs {format_cpulist(missing)} are not online on this machine")
    allowed = topo.affinity.allowed_cpus
    # On Windows the allowed set is the group CPU Doctor's process ran in; `start /node` reaches the others.
    if allowed is not None and not (winpin.is_windows(topo) and len(topo.processor_groups) > 1):
        blocked = wanted - set(allowed) - (wanted - set(topo.online_cpus) if topo.online_cpus else set())
        if blocked:
            plan.warnings.append(
                f"CPUs {format_cpulist(blocked)} are outside this process's allowed set "
                f"({format_cpulist(allowed)}): pinning to them will fail or silently drop them")
    quota = topo.affinity.usable_cpus
    if quota is not None and topo.affinity.cpu_quota is not None and plan.threads > quota:
        plan.warnings.append(
            f"{plan.threads} threads but the cgroup CPU quota allows {plural(topo.affinity.cpu_quota, 'CPU')}: "
            f"use at most {plural(quota, 'thread')}")
    if len(plan.l3_domains) > 1:
        plan.warnings.append(
            f"the set spans {len(plan.l3_domains)} L3 domains (CCXs on AMD): threads sharing data "
            "talk across the fabric, and each domain warms its own cache")
    if len(plan.numa_nodes) > 1 and not plan.whole_numa_nodes:
        plan.warnings.append(f"the set covers NUMA nodes {format_cpulist(plan.numa_nodes)} only in part")
