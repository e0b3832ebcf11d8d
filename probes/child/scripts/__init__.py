"""Standalone child scripts: run by path in the Python environment under test.

Each file here runs as ``python -I SCRIPT.py`` in an interpreter that has never
seen CPU Doctor, so it imports only the standard library, its siblings in this
folder and the package it examines (torch, numpy, ...). The parent reads the
JSON lines they print (:mod:`cpudoctor.probes.child.runner`). Nothing in the app
process imports these modules except the tests.
"""

from __future__ import annotations

from pathlib import Path

FOLDER = Path(__file__).resolve().parent


def script_path(name: str) -> Path:
    """The file of child script ``name`` (``torch_facts``, ``blas_facts``, ``import_check``)."""
    path = FOLDER / f"{name}.py"
    if not path.is_file():
        known = sorted(p.stem for p in FOLDER.glob("*.py") if not p.stem.startswith("_"))
        raise FileNotFoundError(f"no child script {name!r} in {FOLDER}; known: {', '.join(known)}")
    return path
