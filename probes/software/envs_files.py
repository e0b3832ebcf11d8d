"""Small, never-raising helpers for looking at environment folders and the names that point at them.

Any file, folder name or listed line may be hostile (a FIFO, a 100,000-character
name, a NUL byte, a folder that cannot be read): each helper here answers with
a value (``False``, ``None``, ``[]``) instead of an exception. Used by the
finding (:mod:`.envs_find`), describing (:mod:`.envs_describe`) and choosing
(:mod:`.envs_choice`) of environments.
"""

from __future__ import annotations

import errno
import os
import re
from pathlib import Path

from cpudoctor.kits.rooted import read_bytes_checked

MAX_NAME = 4096              # a path longer than this is no environment's (the kernel's PATH_MAX)


MAX_CHILDREN = 2000          # folders looked at in one envs/ or ~/.virtualenvs folder


def file_problem(path: Path) -> str | None:
    """Why ``path`` cannot be an interpreter or environment folder, from one ``stat``; None when it can."""
    try:
        os.stat(path)
    except FileNotFoundError:
        return "no such file"
    except PermissionError:
        return "permission denied: it cannot be read (run CPU Doctor as its owner, or give another)"
    except OSError as exc:
        if exc.errno == errno.ENAMETOOLONG:
            return "the name is too long for a file name"
        return f"cannot look at it ({exc.strerror or exc})"
    except ValueError:
        return "the name holds a NUL byte: not a file name"
    return None


def exists(path: Path) -> bool:
    try:
        return os.path.exists(path)
    except (OSError, ValueError):
        return False


def isfile(path: Path) -> bool:
    try:
        return os.path.isfile(path)
    except (OSError, ValueError):
        return False


def access(path: Path, mode: int) -> bool:
    try:
        return os.access(path, mode)
    except (OSError, ValueError):
        return False


def realpath(path: Path) -> Path:
    try:
        return Path(os.path.realpath(path))
    except (OSError, ValueError):
        return path


def absolute(path: Path | str) -> Path:
    try:
        return Path(os.path.abspath(os.path.expanduser(str(path))))
    except (OSError, ValueError, RuntimeError):
        return Path(str(path))


def plausible(value: str | None) -> bool:
    """A variable or listed line that could name a file: not empty, not too long, no NUL or control character."""
    return isinstance(value, str) and 0 < len(value) <= MAX_NAME and not re.search(r"[\x00-\x1f\x7f]", value)


def shown_name(text: str, limit: int = 120) -> str:
    """A name for a message or a table: clipped (a 100,000-character name is one line, not a page)."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def stamp(path: Path | None) -> list[int] | None:
    if path is None:
        return None
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    return [st.st_mtime_ns, st.st_size]


def read_small(path: Path, limit: int = 1 << 20) -> str | None:
    """A small regular text file, or None (a FIFO or device is never opened; nothing raises)."""
    try:
        return read_bytes_checked(path, limit).decode("utf-8", "replace")
    except (OSError, ValueError):
        return None


def pyvenv_cfg(prefix: Path) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in (read_small(prefix / "pyvenv.cfg", 64 << 10) or "").splitlines():
        key, sep, value = line.partition("=")
        if sep:
            out[key.strip().lower()] = value.strip()
    return out


def children(folder: Path) -> list[Path]:
    """The folders in ``folder`` (at most :data:`MAX_CHILDREN`), sorted; none when it cannot be read."""
    out: list[Path] = []
    try:
        with os.scandir(folder) as it:
            for entry in it:
                if len(out) >= MAX_CHILDREN:
                    break
                try:
                    if entry.is_dir():
                        out.append(Path(entry.path))
                except OSError:
                    continue
    except (OSError, ValueError):
        return []
    return sorted(out)


def same_path(a: Path, b: Path) -> bool:
    try:
        return os.path.realpath(a) == os.path.realpath(b)
    except (OSError, ValueError):
        return a == b
