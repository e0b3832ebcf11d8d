"""Refusals say why in words (issue 29, item 20): never a raw Python exception, never an empty reason, never a
library's raw allocator message."""

from __future__ import annotations

import pytest

from cpudoctor.probes.software.envs import EnvError, PythonEnv
from cpudoctor.render.words import reason_of

RAW = ("'list' object has no attribute 'get'", "AttributeError", "KeyError", "Traceback", "enforce fail",
       "DefaultCPUAllocator")


def _clean(text: str) -> None:
    assert text.strip() and not any(r in text for r in RAW), text


@pytest.mark.parametrize("exc", [AttributeError("'list' object has no attribute 'get'"), KeyError("version"),
                                 TypeError(), ValueError(""), RuntimeError("   ")])
def test_a_bug_is_named_as_one_not_quoted(exc):
    text = reason_of(exc)
    _clean(text)
    assert "internal error" in text or "no reason" in text


def test_our_own_errors_and_os_errors_keep_their_words(tmp_path):
    assert reason_of(EnvError("/x/python is not a Python interpreter")) == "/x/python is not a Python interpreter"
    try:
        open(tmp_path / "missing")
    except OSError as exc:
        assert reason_of(exc).startswith("No such file or directory")
    assert reason_of(EnvError("")) == "no reason was given"


class _Lookup:
    """An EnvironmentChooser's lookup whose describe hits a bug, or answers with an empty reason."""

    def __init__(self, describe):
        self._describe = describe

    def find(self, fresh: bool = False):
        return []

    def describe(self, python: str):
        return self._describe(python)

    def default(self):
        return None, "only-own"


def _bug(python: str):
    raise AttributeError("'list' object has no attribute 'get'")


def _empty_reason(python: str):
    return PythonEnv(python=python, prefix=python, kind="system", name="x", error="")


@pytest.mark.parametrize("describe", [_bug, _empty_reason], ids=["bug", "empty"])
def test_the_window_refuses_an_interpreter_in_words(qtbot, describe):
    from cpudoctor.gui.environments import EnvironmentChooser

    chooser = EnvironmentChooser(lookup=_Lookup(describe))
    with qtbot.waitSignal(chooser.rejected, timeout=30_000) as blocker:
        chooser.choose_path("/opt/odd/bin/python")
    message = blocker.args[0]
    _clean(message)
    assert message.startswith("/opt/odd/bin/python cannot be used: ") and not message.endswith(": ")


def test_an_empty_error_of_a_listed_environment_still_gives_a_reason(qtbot):
    from cpudoctor.render.env_choice import forgotten_text, rejected_text

    _clean(rejected_text("/x/bin/python", ""))
    assert not rejected_text("/x/bin/python", " ").rstrip().endswith(":")
    _clean(forgotten_text("/x/bin/python", ""))


def test_a_saved_report_that_breaks_the_pipeline_is_refused_in_words(qtbot, tmp_path, monkeypatch):
    from PySide6.QtCore import QThreadPool

    from cpudoctor import pipeline
    from cpudoctor.gui.collector import ReportCollector
    from cpudoctor.gui.model import AppModel

    path = tmp_path / "r.json"
    path.write_text("{}")

    def broken(*a, **kw):
        raise AttributeError("'list' object has no attribute 'get'")

    monkeypatch.setattr("cpudoctor.gui.collector.build_report", broken)
    collector = ReportCollector(AppModel())
    with qtbot.waitSignal(collector.failed, timeout=30_000) as blocker:
        collector.open(path)
    _clean(blocker.args[1])
    QThreadPool.globalInstance().waitForDone(10_000)


def _broken(*a, **kw):
    raise AttributeError("'list' object has no attribute 'get'")


def test_a_compare_that_hits_a_bug_is_refused_in_words(qtbot, tmp_path, monkeypatch):
    from PySide6.QtCore import QThreadPool

    from cpudoctor.gui import export as gexport
    from export_samples import sample_report

    monkeypatch.setattr(gexport, "_compare_sides", _broken)
    dlg = gexport.CompareDialog(sample_report(), "This machine")
    qtbot.addWidget(dlg)
    dlg.b_edit.setText(str(tmp_path / "b.json"))
    with qtbot.waitSignal(dlg.failed, timeout=30_000) as blocker:
        assert dlg.run_compare()
    _clean(blocker.args[0])
    _clean(dlg.status.text())
    QThreadPool.globalInstance().waitForDone(10_000)


def test_an_export_that_hits_a_bug_is_refused_in_words(qtbot, tmp_path, monkeypatch):
    from PySide6.QtCore import QThreadPool
    from PySide6.QtWidgets import QWidget

    from cpudoctor.gui import export as gexport
    from cpudoctor.gui.model import AppModel
    from export_samples import sample_report

    monkeypatch.setattr(gexport, "export_report", _broken)
    window = QWidget()
    qtbot.addWidget(window)
    actions = gexport.ReportActions(AppModel(), window)
    monkeypatch.setattr(actions, "_fail", lambda text, *a, **kw: actions.failed.emit(text))   # no message box
    with qtbot.waitSignal(actions.failed, timeout=30_000) as blocker:
        actions.start_export(sample_report(), "html", tmp_path / "r.html")
    _clean(blocker.args[0])
    QThreadPool.globalInstance().waitForDone(10_000)


def test_a_script_that_cannot_be_run_is_refused_in_words(qtbot, tmp_path, monkeypatch):
    """The Inspector's Run a script…: a runner that fails with a bug says so, not Python's words."""
    from PySide6.QtCore import QThreadPool

    from cpudoctor.gui.inspector_page import InspectorPage
    from cpudoctor.gui.model import AppModel

    page = InspectorPage(AppModel())
    page.inspections.list_fn = lambda: []
    qtbot.addWidget(page)
    monkeypatch.setattr(page.runner, "_run", _broken)
    script = tmp_path / "train.py"
    script.write_text("print('hi')\n")
    with qtbot.waitSignal(page.inspect_failed, timeout=30_000) as blocker:
        page.run_script(str(script))
    _clean(blocker.args[0])
    _clean(page.status_label.text())
    QThreadPool.globalInstance().waitForDone(30_000)


# ---------------------------------------------------------------------------- a memory cap in a lab job

ALLOCATOR = ("[enforce fail at alloc_cpu.cpp:127] err == 0. DefaultCPUAllocator: can't allocate memory: you tried "
             "to allocate 4294967296 bytes. Error code 12 (Cannot allocate memory)")


@pytest.mark.parametrize("message", [
    ALLOCATOR,
    "[enforce fail at CPUAllocator.cpp:71] . DefaultCPUAllocator: not enough memory: you tried to allocate "
    "34359738368 bytes. Buy new RAM!",
    "std::bad_alloc",
])
def test_a_memory_cap_is_said_in_words_not_torchs(message, capsys):
    from cpudoctor.kits.child.lines import parse_line
    from cpudoctor.lab.jobs import _jobkit

    def run(args, stop):
        raise RuntimeError(message)

    assert _jobkit.job_main(run, ["--json-args", "{}"]) == 1
    error = parse_line(capsys.readouterr().out.splitlines()[-1])
    assert error.type == "error" and error.data["kind"] == "memory", error
    _clean(error.text)
    assert "not enough memory" in error.text
    if "4294967296" in message:
        assert "4.0 GiB" in error.text


def test_a_real_memory_cap_in_a_real_job_is_said_in_words(tmp_path):
    """The real GEMM job under an address-space cap: torch's allocator refuses, the job says so in words."""
    import importlib.util
    import resource
    import subprocess

    from cpudoctor.kits.child.lines import ERROR, parse_line
    from cpudoctor.lab.runner import job_command

    if importlib.util.find_spec("torch") is None:   # looked up, never imported: this process is the window's
        pytest.skip("torch is not installed here")
    argv = job_command("gemm", {"size": 32768, "backends": ["torch-fp32"], "threads": [1], "min_seconds": 0.01})

    def cap():
        resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))   # torch imports in 3 GiB, 3 x 4 GiB do not fit

    done = subprocess.run(argv, capture_output=True, timeout=600, preexec_fn=cap, stdin=subprocess.DEVNULL)
    errors = [m for m in map(parse_line, done.stdout.splitlines()) if m is not None and m.type == ERROR]
    assert errors, (done.stdout[-2000:], done.stderr[-2000:])
    _clean(errors[-1].text)
    assert errors[-1].data["kind"] == "memory", errors[-1]
