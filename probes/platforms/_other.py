"""An OS CPU Doctor has no dedicated reader for (FreeBSD, ...), live only: psutil and py-cpuinfo counts.

Topology is counts only; the OS is what the interpreter says. Each answer says
what is unknown rather than guessing.
"""

from __future__ import annotations

import platform
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Mapping

    from cpudoctor.probes.platforms import Where


def topology(where: "Where"):
    from cpudoctor.probes.cpu.topology import probe_topology

    return probe_topology(where.root, live=where.live)     # no sysfs: its psutil fallback


def cpu(where: "Where"):
    from cpudoctor.probes.cpu.identity import probe_cpu

    return probe_cpu(where.root)                            # no /proc/cpuinfo: py-cpuinfo


def os_facts(where: "Where", environ: "Mapping[str, str] | None"):
    from cpudoctor.model import OsInfo

    info = OsInfo(system=platform.system() or None, kernel=platform.release() or None)
    return info, [f"{info.system or 'this OS'}: CPU Doctor reads only counts and the OS name here"]
