"""Where an environment's packages live: its site folders, and the folders its ``.pth`` files add.

Nothing here runs code of the environment. A ``.pth`` file's plain lines are
folders; its ``import`` lines are code that ``site`` would run, and one form of
them is common enough to matter: ``import site; site.addsitedir('/shared/pkgs')``
(a shared package folder, some HPC module systems, conda-pack'd envs). Such a
line is read, not run: :func:`pth_folders` parses it with :mod:`ast` and takes
the folder only when it is a literal (or ``os.path.expanduser`` of one), so an
environment whose PyTorch sits in such a folder no longer reads "PyTorch is not
installed". ``sys.path.append('/x')`` and ``sys.path.insert(0, '/x')`` are read
the same way. A folder added by ``addsitedir`` has its own ``.pth`` files
processed too, as ``site`` does (bounded depth and count).

When the interpreter was not asked (``--fast``, a decision from files), the
site folders are guessed from the usual layouts (:func:`guess_site_dirs`).
"""

from __future__ import annotations

import ast
import glob
import os
from pathlib import Path
from typing import Any

from cpudoctor.kits.rooted import read_bytes_checked

MAX_PTH_FILES = 200            # per site folder
MAX_PTH_BYTES = 64 << 10
MAX_FOLDERS = 200              # folders added by .pth files, in all
MAX_DEPTH = 4                  # addsitedir inside addsitedir ...


def isdir(path: str | os.PathLike) -> bool:
    """``os.path.isdir`` (False for a name too long, unreadable or with a NUL byte; never raises)."""
    try:
        return os.path.isdir(path)
    except (OSError, ValueError):
        return False


def site_dirs(prefix: Path, answer: dict[str, Any], cfg: dict[str, str]) -> list[Path]:
    """The import path's site folders of an environment: what its interpreter said (``answer``, checked by
    :func:`cpudoctor.probes.software.pyquery.checked`), the base's when ``pyvenv.cfg`` (``cfg``) includes
    the system site folders, the user site, and what their ``.pth`` files add."""
    dirs = [Path(p) for p in answer.get("site") or []]
    if cfg.get("include-system-site-packages", "").lower() == "true" and answer.get("base_prefix"):
        base = Path(answer["base_prefix"])
        dirs += _glob(base, "lib/python3*/site-packages") + [base / "Lib" / "site-packages"]
    if answer.get("usersite"):
        dirs.append(Path(answer["usersite"]))
    return with_pth_folders(dirs)


def with_pth_folders(dirs: list[Path]) -> list[Path]:
    """``dirs`` that exist, each followed by the folders its ``.pth`` files add (as ``site.addsitedir`` orders them)."""
    out: list[Path] = []
    budget = [MAX_FOLDERS]
    for d in dirs:
        _add_site_dir(d, out, budget, 0)
    return out


def _add_site_dir(folder: Path, out: list[Path], budget: list[int], depth: int) -> None:
    if folder in out or not isdir(folder):
        return
    out.append(folder)
    for extra, is_site in pth_folders(folder):
        if budget[0] <= 0:
            return
        budget[0] -= 1
        if is_site and depth < MAX_DEPTH:
            _add_site_dir(extra, out, budget, depth + 1)
        elif extra not in out and isdir(extra):
            out.append(extra)


def pth_folders(site_dir: Path) -> list[tuple[Path, bool]]:
    """(folder, is a site folder) for each folder the ``.pth`` files in ``site_dir`` add, in file order."""
    found: list[tuple[Path, bool]] = []
    try:
        names = sorted(n for n in os.listdir(site_dir) if n.endswith(".pth"))[:MAX_PTH_FILES]
    except (OSError, ValueError):
        return found
    for name in names:
        try:
            text = read_bytes_checked(site_dir / name, MAX_PTH_BYTES).decode("utf-8", "replace")
        except (OSError, ValueError):
            continue
        for line in text.splitlines():
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            if line.startswith(("import ", "import\t")):
                found += [(Path(p), is_site) for p, is_site in _static_imports(line)]
            else:
                found.append((Path(line) if os.path.isabs(line) else site_dir / line, False))
    return found


def _static_imports(line: str) -> list[tuple[str, bool]]:
    """The folders an ``import`` line of a .pth file adds, read without running it: ``site.addsitedir(LIT)``
    (a site folder), ``sys.path.append(LIT)`` / ``sys.path.insert(N, LIT)`` (a plain folder)."""
    try:
        tree = ast.parse(line, mode="exec")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    out: list[tuple[str, bool]] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            continue
        owner, method = _dotted(node.func.value), node.func.attr
        if owner == "site" and method == "addsitedir" and node.args:
            folder, is_site = _literal_path(node.args[0]), True
        elif owner == "sys.path" and method == "append" and len(node.args) == 1:
            folder, is_site = _literal_path(node.args[0]), False
        elif owner == "sys.path" and method == "insert" and len(node.args) == 2:
            folder, is_site = _literal_path(node.args[1]), False
        else:
            continue
        if folder is not None and os.path.isabs(folder):
            out.append((folder, is_site))
    return out


def _dotted(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = _dotted(node.value)
        return f"{inner}.{node.attr}" if inner else None
    return None


def _literal_path(node: ast.AST) -> str | None:
    """A string literal, ``os.path.expanduser(LIT)`` or ``os.path.join(LIT, ...)``; None for anything computed."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and "\0" not in node.value:
        return node.value
    if isinstance(node, ast.Call) and _dotted(node.func) in ("os.path.expanduser", "os.path.join") and node.args:
        parts = [_literal_path(a) for a in node.args]
        if any(p is None for p in parts):
            return None
        if _dotted(node.func) == "os.path.expanduser":
            return os.path.expanduser(parts[0]) if len(parts) == 1 else None
        return os.path.join(*parts)
    return None


# --------------------------------------------------------------------------- guessed from the layout


def guess_site_dirs(prefix: Path, *, version: str | None = None, home: Path | None = None,
                    user_site: bool = False, cfg: dict[str, str] | None = None) -> list[Path]:
    """The site folders an environment at ``prefix`` most likely has, found from files alone: venvs and conda
    envs (``lib/python3.X/site-packages``, ``Lib/site-packages``), Debian's ``dist-packages``, the base's when
    a venv includes them, and the user site of a system or pyenv Python (``user_site``)."""
    major_minor = ".".join((version or "").split(".")[:2]) or None
    pattern = f"python{major_minor}" if major_minor else "python3*"
    dirs = _glob(prefix, f"lib/{pattern}/site-packages") + _glob(prefix, "Lib/site-packages")
    dirs += _glob(prefix, f"local/lib/{pattern}/dist-packages") + _glob(prefix, "lib/python3/dist-packages")
    cfg = cfg or {}
    if cfg.get("include-system-site-packages", "").lower() == "true" and cfg.get("home"):
        base = Path(cfg["home"]).parent
        dirs += _glob(base, f"lib/{pattern}/site-packages")
    if user_site and home is not None and major_minor:
        dirs.append(home / ".local" / "lib" / f"python{major_minor}" / "site-packages")
    return with_pth_folders(dirs)


def _glob(base: Path, pattern: str) -> list[Path]:
    try:
        return [Path(p) for p in sorted(glob.glob(os.path.join(glob.escape(str(base)), pattern)))[:16]]
    except (OSError, ValueError, RecursionError):
        return []
