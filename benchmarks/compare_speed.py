"""How long ``cpudoctor compare A.json B.json`` takes for two saved reports (medians, not a test).

    .venv/bin/python benchmarks/compare_speed.py [RUNS] [--tree DIR] [--cold] [--bytecode]

Each run is a fresh ``python -m cpudoctor compare`` process, as a user types it:
interpreter start, imports, reading and validating both reports, redaction,
the diff and its text. Printed per mode: the median, min and max wall time and
the median CPU time (user + system) of the process, and the load average
before and after (on a busy machine wall time grows, CPU time much less: read
them side by side).

``--tree DIR`` runs another checkout (e.g. an older commit exported with
``git archive``, its ``probes``/``advisor``/``gui``/``lab``/``resources``
folders linked into its ``cpudoctor`` folder) with this interpreter.
``--cold`` gives every run an empty cache folder (the first run on a machine);
the warm mode keeps one. ``--bytecode`` lets Python keep its bytecode (in a
folder of its own, as an installed app does) even where $PYTHONDONTWRITEBYTECODE
is set, as on the development machines.
"""

from __future__ import annotations

import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SCENARIOS = REPO / "tests" / "fixtures" / "scenarios"
PAIR = ("k10-container-quota.json", "zen3-healthy.json")


def one_run(env: dict[str, str], a: Path, b: Path) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one compare process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "cpudoctor", "compare", str(a), str(b)], env=env,
                         capture_output=True, text=True, cwd=tempfile.gettempdir())
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if out.returncode != 0:
        raise SystemExit(f"compare failed ({out.returncode}): {out.stderr.strip()}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def measure(runs: int, tree: Path | None, cold: bool, bytecode: bool) -> None:
    a, b = (SCENARIOS / name for name in PAIR)
    env = dict(os.environ)
    if tree is not None:
        env["PYTHONPATH"] = str(tree)
    if bytecode:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = tempfile.mkdtemp(prefix="cpudoctor-bytecode-")
        one_run(env, a, b)                     # writes the bytecode
    walls, cpus = [], []
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as warm_cache:
        env["CPUDOCTOR_CACHE_DIR"] = warm_cache
        if not cold:
            one_run(env, a, b)                 # fills the cache (and warms the page cache)
        for _ in range(runs):
            if cold:
                with tempfile.TemporaryDirectory() as fresh:
                    env["CPUDOCTOR_CACHE_DIR"] = fresh
                    wall, cpu = one_run(env, a, b)
            else:
                wall, cpu = one_run(env, a, b)
            walls.append(wall)
            cpus.append(cpu)
    load_after = os.getloadavg()[0]
    what = f"{tree or 'this checkout'}, {'cold' if cold else 'warm'} cache" + (", bytecode" if bytecode else "")
    print(f"{what:60s} wall median {statistics.median(walls):.2f} s (min {min(walls):.2f}, max {max(walls):.2f}), "
          f"CPU median {statistics.median(cpus):.2f} s, {runs} runs, load {load_before:.1f} -> {load_after:.1f}")


def main(argv: list[str]) -> None:
    runs = int(argv[0]) if argv and argv[0].isdigit() else 7
    tree = Path(argv[argv.index("--tree") + 1]) if "--tree" in argv else None
    measure(runs, tree, "--cold" in argv, "--bytecode" in argv)


if __name__ == "__main__":
    main(sys.argv[1:])
