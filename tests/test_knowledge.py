"""The knowledge layer: one loader per data file, each file valid against its schema, every name it uses real.

archspec's habit: the data is validated against its schema, and what a schema
cannot say is checked here: every flag, micro-architecture, rule code,
condition, shape and regular expression a data file names exists or compiles.
(known_problems.json, isa_floors.json and vm_cpu_models.json have more checks of
their own in test_known_problems.py, test_isa_floors_data.py and test_vm_cpu_model.py.)
"""

from __future__ import annotations

import copy
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from cpudoctor import knowledge, resources
from cpudoctor.knowledge import (ADVISOR_KNOWLEDGE, FLAGS, FLOORS, ISA_FORCING, KNOWN_PROBLEMS, LEVELS,
                                 MICROARCHITECTURES, NATIVE_LIBS, PEAK_FLOPS, SHOWN_SETTINGS, TORCH_WHEELS,
                                 VM_CPU_MODELS, DataFile, FlagCatalogue, KnowledgeError)
from cpudoctor.knowledge import datafile, validated
from cpudoctor.knowledge.datafile import validate
from cpudoctor.knowledge.validated import MANIFEST, manifest_text
from cpudoctor.knowledge.flags import AVX512_SUBSET_ORDER
from cpudoctor.model import arch_family

RESOURCES = Path(__file__).resolve().parents[1] / "resources"
# The saved report's contract (generated from cpudoctor.model) and its lab runs' metrics per kind, both read by
# cpudoctor.report_file: not knowledge.
NOT_KNOWLEDGE = {"report.schema.json", "lab_metrics.schema.json"}


def _data_files() -> set[str]:
    return {p.name for p in RESOURCES.glob("*.json")
            if not p.name.endswith(".schema.json") and p.name not in NOT_KNOWLEDGE}


def test_every_data_file_has_one_loader_and_a_schema_beside_it():
    names = [f.name for f in knowledge.ALL]
    assert len(names) == len(set(names)), "two loaders for one file"
    assert set(names) == _data_files()
    schemas = {p.name for p in RESOURCES.glob("*.schema.json")} - NOT_KNOWLEDGE
    assert schemas == {f.schema_name for f in knowledge.ALL}, "a schema without its data file, or the reverse"


@pytest.mark.parametrize("loader", knowledge.ALL, ids=lambda f: f.name)
def test_the_file_matches_its_schema(loader: DataFile):
    data = loader.read(trust_list=False)
    assert data == loader.data                   # what callers get is what was validated
    schema = loader.schema()
    assert schema["$id"].endswith("/resources/" + loader.schema_name) and schema.get("description")


def test_the_list_of_checked_files_is_current():
    """resources/knowledge.sha256 lists exactly the bytes of today's files (each checked before it is listed)."""
    want = manifest_text(knowledge.ALL, lambda loader: loader.read(trust_list=False))
    have = (RESOURCES / MANIFEST).read_text(encoding="ascii")
    assert have == want, ("resources/knowledge.sha256 is stale (a data file or schema changed): "
                          "run `.venv/bin/python -m cpudoctor.knowledge` and commit the list")


def test_a_listed_file_is_not_checked_again_and_a_changed_one_is(monkeypatch):
    compiled: list[str] = []
    real_validate = datafile.validate

    def counting(data, schema, name):
        compiled.append(name)
        real_validate(data, schema, name)

    monkeypatch.setattr(datafile, "validate", counting)
    assert FlagCatalogue("flags.json", "as listed").data["flags"]["avx2"]
    assert compiled == []                                  # the listed bytes: no schema compiled
    listed_bytes = resources.read_bytes("flags.json")
    broken = listed_bytes.replace(b'"avx2": {', b'"avx2": {"misspelt": 1, ', 1)
    assert broken != listed_bytes
    monkeypatch.setattr(resources, "read_bytes",
                        lambda name: broken if name == "flags.json" else resources.path(name).read_bytes())
    with pytest.raises(KnowledgeError, match=r"resources/flags.json does not match its schema"):
        FlagCatalogue("flags.json", "edited since it was listed").data
    assert compiled == ["flags.json"]


def test_without_the_list_every_file_is_checked(monkeypatch):
    monkeypatch.setattr(validated, "listed", lambda: {})
    compiled: list[str] = []
    monkeypatch.setattr(datafile, "validate", lambda data, schema, name: compiled.append(name))
    FlagCatalogue("flags.json", "no list").data
    assert compiled == ["flags.json"]


@pytest.mark.parametrize("loader", knowledge.ALL, ids=lambda f: f.name)
def test_the_schema_rejects_a_file_with_a_key_it_does_not_know(loader: DataFile):
    """Every schema is closed at the top: a misspelt section is an error, not silently ignored."""
    bad = dict(copy.deepcopy(loader.data), misspelt_section=1)
    with pytest.raises(KnowledgeError, match=re.escape(f"resources/{loader.name} does not match its schema")):
        validate(bad, loader.schema(), loader.name)


def test_a_broken_entry_is_named_with_its_place():
    bad = copy.deepcopy(FLAGS.data)
    bad["flags"]["avx2"]["cpuid"] = "7.0.ebx"        # no bit
    with pytest.raises(KnowledgeError) as err:
        validate(bad, FLAGS.schema(), FLAGS.name)
    assert "resources/flags.json" in str(err.value) and "avx2" in str(err.value) and "cpuid" in str(err.value)
    bad = copy.deepcopy(FLOORS.data)
    bad["packages"][0]["floors"].append({"versions": ">=9", "needs": ["AVX 2"], "failure": "sigill",
                                         "confidence": "documented", "reason": "x", "sources": []})
    with pytest.raises(KnowledgeError, match=r"packages"):
        validate(bad, FLOORS.schema(), FLOORS.name)


def test_a_missing_file_says_what_happened_and_what_to_do():
    missing = FlagCatalogue("no_such_flags.json", "missing on purpose")
    with pytest.raises(KnowledgeError, match=r"resources/no_such_flags.json cannot be read .*reinstall CPU Doctor"):
        missing.data
    assert not missing.loaded


def test_a_loader_reads_its_file_once_whatever_the_threads():
    fresh = FlagCatalogue("flags.json", "a second loader, for counting")
    reads = []
    real = fresh.read

    def counted():
        reads.append(1)
        return real()

    fresh.read = counted
    seen = []
    threads = [threading.Thread(target=lambda: seen.append(fresh.data)) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(reads) == 1 and len(seen) == 8 and all(s is seen[0] for s in seen)


def test_importing_the_layers_reads_no_data_file():
    """Nothing is read at import time (psutil's lesson): the first question pays, not every `import`."""
    code = ("import cpudoctor.knowledge as k, cpudoctor.probes, cpudoctor.advisor, cpudoctor.lab, cpudoctor.render, "
            "cpudoctor.pipeline, cpudoctor.report_file; print(sorted(f.name for f in k.ALL if f.loaded))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "[]"


# -- every name a data file uses exists ------------------------------------------------------

def _uarchs() -> set[str]:
    return set(MICROARCHITECTURES.data["uarchs"])


def _vendors() -> set[str]:
    return {v["short"] for v in MICROARCHITECTURES.data["vendors"].values()}


def test_flag_catalogue_names_declared_categories_flags_and_subsets():
    categories = set(FLAGS.categories)
    for name, entry in FLAGS.entries.items():
        assert entry["category"] in categories, name
        for key, variant in entry.get("on", {}).items():
            assert key in {"x86", "arm"} | _vendors(), (name, key)
            assert variant.get("category", entry["category"]) in categories, name
    assert set(FLAGS.aliases.values()) <= set(FLAGS.entries), set(FLAGS.aliases.values()) - set(FLAGS.entries)
    assert not set(FLAGS.aliases) & set(FLAGS.entries), "an alias shadows a kernel flag name"
    assert list(FLAGS.avx512_subsets().values()) == list(AVX512_SUBSET_ORDER)   # each subset once, all known


def test_levels_run_one_to_four_over_known_flags():
    assert [(r["level"], r["name"]) for r in LEVELS.rows] == [
        (1, "x86-64"), (2, "x86-64-v2"), (3, "x86-64-v3"), (4, "x86-64-v4")]
    flags = [f for r in LEVELS.rows for f in r["flags"]]
    assert len(flags) == len(set(flags)) and set(flags) <= set(FLAGS.entries)


def test_floors_need_known_flags_or_levels():
    levels = {r["name"] if r["level"] > 1 else "x86-64-v1" for r in LEVELS.rows}
    for package in FLOORS.packages.values():
        for floor in package.floors:
            assert set(floor.needs) <= set(FLAGS.entries) | levels, (package.name, floor.needs)


def test_microarchitecture_rows_name_known_uarchs_flags_and_vendors():
    table = MICROARCHITECTURES.data
    uarchs = _uarchs()
    for row in table["x86"]:
        assert row["uarch"] is None or row["uarch"] in uarchs, row
        assert row["vendor"] in _vendors(), row["vendor"]
    assert {row["uarch"] for row in table["arm"]} <= uarchs
    for row in table["product_lines"] + table["brand_uarch"]:
        re.compile(row["pattern"])
    for name, traits in table["uarchs"].items():
        assert set(traits["expected_flags"]) <= set(FLAGS.entries), name


def test_vm_models_name_known_uarchs_and_flags():
    data = VM_CPU_MODELS.data
    assert set(data["silicon_isa"]) <= _uarchs()
    assert {f for flags in data["silicon_isa"].values() for f in flags} | set(data["flag_labels"]) <= set(FLAGS.entries)
    for entry in data["generic_models"]:
        re.compile(entry["pattern"])


def test_known_problem_conditions_are_implemented():
    from cpudoctor.advisor import known

    for problem in KNOWN_PROBLEMS.data["problems"]:
        assert set(problem["when"]) <= set(known.CONDITIONS), problem["id"]


def test_forcing_values_need_known_flags_and_aliases_resolve():
    variables = ISA_FORCING.data["variables"]
    for name, entry in variables.items():
        if "same_as" in entry:
            assert "values" in variables[entry["same_as"]], name
            continue
        for value in entry["values"]:
            assert set(value["needs"]) <= set(FLAGS.entries), (name, value["needs"])
    assert set(ISA_FORCING.data["numpy_disable"]["flags"].values()) <= set(FLAGS.entries)


def test_advisor_knowledge_names_known_uarchs_and_registered_rules():
    from cpudoctor.advisor import engine

    data = ADVISOR_KNOWLEDGE.data
    named = set(data["avx512_silicon"]["uarchs"]) | set(data["zen_uarchs"]["uarchs"]) | set(data["zen_uarchs"]["best"])
    assert named <= _uarchs(), named - _uarchs()
    codes = {r.code for r in engine.registry()}
    relevance = data["relevance"]["high"] + data["relevance"]["low"]
    assert set(relevance) <= codes, set(relevance) - codes
    assert len(relevance) == len(set(relevance)), "a rule is both high and low"
    # machine.expected_torch_capability answers with these names.
    assert set(data["torch_cpu_capability"]["rank"]) == {"DEFAULT", "AVX2", "AVX512"}


def test_peak_flops_name_known_uarchs_and_valid_brand_patterns():
    entries = PEAK_FLOPS.data["microarchitectures"]
    assert set(entries) <= _uarchs(), set(entries) - _uarchs()
    for entry in entries.values():
        for variant in entry.get("variants", []):
            re.compile(variant["brand_regex"])


def test_shown_settings_use_declared_shapes_that_compile():
    data = SHOWN_SETTINGS.data
    assert set(data["environment"].values()) <= set(data["shapes"])
    for rx in [*data["shapes"].values(), data["command_line"]["value_shape"], *data["command_line"]["python_code"]]:
        re.compile(rx)


def test_native_library_patterns_compile():
    for entry in NATIVE_LIBS.data["libraries"]:
        re.compile(entry["pattern"])
        assert ("runtime" in entry) is (entry["kind"] == "openmp"), entry["label"]


def test_torch_wheel_platforms_are_spelled_the_way_the_advisor_looks_them_up():
    from cpudoctor.advisor.torch_setup import normalise_arch

    for platform in TORCH_WHEELS.data["platforms"]:
        for arch in platform["arch"]:
            assert normalise_arch(arch, platform["os"]) == arch and arch_family(arch) in ("x86", "arm")


def test_a_damaged_list_trusts_nothing_it_cannot_read(monkeypatch):
    """Garbage, a wrong hash, a binary list: the files whose lines do not match are validated, nothing breaks."""
    real = resources.read_bytes
    flags_hash = validated.digest(real("flags.json"))
    for damaged in (b"\xff\xfe garbage\n", b"not a line\n" + b"0" * 64 + b"  flags.json\n",
                    f"{flags_hash}  flags.json\n".encode() + b"x" * 100_000):
        monkeypatch.setattr(resources, "read_bytes", lambda name, d=damaged: d if name == MANIFEST else real(name))
        validated.listed.cache_clear()
        compiled: list[str] = []
        monkeypatch.setattr(datafile, "validate", lambda data, schema, name: compiled.append(name))
        assert FlagCatalogue("flags.json", "damaged list").data["flags"]["avx2"]
        assert compiled == ["flags.json"]           # the schema's line is missing or wrong: checked again
    validated.listed.cache_clear()
