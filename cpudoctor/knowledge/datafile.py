"""One data file of ``resources/``: read once, on first use, and checked against its schema.

Every knowledge file ``NAME.json`` has ``NAME.schema.json`` beside it (JSON
Schema, the draft-7 subset fastjsonschema compiles). Nothing is read when the
module is imported (psutil's tests must reload modules that detect at import;
a report of a captured tree needs no flag meanings): the first caller of
:attr:`DataFile.data` pays for reading, parsing and validating, every later
caller gets the same object. A file that is missing, is not JSON or breaks its
schema raises :class:`KnowledgeError` naming the file and the place: that is a
broken installation, never something to guess around. The schema check is skipped
for a file that is byte for byte one the test suite checked and listed in
``resources/knowledge.sha256`` (:mod:`.validated`): compiling the schemas was a
tenth of a second of every start.
"""

from __future__ import annotations

import json
import re
import threading
from typing import Any

from cpudoctor.knowledge import validated
from cpudoctor.knowledge.resource_bytes import read_resource


class KnowledgeError(ValueError):
    """A data file is missing, is not JSON, or does not match its schema: ``str()`` is one line naming the file."""


class DataFile:
    """The loader of ``resources/<name>``: :attr:`data` is the parsed, validated file (read once).

    ``about`` says what the file holds and who reads it (the schema's
    description says the same, for someone reading the JSON).
    """

    def __init__(self, name: str, about: str) -> None:
        if not name.endswith(".json") or name.endswith(".schema.json"):
            raise ValueError(f"a data file is NAME.json, not {name!r}")
        self.name = name
        self.about = about
        self._data: Any = None
        self._loaded = False
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"DataFile({self.name!r}{', loaded' if self._loaded else ''})"

    @property
    def schema_name(self) -> str:
        return self.name.removesuffix(".json") + ".schema.json"

    @property
    def loaded(self) -> bool:
        """True once the file has been read (tests check that importing reads nothing)."""
        return self._loaded

    @property
    def data(self) -> Any:
        """The file's content, validated against its schema; read on the first call only."""
        if not self._loaded:
            with self._lock:
                if not self._loaded:
                    self._data = self.read()
                    self._loaded = True
        return self._data

    def read(self, *, trust_list: bool = True) -> Any:
        """Read, parse and validate the file now (no caching): :attr:`data` calls this once.

        ``trust_list``: skip the schema check when this file and its schema are byte for byte the ones
        the test suite checked and listed (:mod:`.validated`); the tests pass False."""
        raw, schema_raw = _bytes(self.name), _bytes(self.schema_name)
        data = _parse(self.name, raw)
        if trust_list and validated.already_checked(self.name, raw, self.schema_name, schema_raw):
            return data
        validate(data, self._schema(schema_raw), self.name)
        return data

    def schema(self) -> dict[str, Any]:
        return self._schema(_bytes(self.schema_name))

    def _schema(self, raw: bytes) -> dict[str, Any]:
        schema = _parse(self.schema_name, raw)
        if not isinstance(schema, dict):
            raise KnowledgeError(f"resources/{self.schema_name} is not a JSON Schema object")
        return schema


def _bytes(name: str) -> bytes:
    try:
        return read_resource(name)
    except (OSError, ValueError) as exc:
        why = getattr(exc, "strerror", None) or str(exc).split(";")[0]
        raise KnowledgeError(f"resources/{name} cannot be read ({why}): the installation is damaged or incomplete; "
                             "reinstall CPU Doctor") from None


def _parse(name: str, raw: bytes) -> Any:
    try:
        return json.loads(raw.decode("utf-8"))
    except ValueError as exc:
        raise KnowledgeError(f"resources/{name} is not valid JSON ({exc}): the installation is damaged; "
                             "reinstall CPU Doctor") from None
    except RecursionError:
        raise KnowledgeError(f"resources/{name} is nested too deeply to be a CPU Doctor data file: the installation "
                             "is damaged; reinstall CPU Doctor") from None


def validate(data: Any, schema: dict[str, Any], name: str) -> None:
    """Raise KnowledgeError when ``data`` (the content of ``resources/<name>``) breaks ``schema``."""
    import fastjsonschema  # noqa: PLC0415 - compiling is paid by the first reader, not by every import

    # The keywords used mean the same in draft 7 and 2020-12; "$defs" is reached as a JSON pointer.
    # Without $id, fastjsonschema resolves "#/$defs/..." in this document instead of fetching the URL.
    root = {k: v for k, v in schema.items() if k not in ("$schema", "$id")}
    try:
        # Without the schema's text in every exception the generated validator is 2.5x smaller and
        # compiles 2.5x faster (all files: ~0.13 s instead of ~0.33 s on a busy 2-core machine); the
        # message still names the place. (fastjsonschema 2.22 cannot compile "const" this way: use a
        # one-value "enum".)
        fastjsonschema.compile(root, detailed_exceptions=False)(data)
    except fastjsonschema.JsonSchemaValueException as exc:
        where = re.sub(r"^data\b", "$", exc.message)
        raise KnowledgeError(f"resources/{name} does not match its schema: {where}") from None
    except fastjsonschema.JsonSchemaDefinitionException as exc:
        raise KnowledgeError(f"the schema of resources/{name} is not valid: {exc}") from None
    except RecursionError:
        raise KnowledgeError(f"the schema of resources/{name} is nested too deeply: the installation is damaged; "
                             "reinstall CPU Doctor") from None
