"""Build a Report from the probes: the one facade the CLI and the GUI both call."""

from __future__ import annotations

import dataclasses
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
    _bound(report, report.notes)
    return report


# What a report may hold, as cpudoctor.report_check enforces when one is read back: a probe
# that copied something odd from a tree must not write a report that CPU Doctor then refuses.
_MAX_TEXT = 4096
_MAX_INT = 2 ** 63 - 1


def _bound(obj, notes: list[str], path: str = "report") -> None:
    """Clip over-long strings, drop control characters and out-of-range integers, in place."""
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        where = f"{path}.{f.name}"
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            _bound(value, notes, where)
        elif isinstance(value, list):
            setattr(obj, f.name, [_bound_value(v, notes, where) for v in value])
        elif isinstance(value, dict):
            setattr(obj, f.name, {k: _bound_value(v, notes, where) for k, v in value.items()})
        else:
            setattr(obj, f.name, _bound_value(value, notes, where))


def _bound_value(value, notes: list[str], where: str):
    from cpudoctor.render.escape import strip_controls

    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        _bound(value, notes, where)
        return value
    if isinstance(value, str):
        value = strip_controls(value)
        return value if len(value) <= _MAX_TEXT else value[: _MAX_TEXT - 1] + "…"
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > _MAX_INT:
        notes.append(f"{where}: a value beyond 64 bits was dropped")
        return None
    return value
