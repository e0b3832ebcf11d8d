"""Probes: read what the machine is (CPU, topology, software, live load, processes).

Probes never import Qt. Every probe that reads files takes ``root`` (default
``/``) so it runs unchanged on a captured tree (``cpudoctor report --root``).
They return plain dataclasses where ``None`` means "unknown" and a ``notes``
list says why; a missing or unreadable file never raises.

The modules are grouped by job:

========================  ==========================================================
:mod:`.cpu`               identity, micro-architecture, ISA verdicts, topology, CPUID check
:mod:`.software`          OS, Python, packages, PyTorch/BLAS facts, thread variables
:mod:`.process`           a running process from /proc (``cpudoctor inspect``)
:mod:`.live`              per-CPU load, clocks, temperatures (the monitor)
:mod:`.child`             running child processes safely, their scripts and cache
========================  ==========================================================

This module is the facade the rest of CPU Doctor builds a report with; the
sub-modules stay importable for the narrower jobs (the inspector, the monitor).
"""

from __future__ import annotations

from cpudoctor.model import CpuInfo, IsaVerdict
from cpudoctor.probes.cpu.identity import probe_cpu
from cpudoctor.model import Topology
from cpudoctor.probes.cpu.topology import probe_topology
from cpudoctor.model import Software
from cpudoctor.probes.software.stack import probe_software
from cpudoctor.probes.software.stack import SoftwareProbe

__all__ = ["CpuInfo", "IsaVerdict", "Software", "SoftwareProbe", "Topology", "probe_cpu", "probe_software",
           "probe_topology"]
