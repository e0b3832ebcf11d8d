"""Installed distributions, read the quick way and never hanging: what ``importlib.metadata`` gives, bounded.

``importlib.metadata.distributions()`` opens the METADATA of every
distribution it meets and parses each with the e-mail parser: a FIFO named
``METADATA`` blocks it for ever (every default command hung on one venv under
~/.virtualenvs), an 8 GB sparse one is read whole (MemoryError), and a big
environment costs a second of parsing that nobody reads. Here:

* a ``*.dist-info`` / ``*.egg-info`` folder's name already holds the
  distribution's name and (usually) its version, so listing a site folder reads
  no file at all;
* a file is read only when something asks for it (the few packages CPU Doctor
  knows, the INSTALLER of one, a RECORD), only when it is a regular file, and
  only up to a bound (:func:`cpudoctor.kits.rooted.read_bytes_checked`: a FIFO
  or device is refused before it is opened);
* whether a distribution ships compiled code is a byte search of its RECORD,
  not a parse of thousands of rows into objects.

:class:`SafeDistribution` answers what the probes ask of an
``importlib.metadata.Distribution`` (``metadata["Name"]``, ``version``,
``requires``, ``read_text``) from the METADATA header alone, without importing
``importlib.metadata`` and its e-mail parser (part of every cold start).
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterable
from pathlib import Path

from cpudoctor.kits.rooted import read_bytes_checked

MAX_METADATA_BYTES = 4 << 20      # torch's METADATA is 38 KB; a long README makes a few hundred
MAX_RECORD_BYTES = 32 << 20       # torch's RECORD is 1.5 MB (15,000 files)
MAX_SMALL_BYTES = 64 << 10        # INSTALLER, top_level.txt, ...
MAX_ENTRIES = 20_000              # names read from one site folder
_SUFFIXES = (".dist-info", ".egg-info")
_COMPILED = re.compile(rb"\.(?:so|pyd|dylib)(?:\.[0-9][0-9.]*)?,")


class Headers(dict):
    """A METADATA header: the first value of each field; a missing field is None (as ``email.message`` has it)."""

    def __missing__(self, key: str) -> None:
        return None


class SafeDistribution:
    """One ``*.dist-info`` or ``*.egg-info`` folder; files read only when regular and small enough."""

    def __init__(self, path: Path):
        self._path = Path(path)
        self.folder_name, self.folder_version = split_folder_name(self._path.name)
        self._headers: Headers | None = None
        self._requires: list[str] = []

    def __repr__(self) -> str:
        return f"SafeDistribution({str(self._path)!r})"

    @property
    def path(self) -> Path:
        return self._path

    def read_text(self, filename: str | os.PathLike) -> str | None:
        name = os.fspath(filename)
        if not name:
            return None
        limit = MAX_RECORD_BYTES if name == "RECORD" else MAX_METADATA_BYTES if name in (
            "METADATA", "PKG-INFO") else MAX_SMALL_BYTES if "/" not in name else MAX_METADATA_BYTES
        try:
            data = read_bytes_checked(self._path / name, limit)
        except (OSError, ValueError):
            return None
        return data.decode("utf-8", "replace")

    def locate_file(self, path: str | os.PathLike) -> Path:
        return self._path.parent / path

    @property
    def metadata(self) -> Headers:
        """The METADATA (or PKG-INFO) header's fields; empty when unreadable."""
        if self._headers is None:
            self._headers, self._requires = parse_headers(self.read_text("METADATA") or self.read_text("PKG-INFO")
                                                          or "")
        return self._headers

    @property
    def version(self) -> str | None:
        return self.metadata["Version"] or self.folder_version

    @property
    def requires(self) -> list[str] | None:
        """Its ``Requires-Dist`` lines (None when it names none)."""
        self.metadata
        return list(self._requires) or None

    @property
    def quick_name(self) -> str:
        """The distribution's name from its folder (no file read); the METADATA's when the folder has none."""
        return self.folder_name or self.metadata["Name"] or ""

    def display_name(self) -> str:
        """The name as its METADATA spells it (``opencv-python-headless``), read from the header alone."""
        return self.metadata["Name"] or self.folder_name or ""

    def ships_compiled(self) -> bool | None:
        """True when its RECORD lists an .so/.pyd/.dylib; None without a readable RECORD."""
        try:
            data = read_bytes_checked(self._path / "RECORD", MAX_RECORD_BYTES)
        except (OSError, ValueError):
            return None
        return _COMPILED.search(data) is not None


def split_folder_name(name: str) -> tuple[str | None, str | None]:
    """``torch-2.13.0+cpu.dist-info`` -> (torch, 2.13.0+cpu); ``numpy-1.26.4-py3.11.egg-info`` ->
    (numpy, 1.26.4); ``pkg.egg-info`` -> (pkg, None). Installers escape ``-`` in names as ``_``."""
    for suffix in _SUFFIXES:
        if name.endswith(suffix):
            stem = name[: -len(suffix)]
            break
    else:
        return None, None
    parts = stem.split("-")
    dist = parts[0] or None
    version = parts[1] if len(parts) > 1 and parts[1] and not parts[1].startswith("py") else None
    return dist, version


def parse_headers(text: str) -> tuple[Headers, list[str]]:
    """A METADATA header (up to the first blank line): its fields' first values (names as the core
    metadata spec spells them, ``Name``, ``Version``...) and every ``Requires-Dist``."""
    fields = Headers()
    requires: list[str] = []
    for line in text.split("\n\n", 1)[0].splitlines():
        if not line or line[0] in " \t":
            continue                      # a continuation line (a long Description or License)
        key, sep, value = line.partition(":")
        if not sep:
            continue
        key, value = key.strip(), value.strip()
        if key.lower() == "requires-dist":
            requires.append(value)
        else:
            fields.setdefault(_FIELD_NAMES.get(key.lower(), key), value)
    return fields, requires


_FIELD_NAMES = {"name": "Name", "version": "Version", "summary": "Summary"}


def distributions(paths: Iterable[str | os.PathLike] | None = None) -> list[SafeDistribution]:
    """The distributions in ``paths`` (default: ``sys.path``), in path order; folders only (zips are skipped),
    each folder's entries sorted, at most :data:`MAX_ENTRIES` names per folder."""
    import sys

    out: list[SafeDistribution] = []
    for entry in list(sys.path if paths is None else paths):
        folder = os.fspath(entry) or "."
        try:
            if not stat.S_ISDIR(os.stat(folder).st_mode):
                continue
            names: list[str] = []
            with os.scandir(folder) as it:
                for item in it:
                    if len(names) >= MAX_ENTRIES:
                        break
                    if item.name.endswith(_SUFFIXES):
                        names.append(item.name)
        except (OSError, ValueError):
            continue
        for name in sorted(names):
            path = Path(folder) / name
            try:
                if path.is_dir():
                    out.append(SafeDistribution(path))
            except (OSError, ValueError):
                continue
    return out


def quick_name(dist) -> str:
    """A distribution's name as cheaply as it can be had (a folder name, else its METADATA)."""
    if isinstance(dist, SafeDistribution):
        return dist.quick_name
    try:
        return dist.metadata["Name"] or ""
    except (KeyError, TypeError):
        return ""


def versions(site_dirs: Iterable[str | os.PathLike], names: Iterable[str]) -> dict[str, str]:
    """Normalised name -> version of the first distribution of each of ``names`` found (import order)."""
    from cpudoctor.knowledge.versions import normalize

    wanted = {normalize(n) for n in names}
    found: dict[str, str] = {}
    for dist in distributions(site_dirs):
        key = normalize(dist.quick_name)
        if key not in wanted or key in found:
            continue
        version = dist.version
        if version:
            found[key] = version
    return found
