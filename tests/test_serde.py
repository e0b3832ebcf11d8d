import json
from dataclasses import dataclass, field

import pytest

from cpudoctor.report_file import report_from_dict, report_from_json
from cpudoctor.model import Finding, Report, ReportError, SCHEMA_VERSION
from cpudoctor.model.serde import SchemaError, from_data, to_data
from cpudoctor.model import L3Domain, NumaNode


@dataclass
class _Inner:
    a: int
    b: list[float] = field(default_factory=list)


@dataclass
class _Outer:
    inner: _Inner
    maybe: _Inner | None = None
    names: dict[str, int] = field(default_factory=dict)


def test_roundtrip_nested():
    obj = _Outer(_Inner(1, [1.5]), None, {"x": 2})
    assert from_data(_Outer, json.loads(json.dumps(to_data(obj)))) == obj


def test_type_errors_are_reported_with_path():
    with pytest.raises(SchemaError, match=r"\$\.inner\.a"):
        from_data(_Outer, {"inner": {"a": "one"}})


def test_report_json_roundtrip_keeps_contract_keys():
    r = Report()
    r.topology.l3_domains = [L3Domain([0, 1], 32 << 20)]
    r.topology.numa_nodes = [NumaNode(0, [0, 1], [10])]
    r.findings = [Finding("ISA001", "x", "isa", "error", "t")]
    data = json.loads(r.to_json())
    assert data["schema_version"] == SCHEMA_VERSION
    assert data["topology"]["l3_domains"] == [{"cpus": [0, 1], "size_bytes": 32 << 20}]
    assert data["topology"]["numa_nodes"] == [{"id": 0, "cpus": [0, 1], "distances": [10]}]
    assert report_from_json(r.to_json()) == r


def test_report_rejects_foreign_json():
    with pytest.raises(ReportError, match="not a CPU Doctor report"):
        report_from_json('{"hello": 1}')
    with pytest.raises(ReportError, match="not valid JSON"):
        report_from_json("{")
    data = Report().to_dict()
    data["schema_version"] = 999
    with pytest.raises(ReportError, match="schema version 999"):
        report_from_dict(data)


def test_report_json_is_strict_even_with_a_diverged_loss():
    from cpudoctor.model import BenchRun

    r = Report(benchmarks=[BenchRun("train", metrics={"loss": float("nan"), "samples_per_s": float("inf"), "ok": 1.5})])
    data = json.loads(r.to_json())                     # json.loads accepts NaN; check the text too
    assert "NaN" not in r.to_json() and "Infinity" not in r.to_json()
    assert data["benchmarks"][0]["metrics"] == {"loss": None, "samples_per_s": None, "ok": 1.5}
