"""Start-up decisions made before Qt is touched: no display, missing X libraries, the terminal fallback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cpudoctor.gui import app


def test_needs_display():
    assert app.needs_display({}, "linux")
    assert not app.needs_display({"DISPLAY": ":0"}, "linux")
    assert not app.needs_display({"WAYLAND_DISPLAY": "wayland-0"}, "linux")
    assert not app.needs_display({"QT_QPA_PLATFORM": "offscreen"}, "linux")   # an explicit choice wins
    assert not app.needs_display({}, "darwin") and not app.needs_display({}, "win32")


def test_uses_xcb():
    assert app.uses_xcb({"DISPLAY": ":0"}, "linux")
    assert not app.uses_xcb({"DISPLAY": ":0", "WAYLAND_DISPLAY": "w"}, "linux")
    assert app.uses_xcb({"QT_QPA_PLATFORM": "xcb"}, "linux")
    assert not app.uses_xcb({"QT_QPA_PLATFORM": "offscreen", "DISPLAY": ":0"}, "linux")
    assert not app.uses_xcb({"DISPLAY": ":0"}, "darwin")


def test_missing_xcb_libs_names_libraries_and_packages():
    absent = {"libxcb-cursor.so.0", "libxkbcommon-x11.so.0"}

    def load(name):
        if name in absent:
            raise OSError(f"{name}: cannot open shared object file")

    assert app.missing_xcb_libs(load) == [("libxcb-cursor.so.0", "libxcb-cursor0"),
                                          ("libxkbcommon-x11.so.0", "libxkbcommon-x11-0")]
    assert app.missing_xcb_libs(lambda name: None) == []


@pytest.fixture
def printed(monkeypatch):
    """Record that the launcher printed the terminal report instead of opening the window."""
    calls = []
    monkeypatch.setattr(app, "terminal_report", lambda: calls.append("doctor") or 0)
    return calls


def test_no_display_prints_the_report_and_how_to_get_the_window(monkeypatch, capsys, printed):
    for var in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(app.sys, "platform", "linux")
    assert app.main([]) == 0
    err = capsys.readouterr().err
    assert "no display" in err and "xvfb-run" in err and "ssh -X" in err
    assert printed == ["doctor"]


def test_missing_libs_print_the_apt_command(monkeypatch, capsys, printed):
    monkeypatch.setenv("DISPLAY", ":77")
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    monkeypatch.delenv("QT_QPA_PLATFORM", raising=False)
    monkeypatch.setattr(app.sys, "platform", "linux")
    monkeypatch.setattr(app, "missing_xcb_libs", lambda: [("libxcb-cursor.so.0", "libxcb-cursor0")])
    assert app.main([]) == 0
    err = capsys.readouterr().err
    assert "libxcb-cursor.so.0 (package libxcb-cursor0)" in err
    assert ("apt-get install -y xvfb libxcb-cursor0 libxcb-icccm4 libxcb-keysyms1 libxcb-image0 "
            "libxcb-render-util0 libxcb-xkb1 libxkbcommon-x11-0 libxcb-shape0") in err
    assert printed == ["doctor"]                    # and the report was printed instead


def test_the_no_display_hint_names_a_command_that_works_after_make_run(monkeypatch, tmp_path, capsys, printed):
    """`make run` starts .venv/bin/cpudoctor, which is not on PATH: the hint prints that script's full path
    (issue 40, 2), never a bare `cpudoctor` the shell cannot find."""
    script = tmp_path / "checkout" / ".venv" / "bin" / "cpudoctor"
    script.parent.mkdir(parents=True)
    script.write_text("#!/bin/sh\n")
    for var in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(app.sys, "platform", "linux")
    monkeypatch.setattr(app.sys, "argv", [str(script.relative_to(tmp_path))])
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PATH", str(tmp_path / "elsewhere"))
    assert app.main([]) == 0
    err = capsys.readouterr().err
    assert f"xvfb-run -a {script}`" in err and f"ssh -X host {script}`" in err
    assert "xvfb-run -a cpudoctor`" not in err
    # on PATH as this very script: the short name is enough
    assert app.launch_command(str(script), which=lambda name: str(script)) == "cpudoctor"
    # started some other way (python -m): this interpreter runs the package
    assert app.launch_command("/somewhere/cpudoctor/__main__.py").endswith(" -m cpudoctor")


def test_make_run_checks_the_x11_libraries_before_it_installs(tmp_path):
    """The check runs with the system Python before the venv exists (standard library only: it runs with
    site-packages off), and `make run` calls it before any pip install."""
    import shutil

    from cpudoctor.gui import x11_libs

    repo = Path(__file__).resolve().parents[1]
    checker = repo / "gui" / "x11_libs.py"
    env = {"PATH": os.environ.get("PATH", ""), "DISPLAY": ":0"}
    out = subprocess.run([sys.executable, "-I", "-S", str(checker)], capture_output=True, text=True, timeout=60,
                         env=env, cwd=tmp_path)
    assert out.returncode in (0, 1), out.stderr
    assert "Traceback" not in out.stderr
    if out.returncode == 1:                          # this machine lacks them: the message is the apt line
        assert x11_libs.APT_LINE in out.stderr
    # the decision itself, with a loader that lacks one library
    def load(name):
        if name == "libxcb-cursor.so.0":
            raise OSError(name)

    assert x11_libs.main({"DISPLAY": ":0"}, load) == 1
    assert x11_libs.main({}, load) == 0                            # no display: the terminal report needs none
    assert x11_libs.main({"DISPLAY": ":0"}, lambda name: None) == 0
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    dry = subprocess.run(["make", "-n", "run", f"VENV={tmp_path / 'venv'}", "PYTHON=python3"], cwd=repo,
                         capture_output=True, text=True, timeout=60)
    lines = dry.stdout.splitlines()
    check = next(i for i, line in enumerate(lines) if "gui/x11_libs.py" in line)
    install = next(i for i, line in enumerate(lines) if "pip install" in line)
    assert check < install, dry.stdout


def test_readme_set_up_has_the_apt_line():
    from cpudoctor.gui import x11_libs

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    setup = readme.split("## Set up", 1)[1].split("\n## ", 1)[0]
    assert x11_libs.APT_LINE in setup


def test_terminal_report_is_the_doctor_page(monkeypatch, capsys):
    """The launcher prints what `cpudoctor doctor` prints, built by the same pipeline (children left out here)."""
    from cpudoctor import pipeline

    built = []
    real = pipeline.build_report

    def quick(source, **kwargs):
        built.append(source)
        return real(source, **{**kwargs, "children": False})

    monkeypatch.setattr(pipeline, "build_report", quick)
    code = app.terminal_report()
    out = capsys.readouterr().out
    # the environment `doctor` describes (the suite sets $CPUDOCTOR_PYTHON to its own interpreter)
    assert built == [pipeline.Source.this_machine(python=None, chosen_by="$CPUDOCTOR_PYTHON")]
    assert out.startswith("CPU Doctor — this machine: ")
    last = out.rstrip().splitlines()
    assert any(line.startswith(("No issues found", "Doctor found issues")) for line in last[-2:])
    assert code in (0, 1)


@pytest.mark.slow
@pytest.mark.alongside
def test_terminal_fallback_for_real(tmp_path):
    """A child process with no display at all: real report text on stdout, advice on stderr, no Qt abort."""
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM")}
    env["XDG_CONFIG_HOME"] = str(tmp_path)
    out = subprocess.run([sys.executable, "-c", "from cpudoctor.gui.app import main; raise SystemExit(main([]))"],
                         capture_output=True, text=True, timeout=120, env=env)
    assert "xvfb-run" in out.stderr
    assert "could not load the Qt platform plugin" not in out.stderr
    assert out.stdout.strip(), out.stderr            # the report itself
    assert out.returncode in (0, 1), out.stderr      # doctor exits 1 when it found problems


def test_screenshot_option_writes_a_png(tmp_path):
    shot = tmp_path / "shot.png"
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen", "XDG_CONFIG_HOME": str(tmp_path / "cfg")}
    out = subprocess.run([sys.executable, "-m", "cpudoctor.gui.app", "--screenshot", str(shot),
                          "--screenshot-delay", "300", "--no-children", "--page", "Flags"],
                         capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode == 0, out.stderr
    assert shot.is_file() and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_pyside_guard_is_a_no_op_on_good_builds(monkeypatch):
    import shiboken6

    monkeypatch.setattr(shiboken6, "__version__", "6.11.3", raising=False)
    assert app.guard_pyside_refcount_bug() is False


def test_pyside_guard_makes_singletons_unkillable_on_a_bad_build():
    """In a child process: pretend shiboken 6.12.0 on Python 3.11; None/True/False get 2**40 references."""
    script = ("import sys, shiboken6\n"
              "shiboken6.__version__ = '6.12.0'\n"
              "from cpudoctor.gui.app import guard_pyside_refcount_bug\n"
              "active = guard_pyside_refcount_bug()\n"
              "print(active, min(sys.getrefcount(o) for o in (None, True, False)) > 2**40)\n")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    expected = "True True" if sys.version_info < (3, 12) else "False False"
    assert out.stdout.strip() == expected, out.stdout + out.stderr


def test_dark_theme_check_boxes_are_visible(qapp):
    """Fusion's unchecked box is #1d1f22 on #25282c in the dark palette: the sheet gives it a border."""
    import re
    from pathlib import Path

    from PySide6.QtWidgets import QCheckBox

    from cpudoctor.gui.app import apply_theme

    style, palette = qapp.style().name(), qapp.palette()
    try:
        apply_theme(qapp, "dark")
        sheet = qapp.styleSheet()
        assert "QCheckBox::indicator" in sheet and "border: 1px solid #7a828b" in sheet
        check = re.search(r"image: url\(([^)]+)\)", sheet).group(1)
        assert Path(check).is_file()
        box = QCheckBox("x")
        box.resize(60, 20)
        img = box.grab().toImage()
        mid = box.height() // 2
        colours = {img.pixelColor(x, mid).name() for x in range(0, 20)}
        assert "#7a828b" in colours                      # the border is drawn
        apply_theme(qapp, "light")
        assert qapp.styleSheet() == ""
    finally:                                             # the other tests run with the style they started with
        qapp.setStyleSheet("")
        qapp.setStyle(style)
        qapp.setPalette(palette)


def test_the_window_collects_garbage_cycles_on_its_main_thread_only(tmp_path):
    """PySide deadlocked a worker thread whose allocation set off Python's cycle collector (it deleted a Qt object
    while the main thread deleted another). The real window, with a thread making cyclic garbage beside it: every
    collection runs on the main thread, and collections do run (pyqtgraph's GarbageCollector on a timer)."""
    shot = tmp_path / "shot.png"
    script = ("import gc, sys, threading, time\n"
              "from cpudoctor.gui import main_window as w\n"
              "seen, churning = [], threading.Event()\n"
              "gc.callbacks.append(lambda phase, info: churning.is_set() and phase == 'start'"
              " and seen.append(threading.current_thread().name))\n"
              "def churn():\n"
              "    churning.set()\n"
              "    while True:\n"
              "        for _ in range(2000):\n"
              "            a = []; a.append(a)\n"
              "        time.sleep(0.002)\n"
              "show = w.MainWindow.show\n"
              "def shown(self):\n"
              "    show(self)\n"
              "    threading.Thread(target=churn, name='churn', daemon=True).start()\n"
              "w.MainWindow.show = shown\n"
              "from cpudoctor.gui.app import main\n"
              f"code = main(['--screenshot', {str(shot)!r}, '--screenshot-delay', '2500', '--no-children'])\n"
              "import json; print(json.dumps([sorted(set(seen)), len(seen), gc.isenabled()]))\n"
              "sys.stdout.flush()\n"
              "import os; os._exit(code)\n")
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen", "XDG_CONFIG_HOME": str(tmp_path / "cfg")}
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    threads, count, enabled = json.loads(out.stdout.strip().splitlines()[-1])
    assert threads == ["MainThread"] and count >= 1 and not enabled, out.stdout
