"""What interpreters answered, remembered between runs: answers and failures, keyed by file stamps.

One small JSON file in CPU Doctor's cache folder. Each entry's key holds the
stamps (modification time and size) of the files that would change the answer
(the interpreter, its ``pyvenv.cfg``), so a new Python in the same place is asked
again. Failures are remembered too: a file that is not a Python stays one as
long as its stamp does, and one that did not answer within the deadline is not
asked again for :data:`TIMEOUT_TTL_S` (it may have hung because the machine was
busy, so not for ever). A missing, unreadable or damaged cache file, or a
read-only home, just means no cache: the same answers, slower.
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path
from typing import Any

FORMAT = 2                     # 2: answers are checked on the way in and out; failures are remembered
TIMEOUT_TTL_S = 3600.0         # an interpreter that did not answer is left alone this long
MAX_FILE_BYTES = 16 << 20
MAX_ENTRIES = 4096             # per section: a machine with more interpreters than this is not one we cache


class EnvCache:
    """Sections of hashed keys -> JSON values, loaded once and saved atomically when changed."""

    FILE = "python-envs.json"

    def __init__(self, path: Path | None):
        self.path = path
        self.data: dict[str, dict[str, Any]] = {}
        self.dirty = False
        if path is None:
            return
        from cpudoctor.kits.rooted import read_bytes_checked

        try:
            loaded = json.loads(read_bytes_checked(path, MAX_FILE_BYTES))
        except (OSError, ValueError, RecursionError):
            return
        if isinstance(loaded, dict) and loaded.get("format") == FORMAT:
            self.data = {k: v for k, v in loaded.items() if isinstance(v, dict) and len(v) <= MAX_ENTRIES}

    @classmethod
    def open(cls, cache: "bool | Path | EnvCache", environ) -> "EnvCache | None":
        """``False``: none; a Path: that folder; ``True``: CPU Doctor's cache folder; an EnvCache: itself."""
        if isinstance(cache, EnvCache):
            return cache
        if cache is False:
            return None
        if isinstance(cache, Path):
            return cls(cache / cls.FILE)
        from cpudoctor.probes.child.cache import default_dir

        folder = default_dir(environ)
        return cls(folder / cls.FILE) if folder is not None else None

    @staticmethod
    def _hash(key: str) -> str:
        return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()

    def get(self, section: str, key: str) -> Any:
        entry = self.data.get(section, {}).get(self._hash(key))
        if isinstance(entry, dict) and isinstance(entry.get("until"), (int, float)):
            if entry["until"] < time.time():
                return None                  # a remembered failure whose time is up: ask again
            return entry.get("value")
        return entry

    def put(self, section: str, key: str, value: Any, ttl: float | None = None) -> None:
        stored = {"until": time.time() + ttl, "value": value} if ttl is not None else value
        self.data.setdefault(section, {})[self._hash(key)] = stored
        self.dirty = True

    def save(self) -> None:
        if not self.dirty or self.path is None:
            return
        from cpudoctor.fileio import WriteError, atomic_write

        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(self.path, json.dumps({"format": FORMAT, **self.data}), regular_only=True)
            self.dirty = False
        except (OSError, WriteError):
            pass                            # a read-only home: no cache, same answers
