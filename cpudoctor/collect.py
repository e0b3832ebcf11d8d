"""Build a Report from the probes: the one facade the CLI and the GUI both call."""

from __future__ import annotations

import sys
from pathlib import Path

from cpudoctor import __version__
from cpudoctor.probes._fs import refusal_notes
from cpudoctor.probes.cpu import probe_cpu
from cpudoctor.probes.software import probe_software
from cpudoctor.probes.topology import probe_topology
from cpudoctor.report import Meta, Report, utc_now_iso


def collect_report(root: Path | str = Path("/"), software: bool = True, children: bool = True) -> Report:
    """Probe the machine (or the captured tree at ``root``) into a Report.

    ``software`` is skipped for captured trees by the caller when it makes no
    sense (the Python stack of *this* process says nothing about that tree);
    ``children`` controls the child processes (torch facts, import checks).
    """
    root = Path(root)
    meta = Meta(generated_at=utc_now_iso(), tool_version=__version__, root=str(root), platform=sys.platform)
    report = Report(meta=meta, cpu=probe_cpu(root), topology=probe_topology(root))
    if software:
        report.software = probe_software(root, children=children)
    # Files of a captured tree that were not read (a FIFO, a device, a file of gigabytes).
    report.notes.extend(refusal_notes(root))
    return report
