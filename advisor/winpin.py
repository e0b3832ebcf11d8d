"""Pinning on Windows: ``start /node N /affinity HEX``, ``ProcessorAffinity`` and processor groups.

Windows names a processor by (group, bit): one affinity mask covers one
processor group of at most 64 logical processors, and a process lives in one
group unless it asks for more (before Windows 11 / Server 2022). The report
numbers processors globally, group after group (see
:mod:`cpudoctor.probes.platforms._windows_lpi`), so a CPU set from the map or
the advisor becomes:

* on a machine with one group: ``start /affinity HEX`` (cmd) or
  ``Start-Process`` then ``$p.ProcessorAffinity = 0xHEX`` (PowerShell);
* on a machine with several groups: ``start /node N /affinity HEX``, the only
  launch that chooses the group: the NUMA node's group, with the mask read
  relative to the node's first processor (``start /?``: "as if the NUMA node's
  processor mask is right shifted to begin at bit zero"). A set that spans
  groups cannot be one process's affinity: it says so and pins to the node
  of the set's first CPU.

Pure functions of a CPU set and a Topology; no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from cpudoctor.model import Topology
from cpudoctor.kits.cpulist import format_cpulist

GROUP_SIZE = 64


@dataclass
class WindowsPin:
    """How to start a process on a CPU set: ``start`` switches and what they cannot express."""

    node: int | None = None            # start /node N (also the preferred node for memory)
    mask: int | None = None            # start /affinity HEX: relative to the node when ``node`` is set
    absolute_mask: int | None = None   # the mask in group 0 (ProcessorAffinity), one-group machines only
    cpus: list[int] = field(default_factory=list)      # the CPUs the launch really gets
    notes: list[str] = field(default_factory=list)

    def start_switches(self) -> str:
        parts = []
        if self.node is not None:
            parts.append(f"/node {self.node}")
        if self.mask is not None:
            parts.append(f"/affinity {self.mask:X}")
        return " ".join(parts)


def is_windows(topo: Topology | None) -> bool:
    return topo is not None and topo.source == "windows"


def _groups(topo: Topology | None, wanted: list[int]) -> list[tuple[int, list[int]]]:
    """(first CPU, CPUs) of each processor group: the report's, else 64 numbers per group."""
    if topo is not None and topo.processor_groups:
        return [(g.first_cpu, list(g.cpus)) for g in topo.processor_groups]
    cpus = sorted(set(topo.online_cpus if topo is not None else []) | set(wanted))
    top = max(cpus, default=0)
    return [(g * GROUP_SIZE, [c for c in cpus if g * GROUP_SIZE <= c < (g + 1) * GROUP_SIZE])
            for g in range(top // GROUP_SIZE + 1)]


def _mask(cpus: list[int], first: int) -> int:
    mask = 0
    for c in cpus:
        mask |= 1 << (c - first)
    return mask


def windows_pin(cpus: list[int] | set[int] | None, topo: Topology | None, *, node: int | None = None) -> WindowsPin:
    """``start`` switches that run a process on ``cpus`` (and/or on NUMA node ``node``)."""
    wanted = sorted(set(cpus or []))
    groups = _groups(topo, wanted)
    multi = len(groups) > 1
    pin = WindowsPin(node=node, cpus=list(wanted))
    nodes = {n.id: sorted(n.cpus) for n in (topo.numa_nodes if topo is not None else []) if n.cpus}
    if not wanted:
        if node is not None and node in nodes:
            pin.cpus = nodes[node]
        return pin
    in_groups = [i for i, (_first, members) in enumerate(groups) if set(wanted) & set(members)] or [0]
    if len(in_groups) > 1:
        pin.notes.append(
            f"CPUs {format_cpulist(wanted)} lie in {len(in_groups)} processor groups, and one Windows affinity "
            "covers one group: run one process per group (each pinned to its own CPUs)")
    group = in_groups[0]
    wanted = [c for c in wanted if c in set(groups[group][1])] or wanted
    first = groups[group][0]
    if not multi and node is None:
        pin.mask = pin.absolute_mask = _mask(wanted, first)
        pin.cpus = wanted
        return pin
    # Several groups (or a node asked for): the node chooses the group, the mask is relative to its first CPU.
    if node is None:
        node = next((n for n, members in sorted(nodes.items()) if wanted[0] in members), None)
    pin.node = node
    members = nodes.get(node) if node is not None else None
    if members is None:
        if multi:
            pin.notes.append("the NUMA node of these CPUs is unknown, so the launch cannot choose their processor "
                             "group: Windows puts the process in a group of its own choosing")
        pin.mask = _mask(wanted, first) if not multi else None
        return pin
    in_node = [c for c in wanted if c in set(members)]
    outside = [c for c in wanted if c not in set(members)]
    node_groups = {i for i, (_f, g) in enumerate(groups) if set(g) & set(members)}
    if len(node_groups) > 1:
        pin.notes.append(f"NUMA node {node} spans processor groups (Windows 11 / Server 2022): start cannot say "
                         "which group's CPUs, so the launch only prefers the node")
        pin.mask, pin.cpus = None, list(members)
        return pin
    if outside:
        pin.notes.append(f"start /node {node} keeps the process on NUMA node {node}: CPUs {format_cpulist(outside)} "
                         "of the set are on other nodes and are left out")
    low = min(members)
    pin.mask = _mask(in_node, low) if in_node and set(in_node) != set(members) else None
    pin.cpus = in_node or list(members)
    return pin


# -- launches --------------------------------------------------------------------------------


def quote_ps(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def command_line(words: list[str]) -> str:
    """Words back into one Windows command line (double quotes where a word has a space)."""
    return " ".join(f'"{w}"' if " " in w else w for w in words)


def cmd_launch(words: list[str], pin: WindowsPin) -> str:
    """``start "" /b /wait [/node N] [/affinity HEX] COMMAND``: waits, shares the console, keeps the exit code."""
    switches = pin.start_switches()
    return f'start "" /b /wait {switches + " " if switches else ""}{command_line(words)}'


def powershell_launch(words: list[str], pin: WindowsPin) -> list[str]:
    """PowerShell lines: Start-Process + ProcessorAffinity on one group; cmd's start where a node is needed."""
    if pin.node is not None or pin.absolute_mask is None:
        if pin.node is None and pin.mask is None:
            return [f"& {command_line(words)}"]
        # Start-Process has no NUMA or group switch; cmd's start has both (memory then prefers that node too)
        return [f"cmd /c {quote_ps(cmd_launch(words, pin))}"]
    exe, args = words[0], words[1:]
    arg_list = f" -ArgumentList {quote_ps(command_line(args))}" if args else ""
    return [f"$p = Start-Process -FilePath {quote_ps(exe)}{arg_list} -NoNewWindow -PassThru",
            f"$p.ProcessorAffinity = [IntPtr]0x{pin.absolute_mask:X}  # CPUs {format_cpulist(pin.cpus)}",
            "$p.WaitForExit()"]


def python_affinity(pin: WindowsPin) -> str | None:
    """``psutil.Process().cpu_affinity([...])``: bits of the process's own group (group 0 on one-group machines)."""
    if pin.absolute_mask is None:
        return None
    bits = [b for b in range(GROUP_SIZE) if pin.absolute_mask >> b & 1]
    return f"psutil.Process().cpu_affinity({bits})"
