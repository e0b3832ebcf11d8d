"""The layering rules, checked on the source: probes/advisor never import Qt, gui never imports torch.

Also checks that every sub-package folder is mapped in pyproject.toml, so a
wheel install ships the same modules as the editable install the tests use.
"""

from __future__ import annotations

import ast
import sys
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
QT = ("PySide6", "pyqtgraph", "shiboken6")
TORCH = ("torch",)


def _imports(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.lineno, node.module))
    return found


def _violations(folder: str, banned: tuple[str, ...]) -> list[str]:
    bad = []
    for path in sorted((REPO / folder).rglob("*.py")):
        for line, name in _imports(path):
            if name.split(".")[0] in banned:
                bad.append(f"{path.relative_to(REPO)}:{line} imports {name}")
    return bad


@pytest.mark.parametrize("folder", ["probes", "advisor"])
def test_probes_and_advisor_never_import_qt(folder):
    assert _violations(folder, QT) == []


def test_gui_never_imports_torch():
    assert _violations("gui", TORCH) == []


def test_probes_and_advisor_import_without_qt_or_torch(monkeypatch):
    """Importing every probe/advisor module must not pull in Qt or torch."""
    import subprocess

    mods = []
    for folder, pkg in (("probes", "cpudoctor.probes"), ("advisor", "cpudoctor.advisor")):
        for path in sorted((REPO / folder).rglob("*.py")):
            rel = path.relative_to(REPO / folder).with_suffix("")
            parts = [p for p in rel.parts if p != "__init__"]
            mods.append(".".join([pkg, *parts]))
    code = (
        "import importlib, sys\n"
        f"for m in {mods!r}: importlib.import_module(m)\n"
        "bad = [m for m in sys.modules if m.split('.')[0] in ('PySide6', 'pyqtgraph', 'torch')]\n"
        "print(','.join(sorted(bad)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == ""


def test_every_subpackage_is_mapped_in_pyproject():
    cfg = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    mapping, packages = cfg["package-dir"], set(cfg["packages"])
    assert set(mapping) == packages
    for name, folder in mapping.items():
        for init in (REPO / folder).rglob("__init__.py"):
            sub = init.parent.relative_to(REPO / folder).parts
            full = ".".join([name, *sub])
            assert full in packages, f"{init.parent} is not listed in pyproject packages ({full})"
