"""Linux, live or a captured /proc + /sys tree: the sysfs and procfs readers.

The readers themselves live with their subject (:mod:`cpudoctor.probes.cpu.topology`,
:mod:`cpudoctor.probes.cpu.identity`, :mod:`cpudoctor.probes.software.osinfo`);
this module is the Linux entry of the platform facade. A tree with no sysfs
(an archspec cpuinfo dump, a container) is still a Linux tree: those readers
say what is missing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Mapping

    from cpudoctor.probes.platforms import Where


def topology(where: "Where"):
    from cpudoctor.probes.cpu.topology import probe_topology

    return probe_topology(where.root, live=where.live)


def cpu(where: "Where"):
    from cpudoctor.probes.cpu.identity import probe_cpu

    return probe_cpu(where.root)


def os_facts(where: "Where", environ: "Mapping[str, str] | None"):
    from cpudoctor.probes.software.osinfo import probe_os

    return probe_os(where.root, environ=environ)
