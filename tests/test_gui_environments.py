"""The window's Python environment: the toolbar picker, its default, switching, and every page saying which.

Real throw-away venvs (a fake torch with real dist-info is enough: nothing imports it) in a fake home and
working folder; discovery looks only there (plus CPU Doctor's own environment, which it always lists), so
nothing depends on this machine's environments. Reports are built without child processes.
"""

from __future__ import annotations

import stat
import threading

import pytest
from PySide6.QtCore import QSettings
from PySide6.QtWidgets import QFileDialog, QMessageBox

from gui_support import no_qt_leaks, settings  # noqa: F401 - fixtures
from test_envs import make_venv

from cpudoctor.gui.environments import SETTINGS_KEY, EnvironmentChooser, EnvLookup
from cpudoctor.gui.main_window import MainWindow
from cpudoctor.gui.model import AppModel
from cpudoctor.render import env_choice


class CountingLookup(EnvLookup):
    """An EnvLookup that notes the threads it ran on (discovery must never run on the UI thread)."""

    threads: list[int]

    def find(self, fresh: bool = False):
        self.threads.append(threading.get_ident())
        return super().find(fresh)


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """A project folder with a .venv that has torch, a virtualenvwrapper env without it, a broken
    environment, and one venv outside every place discovery looks."""
    base = tmp_path_factory.mktemp("envworld")
    home, project = base / "home", base / "project"
    project.mkdir(parents=True)
    with_torch = make_venv(project / ".venv", torch="2.4.0+cpu", numpy="2.0.1")
    plain = make_venv(home / ".virtualenvs" / "plain", numpy="2.1.0")
    hidden = make_venv(base / "elsewhere" / "hidden")
    broken = home / ".virtualenvs" / "broken"
    (broken / "bin").mkdir(parents=True)
    (broken / "pyvenv.cfg").write_text("home = /nowhere\n")
    script = broken / "bin" / "python3"
    script.write_text("#!/bin/sh\necho 'not a python'\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    not_python = base / "notes.txt"
    not_python.write_text("hello\n")
    bin_dir = base / "bin"
    bin_dir.mkdir()
    return {"base": base, "home": home, "project": project, "environ": {"HOME": str(home), "PATH": str(bin_dir)},
            "torch": str(with_torch / "bin" / "python3"), "plain": str(plain / "bin" / "python3"),
            "hidden": str(hidden / "bin" / "python3"), "not_python": str(not_python)}


def lookup(world, **extra_env) -> CountingLookup:
    found = CountingLookup(environ={**world["environ"], **extra_env}, home=world["home"], cwd=world["project"],
                           run_conda=False, cache=world["base"] / "cache")
    found.threads = []
    return found


def _window(qtbot, world, settings, *, collect: bool = False, env_lookup=None) -> MainWindow:
    window = MainWindow(AppModel(), settings=settings, collect=collect, children=False,
                        env_lookup=env_lookup or lookup(world))
    qtbot.addWidget(window)
    window.show()
    qtbot.waitExposed(window)
    return window


def _close(window: MainWindow) -> None:
    window.sampler.stop()
    window.pages["Inspector"].inspections.live_timer.stop()
    window.close()


def _described(window: MainWindow, python: str, chosen_by: str):
    """A condition: this machine's report describes ``python``'s environment, chosen as ``chosen_by``."""
    def check():
        report = window.model.report
        p = report.software.python if report is not None and report.software is not None else None
        return p is not None and p.executable == python and p.chosen_by == chosen_by and not window.collector.busy
    return check


def test_picker_lists_the_environments_off_the_ui_thread_and_prefers_one_with_torch(qtbot, world, settings):
    found = lookup(world)
    window = _window(qtbot, world, settings, env_lookup=found)
    picker, chooser = window.env_picker, window.environments
    with qtbot.waitSignal(chooser.listed, timeout=60_000):
        chooser.start()
        assert picker.full_text == env_choice.LOOKING          # at once, before anything was found
    assert found.threads and threading.get_ident() not in found.threads
    names = [e.name for _a, e in picker.entries]
    assert {"project/.venv", "plain", "broken"} <= set(names)
    assert chooser.current.name == "project/.venv" and chooser.chosen_by == "working-folder"
    assert "torch 2.4.0+cpu" in picker.entry("project/.venv").text() and picker.entry("project/.venv").isChecked()
    assert "no torch" in picker.entry("plain").text()
    assert "numpy 2.0.1" in picker.entry("project/.venv").text()             # issue 28, 10: numpy is shown
    own = [i for i, (_a, e) in enumerate(picker.entries) if e.own]
    assert own and "CPU Doctor's own" in picker.entries[own[0]][0].text()
    assert names.index("project/.venv") < own[0]                          # CPU Doctor's own is not the default
    broken = picker.entry("broken")
    assert not broken.isEnabled() and "not its version" in broken.toolTip()
    assert picker.full_text.startswith("project/.venv") and picker.button.isEnabled()
    assert "project/.venv/bin/python3" in picker.button.toolTip()
    _close(window)


def test_choosing_rebuilds_the_report_there_and_is_remembered(qtbot, world, settings):
    window = _window(qtbot, world, settings, collect=True)
    qtbot.waitUntil(_described(window, world["torch"], "working-folder"), timeout=60_000)
    qtbot.waitUntil(lambda: window.environments.listed_once, timeout=60_000)
    window.env_picker.entry("plain").trigger()
    qtbot.waitUntil(_described(window, world["plain"], "window"), timeout=60_000)
    report = window.model.report
    assert report.software.python.env_name == "plain"
    assert [p.name for p in report.software.packages] == ["numpy"]                     # plain's own packages
    assert settings.value(SETTINGS_KEY) == world["plain"]
    # every page says which environment it describes
    assert "plain (venv" in window.source_label.full and window.source_label.full.startswith("This machine")
    assert window.pages["Overview"].cards["System"].value("Python environment").startswith("plain (venv")
    assert "chosen in the window" in window.pages["Overview"].cards["System"].value("Python environment")
    assert window.pages["Advisor"].environment.text().startswith("Python environment: plain (venv")
    training = window.pages["Training"]
    assert "plain" in training.env_line.text() and "no torch" in training.env_line.text()
    _close(window)

    # the next run starts where this one ended
    again = _window(qtbot, world, settings, collect=True)
    qtbot.waitUntil(_described(again, world["plain"], "window"), timeout=60_000)
    assert again.environments.current.name == "plain"
    qtbot.waitUntil(lambda: again.environments.listed_once, timeout=60_000)
    _close(again)


def test_training_jobs_run_in_the_chosen_interpreter(qtbot, world, settings):
    window = _window(qtbot, world, settings)
    chooser = window.environments
    with qtbot.waitSignal(chooser.listed, timeout=60_000):
        chooser.start()
    page = window.pages["Training"]
    args = page.session.begin("train", page.train_settings().to_dict(), None)
    argv = page.job_argv("train", args)
    assert argv[0] == world["torch"] and argv[1:3] == ["-I", "-B"]        # isolated, in the environment
    assert page.train_button.isEnabled()
    chooser.choose(next(e for e in chooser.envs if e.name == "plain"))
    assert page.job_argv("gemm", {})[0] == world["plain"] and page.runner.python == world["plain"]
    # plain has no torch: the jobs wait for one (the banner has the command), and say why
    assert page.torch_banner.missing and not page.train_button.isEnabled()
    assert "no PyTorch" in page.sweep_button.toolTip()
    sweep = page.job_argv("sweep", {"budget_s": 10})
    assert f'"python": "{world["plain"]}"' in " ".join(sweep)              # its workers run there too
    own = next(e for e in chooser.envs if e.own)
    chooser.choose(own)
    assert page.job_python is None                                         # CPU Doctor's own, as the CLI does
    assert page.train_button.isEnabled() == bool(own.torch)
    page.shutdown()
    _close(window)


def test_default_honours_cpudoctor_python_and_a_forgotten_choice_falls_back(qtbot, world, settings):
    chooser = EnvironmentChooser(lookup=lookup(world, CPUDOCTOR_PYTHON=world["plain"]), settings=settings)
    with qtbot.waitSignal(chooser.chosen, timeout=60_000) as got:
        chooser.start()
    assert got.args[0].name == "plain" and got.args[1] == "$CPUDOCTOR_PYTHON"
    qtbot.waitUntil(lambda: not chooser.looking, timeout=60_000)

    settings.setValue(SETTINGS_KEY, str(world["base"] / "gone" / "bin" / "python"))
    later = EnvironmentChooser(lookup=lookup(world), settings=settings)
    notes: list[str] = []
    later.message.connect(notes.append)
    with qtbot.waitSignal(later.chosen, timeout=60_000) as got:
        later.start()
    assert got.args[0].name == "project/.venv" and got.args[1] == "working-folder"
    assert any("chosen last time" in n and "no such file" in n for n in notes)
    qtbot.waitUntil(lambda: not later.looking, timeout=60_000)


def test_other_interpreter_adds_a_good_one_and_refuses_a_bad_one_in_one_message(qtbot, world, settings, monkeypatch):
    window = _window(qtbot, world, settings)
    chooser, picker = window.environments, window.env_picker
    with qtbot.waitSignal(chooser.listed, timeout=60_000):
        chooser.start()
    shown: list[str] = []
    monkeypatch.setattr(QMessageBox, "warning", lambda *a, **k: shown.append(a[2]))
    monkeypatch.setattr(QFileDialog, "getOpenFileName", lambda *a, **k: (world["not_python"], ""))
    before = chooser.current
    picker.other_action.trigger()
    qtbot.waitUntil(lambda: len(shown) == 1, timeout=30_000)
    qtbot.waitUntil(lambda: not chooser.looking, timeout=30_000)
    assert "notes.txt cannot be used" in shown[0] and "\n" not in shown[0]
    assert chooser.current is before and settings.value(SETTINGS_KEY) is None

    monkeypatch.setattr(QFileDialog, "getOpenFileName", lambda *a, **k: (world["hidden"], ""))
    with qtbot.waitSignal(chooser.chosen, timeout=30_000):
        picker.other_action.trigger()
    assert chooser.current.python == world["hidden"] and chooser.chosen_by == "window"
    assert picker.entry("hidden") is not None and picker.entry("hidden").isChecked()     # listed, though not found
    # issue 28, 10: one added by hand is listed above the greyed rows, not below them
    names = [e.name for _a, e in picker.entries]
    assert names.index("hidden") < names.index("broken") and names[-1] == "broken"
    qtbot.waitUntil(lambda: picker.again_action.isEnabled(), timeout=30_000)              # off while looking
    with qtbot.waitSignal(chooser.listed, timeout=60_000):
        picker.again_action.trigger()                                                     # Look again keeps it
    assert picker.entry("hidden") is not None and chooser.current.name == "hidden"
    assert len(shown) == 1
    _close(window)


def test_inspector_diagnoses_the_inspected_process_environment(qtbot, world, settings):
    from gui_fill import inspection, realistic_report

    window = _window(qtbot, world, settings)
    chooser = window.environments
    with qtbot.waitSignal(chooser.listed, timeout=60_000):
        chooser.start()
    page = window.pages["Inspector"]
    insp = inspection(realistic_report())
    insp.python, insp.python_found_by = world["hidden"], "maps"
    window.show_page("Inspector")
    page.show_inspection(insp, [])
    assert page.python_row.isVisible() and "hidden/bin/python3" in page.python_label.text()
    assert "libraries" in page.python_label.text()
    with qtbot.waitSignal(chooser.chosen, timeout=30_000):
        page.diagnose_button.click()
    assert chooser.current.python == world["hidden"] and window.env_picker.entry("hidden") is not None
    qtbot.waitUntil(lambda: window.current_page_title() == "Overview", timeout=10_000)
    insp.is_python = False
    page.show_inspection(insp, [])
    assert not page.python_row.isVisible()
    _close(window)


def test_a_saved_report_turns_the_picker_off_and_names_its_environment(qtbot, world, settings):
    from gui_fill import realistic_report

    window = _window(qtbot, world, settings)
    chooser = window.environments
    with qtbot.waitSignal(chooser.listed, timeout=60_000):
        chooser.start()
    report = realistic_report()
    report.software.python.env_name, report.software.python.env_kind = "colleague_env", "conda"
    window.model.set_report(report, read_only=True, label="Report colleague.json")
    picker = window.env_picker
    assert not picker.button.isEnabled() and picker.full_text.startswith("Saved report: colleague_env (conda")
    assert "colleague_env" in window.source_label.full                   # (elided to its width, whole in its tooltip)
    assert not window.pages["Training"].train_button.isEnabled()
    window.model.set_report(realistic_report())                  # this machine again
    assert picker.button.isEnabled() and picker.full_text.startswith("project/.venv")
    _close(window)


def test_long_names_are_elided_with_the_whole_line_in_the_tooltip(qtbot, world, settings):
    from cpudoctor.probes.software.envs import PythonEnv

    window = _window(qtbot, world, settings)
    long = PythonEnv(python="/opt/envs/x/bin/python", prefix="/opt/envs/x", kind="conda", version="3.12.3",
                     name="a-very-long-environment-name-for-a-research-project-on-the-cluster", torch="2.5.1+cpu")
    window.environments.choose(long)
    button = window.env_picker.button
    assert button.text().endswith("…") and long.name in button.toolTip() and "2.5.1+cpu" in button.toolTip()
    assert button.fontMetrics().horizontalAdvance(button.text()) <= 320
    _close(window)



class HeldLookup(CountingLookup):
    """Decides the default only when the test lets it (``release``)."""

    def default(self):
        assert self.release.wait(60)
        return super().default()


@pytest.mark.parametrize("how", ["window", "export-actions"])
def test_opening_a_report_while_the_default_is_looked_up_is_not_replaced_by_this_machine(qtbot, world, settings,
                                                                                       monkeypatch, how):
    """The window's first report of this machine waits for the environment; a report the user opens
    meanwhile wins, even when the environment is decided while the file is still being read."""
    from gui_fill import SCENARIO

    from cpudoctor.gui import collector as collector_mod

    reading = threading.Event()
    real_build = collector_mod.build_report

    def slow_for_files(source, **kw):
        if source.kind == "saved":
            assert reading.wait(60)
        return real_build(source, **kw)

    monkeypatch.setattr(collector_mod, "build_report", slow_for_files)
    held = lookup(world)
    held.__class__ = HeldLookup
    held.release = threading.Event()
    window = _window(qtbot, world, settings, collect=True, env_lookup=held)
    qtbot.waitUntil(lambda: window.environments.looking, timeout=10_000)     # this machine waits for the default
    if how == "window":
        window.open_report(SCENARIO)
    else:                                             # the File menu's Open goes through the report actions
        window.report_actions.open_path(SCENARIO)
    with qtbot.waitSignal(window.environments.chosen, timeout=60_000):
        held.release.set()                            # decided while the file is being read
    with qtbot.waitSignal(window.collector.opened, timeout=60_000):
        reading.set()
    qtbot.waitUntil(lambda: not window.environments.looking and not window.collector.busy, timeout=60_000)
    assert window.model.read_only                      # the file's report, diagnosed, not this machine's
    assert window.model.report.cpu.brand.startswith("Intel(R) Xeon(R) Gold 6230")
    assert window.env_picker.full_text.startswith("Saved report:") and not window.env_picker.button.isEnabled()
    _close(window)


def test_menu_lists_usable_first_and_one_kind_of_interpreter_newest_first():
    """Issue 28, 10: pyenv versions were unsorted and greyed rows sat among the usable ones."""
    from cpudoctor.probes.software.envs import PythonEnv

    def env(name, kind, version, error=None):
        return PythonEnv(python=f"/x/{name}", prefix=f"/x/{name}", kind=kind, name=name, version=version, error=error)

    found = [env("proj", "venv", "3.11.9"), env("3.8.18", "pyenv", "3.8.18"), env("old", "conda", None, "hangs"),
             env("3.12.4", "pyenv", "3.12.4"), env("3.10.14", "pyenv", "3.10.14"), env("data", "conda", "3.12.7"),
             env("3.9.19", "pyenv", "3.9.19"), env("by hand", "venv", "3.13.0")]
    names = [e.name for e in env_choice.menu_order(found)]
    assert names == ["proj", "by hand", "3.12.4", "3.10.14", "3.9.19", "3.8.18", "data", "old"]

