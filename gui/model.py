"""The application model every page listens to: the current report, its findings and live samples.

Pages take an AppModel, react to its signals and never call probes or the
advisor themselves. The model owns the diagnosis of what it holds: when a
lab result arrives (:meth:`add_benchmark`, :meth:`set_recommendation`: the
pipeline's :func:`~cpudoctor.pipeline.with_lab_result`, as ``bench --into``) or
someone asks (:meth:`rediagnose`), it runs the pipeline's advisor stage off
the GUI thread and emits the new findings. A report opened from a file sets
``read_only`` and a label, and every page shows that machine instead of this one.
The Python environment this machine's report describes and the lab's jobs run
in is chosen once for the window: :attr:`environments`
(:class:`cpudoctor.gui.environments.EnvironmentChooser`).
"""

from __future__ import annotations

import dataclasses

from PySide6.QtCore import QObject, Signal

from cpudoctor.gui.environments import EnvironmentChooser
from cpudoctor.pipeline import with_lab_result
from cpudoctor.render.words import reason_of, status_text
from cpudoctor.model import BenchRun, Finding, Report, ThreadRecommendation


class AppModel(QObject):
    report_changed = Signal(object)            # Report
    findings_changed = Signal(list)            # list[Finding]
    sample = Signal(object)                    # cpudoctor.probes.live.sample.Sample
    benchmarks_changed = Signal(list)          # list[BenchRun]
    recommendation_changed = Signal(object)    # ThreadRecommendation | None
    status_message = Signal(str)               # short text for the status bar
    diagnosing_changed = Signal(bool)          # the advisor is running on the model's report

    def __init__(self, parent: QObject | None = None):
        super().__init__(parent)
        self.report: Report | None = None
        self.read_only = False                 # True for a report opened from a file
        self.source_label = "This machine"
        self.judged = False                    # the findings shown are the advisor's for this report
        # ... for an earlier stage of it (the quick software facts): the advisor runs again when the
        # pipeline's last stage lands, and pages say the findings are so far
        self.provisional = False
        self._judged: Report | None = None     # the report the current findings were made for
        self._advice_generation = 0
        self._diagnosing = False
        # Which Python environment this machine's report and the lab's jobs are about; it looks
        # nothing up until started (the window starts it when it is shown).
        self.environments = EnvironmentChooser(self)
        self.environments.message.connect(self.status_message)

    # -- the report ------------------------------------------------------------------------------

    def set_report(self, report: Report, read_only: bool = False, label: str | None = None,
                   judged: bool = True, keep_findings: bool = False) -> None:
        """Show ``report``. The model keeps its own copy: it changes lab results on it, never the caller's.

        ``judged=False``: a stage of a report the advisor has not seen yet (its findings follow), so no page
        says "No findings." before the advisor ran. ``keep_findings``: a later stage of the same run of
        this machine; the findings shown (the advisor's for an earlier stage) stay, marked
        :attr:`provisional`, until the advisor's for the whole report replace them, so nothing flickers.

        A new stage of this machine's report keeps the lab results measured here meanwhile (a
        benchmark run while the software check was still going, or before a refresh); when the
        report's findings were made without them, the advisor runs again.
        """
        previous = self.report
        own = dataclasses.replace(report, benchmarks=list(report.benchmarks), findings=list(report.findings))
        keep = (keep_findings and not judged and self.judged and previous is not None and not read_only
                and not self.read_only and not own.findings)
        if keep:
            own.findings = list(previous.findings)
        carried = False
        if previous is not None and not read_only and not self.read_only:
            if previous.benchmarks and not own.benchmarks:
                own.benchmarks, carried = list(previous.benchmarks), True
            if previous.recommendation is not None and own.recommendation is None:
                own.recommendation, carried = previous.recommendation, True
        self._advice_generation += 1          # advice still running judged another report
        self._set_diagnosing(False)
        self.report = own
        self._judged = report
        self.read_only = read_only
        self.judged = judged or keep
        self.provisional = keep
        self.source_label = label or ("Saved report" if read_only else "This machine")
        self.report_changed.emit(own)
        self.findings_changed.emit(list(own.findings))
        if carried:
            self.rediagnose()

    def set_findings(self, findings: list[Finding], provisional: bool = False) -> None:
        self.judged = True
        self.provisional = provisional
        if self.report is not None:
            self.report.findings = list(findings)
        self.findings_changed.emit(list(findings))

    def offer_findings(self, judged: Report, findings: list[Finding]) -> bool:
        """Findings made (by the pipeline's advisor stage) for ``judged``: shown when they describe
        the model's report as it is now, else dropped (the model's own advice follows)."""
        if self.report is None or self._judged is None or not _same_facts(judged, self._judged):
            return False
        if (self.report.benchmarks, self.report.recommendation) != (judged.benchmarks, judged.recommendation):
            return False                       # lab results arrived meanwhile: rediagnose() is on its way
        self.set_findings(findings)
        return True

    # -- lab results -----------------------------------------------------------------------------

    def add_benchmark(self, run: BenchRun) -> None:
        """A lab run joins the report (the pipeline's :func:`~cpudoctor.pipeline.with_lab_result`, as
        ``bench --into`` does); the advisor then judges it again off the GUI thread."""
        if self.report is None:
            return
        self.report = with_lab_result(self.report, run, judge=False)
        self.benchmarks_changed.emit(list(self.report.benchmarks))
        self.rediagnose()

    def set_recommendation(self, rec: ThreadRecommendation | None) -> None:
        if self.report is not None:
            self.report = with_lab_result(self.report, recommendation=rec, judge=False)
        self.recommendation_changed.emit(rec)
        if self.report is not None:
            self.rediagnose()          # a measured thread count changes fixes and snippets

    # -- the advisor -----------------------------------------------------------------------------

    @property
    def diagnosing(self) -> bool:
        return self._diagnosing

    def rediagnose(self, provisional: bool = False) -> bool:
        """Run the advisor on the model's report on a worker thread; ``findings_changed`` follows.

        False when there is no report. A newer report or a newer request makes
        the running one moot: its findings are dropped. ``provisional``: the report is a stage whose
        pipeline goes on (its own advisor stage follows); the findings come quietly (no status
        messages over the pipeline's) and are marked :attr:`provisional`.
        """
        from cpudoctor.gui.workers import run_in_thread
        from cpudoctor.pipeline import diagnose

        report = self.report
        if report is None:
            return False
        self._advice_generation += 1
        generation = self._advice_generation
        snapshot = dataclasses.replace(report, benchmarks=list(report.benchmarks))   # the worker's own view
        if not provisional:
            self._set_diagnosing(True)
            self.status_message.emit("Running the advisor…")
        run_in_thread(diagnose, snapshot,
                      on_result=lambda judged: self._diagnosed(generation, judged, provisional),
                      on_error=lambda exc: self._advice_failed(generation, exc, provisional))
        return True

    def _diagnosed(self, generation: int, judged: Report, provisional: bool = False) -> None:
        if generation != self._advice_generation or self.report is None:
            return
        self._set_diagnosing(False)
        self._judged = judged
        self.set_findings(judged.findings, provisional=provisional)
        if not provisional:
            self.status_message.emit(f"Advisor: {status_text(judged.findings)}")

    def _advice_failed(self, generation: int, exc: BaseException, provisional: bool = False) -> None:
        if generation != self._advice_generation:
            return
        self._set_diagnosing(False)
        if not provisional:                    # the pipeline's own advisor stage follows and says it
            self.status_message.emit(f"The advisor failed: {reason_of(exc)}")

    def _set_diagnosing(self, busy: bool) -> None:
        if busy != self._diagnosing:
            self._diagnosing = busy
            self.diagnosing_changed.emit(busy)


def _same_facts(a: Report, b: Report) -> bool:
    """Two snapshots of one pipeline run with the same probe results (the advisor stage adds findings only)."""
    return a.cpu is b.cpu and a.topology is b.topology and a.software is b.software and a.meta is b.meta
