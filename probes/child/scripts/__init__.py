"""Standalone child scripts: run by path in the Python environment under test.

Each file here runs as ``python -I SCRIPT.py`` in an interpreter that has never
seen CPU Doctor, so it imports only the standard library, its siblings in this
folder and the package it examines (torch, numpy, ...). The parent reads the
JSON lines they print (:mod:`cpudoctor.kits.child.runner`). Nothing in the app
process imports these modules except the tests.

They must be real ``.py`` files on disk, because another interpreter runs
them by path: the standalone app (``make dist``) ships them as data files in
its bundle, in the same place under the bundle's folder as in the package.
"""

from __future__ import annotations

import sys
from pathlib import Path

from cpudoctor.kits.child.own import bundle_dir, frozen, own_script_command
from cpudoctor.kits.child.runner import CHILD_FLAGS


def _folder() -> Path:
    """This folder: in the package, or its copy in the standalone app's bundle."""
    bundle = bundle_dir()
    if bundle is not None:
        return bundle.joinpath(*__name__.split("."))
    return Path(__file__).resolve().parent


FOLDER = _folder()


def script_path(name: str) -> Path:
    """The file of child script ``name`` (``torch_facts``, ``blas_facts``, ``import_check``)."""
    path = FOLDER / f"{name}.py"
    if not path.is_file():
        known = sorted(p.stem for p in FOLDER.glob("*.py") if not p.stem.startswith("_"))
        raise FileNotFoundError(f"no child script {name!r} in {FOLDER}; known: {', '.join(known)}")
    return path


def script_argv(name: str, *args: str, python: str | None = None) -> list[str]:
    """Run child script ``name`` (see :mod:`cpudoctor.probes.child.scripts`) by path with ``args``.

    ``python`` is the interpreter of the environment under test (default: this
    one; in the standalone app, the app's ``--run-script``). ``-I`` keeps CPU
    Doctor's own Python settings out of it; the script's prelude then gives it
    the import path a plain ``python train.py`` of the user would have
    (PYTHONPATH, the user site). ``-B``: looking at an environment writes
    nothing into it (no ``__pycache__`` in its packages).
    """
    path = script_path(name)
    if python is None and frozen():
        return own_script_command(path, *args)
    return [python or sys.executable, *CHILD_FLAGS, str(path), *args]
