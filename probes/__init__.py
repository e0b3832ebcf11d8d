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
:mod:`.platforms`         the one facade over Linux, Windows and macOS (live or captured)
========================  ==========================================================

This module is the facade the rest of CPU Doctor builds a report with; the
sub-modules stay importable for the narrower jobs (the inspector, the monitor).
The facade's probes are imported when first asked for: a narrow job that reads
one sub-module (redacting a saved report reads ``software.envvars``) does not
pay for importing every probe (a fifth of a second, a third of ``cpudoctor compare``).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from cpudoctor.model import CpuInfo, IsaVerdict, Software, Topology

if TYPE_CHECKING:
    from cpudoctor.probes.platforms import probe_cpu, probe_topology
    from cpudoctor.probes.software.stack import SoftwareProbe, probe_software

# Each probe of the facade and the module that defines it (CPU and topology: the platform facade,
# which picks Linux, Windows or macOS readers per call).
_PROBES = {
    "probe_cpu": "cpudoctor.probes.platforms",
    "probe_topology": "cpudoctor.probes.platforms",
    "probe_software": "cpudoctor.probes.software.stack",
    "SoftwareProbe": "cpudoctor.probes.software.stack",
}

__all__ = ["CpuInfo", "IsaVerdict", "Software", "SoftwareProbe", "Topology", "probe_cpu", "probe_software",
           "probe_topology"]


def __getattr__(name: str) -> Any:
    """``probes.probe_cpu`` and the others, imported on first use (then an ordinary attribute)."""
    module = _PROBES.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
