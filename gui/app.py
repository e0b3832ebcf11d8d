"""Start the window: ``cpudoctor`` with no command, and the ``cpudoctor-gui`` script.

Before Qt is touched, two cases that would otherwise end in Qt's abort
("could not load the Qt platform plugin xcb") are caught and answered in the
terminal instead: no display at all (SSH session, server, container), and a
display but missing X libraries. Either way the doctor report is printed, and
the message says how to get the window.
"""

from __future__ import annotations

import argparse
import ctypes
import logging
import os
import shlex
import shutil
import signal
import sys
from pathlib import Path

from cpudoctor import __version__
from cpudoctor.argtypes import integer
from cpudoctor.gui.theme import THEMES, apply_theme, remembered_theme
from cpudoctor.gui.x11_libs import APT_LINE, missing_text, missing_xcb_libs, uses_xcb

log = logging.getLogger(__name__)


def launch_command(argv0: str | None = None, which=shutil.which) -> str:
    """How to start the window again from this shell: ``cpudoctor`` when that name on PATH is this very
    script; else the script's own path (after ``make run``: ``/…/.venv/bin/cpudoctor``, not on PATH); else
    ``python -m cpudoctor`` with this interpreter."""
    argv0 = sys.argv[0] if argv0 is None else argv0
    script = Path(argv0) if argv0 else None
    if script is not None and script.name.removesuffix(".exe") in ("cpudoctor", "cpudoctor-gui") and script.is_file():
        on_path = which(script.name)
        try:
            if on_path and Path(on_path).resolve() == script.resolve():
                return script.name
        except OSError:
            pass
        return shlex.quote(str(script.absolute()))
    return f"{shlex.quote(sys.executable)} -m cpudoctor"


def how_to_get_the_window(command: str | None = None) -> str:
    command = command or launch_command()
    return (f"To get the window: run `{command}` inside a desktop session, over SSH with X forwarding "
            f"(`ssh -X host {command}`), or on a virtual display (`xvfb-run -a {command}`).")


def needs_display(env: dict[str, str] | None = None, platform: str | None = None) -> bool:
    """True when Qt would look for a display server and none is there (Linux/BSD only)."""
    env = os.environ if env is None else env
    platform = sys.platform if platform is None else platform
    if not platform.startswith(("linux", "freebsd", "openbsd", "netbsd")):
        return False                        # macOS and Windows always have their own platform
    if env.get("QT_QPA_PLATFORM"):
        return False                        # an explicit choice (offscreen, vnc, eglfs, ...) is respected
    return not (env.get("DISPLAY") or env.get("WAYLAND_DISPLAY"))


def terminal_report() -> int:
    """Print the doctor's page for this machine in the terminal: what ``cpudoctor doctor`` prints.

    The window cannot import the commands (its siblings), so both run
    :mod:`cpudoctor.doctor_run`: the environment ``doctor`` describes, the same
    pipeline, the same page, the same terminal escaping and exit code.
    """
    from cpudoctor import doctor_run
    from cpudoctor.pipeline import chosen_source
    from cpudoctor.probes.software.envs import EnvError

    try:    # the environment `cpudoctor doctor` describes: $CPUDOCTOR_PYTHON, else the likely training one
        source = chosen_source()
    except EnvError as exc:
        print(f"CPU Doctor: {exc}", file=sys.stderr)
        return 2
    done = doctor_run.run(source, ascii_only=not doctor_run.can_print())
    doctor_run.print_page(done.text)
    return done.exit_code


def _explain_no_display() -> None:
    print("CPU Doctor: no display here (DISPLAY and WAYLAND_DISPLAY are not set), "
          "so the report is printed in the terminal instead.", file=sys.stderr)
    print(how_to_get_the_window(), file=sys.stderr)
    print(file=sys.stderr)


def _explain_missing_libs(missing: list[tuple[str, str]]) -> None:
    print(f"CPU Doctor: {missing_text(missing)}", file=sys.stderr)
    print("Install them (Debian/Ubuntu) with:", file=sys.stderr)
    print(f"    {APT_LINE}", file=sys.stderr)
    print("Meanwhile, here is the report in the terminal.", file=sys.stderr)
    print(file=sys.stderr)


def guard_pyside_refcount_bug() -> bool:
    """Survive PySide6 6.12.0 on Python < 3.12; True when the guard was needed.

    That abi3 build returns None/True/False without taking a reference (fine on
    3.12+, where they are immortal); on 3.11 every void Qt call drops one and the
    process aborts within seconds ("none_dealloc"). pyproject pins <6.12 on 3.11;
    if such a build is installed anyway, give the three singletons a reference
    count they can never lose, which is what Python 3.12 does itself.
    """
    if sys.version_info >= (3, 12):
        return False
    try:
        import shiboken6
    except ImportError:
        return False
    version = getattr(shiboken6, "__version__", "")
    if not version.startswith("6.12."):
        return False
    for obj in (None, True, False):
        ctypes.c_ssize_t.from_address(id(obj)).value += 1 << 40
    log.warning("PySide6 %s has a reference-counting bug on Python %d.%d; worked around. "
                "Install PySide6-Essentials<6.12 for a clean setup.", version, *sys.version_info[:2])
    return True


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="cpudoctor-gui", description="CPU Doctor's window.")
    p.add_argument("report", nargs="?", help="open this saved report (JSON) read-only")
    p.add_argument("--version", action="version", version=f"cpudoctor {__version__}")
    # Hidden: for tests, screenshots and CI.
    p.add_argument("--screenshot", metavar="PATH", help=argparse.SUPPRESS)
    p.add_argument("--screenshot-delay", type=integer(0, 600_000), default=2500, metavar="MS", help=argparse.SUPPRESS)
    p.add_argument("--page", help=argparse.SUPPRESS)
    # The View menu's Theme (remembered in the settings); this overrides it for one run (screenshots, tests).
    p.add_argument("--theme", choices=THEMES, default=None, help=argparse.SUPPRESS)
    p.add_argument("--size", metavar="WxH", help=argparse.SUPPRESS)
    p.add_argument("--no-children", action="store_true", help=argparse.SUPPRESS)
    return p


def _parse_size(text: str | None) -> tuple[int, int] | None:
    if not text:
        return None
    try:
        w, h = (int(v) for v in text.lower().split("x") if len(v) <= 6)
    except ValueError:
        return None
    return (w, h) if 0 < w <= 16384 and 0 < h <= 16384 else None


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(sys.argv[1:] if argv is None else argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")

    if needs_display():
        _explain_no_display()
        return terminal_report()
    if uses_xcb():
        missing = missing_xcb_libs()
        if missing:
            _explain_missing_libs(missing)
            return terminal_report()

    guard_pyside_refcount_bug()
    from PySide6.QtCore import QTimer
    from PySide6.QtWidgets import QApplication

    from cpudoctor.gui.icons import app_icon
    from cpudoctor.gui.main_window import APP_NAME, MainWindow
    from cpudoctor.gui.model import AppModel

    app = QApplication.instance() or QApplication([sys.argv[0] if sys.argv else "cpudoctor"])
    app.setApplicationName(APP_NAME)
    app.setApplicationDisplayName(APP_NAME)
    app.setOrganizationName("CPU Doctor")
    app.setApplicationVersion(__version__)
    app.setDesktopFileName("cpudoctor")
    app.setWindowIcon(app_icon())
    # Python's cycle collector on the main thread only: run on a worker thread (a preview rendering) it can delete
    # a Qt object while the main thread deletes another, and PySide deadlocks the two (the window hung for good).
    from pyqtgraph.util.garbage_collector import GarbageCollector

    collector = GarbageCollector(interval=1.0)
    from cpudoctor.gui.settings_file import window_settings

    settings = window_settings()        # never Qt's own file handling: see gui/settings_file.py
    apply_theme(app, args.theme or remembered_theme(settings))

    model = AppModel()
    # With a report to open, this machine is probed only if that report cannot be read (see open_report).
    window = MainWindow(model, settings=settings, collect=not args.report, children=not args.no_children)
    size = _parse_size(args.size)
    if size:
        window.resize(*size)
    if args.page:
        window.show_page(args.page)
    window.show()
    if args.report:
        window.open_report(Path(args.report))       # a bad file: a message, then this machine is read

    # Ctrl+C in the terminal closes the window properly (settings saved);
    # the timer lets the Python interpreter see the signal while Qt's loop runs.
    signal.signal(signal.SIGINT, lambda *_: window.close_now())
    tick = QTimer(window)
    tick.timeout.connect(lambda: None)
    tick.start(500)
    window._garbage_collector = collector          # lives as long as the window

    if args.screenshot:
        def grab() -> None:
            from PySide6.QtCore import QBuffer, QIODevice

            from cpudoctor.fileio import atomic_write

            out = Path(args.screenshot)
            buf = QBuffer()
            buf.open(QIODevice.OpenModeFlag.WriteOnly)
            ok = window.grab().save(buf, (out.suffix.lstrip(".") or "png").upper())
            try:
                out.parent.mkdir(parents=True, exist_ok=True)
                if ok:
                    atomic_write(out, bytes(buf.data()))
            except OSError as exc:
                ok = False
                print(f"cpudoctor-gui: {exc.strerror or exc}", file=sys.stderr)
            if not ok:
                print(f"cpudoctor-gui: could not write the screenshot {out}", file=sys.stderr)
            window.close()
            app.exit(0 if ok else 1)

        QTimer.singleShot(max(0, args.screenshot_delay), grab)
    code = app.exec()
    _let_background_work_end(window)
    return code


# How long the window, once closed, waits for its background work (a report being built, interpreters being
# described) before the interpreter is torn down under it.
EXIT_WAIT_MS = 60_000


def _let_background_work_end(window) -> None:
    """Stop what the window started and wait for the pool's threads, while Python and Qt are still whole.

    Returning with pool threads still running Python code left them to race the interpreter's and Qt's
    teardown: a window closed early (``--screenshot-delay 300`` on a busy machine) once died of SIGSEGV
    on the way out. Whatever is still running after EXIT_WAIT_MS is left, as before.
    """
    from PySide6.QtCore import QThreadPool

    try:
        window.collector.cancel()
        window.sampler.stop()
    except RuntimeError:                      # already deleted with the window
        pass
    QThreadPool.globalInstance().waitForDone(EXIT_WAIT_MS)


if __name__ == "__main__":
    raise SystemExit(main())
