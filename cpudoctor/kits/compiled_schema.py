"""A JSON schema compiled once per machine, not once per process.

fastjsonschema turns a schema into Python source. For the report schema that
source is half a megabyte: generating and compiling it took 0.3-0.5 s of every
command that reads a saved report, two thirds of ``cpudoctor compare``. The
compiled code is kept in the user's cache folder, named by a digest of the
schema, the fastjsonschema version and the interpreter's bytecode version, and
a later process loads it in milliseconds. A cache that cannot be read or
written only costs the compile: validation never depends on it.

The cached file is code, so it is used only when it belongs to this user and
nobody else may write it (the rule ssh applies to its keys); anything else is
ignored and compiled afresh.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import marshal
import os
import stat
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cpudoctor.kits.cachedir import cache_dir

Validator = Callable[[Any], Any]
SUFFIX = ".schema-code"
KEEP_VERSIONS = 4


def validator(schema: dict[str, Any], name: str, folder: Path | None = None) -> Validator:
    """fastjsonschema's ``validate`` function for ``schema``, from the cache in ``folder`` when it holds it.

    ``name`` names the cache file (``report`` -> ``report-<digest>.schema-code``); ``folder``
    defaults to :func:`cache_dir`. Raises what ``fastjsonschema.compile`` raises for a bad schema.
    """
    import fastjsonschema

    folder = cache_dir() if folder is None else folder
    key = _digest(schema, fastjsonschema.VERSION)
    path = folder / f"{name}-{key}{SUFFIX}" if folder is not None else None
    code = _read(path) if path is not None else None
    if code is not None:
        try:
            return _load(code)
        except Exception:  # noqa: BLE001 - a damaged or foreign file: compile afresh below
            pass
    code = compile(fastjsonschema.compile_to_code(schema), f"<{name} schema>", "exec")
    if path is not None:
        _write(path, code, name)
    return _load(code)


def _digest(schema: dict[str, Any], version: str) -> str:
    text = json.dumps(schema, sort_keys=True, ensure_ascii=True)
    data = f"{version}\0{importlib.util.MAGIC_NUMBER.hex()}\0{sys.implementation.cache_tag}\0{text}"
    return hashlib.sha256(data.encode()).hexdigest()[:24]


def _load(code: Any) -> Validator:
    namespace: dict[str, Any] = {"__name__": "cpudoctor_compiled_schema"}
    exec(code, namespace)  # noqa: S102 - fastjsonschema's generated validator, compiled or from our own cache
    return namespace["validate"]


def _trusted(st: os.stat_result) -> bool:
    """This user's regular file, writable by nobody else (POSIX; elsewhere the folder is the user's own)."""
    if not stat.S_ISREG(st.st_mode):
        return False
    if hasattr(os, "getuid"):
        return st.st_uid == os.getuid() and not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
    return True


# The compiled report schema is about half a megabyte of bytecode; a cache file much larger is not ours.
MAX_BYTES = 64 << 20
# Every cache file starts with this line and the SHA-256 of the marshalled code after it: marshal trusts its
# input (a damaged file of "[[[[" asked it for a list of 1.5 billion items, 13 TB of address space), so only
# bytes this module wrote are ever unmarshalled.
MAGIC = b"cpudoctor-schema-code 1\n"


def _read(path: Path) -> Any:
    # Non-blocking, checked on the open file: a FIFO named like the cache file never blocks the command.
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOCTTY", 0)
    try:
        fd = os.open(path, flags)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not _trusted(st) or st.st_size > MAX_BYTES:
            return None
        with os.fdopen(os.dup(fd), "rb") as fh:
            data = fh.read(MAX_BYTES + 1)
        head, digest, payload = data[:len(MAGIC)], data[len(MAGIC):len(MAGIC) + 64], data[len(MAGIC) + 64:]
        if head != MAGIC or digest != hashlib.sha256(payload).hexdigest().encode():
            return None
        return marshal.loads(payload)
    except (OSError, ValueError, EOFError, TypeError):
        return None
    finally:
        os.close(fd)


def _write(path: Path, code: Any, name: str) -> None:
    """Atomically, readable by this user only; beyond :data:`KEEP_VERSIONS` the oldest versions are removed.
    Only a new name or a regular file is replaced: a device, FIFO or link found there is left as it is."""
    try:
        try:
            if not stat.S_ISREG(os.lstat(path).st_mode):
                return
        except FileNotFoundError:
            pass
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{name}-", suffix=".tmp")
        try:
            payload = marshal.dumps(code)
            with os.fdopen(fd, "wb") as fh:
                fh.write(MAGIC + hashlib.sha256(payload).hexdigest().encode() + payload)
            os.replace(tmp, path)
        except BaseException:
            os.unlink(tmp)
            raise
        # a few versions stay (two checkouts of different versions share the folder), the oldest go
        kept = sorted((p for p in path.parent.glob(f"{name}-*{SUFFIX}") if p.is_file() and not p.is_symlink()),
                      key=lambda p: p.stat().st_mtime, reverse=True)
        for old in kept[KEEP_VERSIONS:]:
            old.unlink(missing_ok=True)
    except OSError:
        pass            # a read-only or full cache folder: the next process compiles again
