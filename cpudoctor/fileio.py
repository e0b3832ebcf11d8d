"""Atomic file writes with errors a person can act on.

A report is written to a temporary file in the target folder and renamed over
the target, so a full disk or a crash never leaves half a file behind.
"""

from __future__ import annotations

import errno
import os
import tempfile
from pathlib import Path


class WriteError(OSError):
    """Writing failed; ``str()`` says what happened and what to do."""


def atomic_write(path: Path | str, data: bytes | str, overwrite: bool = True) -> Path:
    path = Path(path).expanduser()
    payload = data.encode("utf-8") if isinstance(data, str) else data
    folder = path.parent if str(path.parent) else Path(".")
    if not folder.is_dir():
        raise WriteError(errno.ENOENT, f"cannot write {path}: the folder {folder} does not exist; create it or choose another")
    if path.is_dir():
        raise WriteError(errno.EISDIR, f"cannot write {path}: it is a folder; give a file name")
    if path.exists() and not overwrite:
        raise WriteError(errno.EEXIST, f"{path} already exists; choose another name or allow overwriting")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=folder)
    except OSError as exc:
        raise WriteError(exc.errno, f"cannot write in {folder}: {exc.strerror}; choose a folder you can write to") from None
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(payload)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except OSError as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        hint = "free some disk space" if exc.errno == errno.ENOSPC else "check the folder's permissions"
        raise WriteError(exc.errno, f"cannot write {path}: {exc.strerror}; nothing was changed ({hint})") from None
    return path
