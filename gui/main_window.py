"""The main window: a sidebar of pages, a stacked page area, toolbar, menus and status bar.

Pages are found by module name (``gui/<name>_page.py``, class ``<Name>Page``,
see the contract in gui/__init__.py). While other parts are still being built
a page module may be absent: it is skipped, but only when the module itself is
missing — an import error inside a page is a bug and propagates.
"""

from __future__ import annotations

import importlib
import platform
import sys
from pathlib import Path

from PySide6.QtCore import QByteArray, QEvent, QSettings, QSize, Qt, QTimer
from PySide6.QtGui import QAction, QCloseEvent, QKeySequence, QPalette
from PySide6.QtWidgets import (QFileDialog, QFrame, QHBoxLayout, QLabel, QListWidget, QListWidgetItem,
                               QMainWindow, QMessageBox, QProgressBar, QPushButton, QSizePolicy, QStackedWidget,
                               QToolBar, QVBoxLayout, QWidget)

from cpudoctor import __version__
from cpudoctor.gui.collector import ReportCollector
from cpudoctor.gui.common import ElidedLabel
from cpudoctor.gui.env_picker import EnvironmentPicker
from cpudoctor.gui.environments import WINDOW, EnvLookup
from cpudoctor.gui.icons import app_icon, icon
from cpudoctor.gui.model import AppModel
from cpudoctor.gui.page_set import PageSet
from cpudoctor.gui.sampler import DEFAULT_HZ, LiveSampler
from cpudoctor.render import env_choice
from cpudoctor.model import Report


APP_NAME = "CPU Doctor"
SIDEBAR_PX = 176
SIDEBAR_COMPACT_PX = 56
COMPACT_BELOW_PX = 1000       # narrower windows show the sidebar as icons only
ICON_TOOLBAR_BELOW_PX = 900   # narrower still: the toolbar's buttons too (the Environment picker keeps its text)
PICKER_TEXT_PX = (190, 320)   # the environment picker's text in a compact / a wide window (then elided)
SOURCE_SHARE = 0.38           # the status bar's source line takes at most this share of the width (the message the rest)
LATE_PAGES_MS = 600           # after the window is shown, the pages it did not wait for are built (gui/page_set.py)
TITLE_ROLE = Qt.ItemDataRole.UserRole + 1
# (module under cpudoctor.gui, class name) in sidebar order
PAGES: tuple[tuple[str, str], ...] = (
    ("overview_page", "OverviewPage"),
    ("flags_page", "FlagsPage"),
    ("topology_page", "TopologyPage"),
    ("monitor_page", "MonitorPage"),
    ("training_page", "TrainingPage"),
    ("advisor_page", "AdvisorPage"),
    ("inspector_page", "InspectorPage"),
    ("report_page", "ReportPage"),
)


def saved_report_title(name: str) -> str:
    """``r.json (saved report)``; the platform adds the application name (" — CPU Doctor"), so it is not repeated."""
    for prefix in ("Saved report ", "saved report ", "Report "):
        name = name.removeprefix(prefix)
    return f"{name} (saved report)"


def page_classes() -> list[type]:
    """The page classes in sidebar order (a missing page is a packaging bug: let it raise)."""
    return [getattr(importlib.import_module(f"cpudoctor.gui.{module}"), cls) for module, cls in PAGES]


def versions() -> list[tuple[str, str]]:
    """Versions shown by About (never imports torch: that happens in child processes only)."""
    from importlib.metadata import PackageNotFoundError, version

    from PySide6 import __version__ as pyside_version
    from PySide6.QtCore import qVersion

    def dist(name: str) -> str:
        try:
            return version(name)
        except PackageNotFoundError:
            return "not installed"

    return [("CPU Doctor", __version__),
            ("Python", f"{platform.python_version()} ({platform.python_implementation()})"),
            ("Qt", qVersion()),
            ("PySide6", pyside_version),
            ("pyqtgraph", dist("pyqtgraph")),
            ("psutil", dist("psutil")),
            ("numpy", dist("numpy"))]


class ReadOnlyBanner(QFrame):
    """'You are looking at a saved report of another machine' with a way back."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("banner")
        self._restyle()
        h = QHBoxLayout(self)
        h.setContentsMargins(16, 6, 10, 6)
        self.label = QLabel()
        self.label.setWordWrap(True)
        self.back = QPushButton("Back to this machine")
        h.addWidget(self.label, 1)
        h.addWidget(self.back)

    def _restyle(self) -> None:
        """Amber on light themes, a dim amber on dark ones (a pale banner glares in a dark window)."""
        dark = self.palette().color(QPalette.ColorRole.Window).lightness() < 128
        bg, border, fg = ("#4a3c14", "#7a6424", "#f3e2ae") if dark else ("#fff4d6", "#e0c070", "#5a4a10")
        sheet = (f"QFrame#banner {{ background: {bg}; border-bottom: 1px solid {border}; }}"
                 f"QFrame#banner QLabel {{ color: {fg}; background: transparent; }}")
        if sheet != self.styleSheet():       # a new sheet can itself change the palette: no loop
            self.setStyleSheet(sheet)

    def changeEvent(self, event) -> None:  # noqa: N802 - Qt API
        super().changeEvent(event)
        if event.type() == QEvent.Type.PaletteChange:
            self._restyle()

    def show_report(self, report: Report, label: str) -> None:
        brand = report.cpu.brand or "unknown CPU"
        date = (report.meta.generated_at or "unknown date").replace("T", " ")[:16]
        self.label.setText(f"<b>Read-only:</b> {label} — {brand}, captured {date} UTC. "
                           "The Monitor still shows this machine.")


class MainWindow(QMainWindow):
    def __init__(self, model: AppModel | None = None, settings: QSettings | None = None,
                 root: Path = Path("/"), collect: bool = True, children: bool = True,
                 env_lookup: EnvLookup | None = None, parent: QWidget | None = None):
        super().__init__(parent)
        self.model = model or AppModel(self)
        if settings is None:            # never Qt's own file handling: see gui/settings_file.py
            from cpudoctor.gui.settings_file import window_settings

            settings = window_settings()
        self.settings = settings
        # The Python environment the report and the lab's jobs are about: remembered in the settings;
        # ``env_lookup`` says where to look (tests give a fake home and working folder).
        self.environments = self.model.environments
        self.environments.settings = self.settings
        if env_lookup is not None:
            self.environments.lookup = env_lookup
        self._environment_known = False    # the first choice (usually the default) has arrived
        self.setWindowTitle(APP_NAME)
        self.setWindowIcon(app_icon())
        self.setMinimumSize(QSize(760, 520))

        self.collector = ReportCollector(self.model, root=root, children=children, parent=self)
        self.sampler = LiveSampler(self.model, rate_hz=self._setting_float("monitor/rate_hz", DEFAULT_HZ), parent=self)
        self.pages: PageSet                # title -> page (Monitor and Training built just after the first paint)
        self.report_actions = None

        self._build_central()
        self._build_pages()
        self._build_actions()
        self._build_status()
        self._wire()
        self._restore()
        self._collect_on_show = collect

    # -- building -------------------------------------------------------------
    def _build_central(self) -> None:
        central = QWidget()
        h = QHBoxLayout(central)
        h.setContentsMargins(0, 0, 0, 0)
        h.setSpacing(0)
        self.sidebar = QListWidget()
        self.sidebar.setObjectName("sidebar")
        self.sidebar.setIconSize(QSize(22, 22))
        self.sidebar.setFixedWidth(SIDEBAR_PX)
        self.sidebar.setFrameShape(QFrame.Shape.NoFrame)
        self.sidebar.setStyleSheet(
            "QListWidget#sidebar { background: palette(window); border-right: 1px solid palette(midlight);"
            " padding-top: 8px; outline: 0; }"
            "QListWidget#sidebar::item { padding: 8px 10px; margin: 1px 6px; border-radius: 6px; }"
            "QListWidget#sidebar::item:selected { background: palette(highlight); color: palette(highlighted-text); }")
        right = QWidget()
        v = QVBoxLayout(right)
        v.setContentsMargins(0, 0, 0, 0)
        v.setSpacing(0)
        self.banner = ReadOnlyBanner()
        self.banner.hide()
        self.stack = QStackedWidget()
        v.addWidget(self.banner)
        v.addWidget(self.stack, 1)
        h.addWidget(self.sidebar)
        h.addWidget(right, 1)
        self.setCentralWidget(central)

    def _build_pages(self) -> None:
        self.pages = PageSet(self.stack, lambda cls: cls(self.model), self._page_built)
        for module, cls_name in PAGES:
            title = self.pages.add(module, cls_name, late=True)
            item = QListWidgetItem(icon(self.pages.icons[title]), title)
            item.setData(TITLE_ROLE, title)
            item.setSizeHint(QSize(160, 38))
            self.sidebar.addItem(item)
        self.sidebar.currentRowChanged.connect(self._on_row)

    def _page_built(self, title: str, page: QWidget) -> None:
        """Wire a page once it exists (the Monitor and Training pages are built after the first paint)."""
        nav = getattr(page, "navigate", None)
        if nav is not None and hasattr(nav, "connect"):
            nav.connect(self.show_page)
        finding = getattr(page, "open_finding", None)
        if finding is not None and hasattr(finding, "connect"):
            finding.connect(self.open_finding)
        if title == "Monitor":
            page.set_rate(self.sampler.rate_hz)
            page.rate_changed.connect(self._set_rate)
            page.paused_changed.connect(self._set_paused)
        elif title == "Training":
            self._keep_lab_runs(page)

    def _keep_lab_runs(self, training: QWidget) -> None:
        """The Training page keeps its runs between sessions beside the window's settings file."""
        from cpudoctor.gui.training_runs import RunStore

        where = self.settings.fileName()
        if where:
            training.set_run_store(RunStore(Path(where).with_name("lab-runs.json")))

    def _build_late_pages(self) -> None:
        """One page the window did not wait for, per turn of the event loop, while it is shown."""
        if self.isVisible() and self.pages.build_next():
            QTimer.singleShot(0, self._build_late_pages)

    def set_compact_sidebar(self, compact: bool) -> None:
        """Icons only (titles in tooltips): a narrow window gives its width to the page."""
        if compact == getattr(self, "_compact", False):
            return
        self._compact = compact
        for row in range(self.sidebar.count()):
            item = self.sidebar.item(row)
            title = item.data(TITLE_ROLE)
            item.setText("" if compact else title)
            item.setToolTip(title if compact else "")
            item.setSizeHint(QSize(40, 38) if compact else QSize(160, 38))
        self.sidebar.setFixedWidth(SIDEBAR_COMPACT_PX if compact else SIDEBAR_PX)

    def resizeEvent(self, event) -> None:  # noqa: N802 - Qt API
        super().resizeEvent(event)
        compact = event.size().width() < COMPACT_BELOW_PX
        self.set_compact_sidebar(compact)
        self.toolbar.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonIconOnly
                                        if event.size().width() < ICON_TOOLBAR_BELOW_PX
                                        else Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        self.env_picker.set_max_text_width(PICKER_TEXT_PX[0] if compact else PICKER_TEXT_PX[1])
        self.source_label.setMaximumWidth(int(event.size().width() * SOURCE_SHARE))

    def _build_actions(self) -> None:
        from cpudoctor.gui.export import ReportActions

        self.report_actions = ReportActions(self.model, self, collector=self.collector)
        ra = self.report_actions

        self.refresh_action = QAction(icon("refresh"), "&Refresh", self)
        self.refresh_action.setShortcut(QKeySequence.StandardKey.Refresh)
        self.refresh_action.setToolTip("Probe this machine again")
        self.refresh_action.triggered.connect(self.refresh)
        if ra is not None and getattr(ra, "open_report", None) is not None:
            self.open_action = ra.open_report
        else:
            self.open_action = QAction(icon("open"), "&Open report…", self)
            self.open_action.setShortcut(QKeySequence.StandardKey.Open)
            self.open_action.triggered.connect(self.open_report_dialog)
        if self.open_action.icon().isNull():
            self.open_action.setIcon(icon("open"))
        self.export_action = getattr(ra, "export_quick", None) if ra is not None else None
        if self.export_action is not None and self.export_action.icon().isNull():
            self.export_action.setIcon(icon("export"))
        self.about_action = QAction(icon("about"), "&About CPU Doctor", self)
        self.about_action.triggered.connect(self.about)
        self.quit_action = QAction(icon("quit"), "&Quit", self)
        self.quit_action.setShortcut(QKeySequence.StandardKey.Quit)
        self.quit_action.triggered.connect(self.close)

        tb = QToolBar("Main")
        tb.setObjectName("main_toolbar")
        tb.setMovable(False)
        tb.setIconSize(QSize(20, 20))
        tb.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        if self.export_action is not None:
            tb.addAction(self.export_action)
        tb.addAction(self.open_action)
        tb.addAction(self.refresh_action)
        self.env_picker = EnvironmentPicker(self.environments)
        tb.addWidget(self.env_picker)
        spacer = QWidget()
        spacer.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Preferred)
        tb.addWidget(spacer)
        tb.addAction(self.about_action)
        self.addToolBar(tb)
        self.toolbar = tb

        menu = self.menuBar()
        file_menu = menu.addMenu("&File")
        for name in ("export_quick", "export_as", "copy_markdown"):
            act = getattr(ra, name, None) if ra is not None else None
            if act is not None:
                file_menu.addAction(act)
        file_menu.addAction(self.open_action)
        for name in ("compare", "capture"):
            act = getattr(ra, name, None) if ra is not None else None
            if act is not None:
                file_menu.addAction(act)
        file_menu.addSeparator()
        file_menu.addAction(self.refresh_action)
        file_menu.addSeparator()
        file_menu.addAction(self.quit_action)
        view_menu = menu.addMenu("&View")
        for i, title in enumerate(self.pages):
            act = QAction(icon(self.pages.icons[title]), title, self)
            if i < 9:
                act.setShortcut(QKeySequence(f"Ctrl+{i + 1}"))
            act.triggered.connect(lambda _=False, t=title: self.show_page(t))
            view_menu.addAction(act)
        view_menu.addSeparator()
        self.theme_actions = self._build_theme_menu(view_menu.addMenu("&Theme"))
        from cpudoctor.gui.help_menu import HelpActions

        self.help_actions = HelpActions(self.model, self)
        help_menu = menu.addMenu("&Help")
        for act in (self.help_actions.docs, self.help_actions.rules, self.help_actions.report_problem):
            help_menu.addAction(act)
        help_menu.addSeparator()
        help_menu.addAction(self.about_action)
        report_page = self.pages.get("Report")
        if report_page is not None and ra is not None:
            # File > Export as… starts from what the Report page shows (format and privacy)
            ra.preferences = lambda: (report_page.fmt, report_page.privacy.isChecked())

    def _build_theme_menu(self, menu) -> dict[str, QAction]:
        """View > Theme: System (the desktop's light or dark), Light, Dark; remembered in the settings."""
        from PySide6.QtGui import QActionGroup
        from PySide6.QtWidgets import QApplication

        from cpudoctor.gui.theme import THEMES, current_theme

        group = QActionGroup(self)
        group.setExclusive(True)
        now = current_theme(QApplication.instance())
        actions = {}
        for name, text in zip(THEMES, ("&System (follow the desktop)", "&Light", "&Dark")):
            act = QAction(text, self, checkable=True)
            act.setChecked(name == now)
            act.triggered.connect(lambda _=False, n=name: self.set_theme(n))
            group.addAction(act)
            menu.addAction(act)
            actions[name] = act
        return actions

    def set_theme(self, theme: str) -> None:
        """Switch the window's colours now and remember the choice (every page restyles on the palette change)."""
        from PySide6.QtWidgets import QApplication

        from cpudoctor.gui.theme import SETTINGS_KEY, apply_theme

        app = QApplication.instance()
        if app is not None:
            apply_theme(app, theme)
        if theme in self.theme_actions:
            self.theme_actions[theme].setChecked(True)
        self.settings.setValue(SETTINGS_KEY, theme)

    def _build_status(self) -> None:
        sb = self.statusBar()
        self.busy = QProgressBar()
        self.busy.setRange(0, 0)
        self.busy.setFixedWidth(110)
        self.busy.setMaximumHeight(12)
        self.busy.setTextVisible(False)
        self.busy.hide()
        # which machine and environment the pages describe; elided in a narrow window, so the message has room
        self.source_label = ElidedLabel("This machine")
        self.source_label.setStyleSheet("color: palette(placeholder-text); padding: 0 8px;")
        sb.addPermanentWidget(self.busy)
        sb.addPermanentWidget(self.source_label)

    def _wire(self) -> None:
        m = self.model
        m.status_message.connect(lambda text: self.statusBar().showMessage(text, 8000))
        m.report_changed.connect(self._on_report)
        self.collector.busy_changed.connect(self._show_busy)
        self.collector.busy_changed.connect(self._list_when_idle)
        self.environments.looking_changed.connect(self._show_busy)
        self.collector.open_failed.connect(self._open_failed)
        # a saved report starts at its summary, not on a live page (Monitor, Inspector) of this machine
        self.collector.opened.connect(lambda _path: self.show_page("Overview"))
        self.banner.back.clicked.connect(self.refresh)
        self.environments.chosen.connect(self._on_environment)
        self.environments.rejected.connect(self._environment_rejected)

    # -- settings -------------------------------------------------------------
    def _setting_float(self, key: str, default: float) -> float:
        try:
            return float(self.settings.value(key, default))
        except (TypeError, ValueError):
            return default

    def _restore(self) -> None:
        geometry = self.settings.value("window/geometry")
        if isinstance(geometry, QByteArray) and not geometry.isEmpty():
            self.restoreGeometry(geometry)
        else:
            self.resize(1180, 780)
        state = self.settings.value("window/state")
        if isinstance(state, QByteArray) and not state.isEmpty():
            self.restoreState(state)
        last = self.settings.value("window/page", "Overview")
        titles = list(self.pages)
        self.sidebar.setCurrentRow(titles.index(last) if last in titles else 0)

    def save_settings(self) -> None:
        self.settings.setValue("window/geometry", self.saveGeometry())
        self.settings.setValue("window/state", self.saveState())
        self.settings.setValue("window/page", self.current_page_title())
        self.settings.setValue("monitor/rate_hz", self.sampler.rate_hz)
        self.settings.sync()

    # -- behaviour ------------------------------------------------------------
    def current_page_title(self) -> str:
        return self.pages.title_at(self.stack.currentIndex())

    def show_page(self, title: str) -> None:
        titles = list(self.pages)
        if title in titles:
            self.sidebar.setCurrentRow(titles.index(title))

    def open_finding(self, code: str) -> None:
        """Show one finding in the Advisor (the Overview's "start here")."""
        advisor = self.pages.get("Advisor")
        if advisor is not None:
            advisor.select(code)
            self.show_page("Advisor")

    def _on_row(self, row: int) -> None:
        if row >= 0:
            self.pages.get(self.pages.title_at(row))       # a page the window did not wait for is built now
            self.stack.setCurrentIndex(row)

    def _on_report(self, report: Report) -> None:
        m = self.model
        sw = report.software
        python = sw.python if sw is not None and not sw.captured else None
        self.source_label.set_full(env_choice.source_text(m.source_label, python),
                                   env_choice.ABOUT if python is not None else "")
        if m.read_only:
            self.banner.show_report(report, m.source_label)
            self.banner.show()
            self.setWindowTitle(saved_report_title(m.source_label))
            self.env_picker.show_saved(python)   # it describes someone else's environment
        else:
            self.banner.hide()
            self.setWindowTitle(APP_NAME)
            self.env_picker.show_live()

    def _on_environment(self, env, chosen_by: str) -> None:
        """The environment chosen (the default when the window opens, or the user's pick): this
        machine's report describes it, built anew; a saved report shown stays."""
        awaited = self.collector.awaiting_environment       # the report in progress waits for exactly this
        self.collector.set_environment(env, chosen_by)
        default, self._environment_known = not self._environment_known and chosen_by != WINDOW, True
        if awaited or self.collector.opening or self.model.read_only:
            # awaited: the run goes on with it; a saved report: the user's file is what to show (however
            # it was opened), and Back to this machine uses this choice
            self._show_busy()
            return
        if default:
            return                          # nothing was waiting for it (the window was told not to probe)
        shows_this_machine = self.model.report is not None or self.collector.busy
        if self.collector.live and not self.model.read_only and shows_this_machine:
            self.model.status_message.emit(env_choice.switching_text(env))
            self.collector.start()

    def _list_when_idle(self, busy: bool) -> None:
        """Once this machine's first report is done, list the environments for the picker (off the
        critical path: asking every interpreter competes with the report's checks for the CPU)."""
        if not busy and self.environments.decided and not self.environments.listed_once:
            self.environments.start()

    def _show_busy(self, _busy: bool = False) -> None:
        """The status bar's busy bar: a report being built (perhaps waiting for its environment)."""
        self.busy.setVisible(self.collector.busy)

    def _environment_rejected(self, message: str) -> None:
        QMessageBox.warning(self, "Cannot use this Python", message)

    def _set_rate(self, hz: float) -> None:
        self.sampler.set_rate(hz)
        self.settings.setValue("monitor/rate_hz", self.sampler.rate_hz)

    def _set_paused(self, paused: bool) -> None:
        if paused:
            self.sampler.pause()
        elif self.isVisible():
            self.sampler.resume()

    def refresh(self) -> None:
        """Probe this machine again (also leaves a report opened from a file).

        The first time, the Python environment to describe is decided meanwhile (the one chosen last
        time, else the CLI's default: milliseconds, one interpreter at most): the machine's facts show
        at once, and the software stages wait for the decision.
        """
        self.model.read_only = False
        if self.collector.live and not self.environments.decided:
            self.environments.decide_default()
            self.collector.start(environment_pending=True)
            return
        self.collector.start()

    def open_report_dialog(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Open a CPU Doctor report", "",
                                              "CPU Doctor reports (*.json);;All files (*)")
        if path:
            self.open_report(Path(path))

    def open_report(self, path: Path) -> None:
        """Show a saved report read-only (read and diagnosed off the GUI thread, like every report).

        A bad file gets a message, not a crash; when nothing is shown yet (the window was
        started with that file), this machine is read instead.
        """
        self.collector.open(path)
        self._show_busy()

    def _open_failed(self, message: str) -> None:
        QMessageBox.warning(self, "Cannot open the report", message)
        if self.model.report is None:
            self.refresh()

    def about(self) -> None:
        rows = "".join(f"<tr><td>{k}</td><td>&nbsp;&nbsp;{v}</td></tr>" for k, v in versions())
        QMessageBox.about(self, "About CPU Doctor",
                          "<h3>CPU Doctor</h3><p>Is this CPU set up well for deep learning? "
                          "What to change, and why.</p>"
                          f"<table>{rows}</table>"
                          f"<p style='color:gray'>{sys.platform}, {platform.machine()}</p>")

    # -- lifecycle ------------------------------------------------------------
    def showEvent(self, event) -> None:  # noqa: N802 - Qt API
        super().showEvent(event)
        monitor = self.pages.built("Monitor")
        if not (monitor is not None and monitor.paused):
            self.sampler.start()
        QTimer.singleShot(LATE_PAGES_MS, self._build_late_pages)
        if self._collect_on_show:
            self._collect_on_show = False
            # after the first paint, so the window appears before any probe runs
            QTimer.singleShot(0, self.refresh)

    def hideEvent(self, event) -> None:  # noqa: N802 - Qt API
        super().hideEvent(event)
        self.sampler.pause()

    def changeEvent(self, event) -> None:  # noqa: N802 - Qt API
        super().changeEvent(event)
        if event.type() == event.Type.WindowStateChange:
            monitor = self.pages.built("Monitor")
            if self.isMinimized():
                self.sampler.pause()        # nobody looks at a minimised window
            elif self.isVisible() and not (monitor is not None and monitor.paused):
                self.sampler.start()

    def running_jobs(self) -> list[str]:
        """What the pages are running now ("the training run", "the script run in the Inspector"): a page says so
        through ``running_job()``, "" when it runs nothing."""
        jobs = []
        for title in self.pages:
            ask = getattr(self.pages.built(title), "running_job", None)
            what = ask() if callable(ask) else ""
            if what:
                jobs.append(what)
        return jobs

    def confirm_close(self, jobs: list[str]) -> bool:
        """Ask before a running job is stopped by closing the window; True: close (and stop it)."""
        what = " and ".join(jobs)
        box = QMessageBox(QMessageBox.Icon.Question, "Quit CPU Doctor?",
                          f"{what[:1].upper()}{what[1:]} {'is' if len(jobs) == 1 else 'are'} still running.",
                          parent=self)
        box.setInformativeText("Quitting stops it, and what it measured so far is not kept.")
        stop = box.addButton("Stop and quit", QMessageBox.ButtonRole.DestructiveRole)
        keep = box.addButton("Keep running", QMessageBox.ButtonRole.RejectRole)
        box.setDefaultButton(keep)
        box.setEscapeButton(keep)
        box.exec()
        return box.clickedButton() is stop

    def close_now(self) -> None:
        """Close without asking (Ctrl+C in the terminal, the session ending): running jobs are stopped."""
        self._close_anyway = True
        self.close()

    def closeEvent(self, event: QCloseEvent) -> None:  # noqa: N802 - Qt API
        jobs = [] if getattr(self, "_close_anyway", False) else self.running_jobs()
        if jobs and not self.confirm_close(jobs):
            event.ignore()
            return
        self.save_settings()
        self.sampler.stop()
        self.collector.cancel()
        super().closeEvent(event)
