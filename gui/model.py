"""The application model every page listens to: the current report and live samples.

Pages take an AppModel and react to its signals; they never call probes
themselves. A report opened from a file sets ``read_only`` and a label, and
every page shows that machine instead of this one.
"""

from __future__ import annotations

from PySide6.QtCore import QObject, Signal

from cpudoctor.report import BenchRun, Finding, Report, ThreadRecommendation


class AppModel(QObject):
    report_changed = Signal(object)            # Report
    findings_changed = Signal(list)            # list[Finding]
    sample = Signal(object)                    # cpudoctor.probes.live.sample.Sample
    benchmarks_changed = Signal(list)          # list[BenchRun]
    recommendation_changed = Signal(object)    # ThreadRecommendation | None
    status_message = Signal(str)               # short text for the status bar

    def __init__(self, parent: QObject | None = None):
        super().__init__(parent)
        self.report: Report | None = None
        self.read_only = False                 # True for a report opened from a file
        self.source_label = "This machine"

    def set_report(self, report: Report, read_only: bool = False, label: str | None = None) -> None:
        self.report = report
        self.read_only = read_only
        self.source_label = label or ("Saved report" if read_only else "This machine")
        self.report_changed.emit(report)
        self.findings_changed.emit(list(report.findings))

    def set_findings(self, findings: list[Finding]) -> None:
        if self.report is not None:
            self.report.findings = list(findings)
        self.findings_changed.emit(list(findings))

    def add_benchmark(self, run: BenchRun) -> None:
        if self.report is None:
            return
        self.report.benchmarks.append(run)
        self.benchmarks_changed.emit(list(self.report.benchmarks))

    def set_recommendation(self, rec: ThreadRecommendation | None) -> None:
        if self.report is not None:
            self.report.recommendation = rec
        self.recommendation_changed.emit(rec)
