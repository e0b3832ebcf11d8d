"""Topology sections for text and Markdown reports.

TEMPORARY scaffold (counts only) until the topology issue replaces it with
an lstopo-like tree.
"""

from __future__ import annotations

from cpudoctor.probes.topology import Topology


def text_lines(topo: Topology) -> list[str]:
    return [f"Packages: {topo.packages}  Cores: {topo.cores}  Logical CPUs: {topo.logical_cpus}"]


def markdown_lines(topo: Topology) -> list[str]:
    return [f"- Packages: {topo.packages}, cores: {topo.cores}, logical CPUs: {topo.logical_cpus}"]
