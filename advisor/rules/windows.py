"""What only a Windows machine has: processor groups and power plans."""

from __future__ import annotations

import re

from cpudoctor.advisor.engine import Facts, rule
from cpudoctor.kits.cpulist import format_cpulist
from cpudoctor.kits.plural import plural
from cpudoctor.model import Finding, Report

# Windows 11 starts at build 22000, Server 2022 at 20348: from there a process's threads span all groups.
SPANNING_BUILD = 20348
POWER_SAVER = "a1841308-3541-4fab-bc81-f71556f20b4a"
BALANCED = "381b4222-f694-41f0-9685-ff5bb260df2e"
HIGH_PERFORMANCE = "8c5e7fda-e8bf-4a96-9a85-a6e23a8c635c"


def _build(version: str | None) -> int | None:
    m = re.fullmatch(r"\d{1,3}\.\d{1,3}\.(\d{1,6})(?:\.\d+)?", (version or "").strip())
    return int(m.group(1)) if m else None


def _cores(topo, cpus: set[int]) -> int:
    return sum(1 for core in topo.core_list if set(core.cpus) & cpus) or len(cpus)


@rule("TOPO004", "processor-groups", category="topology", severity="warning",
      title="Windows splits the CPUs into processor groups: one process may get only one group")
def processor_groups(report: Report) -> list[Finding]:
    """What it checks:
        Windows machines with more than 64 logical CPUs (Threadripper 3990X and 7980X, big EPYCs
        and Xeons), which Windows splits into processor groups of at most 64, and the Windows
        build: before Windows 11 and Server 2022 (build 20348) a process runs in one group.

    Why it matters:
        One Windows affinity mask names 64 CPUs at most. Before Windows 11 / Server 2022 every
        thread of a process stays in the group the process started in unless the program moves
        them itself, and PyTorch's OpenMP threads do not: a training process on a 128-thread
        Threadripper uses 64 of them, half the cores, and Task Manager shows the other half idle.
        Windows 11 and Server 2022 let a process's threads span all groups by default.

    Fix:
        Run one training process per processor group (torch.distributed with the gloo backend, one
        rank per group), each started on a NUMA node of its group with ``start /node N``, and set
        each one's threads to its group's cores; or move to Windows 11 / Server 2022.
    """
    f = Facts(report)
    groups = [g for g in (f.get("topology.processor_groups", record=False) or []) if g.cpus]
    if len(groups) < 2:
        return []
    f.record("topology.processor_groups", [f"group {g.id}: {format_cpulist(g.cpus)}" for g in groups])
    topo = report.topology
    total = len(topo.online_cpus) or sum(len(g.cpus) for g in groups)
    version = f.get("software.os.kernel")
    build = _build(version)
    sizes = " and ".join(f"{len(g.cpus)} (CPUs {format_cpulist(g.cpus)})" for g in groups)
    biggest = max(groups, key=lambda g: len(g.cpus))
    per_group = len(biggest.cpus)
    per_cores = _cores(topo, set(biggest.cpus))
    allowed = set(f.get("topology.affinity.allowed_cpus") or [])
    snippet = _one_process_per_group(report, groups)
    split = (f"Windows splits this machine's {total} logical CPUs into {len(groups)} processor groups of {sizes}: "
             "one affinity mask names 64 CPUs at most.")
    if build is not None and build >= SPANNING_BUILD:
        return [f.finding(
            "info", f"{total} CPUs in {len(groups)} processor groups: "
                    f"{f.get('software.os.distro') or 'this Windows'} lets one process use all",
            why=(f"{split} On this Windows (build {build}) a process's threads may run in every group, so PyTorch can "
                 f"use all {total}. A program that sets its own affinity still gets one group ({per_group} CPUs); "
                 "if Task Manager shows only part of the CPUs busy during training, run one process per group."),
            fix=("Nothing to do unless training leaves CPUs idle; then run one process per processor group, each on "
                 "its own NUMA node."),
            snippet=snippet, snippet_lang="powershell")]
    known = "" if build is not None else " The Windows build is unknown, so this may not apply (Windows 11 and Server 2022 differ)."
    got = len(allowed) if allowed and len(allowed) < total else per_group
    return [f.finding(
        "warning", f"PyTorch uses {got} of the {total} CPUs: Windows runs a process in one of {len(groups)} processor groups",
        why=(f"{split} Before Windows 11 and Server 2022 a process runs in one group unless it moves its threads "
             f"itself, and PyTorch's OpenMP threads do not: one training process gets {plural(got, 'CPU')} "
             f"({plural(_cores(topo, allowed) if allowed and len(allowed) < total else per_cores, 'core')}) and the "
             "rest of "
             f"the machine stays idle.{known}"),
        fix=(f"Run one training process per processor group (torch.distributed, gloo backend), each started on a NUMA "
             f"node of its group and set to {per_cores} threads; or upgrade to Windows 11 / Server 2022, where a "
             "process's threads span all groups."),
        snippet=snippet, snippet_lang="powershell")]


def _one_process_per_group(report: Report, groups) -> str:
    """PowerShell that starts one rank per processor group on a NUMA node of that group (not waiting)."""
    topo = report.topology
    lines = ["# One training process per processor group (torch.distributed, gloo backend), each on a NUMA node "
             "of its group",
             "$env:MASTER_ADDR = '127.0.0.1'", "$env:MASTER_PORT = '29500'", f"$env:WORLD_SIZE = '{len(groups)}'"]
    for rank, g in enumerate(groups):
        members = set(g.cpus)
        node = next((n for n in topo.numa_nodes if n.cpus and set(n.cpus) <= members), None) or next(
            (n for n in topo.numa_nodes if set(n.cpus) & members), None)
        where = f"/node {node.id} " if node is not None else ""
        lines += [f"$env:RANK = '{rank}'", f"$env:OMP_NUM_THREADS = '{_cores(topo, members)}'",
                  f"cmd /c 'start \"rank {rank}\" {where}python train.py'"]
    return "\n".join(lines)


@rule("OS002", "power-plan", category="os", severity="warning",
      title="Windows power plan holds the cores back")
def power_plan(report: Report) -> list[Finding]:
    """What it checks:
        The active Windows power plan (``powercfg /getactivescheme``), Windows' counterpart of the
        Linux cpufreq governor.

    Why it matters:
        The Power saver plan caps the processor state and keeps cores at low clocks, so training
        steps take longer; Balanced lets cores boost under load (AMD's chipset driver installs its
        own Ryzen Balanced plan for this), High performance and Ultimate Performance keep them
        ready between steps.

    Fix:
        Switch to Balanced or High performance for training (``powercfg /setactive``, or Settings >
        System > Power), and plug a laptop in: on battery Windows may lower the power mode again.
    """
    f = Facts(report)
    if f.get("software.os.system") != "Windows":
        return []
    name, guid = f.get("software.os.power_plan"), f.get("software.os.power_plan_guid")
    if not name and not guid:
        return []
    if guid == POWER_SAVER:
        return [f.finding(
            "warning", "Power plan is Power saver: cores run at low clocks",
            why=("The Power saver plan limits the processor's performance state, so every core runs well below its "
                 "boost clock and training steps take longer, on battery and on mains alike."),
            fix="Switch to Balanced (or High performance) while training.",
            snippet=f"powercfg /setactive {BALANCED}    # Balanced\n"
                    f"# or: powercfg /setactive {HIGH_PERFORMANCE}    # High performance",
            snippet_lang="powershell")]
    return [f.finding("ok", f"Power plan: {name or guid}")]
