"""The main window: pages, actions, settings, read-only reports, background collection."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import textwrap

import pytest
from conftest import probe_tree
from PySide6.QtCore import QPoint, QSize
from PySide6.QtWidgets import QMessageBox

from gui_support import no_qt_leaks, settings  # noqa: F401 - fixtures

from cpudoctor.gui import main_window as mw
from cpudoctor.gui.icons import icon, known_icons
from cpudoctor.gui.main_window import MainWindow, versions
from cpudoctor.gui.model import AppModel
from cpudoctor.model import CpuInfo
from cpudoctor.model import Meta, Report


def installed_pages() -> list[tuple[str, str]]:
    return [(m, c) for m, c in mw.PAGES if importlib.util.find_spec(f"cpudoctor.gui.{m}") is not None]


@pytest.fixture
def window(qtbot, settings):  # noqa: F811
    model = AppModel()
    win = MainWindow(model, settings=settings, collect=False)
    qtbot.addWidget(win)
    win.show()
    qtbot.waitExposed(win)
    yield win
    win.close()


def test_window_opens_with_every_present_page(window):
    expected = installed_pages()
    assert {"overview_page", "flags_page", "monitor_page"} <= {m for m, _ in expected}
    assert window.sidebar.count() == window.stack.count() == len(expected)
    for row, (module, cls_name) in enumerate(expected):
        page = window.pages[window.pages.title_at(row)]     # a page built after the first paint: built on look-up
        assert window.stack.widget(row) is page and type(page).__name__ == cls_name
        item = window.sidebar.item(row)
        assert item.data(mw.TITLE_ROLE) == type(page).title
        assert item.text() == type(page).title or item.toolTip() == type(page).title    # compact: tooltip
        assert not icon(type(page).icon_name).isNull()
    assert window.windowTitle() == "CPU Doctor"
    assert not window.windowIcon().isNull()
    for title in window.pages:                      # every page can be shown
        window.show_page(title)
        assert window.current_page_title() == title


def test_toolbar_has_the_main_actions(window):
    texts = [a.text().replace("&", "") for a in window.toolbar.actions() if a.text()]
    assert any("Open" in t for t in texts) and "Refresh" in texts and any("About" in t for t in texts)
    assert window.export_action is not None and window.export_action in window.toolbar.actions()
    menus = [a.text().replace("&", "") for a in window.menuBar().actions()]
    assert menus == ["File", "View", "Help"]


def test_every_page_is_installed_and_follows_the_page_contract():
    from cpudoctor.gui.icons import icon

    classes = mw.page_classes()
    assert [c.__name__ for c in classes] == [cls for _, cls in mw.PAGES]
    for cls in classes:
        assert isinstance(cls.title, str) and cls.title
        assert not icon(cls.icon_name).isNull(), cls.icon_name


def test_settings_persist(qtbot, settings):  # noqa: F811
    first = MainWindow(AppModel(), settings=settings, collect=False)
    qtbot.addWidget(first)
    first.show()
    qtbot.waitExposed(first)
    first.resize(QSize(780, 540))
    first.move(QPoint(9, 11))
    first.show_page("Monitor")
    first.pages["Monitor"].rate_box.setCurrentIndex(first.pages["Monitor"].rate_box.findData(5.0))
    assert first.sampler.rate_hz == 5.0
    where = first.geometry().topLeft()
    first.close()

    second = MainWindow(AppModel(), settings=settings, collect=False)
    qtbot.addWidget(second)
    second.show()
    qtbot.waitExposed(second)
    assert second.current_page_title() == "Monitor"
    assert second.size() == QSize(780, 540)        # the offscreen screen is 800 x 600
    # offscreen reports no window frame on restore, so y may shift by a title bar
    delta = second.geometry().topLeft() - where
    assert abs(delta.x()) <= 2 and 0 <= delta.y() <= 32, delta
    assert second.sampler.rate_hz == 5.0
    assert second.pages["Monitor"].rate_hz == 5.0
    assert settings.fileName().endswith("cpudoctor-test.ini")    # the temp file, never ~/.config
    second.close()


def test_sampler_runs_only_while_shown_and_not_paused(window, qtbot):
    assert window.sampler.running
    monitor = window.pages["Monitor"]
    monitor.pause_button.click()
    assert monitor.paused and not window.sampler.running
    monitor.pause_button.click()
    assert window.sampler.running
    window.close()
    assert not window.sampler.running


def _saved_report() -> Report:
    return Report(meta=Meta(generated_at="2026-05-04T10:20:00+00:00", tool_version="0.1.0"),
                  cpu=CpuInfo(brand="AMD Ryzen 9 7950X 16-Core Processor", vendor="AMD"))


def test_opened_report_without_findings_is_diagnosed(window, qtbot, tmp_path, corpus):
    from conftest import machine_root

    path = tmp_path / "opteron.json"
    path.write_text(probe_tree(machine_root("hwloc-64amd64-4s2n4ca2co"), software=False).to_json())
    with qtbot.waitSignal(window.model.findings_changed, timeout=20_000,
                          check_params_cb=lambda f: bool(f)):
        window.open_report(path)
    assert window.model.report.findings and window.model.read_only
    assert "checks passed: all in the Advisor" in window.pages["Overview"].findings_label.text()


def test_read_only_banner_and_back_to_this_machine(window, qtbot):
    window.model.set_report(_saved_report(), read_only=True, label="Report colleague.json")
    assert window.banner.isVisible()
    text = window.banner.label.text()
    assert "AMD Ryzen 9 7950X" in text and "2026-05-04 10:20" in text and "colleague.json" in text
    assert "colleague.json" in window.windowTitle()
    window.collector.children = False
    seen = []
    window.collector.stage_done.connect(seen.append)
    with qtbot.waitSignal(window.collector.stage_done, timeout=20_000, check_params_cb=lambda s: s == "software-quick"):
        window.banner.back.click()
    assert seen[:3] == ["cpu", "topology", "software-quick"]      # each stage as it lands
    assert not window.model.read_only and not window.banner.isVisible()
    qtbot.waitUntil(lambda: not window.collector.busy, timeout=30_000)
    assert window.model.report.meta.generated_at != "2026-05-04T10:20:00+00:00"   # this machine's, fresh


def test_open_report_file_and_bad_file(window, qtbot, tmp_path, monkeypatch):
    good = tmp_path / "good.json"
    good.write_text(_saved_report().to_json())
    with qtbot.waitSignal(window.collector.opened, timeout=20_000):
        window.open_report(good)
    assert window.model.read_only and window.model.report.cpu.brand.startswith("AMD Ryzen 9")
    assert window.model.source_label == "Saved report good.json"
    shown = []
    monkeypatch.setattr(QMessageBox, "warning", lambda *a: shown.append(a[2]))
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"hello": 1}))
    with qtbot.waitSignal(window.collector.open_failed, timeout=20_000):
        window.open_report(bad)
    assert shown and "not a CPU Doctor report" in shown[0]
    assert window.model.report.cpu.brand.startswith("AMD Ryzen 9")      # the shown report stays


def test_collector_fills_the_model_in_the_background(qtbot):
    from cpudoctor.gui.collector import ReportCollector

    model = AppModel()
    collector = ReportCollector(model, children=False)
    shown = []
    model.report_changed.connect(shown.append)
    with qtbot.waitSignal(model.report_changed, timeout=20_000) as got:
        collector.start()
    first = got.args[0]
    assert first.topology.logical_cpus and first.software is None     # the machine's facts first, at once
    qtbot.waitUntil(lambda: not collector.busy, timeout=30_000)
    report = shown[-1]
    assert report.software is not None and not report.software.children_ran   # the cheap stage: no children


def test_stale_results_are_dropped(qtbot):
    from cpudoctor.gui.collector import ReportCollector

    model = AppModel()
    collector = ReportCollector(model, children=False)
    seen = []
    model.report_changed.connect(seen.append)
    collector.start()
    collector.cancel()                               # e.g. a report was opened meanwhile
    from PySide6.QtCore import QCoreApplication, QThreadPool
    assert QThreadPool.globalInstance().waitForDone(60_000)
    # Results a worker sent are queued events now: deliver every one of them, then look (no timer).
    QCoreApplication.sendPostedEvents()
    QCoreApplication.processEvents()
    assert seen == []


def test_about_lists_versions_without_torch():
    names = [name for name, _ in versions()]
    assert names[:5] == ["CPU Doctor", "Python", "Qt", "PySide6", "pyqtgraph"] and "psutil" in names
    assert "torch" not in " ".join(names).lower()


def test_every_icon_the_code_names_exists():
    import re
    from pathlib import Path

    gui = Path(mw.__file__).parent
    named = set()
    for f in gui.glob("*.py"):
        text = f.read_text()
        named |= set(re.findall(r'\bicon\("([a-z_]+)"\)', text))
        named |= set(re.findall(r'icon_name = "([a-z_]+)"', text))
    assert {"overview", "flags", "monitor", "refresh", "open", "about"} <= named
    assert named <= set(known_icons()), named - set(known_icons())
    with pytest.raises(FileNotFoundError, match="known icons"):
        icon("no-such-icon")


def test_gui_process_never_imports_torch(tmp_path):
    """Build the window and collect the cheap report in a fresh process: torch stays out."""
    script = textwrap.dedent("""
        import sys
        from PySide6.QtCore import QSettings, QThreadPool
        from PySide6.QtWidgets import QApplication
        app = QApplication([])
        from cpudoctor.gui.main_window import MainWindow
        from cpudoctor.gui.model import AppModel
        model = AppModel()
        w = MainWindow(model, settings=QSettings(sys.argv[1], QSettings.Format.IniFormat), children=False)
        w.show()
        for _ in range(200):
            app.processEvents()
            QThreadPool.globalInstance().waitForDone(20)
            if model.report is not None and not w.collector.busy:
                break
        assert model.report is not None, "no report collected"
        w.close()
        print("TORCH", "torch" in sys.modules)
    """)
    env = {**__import__("os").environ, "QT_QPA_PLATFORM": "offscreen"}
    out = subprocess.run([sys.executable, "-c", script, str(tmp_path / "s.ini")], capture_output=True,
                         text=True, timeout=120, env=env)
    assert out.returncode == 0, out.stderr
    assert "TORCH False" in out.stdout, out.stdout + out.stderr


def test_overview_link_opens_the_advisor(window):
    if "Advisor" not in window.pages:
        pytest.skip("the Advisor page is not installed yet")
    window.show_page("Overview")
    window.pages["Overview"].findings_label.linkActivated.emit("advisor")
    assert window.current_page_title() == "Advisor"


def test_start_here_opens_the_top_finding_in_the_advisor(window):
    """Issue 28, 8: the Overview's "start here" line opens its finding, selected, in the Advisor."""
    from cpudoctor.model import Finding, Report

    window.model.set_report(Report(findings=[Finding("THR001", "omp-unset", "threads", "warning", "Threads")]))
    window.show_page("Overview")
    window.pages["Overview"].start_here.linkActivated.emit("finding:THR001")
    assert window.current_page_title() == "Advisor"
    assert window.pages["Advisor"].details_title.text().startswith("Threads")


def test_keyboard_shortcuts_switch_pages(window, qtbot):
    from PySide6.QtCore import Qt

    titles = list(window.pages)
    qtbot.keyClick(window, Qt.Key.Key_2, Qt.KeyboardModifier.ControlModifier)
    assert window.current_page_title() == titles[1]
    qtbot.keyClick(window, Qt.Key.Key_1, Qt.KeyboardModifier.ControlModifier)
    assert window.current_page_title() == titles[0]


def test_opening_a_report_mid_collection_stops_the_busy_indicator(qtbot):
    from cpudoctor.gui.collector import ReportCollector

    model = AppModel()
    collector = ReportCollector(model, children=False)
    collector.start()
    model.set_report(_saved_report(), read_only=True, label="Report x.json")
    qtbot.waitUntil(lambda: not collector.busy, timeout=20_000)
    assert model.report.cpu.brand.startswith("AMD Ryzen 9")       # the opened report stays


def test_about_dialog_lists_versions(window, monkeypatch):
    shown = []
    monkeypatch.setattr(mw.QMessageBox, "about", lambda parent, title, text: shown.append(text))
    window.about_action.trigger()
    assert shown and "PySide6" in shown[0] and "pyqtgraph" in shown[0] and "torch" not in shown[0].lower()


def test_narrow_window_shows_the_sidebar_as_icons(window, qtbot):
    """Below 1000 px the sidebar gives its width to the page; titles move to tooltips and come back."""
    window.resize(QSize(780, 540))
    qtbot.waitUntil(lambda: window.sidebar.width() == mw.SIDEBAR_COMPACT_PX)
    first = window.sidebar.item(0)
    assert first.text() == "" and first.toolTip() == "Overview"
    window.resize(QSize(1180, 780))
    qtbot.waitUntil(lambda: window.sidebar.width() == mw.SIDEBAR_PX)
    assert first.text() == "Overview" and first.toolTip() == ""


def test_saved_report_opens_on_overview_with_a_plain_title(window, qtbot, tmp_path):
    """Not on the last live page (Inspector, Monitor), and no 'CPU Doctor' twice in the title."""
    from cpudoctor.gui.main_window import saved_report_title

    window.show_page("Inspector")
    path = tmp_path / "r.json"
    path.write_text(_saved_report().to_json())
    with qtbot.waitSignal(window.collector.opened, timeout=30_000):      # read and diagnosed off the GUI thread
        window.open_report(path)
    qtbot.waitUntil(lambda: window.current_page_title() == "Overview", timeout=30_000)
    assert window.windowTitle() == "r.json (saved report)"
    assert "CPU Doctor" not in window.windowTitle()          # xcb and Windows append the application name
    assert saved_report_title("Saved report r.json") == "r.json (saved report)"


def test_export_as_starts_from_the_report_pages_format_and_privacy(window, monkeypatch):
    """Issue 28, 11: File > Export as… defaulted to HTML while the Report page was set to Markdown."""
    from PySide6.QtWidgets import QDialog

    from cpudoctor.gui.export import ExportDialog
    from cpudoctor.model import Report

    window.model.set_report(Report())
    page = window.pages["Report"]
    page.format_box.setCurrentIndex(page.format_box.findData("md"))
    page.privacy.setChecked(True)
    seen = {}

    def fake_exec(dlg):
        seen.update(fmt=dlg.fmt, private=dlg.privacy.isChecked(), path=dlg.path.suffix)
        return QDialog.DialogCode.Rejected

    monkeypatch.setattr(ExportDialog, "exec", fake_exec)
    window.report_actions.export_as.trigger()
    assert seen == {"fmt": "md", "private": True, "path": ".md"}


def test_help_menu_has_the_docs_the_rules_and_report_a_problem(window, tmp_path, monkeypatch):
    """Issue 28, 11: the Help menu had only About."""
    from PySide6.QtGui import QDesktopServices, QGuiApplication
    from PySide6.QtWidgets import QMenu

    from cpudoctor.model import Report

    help_menu = next(m for m in window.menuBar().findChildren(QMenu) if m.title() == "&Help")
    titles = [a.text() for a in help_menu.actions() if a.text()]
    assert titles == ["&Documentation", "&Rules reference", "Report a &problem…", "&About CPU Doctor"]
    dialog = window.help_actions.show_rules()
    assert "ISA001" in dialog.view.toPlainText() and "PROC014" in dialog.view.toPlainText()
    dialog.close()
    opened = []
    monkeypatch.setattr(QDesktopServices, "openUrl", lambda url: opened.append(url.toString()) or True)
    window.model.set_report(Report())
    saved = window.help_actions.start_report(tmp_path)
    assert saved is not None and saved.parent == tmp_path and saved.suffix == ".md"
    text = saved.read_text()
    assert text.startswith("# CPU Doctor") and QGuiApplication.clipboard().text() == text
    assert opened and "/issues/new?" in opened[0] and "title=Problem+report" in opened[0]
    window.help_actions.last_dialog.close()


# -- issue 40, 14: closing during a job, the theme in the menus, the Training page after a saved report --------

_ENDLESS_JOB = textwrap.dedent("""
    import time
    from cpudoctor.lab.jobs import _jobkit as protocol
    stop = protocol.StopFlag()
    stop.watch_stdin()
    protocol.progress(step=1, loss=2.3, accuracy=0.1, samples_per_s=None, elapsed=0.01, dtype="fp32")
    while not stop.is_set():
        time.sleep(0.02)
    protocol.result(status="cancelled", steps=1)
""")


def _answer_the_question(qtbot, button_text: str, asked: list[str]) -> None:
    """Click ``button_text`` in the message box the window is about to show (modal: it blocks until answered)."""
    from PySide6.QtCore import QTimer
    from PySide6.QtWidgets import QApplication

    def answer():
        box = QApplication.activeModalWidget()
        if not isinstance(box, QMessageBox):
            QTimer.singleShot(20, answer)
            return
        asked.append(box.text())
        next(b for b in box.buttons() if b.text() == button_text).click()

    QTimer.singleShot(0, answer)


def test_closing_during_a_job_asks_first(window, qtbot):
    training = window.pages["Training"]
    training.job_argv = lambda job, args: [sys.executable, "-c", _ENDLESS_JOB]
    training._start("train", {"seconds": 60.0})
    qtbot.waitUntil(lambda: bool(training.session.live.steps), timeout=20_000)
    assert window.running_jobs() == ["the training run"]
    asked: list[str] = []
    _answer_the_question(qtbot, "Keep running", asked)
    window.close()
    assert asked == ["The training run is still running."]
    assert window.isVisible() and training.runner.is_running()          # nothing was discarded
    _answer_the_question(qtbot, "Stop and quit", asked)
    with qtbot.waitSignal(training.runner.finished, timeout=20_000):
        window.close()
        training.shutdown()                                             # what the application's quit does
    assert len(asked) == 2 and not window.isVisible() and not training.runner.is_running()


def test_closing_without_a_job_does_not_ask(window):
    assert window.running_jobs() == []
    window.close()                                                      # a question would block here
    assert not window.isVisible()


def test_theme_is_chosen_in_the_view_menu_and_remembered(qtbot, settings):  # noqa: F811
    from PySide6.QtGui import QPalette
    from PySide6.QtWidgets import QApplication

    from cpudoctor.gui.theme import apply_theme, remembered_theme

    app = QApplication.instance()
    before = app.palette()
    try:
        apply_theme(app, "light")
        win = MainWindow(AppModel(), settings=settings, collect=False)
        qtbot.addWidget(win)
        win.show()
        view = next(a.menu() for a in win.menuBar().actions() if a.text() == "&View")
        theme = next(a.menu() for a in view.actions() if a.menu() is not None and a.text() == "&Theme")
        names = [a.text().replace("&", "") for a in theme.actions()]
        assert names == ["System (follow the desktop)", "Light", "Dark"]
        assert win.theme_actions["light"].isChecked()
        plot = win.pages["Training"].live.loss_plot
        win.theme_actions["dark"].trigger()
        assert win.theme_actions["dark"].isChecked()
        assert app.palette().color(QPalette.ColorRole.Window).lightness() < 128
        qtbot.waitUntil(lambda: plot.backgroundBrush().color().lightness() < 128, timeout=5_000)   # plots follow
        assert remembered_theme(settings) == "dark"                     # the next start opens dark
        win.theme_actions["light"].trigger()
        qtbot.waitUntil(lambda: plot.backgroundBrush().color().lightness() > 128, timeout=5_000)
        assert remembered_theme(settings) == "light"
        win.sampler.stop()
        win.pages["Inspector"].inspections.live_timer.stop()
        win.close()
    finally:
        app.setPalette(before)
        app.setStyleSheet("")


def test_the_training_page_forgets_the_saved_report_after_back_to_this_machine(window, qtbot):
    from cpudoctor.render import training as words

    training = window.pages["Training"]
    window.model.set_report(_saved_report(), read_only=True, label="Report colleague.json")
    assert "saved report" in training.status.text()
    window.collector.children = False
    window.banner.back.click()
    qtbot.waitUntil(lambda: not window.collector.busy and window.model.report is not None
                    and not window.model.read_only, timeout=30_000)
    assert "saved report" not in training.status.text() and training.status.text() == words.READY
