"""resources/report.schema.json: it matches the dataclasses, real reports validate, and it rejects bad ones."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import pytest

import schema_tools
from conftest import machine_root, probe_tree
from cpudoctor.report_file import report_from_json
from cpudoctor.model import BenchRun, Finding, Report, ThreadRecommendation
from cpudoctor.resources import load_json

REGEN = "regenerate with: .venv/bin/python tests/schema_tools.py (then describe new fields in tests/schema_tools.py)"


@pytest.fixture(scope="module")
def schema() -> dict:
    return load_json("report.schema.json")


def test_schema_file_matches_the_dataclasses(schema):
    built = schema_tools.build_schema()
    assert schema_tools.structure(schema) == schema_tools.structure(built), REGEN


def test_every_field_is_described_in_schema_and_docs(schema):
    docs = schema_tools.DOCS_PATH.read_text(encoding="utf-8")
    for name, obj in {"Report": schema, **schema["$defs"]}.items():
        assert f"### {name}" in docs, REGEN
        section = docs.split(f"### {name}\n", 1)[1].split("\n### ", 1)[0]
        for field_name, prop in obj["properties"].items():
            assert prop.get("description"), f"{name}.{field_name} has no description; {REGEN}"
            assert f"| `{field_name}` |" in section, f"{name}.{field_name} missing from docs; {REGEN}"


def test_refs_resolve_and_contract_keys_are_constrained(schema):
    text = json.dumps(schema)
    for ref in set(re.findall(r'"\$ref": "#/\$defs/(\w+)"', text)):
        assert ref in schema["$defs"], ref
    cpu = schema["$defs"]["CpuInfo"]["properties"]
    isa = schema["$defs"]["IsaVerdict"]["properties"]
    for key in ("vendor", "brand", "family", "model", "stepping", "microarchitecture", "flags", "isa"):
        assert key in cpu
    assert isa["avx512_usable"]["type"] == "boolean"
    assert isa["avx512_subsets"]["items"]["enum"][:5] == ["F", "CD", "BW", "DQ", "VL"]
    assert isa["x86_64_level"]["minimum"] == 1 and isa["x86_64_level"]["maximum"] == 4
    assert schema["properties"]["schema_version"]["const"] == 1


def _validate(report: Report, schema: dict) -> None:
    data = json.loads(report.to_json())
    schema_tools.validate(data, schema)


@pytest.mark.hardware
def test_live_report_validates(schema):
    from cpudoctor import advisor

    report = probe_tree(Path("/"))
    report.findings = advisor.diagnose(report)
    assert report.findings
    _validate(report, schema)


@pytest.mark.parametrize("name", ["hwloc-nvidia-dgx-gb10", "hwloc-20em64t-hybrid-1p6c2t+2ca4co1t",
                                  "pycpuinfo-fedora29-ryzen7-2700x-kvm", "hwloc-96em64t-4no4pa3ca2co",
                                  "archspec-rocky8-a64fx"])
def test_corpus_reports_validate(name, corpus, schema):
    _validate(probe_tree(machine_root(name)), schema)


def test_garbled_tree_report_validates(tmp_path, schema):
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc" / "cpuinfo").write_bytes(b"\xff\x00 not cpuinfo")
    report = probe_tree(tmp_path, software=False)
    assert report.software is None and report.cpu.vendor is None
    _validate(report, schema)


def test_report_with_benchmarks_and_recommendation_validates(corpus, schema):
    report = probe_tree(machine_root("archspec-rocky9-zen5"), software=False)
    report.benchmarks = [BenchRun(kind="sweep", settings={"threads": [1, 2]}, metrics={"best": 1.5, "series": [[1, 2.0]]},
                                  status="cancelled", started_at="2026-11-30T10:00:00+00:00", note="stopped")]
    report.recommendation = ThreadRecommendation(threads=8, interop_threads=1, cpus=[0, 1], variant="one CCX",
                                                 samples_per_s=12.5, default_samples_per_s=10.0, model="mlp")
    report.findings = [Finding(code="ISA001", symbol="avx512-not-usable", category="isa", severity="ok", title="fine",
                               evidence={"cpu.isa.avx512_usable": True})]
    _validate(report, schema)
    _validate(report_from_json(report.to_json()), schema)


@pytest.mark.parametrize(
    "mutate, fragment",
    [
        (lambda d: d["cpu"].__setitem__("family", "26"), "not of type"),
        (lambda d: d["cpu"]["isa"].__setitem__("avx512_subsets", ["F", "AVX512F"]), "not one of"),
        (lambda d: d["cpu"]["isa"].__setitem__("x86_64_level", 5), "> 4"),
        (lambda d: d["cpu"].__setitem__("microarchitecture", "Zen 5"), "does not match"),
        (lambda d: d["meta"].__setitem__("kind", "something-else"), "!="),
        (lambda d: d["cpu"].pop("flags"), "missing required key 'flags'"),
        (lambda d: d["topology"]["numa_nodes"].append({"id": 0, "cpus": ["a"], "distances": []}), "not of type"),
        (lambda d: d.__setitem__("findings", [{"code": "X1", "symbol": "s", "category": "c", "severity": "fatal"}]), "missing required key"),
    ],
)
def test_validator_rejects_broken_reports(mutate, fragment, corpus, schema):
    data = json.loads(probe_tree(machine_root("archspec-rocky9-zen5"), software=False).to_json())
    schema_tools.validate(copy.deepcopy(data), schema)
    mutate(data)
    with pytest.raises(schema_tools.ValidationError, match=re.escape(fragment)):
        schema_tools.validate(data, schema)


def test_schema_ships_as_package_data():
    from importlib import resources

    ref = resources.files("cpudoctor.resources").joinpath("report.schema.json")
    assert json.loads(ref.read_text(encoding="utf-8"))["title"] == "CPU Doctor report"
