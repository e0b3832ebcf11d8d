"""Take the README's screenshots of the real window: every page at 1600x1000 under a private Xvfb.

The window is CPU Doctor's own MainWindow on the xcb platform (what a desktop user gets), captured
from the X server with ImageMagick's ``import -window root`` (not Qt's offscreen grab), filled with
the data the layout test uses (tests/gui_fill.py: a 2-socket Xeon scenario report from the corpus,
with simulated live load), then reduced to 256-colour PNGs to keep the repository small.

    .venv/bin/python docs/screenshots.py [OUTDIR]      # default: docs/screenshots (and docs/screenshot.png)

Needs Xvfb and ImageMagick (apt-get install xvfb imagemagick).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SIZE = (1600, 1000)
HERO = REPO / "docs" / "screenshot.png"
PAGES = ("Overview", "Flags", "Topology", "Monitor", "Training", "Advisor", "Inspector", "Report")


def _free_display() -> int:
    for n in range(150, 200):
        if not Path(f"/tmp/.X11-unix/X{n}").exists() and not Path(f"/tmp/.X{n}-lock").exists():
            return n
    raise SystemExit("no free X display number between :150 and :199")


def _shoot(display: str, out: Path) -> None:
    raw = out.with_suffix(".raw.png")
    subprocess.run(["import", "-display", display, "-window", "root", str(raw)], check=True)
    # 256 colours: a flat UI loses nothing visible and the file shrinks four- to sixfold
    subprocess.run(["convert", str(raw), "-strip", "-dither", "None", "-colors", "256", f"PNG8:{out}"], check=True)
    raw.unlink()


def run_in_display(outdir: Path) -> int:
    """Inside the X server: build the window, fill it, capture each page."""
    sys.path.insert(0, str(REPO / "tests"))
    from PySide6.QtCore import QEventLoop, QSettings, QTimer
    from PySide6.QtWidgets import QApplication

    import pyqtgraph as pg

    from cpudoctor.gui.app import apply_theme
    from cpudoctor.gui.main_window import APP_NAME, MainWindow
    from cpudoctor.gui.model import AppModel
    from gui_fill import fill_window, realistic_report

    app = QApplication(["cpudoctor"])
    app.setApplicationDisplayName(APP_NAME)
    apply_theme(app, "light")
    pg.setConfigOptions(antialias=True)
    settings = QSettings(str(outdir / ".screenshots.ini"), QSettings.Format.IniFormat)
    settings.clear()
    window = MainWindow(AppModel(), settings=settings, collect=False, children=False)
    window.setGeometry(0, 0, *SIZE)
    window.show()

    def settle(ms: int) -> None:
        loop = QEventLoop()
        QTimer.singleShot(ms, loop.quit)
        loop.exec()

    settle(500)
    fill_window(window, realistic_report())
    window.pages["Advisor"].select("PREC001")
    settle(1500)
    display = os.environ["DISPLAY"]
    for title in PAGES:
        window.show_page(title)
        settle(900)
        _shoot(display, outdir / f"{title.lower()}.png")
    window.close()
    Path(outdir / ".screenshots.ini").unlink(missing_ok=True)
    return 0


def main() -> int:
    outdir = Path(sys.argv[1]) if len(sys.argv) > 1 else REPO / "docs" / "screenshots"
    outdir.mkdir(parents=True, exist_ok=True)
    if os.environ.get("CPUDOCTOR_SCREENSHOTS_INSIDE"):
        return run_in_display(outdir)
    for tool in ("Xvfb", "import", "convert"):
        if shutil.which(tool) is None:
            raise SystemExit(f"{tool} is missing: apt-get install xvfb imagemagick")
    n = _free_display()
    server = subprocess.Popen(["Xvfb", f":{n}", "-screen", "0", f"{SIZE[0]}x{SIZE[1]}x24", "-nolisten", "tcp"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while not Path(f"/tmp/.X11-unix/X{n}").exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        env = {**os.environ, "DISPLAY": f":{n}", "QT_QPA_PLATFORM": "xcb", "CPUDOCTOR_SCREENSHOTS_INSIDE": "1"}
        env.pop("WAYLAND_DISPLAY", None)
        done = subprocess.run([sys.executable, __file__, str(outdir)], env=env, timeout=300)
    finally:
        server.terminate()
        server.wait(timeout=10)
    if done.returncode == 0 and outdir == REPO / "docs" / "screenshots":
        shutil.copyfile(outdir / "topology.png", HERO)      # the README's first picture is the topology page
    for png in sorted(outdir.glob("*.png")):
        print(f"{png.relative_to(REPO) if png.is_relative_to(REPO) else png}: {png.stat().st_size // 1024} KiB")
    return done.returncode


if __name__ == "__main__":
    raise SystemExit(main())
