"""Run import-linter's contracts (pyproject.toml, [tool.importlinter]) on CPU Doctor.

import-linter builds its graph by walking the package's folder, but
``cpudoctor`` is assembled by setuptools' ``package-dir`` from several
top-level folders (probes/, advisor/, lab/, gui/, ...). So this lays the
sources out the way a wheel installs them, in a temporary folder, and runs
``lint-imports`` there. Run it by hand with::

    .venv/bin/python tests/import_contracts.py
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import tomllib
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PYPROJECT = REPO / "pyproject.toml"


@dataclass
class LintResult:
    returncode: int
    output: str
    files: int              # how many modules were laid out
    graphed: int            # how many of them are in the import graph the contracts were checked on


def lay_out(dest: Path) -> int:
    """Copy every module to ``dest/cpudoctor/...`` as setuptools maps it; returns how many."""
    mapping = tomllib.loads(PYPROJECT.read_text())["tool"]["setuptools"]["package-dir"]
    count = 0
    for package, folder in mapping.items():
        target = dest.joinpath(*package.split("."))
        target.mkdir(parents=True, exist_ok=True)
        for source in (REPO / folder).glob("*.py"):
            shutil.copy2(source, target / source.name)
            count += 1
    return count


def lint_imports() -> LintResult:
    """Lay the package out and run ``lint-imports`` with the repository's contracts.

    Also counts the CPU Doctor modules in grimp's graph (the one import-linter
    builds), so a module the layout missed cannot pass unchecked.
    """
    executable = Path(sys.executable).with_name("lint-imports")
    count = "import grimp; print(sum(1 for m in grimp.build_graph('cpudoctor').modules if m.startswith('cpudoctor')))"
    with tempfile.TemporaryDirectory(prefix="cpudoctor-imports-") as tmp:
        files = lay_out(Path(tmp) / "site")
        env = {**os.environ, "PYTHONPATH": str(Path(tmp) / "site")}
        proc = subprocess.run([str(executable), str(PYPROJECT), "--no-cache"], cwd=tmp, env=env,
                              capture_output=True, text=True, timeout=300)
        graphed = subprocess.run([sys.executable, "-c", count], cwd=tmp, env=env, capture_output=True, text=True,
                                 timeout=300)
    output = proc.stdout + proc.stderr
    return LintResult(proc.returncode, output, files, int(graphed.stdout.strip() or 0))


def main() -> int:
    result = lint_imports()
    print(result.output)
    return result.returncode


if __name__ == "__main__":
    raise SystemExit(main())
