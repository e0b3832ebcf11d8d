"""Take the README's screenshots of the real window: every page at 1600x1000 under a private Xvfb, and a few states.

The window is CPU Doctor's own MainWindow on the xcb platform (what a desktop user gets), captured
from the X server with ImageMagick's ``import`` (not Qt's offscreen grab), filled with the data the
layout test uses (tests/gui_fill.py: a 2-socket Xeon scenario report from the corpus, with simulated
live load, an inspection and lab runs), then reduced to 256-colour PNGs to keep the repository small.
The states: the first launch before anything is read, the Training page with runs, its sweep and its roofline at
1280x800, the window at its minimum size (Training, Monitor, Inspector), and the first pages of the PDF export
(with pdftoppm, when installed). ImageMagick's ``convert`` must come first on PATH.

    .venv/bin/python docs/screenshots.py [OUTDIR]      # default: docs/screenshots (and docs/screenshot.png)

Needs Xvfb and ImageMagick (apt-get install xvfb imagemagick; poppler-utils for the PDF pages).
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
PAGES = ("Overview", "Flags", "Topology", "Monitor", "Training", "Advisor", "Inspector", "Memory fit", "Report")
STATE_SIZE = (1280, 800)


def _free_display() -> int:
    for n in range(150, 200):
        if not Path(f"/tmp/.X11-unix/X{n}").exists() and not Path(f"/tmp/.X{n}-lock").exists():
            return n
    raise SystemExit("no free X display number between :150 and :199")


def _shoot(display: str, out: Path, size: tuple[int, int] | None = None) -> None:
    raw = out.with_suffix(".raw.png")
    crop = ["-crop", f"{size[0]}x{size[1]}+0+0"] if size else []
    subprocess.run(["import", "-display", display, "-window", "root", *crop, str(raw)], check=True)
    # 256 colours: a flat UI loses nothing visible and the file shrinks four- to sixfold
    subprocess.run(["convert", str(raw), "-strip", "-dither", "None", "-colors", "256", f"PNG8:{out}"], check=True)
    raw.unlink()


def run_in_display(outdir: Path) -> int:
    """Inside the X server: build the window, fill it, capture each page."""
    sys.path[:0] = [str(REPO / "tests"), str(REPO)]          # gui_fill imports tests.roofline_samples
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
    display = os.environ["DISPLAY"]

    def settle(ms: int) -> None:
        loop = QEventLoop()
        QTimer.singleShot(ms, loop.quit)
        loop.exec()

    def new_window(size: tuple[int, int]) -> MainWindow:
        settings = QSettings(str(outdir / ".screenshots.ini"), QSettings.Format.IniFormat)
        settings.clear()
        (outdir / "lab-runs.json").unlink(missing_ok=True)        # the Training page's kept runs, beside it
        window = MainWindow(AppModel(), settings=settings, collect=False, children=False)
        window.setGeometry(0, 0, *size)
        window.show()
        settle(500)
        return window

    window = new_window(SIZE)
    fill_window(window, realistic_report())
    window.pages["Advisor"].select("PREC001")
    settle(1500)
    for title in PAGES:
        window.show_page(title)
        settle(900)
        _shoot(display, outdir / f"{title.lower().replace(' ', '-')}.png")
    window.close()
    _shoot_states(outdir, new_window, settle, display)
    for leftover in (".screenshots.ini", "lab-runs.json"):
        (outdir / leftover).unlink(missing_ok=True)
    return 0


def _shoot_states(outdir: Path, new_window, settle, display: str) -> None:
    """The first launch, the Training page with runs, the minimum size, and the PDF export's first pages."""
    from gui_fill import fill_window, realistic_report
    from lab_samples import lab_runs

    window = new_window(STATE_SIZE)                     # nothing read yet: the Overview's skeleton
    window.show_page("Overview")
    settle(700)
    _shoot(display, outdir / "state-first-launch.png", STATE_SIZE)
    fill_window(window, realistic_report())
    settle(1200)
    window.show_page("Training")
    settle(900)
    _shoot(display, outdir / "state-training-runs.png", STATE_SIZE)
    window.pages["Training"].tabs.setCurrentIndex(1)
    settle(700)
    _shoot(display, outdir / "state-training-sweep.png", STATE_SIZE)
    window.pages["Training"].tabs.setCurrentIndex(3)
    settle(700)
    _shoot(display, outdir / "state-training-roofline.png", STATE_SIZE)
    training = window.pages["Training"]
    training.tabs.setCurrentIndex(training.tabs.indexOf(training.infer))
    settle(700)
    _shoot(display, outdir / "state-training-inference.png", STATE_SIZE)
    training.tabs.setCurrentIndex(0)
    smallest = (window.minimumSize().width(), window.minimumSize().height())
    window.resize(*smallest)
    for title in ("Training", "Monitor", "Inspector"):
        window.show_page(title)
        settle(900)
        _shoot(display, outdir / f"state-minimum-{title.lower()}.png", smallest)
    window.close()
    if shutil.which("pdftoppm") is None:
        return
    from cpudoctor.export import render_export

    report = realistic_report()
    report.benchmarks = lab_runs()
    pdf = outdir / "report.pdf"
    pdf.write_bytes(render_export(report, "pdf"))
    subprocess.run(["pdftoppm", "-r", "60", "-png", "-f", "1", "-l", "7", str(pdf), str(outdir / "state-pdf")],
                   check=True)
    pdf.unlink()
    pages = sorted(outdir.glob("state-pdf-[0-9]*.png"))     # pdftoppm's pages, not the strips made last time
    if pages:
        # two strips: the first page beside the second, the benchmarks' pages side by side
        subprocess.run(["convert", *map(str, pages[:2]), "+append", str(outdir / "state-pdf-pages-1-2.png.raw.png")],
                       check=True)
        subprocess.run(["convert", *map(str, pages[-3:]), "+append", str(outdir / "state-pdf-benchmarks.png.raw.png")],
                       check=True)
        for name in ("state-pdf-pages-1-2", "state-pdf-benchmarks"):
            raw = outdir / f"{name}.png.raw.png"
            subprocess.run(["convert", str(raw), "-strip", "-dither", "None", "-colors", "256",
                            f"PNG8:{outdir / (name + '.png')}"], check=True)
            raw.unlink()
    for page in pages:
        page.unlink()


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
        done = subprocess.run([sys.executable, __file__, str(outdir)], env=env, timeout=900)
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
