"""The report schema compiled once per machine: cached, trusted only when it is the user's own, never required."""

from __future__ import annotations

import os

import fastjsonschema
import pytest

from cpudoctor.kits import compiled_schema
from cpudoctor.kits.cachedir import cache_dir

SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}


def _files(folder):
    return sorted(folder.glob(f"*{compiled_schema.SUFFIX}"))


def test_compiled_once_then_loaded_from_the_cache(tmp_path, monkeypatch):
    validate = compiled_schema.validator(SCHEMA, "t", tmp_path)
    assert validate({"n": 1}) == {"n": 1}
    with pytest.raises(fastjsonschema.JsonSchemaValueException):
        validate({"n": "one"})
    (cached,) = _files(tmp_path)
    assert cached.stat().st_mode & 0o077 == 0                       # this user's only

    def no_compiling(_schema):
        raise AssertionError("compiled again although the cache holds it")

    monkeypatch.setattr(fastjsonschema, "compile_to_code", no_compiling)
    again = compiled_schema.validator(SCHEMA, "t", tmp_path)
    with pytest.raises(fastjsonschema.JsonSchemaValueException):
        again({})


def test_another_schema_gets_its_own_file_and_old_versions_go(tmp_path):
    for i in range(compiled_schema.KEEP_VERSIONS + 2):
        compiled_schema.validator({**SCHEMA, "title": f"v{i}"}, "t", tmp_path)
    assert len(_files(tmp_path)) == compiled_schema.KEEP_VERSIONS


@pytest.mark.parametrize("damage", ["garbage", "foreign-writable"])
def test_a_damaged_or_untrusted_cache_is_compiled_afresh(tmp_path, damage):
    compiled_schema.validator(SCHEMA, "t", tmp_path)
    (cached,) = _files(tmp_path)
    if damage == "garbage":
        cached.write_bytes(b"\x00not marshal data")
    else:
        # Code anyone may rewrite is never run: a valid file that accepts everything, made group-writable.
        import marshal

        cached.write_bytes(marshal.dumps(compile("def validate(data, **kw):\n    return data\n", "x", "exec")))
        cached.chmod(0o664)
    validate = compiled_schema.validator(SCHEMA, "t", tmp_path)
    with pytest.raises(fastjsonschema.JsonSchemaValueException):
        validate({})


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root writes into read-only folders")
def test_an_unwritable_cache_only_costs_the_compile(tmp_path):
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o500)
    try:
        validate = compiled_schema.validator(SCHEMA, "t", folder)
        assert validate({"n": 2}) == {"n": 2} and _files(folder) == []
    finally:
        folder.chmod(0o700)


def test_a_cache_path_that_is_a_file_only_costs_the_compile(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    validate = compiled_schema.validator(SCHEMA, "t", blocker / "cache")
    assert validate({"n": 3}) == {"n": 3}


def test_the_cache_folder():
    assert cache_dir({"CPUDOCTOR_CACHE_DIR": "/tmp/cd"}).as_posix() == "/tmp/cd"
    assert cache_dir({"XDG_CACHE_HOME": "/tmp/x"}).as_posix() == "/tmp/x/cpudoctor"


def test_saved_reports_are_checked_by_the_cached_schema(tmp_path, monkeypatch):
    """The report schema itself goes through the cache, and a damaged report is still refused."""
    from cpudoctor import report_file
    from cpudoctor.model import ReportError

    monkeypatch.setenv("CPUDOCTOR_CACHE_DIR", str(tmp_path))
    report_file._compiled.cache_clear()
    try:
        with pytest.raises(ReportError, match="damaged"):
            report_file.report_from_json('{"schema_version": 1, "meta": {"kind": "cpudoctor-report"}, '
                                         '"cpu": {"flags": 7}}')
        assert [p.name.split("-")[0] for p in _files(tmp_path)] == ["report"]
    finally:
        report_file._compiled.cache_clear()


@pytest.mark.parametrize("content", [b"[" * 4096, b"\xdb\xff\xff\xff\x7f" * 100, b"", b"cpudoctor-schema-code 1\n" +
                                     b"0" * 64 + b"[[[["])
def test_only_bytes_this_module_wrote_are_unmarshalled(tmp_path, content):
    """marshal trusts its input: "[[[[" in the cache file asked it for a list of 1.5 billion items (13 TB of address
    space, minutes to give back). A file without the module's header and the digest of what follows is compiled
    afresh and replaced."""
    name = tmp_path / f"t-{compiled_schema._digest(SCHEMA, fastjsonschema.VERSION)}{compiled_schema.SUFFIX}"
    name.write_bytes(content)
    name.chmod(0o600)
    assert compiled_schema.validator(SCHEMA, "t", tmp_path)({"n": 1}) == {"n": 1}
    assert name.read_bytes().startswith(compiled_schema.MAGIC)
