"""The software side of a capture: the Python environment ``cpudoctor capture`` described, read back.

A capture's /proc and /sys say nothing about the Python environment people
train in, so ``cpudoctor capture`` also writes ``environment.json`` in the
capture folder: a report of that machine holding only the software facts the
doctor gathered there (interpreter, packages and versions, the PyTorch build,
the thread variables a shared report keeps, import checks) and the CPUID
check, redacted like a shared report (:mod:`cpudoctor.capture` writes it).
Under ``--root`` the software probe uses it, so the capture analysed anywhere
gives the software findings ``doctor`` gave on the machine.

It is read like any saved report from a stranger
(:func:`cpudoctor.report_file.load_report`: bounded, limits, schema), through
the tree's containment, and never trusted beyond that.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

from cpudoctor.kits.rooted import under
from cpudoctor.model import CpuidCheck, ReportError, Software

ENVIRONMENT_FILE = "environment.json"


@dataclass
class CapturedEnvironment:
    software: Software
    cpuid_check: CpuidCheck | None
    generated_at: str | None
    tool_version: str | None

    @property
    def note(self) -> str:
        """Where the software facts of a captured tree come from, for the report's notes."""
        who = self.software.python.executable or "an unnamed interpreter"
        when = f" on {self.generated_at}" if self.generated_at else ""
        version = f" by CPU Doctor {self.tool_version}" if self.tool_version else ""
        return (f"Python environment, packages, thread variables and child checks from the capture's "
                f"{ENVIRONMENT_FILE} (described{when}{version}: {who}), not from this machine")


def read_captured(root: Path) -> tuple[CapturedEnvironment | None, str | None]:
    """(the capture's environment, None) or (None, why it could not be used); (None, None) when it has none."""
    path = under(root, ENVIRONMENT_FILE)
    try:
        if not path.exists():
            return None, None
        report = _load(path)
    except (ReportError, OSError) as exc:
        return None, (f"the capture's {ENVIRONMENT_FILE} could not be used ({exc}): Python, packages, thread "
                      "variables and child checks are unknown")
    if report.software is None:
        return None, f"the capture's {ENVIRONMENT_FILE} holds no software facts: Python and packages are unknown"
    sw = dataclasses.replace(report.software, captured=False)
    return CapturedEnvironment(sw, report.cpu.cpuid_check, report.meta.generated_at, report.meta.tool_version), None


def _load(path: Path):
    from cpudoctor.report_file import load_report

    return load_report(path)
