"""Standalone child scripts: run by path in the Python environment under test.

Each file here runs as ``python -I SCRIPT.py`` in an interpreter that has never
seen CPU Doctor, so it imports only the standard library, its siblings in this
folder and the package it examines (torch, numpy, ...). The parent reads the
JSON lines they print (:mod:`cpudoctor.probes.child.runner`). Nothing in the app
process imports these modules except the tests.

They must be real ``.py`` files on disk, because another interpreter runs
them by path: the standalone app (``make dist``) ships them as data files in
its bundle, in the same place under the bundle's folder as in the package.
"""

from __future__ import annotations

from pathlib import Path

from cpudoctor.probes.child.own import bundle_dir


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
