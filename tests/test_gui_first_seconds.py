"""The window's first seconds (issue 27): the machine's facts show while the Python environment is still
being decided, and the Overview never says "No findings." before the advisor ran.

The environment's decision is held back by a lookup that waits on an event the test sets, so "before" and
"after" are states the test controls, not moments it times.
"""

from __future__ import annotations

import dataclasses
import threading

from gui_support import no_qt_leaks, settings  # noqa: F401 - fixtures
from test_gui_environments import _close, lookup, world  # noqa: F401 - fixtures

from cpudoctor.gui.main_window import MainWindow
from cpudoctor.gui.model import AppModel
from cpudoctor.gui.overview_page import OverviewPage


class HeldLookup:
    """Wraps a lookup: the default is decided only once ``release`` is set; the listing is counted."""

    def __init__(self, inner):
        self.inner = inner
        self.release = threading.Event()
        self.listings = 0

    def default(self):
        assert self.release.wait(120), "the test never released the decision"
        return self.inner.default()

    def decide(self):
        return self.inner.decide()

    def describe(self, python):
        return self.inner.describe(python)

    def find(self, fresh=False):
        self.listings += 1
        return self.inner.find(fresh)


def test_machine_facts_show_before_the_environment_is_decided(qtbot, world, settings):
    held = HeldLookup(lookup(world))
    window = MainWindow(AppModel(), settings=settings, collect=True, children=False, env_lookup=held)
    qtbot.addWidget(window)
    window.show()
    qtbot.waitUntil(lambda: window.model.report is not None, timeout=60_000)
    report = window.model.report
    assert report.cpu is not None and report.topology is not None       # the machine's facts, on screen
    assert not window.environments.decided and window.collector.awaiting_environment
    assert window.pages["Overview"].findings_label.text() != "No findings."
    assert held.listings == 0                                             # nobody listed every interpreter
    held.release.set()
    qtbot.waitUntil(lambda: window.model.judged and not window.collector.busy, timeout=60_000)
    python = window.model.report.software.python
    assert python.executable == world["torch"] and python.chosen_by == "working-folder"
    qtbot.waitUntil(lambda: window.environments.listed_once, timeout=60_000)   # the listing follows, after
    _close(window)


def test_closing_while_the_report_waits_for_its_environment_ends_the_run(qtbot, world, settings):
    held = HeldLookup(lookup(world))
    window = MainWindow(AppModel(), settings=settings, collect=True, children=False, env_lookup=held)
    qtbot.addWidget(window)
    window.show()
    qtbot.waitUntil(lambda: window.collector.awaiting_environment and window.model.report is not None,
                    timeout=60_000)
    _close(window)
    held.release.set()                                                    # the decision's thread may end too


def test_no_findings_is_said_only_after_the_advisor_ran(qtbot):
    from export_samples import sample_report

    model = AppModel()
    page = OverviewPage(model)
    qtbot.addWidget(page)
    report = sample_report()
    report.software = dataclasses.replace(report.software, children_ran=True)
    report.findings = []
    model.set_report(report, judged=False)             # a snapshot after the child checks, before the advisor
    assert page.findings_label.text() != "No findings."
    model.set_findings([])                             # the advisor ran and found nothing
    assert page.findings_label.text() == "No findings."
    model.set_report(dataclasses.replace(report), judged=False)   # a new snapshot: not judged yet
    assert page.findings_label.text() != "No findings."


def test_late_pages_are_named_as_their_classes_say():
    import importlib

    from cpudoctor.gui.main_window import PAGES
    from cpudoctor.gui.page_set import LATE

    classes = dict(PAGES)
    for module, (title, icon_name) in LATE.items():
        cls = getattr(importlib.import_module(f"cpudoctor.gui.{module}"), classes[module])
        assert (cls.title, cls.icon_name) == (title, icon_name)


def test_the_window_paints_before_pyqtgraph_is_imported_and_builds_every_page_after(tmp_path):
    """A fresh process: nothing of pyqtgraph (nor numpy through it) before the first paint; every page after."""
    import os
    import subprocess
    import sys

    script = """
import sys
from PySide6.QtCore import QEvent, QObject, QSettings
from PySide6.QtWidgets import QApplication
app = QApplication([])
from cpudoctor.gui.main_window import MainWindow
from cpudoctor.gui.model import AppModel
painted = []
class Seen(QObject):
    def eventFilter(self, obj, event):
        if event.type() == QEvent.Type.Paint and not painted:
            painted.append("pyqtgraph" in sys.modules)
        return False
window = MainWindow(AppModel(), settings=QSettings(sys.argv[1], QSettings.Format.IniFormat), collect=False)
seen = Seen()
window.installEventFilter(seen)
window.show()
while not painted:
    app.processEvents()
assert painted == [False], painted
while window.pages.pending:
    app.processEvents()
assert "pyqtgraph" in sys.modules and window.pages["Monitor"].history is not None
assert [window.stack.indexOf(window.pages[t]) for t in window.pages] == list(range(len(window.pages)))
window.sampler.stop()
window.pages["Inspector"].inspections.live_timer.stop()
window.close()
print("ok")
"""
    out = subprocess.run([sys.executable, "-c", script, str(tmp_path / "s.ini")], capture_output=True, text=True,
                         timeout=300, env={**os.environ, "QT_QPA_PLATFORM": "offscreen"})
    assert out.returncode == 0 and out.stdout.strip().endswith("ok"), out.stderr[-3000:]


def _unjudged_overview(qtbot):
    """An Overview on a model holding a sample report's quick stage, not judged yet: (model, page, report)."""
    from export_samples import sample_report

    model = AppModel()
    page = OverviewPage(model)
    qtbot.addWidget(page)
    report = sample_report()
    report.findings = []
    model.set_report(report, judged=False)
    return model, page, report


def _after_the_children(report):
    """The same run's snapshot once the child checks landed (new software facts, no findings yet)."""
    return dataclasses.replace(report, software=dataclasses.replace(report.software, children_ran=True), findings=[])


def test_findings_of_the_quick_facts_stay_until_the_whole_report_is_judged(qtbot):
    """The Overview shows the findings the quick facts support while the child checks run, marked "so far";
    a later stage keeps them on screen (no flicker back to "the advisor runs..."); the final ones replace them."""
    from cpudoctor.pipeline import diagnose
    from cpudoctor.render import overview as words

    model, page, quick = _unjudged_overview(qtbot)
    assert page.findings_label.text() == words.ADVISOR_PENDING
    early = diagnose(quick).findings
    assert early, "the sample report has findings the quick facts support"
    model.set_findings(early, provisional=True)
    assert model.provisional and words.PROVISIONAL_NOTE in page.findings_label.text()
    later = _after_the_children(quick)
    model.set_report(later, judged=False, keep_findings=True)          # the child checks landed
    assert model.provisional and model.report.findings == early
    assert words.PROVISIONAL_NOTE in page.findings_label.text() and words.ADVISOR_PENDING not in page.findings_label.text()
    assert model.offer_findings(later, diagnose(later).findings)      # the pipeline's advisor stage
    assert not model.provisional and words.PROVISIONAL_NOTE not in page.findings_label.text()


def test_no_findings_so_far_is_not_no_findings(qtbot):
    from cpudoctor.render import overview as words

    model, page, report = _unjudged_overview(qtbot)
    model.set_findings([], provisional=True)
    assert page.findings_label.text() == words.PROVISIONAL_NONE
    model.set_report(dataclasses.replace(report), judged=False)        # a new run (a refresh): nothing carried
    assert page.findings_label.text() == words.ADVISOR_PENDING and not model.provisional


def test_the_collector_shows_the_quick_findings_while_the_child_stages_run(qtbot, monkeypatch):
    """The pipeline held after its quick software stage (a stand-in that waits on an event the test sets): the
    advisor has already judged the quick facts; the final advisor stage replaces those findings."""
    from export_samples import sample_report

    from cpudoctor.gui import collector as collector_module
    from cpudoctor.pipeline import StageResult, diagnose, planned_stages

    release = threading.Event()
    quick = sample_report()
    quick.findings = []
    later = _after_the_children(quick)

    def held_pipeline(source, *, children, on_stage, cancelled, **_):
        plan = planned_stages(source, children=children)
        assert "software-children" in plan                       # a live run with child stages
        for name in ("cpu", "topology", "software-quick"):
            on_stage(StageResult(name, quick, 0.0))
        assert release.wait(120), "the test never released the child stages"
        on_stage(StageResult("software-children", later, 0.0))
        final = diagnose(later)
        on_stage(StageResult("advisor", final, 0.0))
        return final

    monkeypatch.setattr(collector_module, "build_report", held_pipeline)
    model = AppModel()
    page = OverviewPage(model)
    qtbot.addWidget(page)
    collector = collector_module.ReportCollector(model, children=True)
    collector.start()
    qtbot.waitUntil(lambda: model.judged and model.provisional, timeout=60_000)
    early = list(model.report.findings)
    assert early and "so far" in page.findings_label.text()
    stages = []
    collector.stage_done.connect(stages.append)
    release.set()
    qtbot.waitUntil(lambda: "software-children" in stages, timeout=60_000)
    qtbot.waitUntil(lambda: not collector.busy, timeout=60_000)
    assert not model.provisional and model.report.software.children_ran
    assert [f.code for f in model.report.findings] == [f.code for f in diagnose(later).findings]
    assert "so far" not in page.findings_label.text()


def _overview_state(page: OverviewPage) -> dict[str, str]:
    """Every card row of the Overview (card/label -> text), and the findings card's text."""
    rows = {f"{title}/{label}": text for title, card in page.cards.items() for label, text in card.rows()}
    rows["findings"] = page.findings_label.text()
    return rows


def test_a_second_run_of_this_machine_never_blanks_what_the_overview_shows(qtbot, world, settings):
    """Issue 40, 3: the cards filled, went blank for seconds, then filled again when this machine's report was
    built anew (the environment listing's rebuild, a Refresh). Every state the Overview passes through during the
    second run keeps each row the first run filled, and the findings stay until the new ones replace them."""
    from cpudoctor.render import overview as words
    from cpudoctor.render.words import DASH

    window = MainWindow(AppModel(), settings=settings, collect=True, children=False, env_lookup=lookup(world))
    qtbot.addWidget(window)
    window.show()
    qtbot.waitUntil(lambda: window.model.judged and not window.model.provisional and not window.collector.busy
                    and window.model.report.software is not None, timeout=60_000)
    page = window.pages["Overview"]
    filled = {k: v for k, v in _overview_state(page).items() if v and v != DASH}
    assert any(k.startswith("System/") for k in filled) and any(k.startswith("Memory/") for k in filled)
    seen: list[dict[str, str]] = []
    window.model.report_changed.connect(lambda _r: seen.append(_overview_state(page)))
    window.model.findings_changed.connect(lambda _f: seen.append(_overview_state(page)))
    window.refresh()
    qtbot.waitUntil(lambda: not window.collector.busy and window.model.judged and not window.model.provisional,
                    timeout=60_000)
    assert seen, "the second run showed nothing"
    for state in seen:
        blanked = [k for k in filled if k != "findings" and state.get(k, "") in ("", DASH)]
        assert not blanked, f"rows blanked during the second run: {blanked}"
        assert state["findings"] != words.ADVISOR_PENDING
    _close(window)
