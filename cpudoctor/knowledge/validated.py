"""The list of knowledge files already checked against their schemas: ``resources/knowledge.sha256``.

Compiling the schemas is most of what reading the knowledge costs (fastjsonschema
generates and compiles a validator per schema: about a tenth of a second for all
files, on every start). The files ship with the app and do not change, so the
test suite checks them once and lists the SHA-256 of every data file and schema
it checked, in ``sha256sum`` format (``sha256sum -c resources/knowledge.sha256``
works). At run time a file whose bytes and whose schema's bytes are the listed
ones was valid when it was listed, and is not checked again; a file edited,
damaged or converted since (CRLF line ends) no longer matches its line and is
validated as before. Validation is a function of the two files' bytes, so
nothing is trusted that was not checked.

Write the list after editing a data file or schema (tests/test_knowledge.py says so when it is stale):

    .venv/bin/python -m cpudoctor.knowledge
"""

from __future__ import annotations

import hashlib
from functools import lru_cache
from typing import Callable, Iterable

from cpudoctor import resources
from cpudoctor.knowledge.resource_bytes import read_resource

MANIFEST = "knowledge.sha256"
# Two lines per data file, about 90 bytes each: a list larger than this is not the one the suite wrote.
MAX_BYTES = 64 << 10


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@lru_cache(maxsize=1)
def listed() -> dict[str, str]:
    """``{file name: sha256}`` from the list; empty when it is missing or unreadable (then all is validated)."""
    try:           # bounded: a 3 GB list was once read whole; a damaged list only means every file is validated
        text = read_resource(MANIFEST, MAX_BYTES).decode("ascii")
    except (OSError, ValueError, UnicodeDecodeError):
        return {}
    out: dict[str, str] = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and len(parts[0]) == 64:
            out[parts[1].lstrip("*")] = parts[0]
    return out


def already_checked(name: str, data: bytes, schema_name: str, schema: bytes) -> bool:
    """True when both files are byte for byte the ones the test suite validated and listed."""
    known = listed()
    return known.get(name) == digest(data) and known.get(schema_name) == digest(schema)


def manifest_text(loaders: Iterable, check: Callable[[object], object]) -> str:
    """The list for ``loaders`` (:class:`DataFile`), each first checked by ``check(loader)`` (which raises when
    a file is invalid: an invalid file is never listed)."""
    lines = []
    for loader in sorted(loaders, key=lambda f: f.name):
        check(loader)
        for name in (loader.name, loader.schema_name):
            lines.append(f"{digest(resources.read_bytes(name))}  {name}")
    return "\n".join(lines) + "\n"
