"""The cold path, side by side with PyTorch's own tools (issue 27's table), and the window's first seconds.

Every row is a whole process, as a user starts it, run interleaved with the
others (one of each per round, so load hits all alike); the table gives
medians and the spread (min-max) over the rounds:

* ``cpudoctor report --format json`` with a fresh cache folder, and with a warm one;
* ``cpudoctor report --fast`` (no children) with a fresh and a warm cache;
* the peers: ``python -m torch.utils.collect_env`` and ``python -c "import torch"`` in the
  environment CPU Doctor describes (the floor of a correct import check);
* the window (``cpudoctor`` with no command, offscreen): time to the first paint, to the
  first machine facts on screen, to the first findings on screen (the advisor on the quick
  facts, shown "so far") and to the whole report's findings (the advisor stage), fresh cache;
* ``doctor --fast`` and ``envs`` with 12 interpreters that never answer listed in
  ``~/.conda/environments.txt`` (a private home; fewer rounds: before the fix, minutes).

The environment described is a project's ``.venv`` in the working folder, with
torch (a ``.pth`` file lends it this checkout's site-packages), the rest of the
machine as it is (its pyenv, system Pythons...), so the discovery cost is the
machine's own. The goals of issue 27 are printed beside the figures.

    .venv/bin/python benchmarks/cold_path.py [--rounds 5] [--hang-rounds 1] [--no-window] [--no-hang]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HANGING = 12


def _world(base: Path) -> dict:
    """A project folder with a ``.venv`` that has torch, and a private home with hanging conda envs."""
    project = base / "project"
    project.mkdir()
    venv = project / ".venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    site = next(venv.glob("lib/python3*/site-packages"))
    (site / "_lend_torch.pth").write_text(str(Path(importlib.util.find_spec("torch").origin).parent.parent) + "\n")
    home = base / "home"
    (home / ".conda").mkdir(parents=True)
    prefixes = []
    for i in range(HANGING):
        prefix = base / "hang" / f"env{i}"
        (prefix / "conda-meta").mkdir(parents=True)
        (prefix / "bin").mkdir()
        python = prefix / "bin" / "python"
        python.write_text("#!/bin/sh\nexec sleep 600\n")
        python.chmod(0o755)
        prefixes.append(str(prefix))
    (home / ".conda" / "environments.txt").write_text("\n".join(prefixes) + "\n")
    return {"project": project, "python": str(venv / "bin" / "python"), "home": home, "base": base}


# PYTHONDONTWRITEBYTECODE (set in some sandboxes and CI images) would compile every module without a .pyc
# from source on each start (~0.1 s here): a user's install has its bytecode, written by pip or the first run.
_DROPPED = ("CPUDOCTOR_PYTHON", "VIRTUAL_ENV", "CONDA_PREFIX", "PYTHONDONTWRITEBYTECODE")


def _env(cache: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _DROPPED}
    env.update(CPUDOCTOR_CACHE_DIR=str(cache), **extra)
    return env


CPU: dict[str, list[float]] = {}     # row -> CPU seconds (user + system) of the process and all it waited for


def timed(argv: list[str], cwd: Path, env: dict[str, str], timeout: float = 900, row: str = "") -> float:
    """Wall seconds of one whole process; its CPU seconds (with its children's) go to CPU[row]."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    try:
        subprocess.run(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       stdin=subprocess.DEVNULL, timeout=timeout)
    except subprocess.TimeoutExpired:
        return float("inf")
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if row:
        CPU.setdefault(row, []).append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    return wall


# --------------------------------------------------------------------------- the window, seen from inside

_PROBE = r"""
import json, os, sys, time
T0 = float(os.environ["BENCH_T0"])
events = {}
def mark(name):
    events.setdefault(name, time.time() - T0)
    events.setdefault("cpu " + name, time.process_time())
from PySide6.QtCore import QEvent, QObject, QTimer
import cpudoctor.gui.main_window as mw
class Filter(QObject):
    def eventFilter(self, obj, event):
        if event.type() == QEvent.Type.Paint:
            mark("paint")
        return False
original = mw.MainWindow.__init__
def init(self, *a, **k):
    original(self, *a, **k)
    self._bench_filter = Filter(self)
    self.installEventFilter(self._bench_filter)
    self.model.report_changed.connect(lambda _r: mark("facts"))
    def findings(_found):
        label = getattr(self.pages.get("Overview"), "findings_label", None)
        if label is not None and label.text() == "No findings." and "advisor" not in events:
            mark("empty findings shown")
        if self.model.judged:
            mark("findings")
    self.model.findings_changed.connect(findings)
    def stage(name):
        mark("stage " + name)
        if name == "advisor":
            mark("advisor")
            print(json.dumps(events), flush=True)
            QTimer.singleShot(0, self.close)
    self.collector.stage_done.connect(stage)
mw.MainWindow.__init__ = init
from cpudoctor.gui.app import main
main([])
"""


def window_run(python: str, world: dict, cache: Path, config: Path) -> dict[str, float]:
    env = _env(cache, QT_QPA_PLATFORM="offscreen", XDG_CONFIG_HOME=str(config), BENCH_T0=repr(time.time()))
    try:
        out = subprocess.run([python, "-c", _PROBE], cwd=world["project"], env=env, capture_output=True,
                             text=True, timeout=300, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return {}
    for line in reversed(out.stdout.splitlines()):
        try:
            return json.loads(line)
        except ValueError:
            continue
    print(f"  the window gave no timings: {out.stderr[-400:]}", file=sys.stderr)
    return {}


# --------------------------------------------------------------------------- the table


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--hang-rounds", type=int, default=1)
    ap.add_argument("--no-window", action="store_true")
    ap.add_argument("--no-hang", action="store_true")
    ap.add_argument("--baseline", metavar="PYTHON",
                    help="also time the CPU Doctor installed for this interpreter (e.g. an older commit's venv), "
                         "interleaved with this one: its rows are marked 'before'")
    args = ap.parse_args()
    base = Path(tempfile.mkdtemp(prefix="cpudoctor-cold-"))
    try:
        return _measure(base, args)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _measure(base: Path, args) -> int:
    world = _world(base)
    installs = {"": sys.executable}
    if args.baseline:
        installs = {"before: ": args.baseline, "after:  ": sys.executable}
    py = world["python"]
    fresh_n = [0]

    def fresh() -> Path:
        fresh_n[0] += 1
        return base / f"fresh-{fresh_n[0]}"

    rows: dict[str, tuple[list[str], Path | None]] = {}
    for mark, python in installs.items():
        cd = [python, "-m", "cpudoctor"]
        warm = base / f"warm-cache-{len(rows)}"
        rows[mark + "report --format json, fresh cache"] = (cd + ["report", "--format", "json"], None)
        rows[mark + "report --format json, warm cache"] = (cd + ["report", "--format", "json"], warm)
        rows[mark + "report --fast, fresh cache"] = (cd + ["report", "--fast", "--format", "json"], None)
        rows[mark + "report --fast, warm cache"] = (cd + ["report", "--fast", "--format", "json"], warm)
    rows["python -m torch.utils.collect_env"] = ([py, "-m", "torch.utils.collect_env"], base / "peers")
    rows['python -c "import torch"'] = ([py, "-c", "import torch"], base / "peers")
    times: dict[str, list[float]] = {name: [] for name in rows}
    window: dict[str, dict[str, list[float]]] = {mark: {} for mark in installs}
    # One warm-up of each: the page cache equally warm for all, and the warm caches filled.
    for argv, cache in rows.values():
        timed(argv, world["project"], _env(cache or fresh()))
    for r in range(args.rounds):
        for name, (argv, cache) in rows.items():
            times[name].append(timed(argv, world["project"], _env(cache or fresh()), row=name))
        if not args.no_window:
            for mark, python in installs.items():
                for key, value in window_run(python, world, fresh(), base / f"config-{fresh_n[0]}").items():
                    window[mark].setdefault(key, []).append(value)
        print(f"  round {r + 1}/{args.rounds} done", file=sys.stderr, flush=True)
    hang: dict[str, list[float]] = {}
    if not args.no_hang:
        hang_env = {"HOME": str(world["home"])}
        for _ in range(args.hang_rounds):
            for mark, python in installs.items():
                cd = [python, "-m", "cpudoctor"]
                hang.setdefault(f"{mark}doctor --fast, {HANGING} hanging interpreters", []).append(
                    timed(cd + ["doctor", "--fast"], world["project"], _env(fresh(), **hang_env)))
                remembered = fresh()
                hang.setdefault(f"{mark}envs, {HANGING} hanging interpreters", []).append(
                    timed(cd + ["envs"], world["project"], _env(remembered, **hang_env)))
                hang.setdefault(f"{mark}envs again (same cache), {HANGING} hanging", []).append(
                    timed(cd + ["envs"], world["project"], _env(remembered, **hang_env)))
    _print(times, window, hang, args)
    return 0


def _med(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def _verdict(med: float, goal: float | None, words: str) -> str:
    return "" if goal is None else f"{words} = {goal:.2f} s: " + ("met" if med <= goal else "NOT met")


def _print(times: dict[str, list[float]], window: dict[str, dict[str, list[float]]], hang: dict[str, list[float]],
           args) -> None:
    collect = _med(times["python -m torch.utils.collect_env"])
    torch = _med(times['python -c "import torch"'])
    goals = {
        "report --format json, fresh cache": (1.15 * torch + 0.3, "<= 1.15 x import torch + 0.3 s"),
        "report --format json, warm cache": (0.2 * collect, "<= 0.2 x collect_env"),
        "report --fast, warm cache": (0.12 * collect, "<= 0.12 x collect_env"),
        "report --fast, fresh cache": (0.12 * collect, "<= 0.12 x collect_env"),
    }
    cpu_collect = _med(CPU.get("python -m torch.utils.collect_env", []))
    print(f"\n{'what':56} {'median s':>9} {'min-max s':>13} {'x collect_env':>14} {'CPU s':>6} {'x':>5}  goal")
    for name, values in times.items():
        med = _med(values)
        cpu = _med(CPU.get(name, []))
        goal, words = goals.get(name.split(": ", 1)[-1].strip(), (None, ""))
        print(f"{name:56} {med:9.2f} {min(values):6.2f}-{max(values):<6.2f} {med / collect:14.2f} {cpu:6.2f} "
              f"{cpu / cpu_collect:5.2f}  {_verdict(med, goal, words)}")
    print("(CPU s: user + system seconds of the process and its children, median; x: over collect_env's; "
          "load changes it far less than wall time)")
    wgoals = {"paint": (1.0, "on screen <= 1 s"), "findings": (torch + 1.0, "first findings <= import torch + 1 s")}
    labels = {"paint": "first paint", "facts": "first machine facts shown",
              "findings": "first findings shown (the quick facts' advisor)",
              "advisor": "findings of the whole report (advisor stage)"}
    for mark, events in window.items():
        if not events:
            continue
        print(f"\n{mark}the window (offscreen, fresh cache and settings; seconds from the process start, CPU s "
              f"of the window's own process; {len(events.get('advisor', []))} of {args.rounds} runs reached the "
              "findings)")
        for key, label in labels.items():
            values = events.get(key, [])
            if values:
                med = _med(values)
                cpu = _med(events.get("cpu " + key, []))
                print(f"  {label:54} {med:9.2f} {min(values):6.2f}-{max(values):<6.2f} {'':14} {cpu:6.2f} {'':5}  "
                      f"{_verdict(med, *wgoals.get(key, (None, '')))}")
        flashes = len(events.get("empty findings shown", []))
        print(f"  'No findings.' shown before the advisor ran: in {flashes} of {args.rounds} runs")
    if hang:
        print()
    for name, values in hang.items():
        print(f"{name:56} {_med(values):9.2f} {min(values):6.2f}-{max(values):<6.2f}  ({len(values)} run(s))")
    print(f"\n{args.rounds} interleaved rounds; collect_env median {collect:.2f} s, import torch median {torch:.2f} s; "
          f"load average now {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")


if __name__ == "__main__":
    raise SystemExit(main())
