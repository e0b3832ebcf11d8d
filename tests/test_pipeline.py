"""The report pipeline: sources, named stages, snapshots, cancellation, and the CPUID cross-check on every surface."""

from __future__ import annotations

import json
import platform

import pytest
from conftest import machine_root, run_cli

from cpudoctor.pipeline import STAGES, Cancelled, Source, build_report, diagnose, planned_stages
from cpudoctor.model import ReportError

TREE = "archspec-rocky9-zen5"


def test_sources_and_their_labels(tmp_path):
    assert Source.tree("/") == Source.this_machine() and Source.this_machine().live
    tree = Source.tree(tmp_path)
    assert tree.kind == "tree" and not tree.live and tree.label == f"captured tree {tmp_path}"
    saved = Source.saved(tmp_path / "a.json")
    assert saved.kind == "saved" and saved.label == "saved report a.json"


def test_planned_stages():
    assert planned_stages(Source.this_machine()) == ["cpu", "topology", "software-quick", "software-children",
                                                     "cpuid-cross-check", "advisor"]
    assert planned_stages(Source.this_machine(), children=False) == ["cpu", "topology", "software-quick", "advisor"]
    assert planned_stages(Source.tree("/tmp/x")) == ["cpu", "topology", "software-quick", "advisor"]
    assert planned_stages(Source.saved("a.json"), findings=False) == ["load"]
    assert set(planned_stages(Source.this_machine())) | {"load"} == set(STAGES)


def test_stages_land_in_order_as_snapshots_later_stages_never_change(corpus):
    seen = []
    report = build_report(Source.tree(machine_root(TREE)), on_stage=seen.append)
    assert [s.name for s in seen] == planned_stages(Source.tree(machine_root(TREE)))
    assert all(s.seconds >= 0 for s in seen)
    cpu, topology, quick, advice = (s.report for s in seen)
    assert topology.topology.logical_cpus and not cpu.topology.logical_cpus      # the cpu snapshot kept its own
    assert quick.software is not None and topology.software is None
    assert quick.findings == [] and advice.findings and report is advice
    assert report.software.captured                                               # a tree: file facts only


def test_cancelled_between_stages(corpus):
    seen = []
    with pytest.raises(Cancelled):
        build_report(Source.tree(machine_root(TREE)), on_stage=seen.append, cancelled=lambda: len(seen) >= 2)
    assert [s.name for s in seen] == ["cpu", "topology"]


def test_saved_reports_are_diagnosed_again_and_bad_ones_raise(corpus, tmp_path):
    built = build_report(Source.tree(machine_root(TREE)))
    path = tmp_path / "r.json"
    stale = diagnose(built)
    stale.findings = stale.findings[:1]                   # as if saved by an older CPU Doctor
    path.write_text(stale.to_json())
    again = build_report(Source.saved(path))
    assert {(f.code, f.severity) for f in again.findings} == {(f.code, f.severity) for f in built.findings}
    path.write_text("{oops")
    with pytest.raises(ReportError, match="not valid JSON"):
        build_report(Source.saved(path))


def test_diagnose_leaves_its_input_alone(corpus):
    report = build_report(Source.tree(machine_root(TREE)), findings=False)
    judged = diagnose(report)
    assert report.findings == [] and judged.findings and judged.cpu is report.cpu


@pytest.mark.skipif(platform.machine().lower() not in ("x86_64", "amd64"), reason="CPUID is x86-only")
def test_doctor_and_report_both_run_the_cpuid_cross_check(monkeypatch, capsys):
    """Under emulation /proc/cpuinfo shows the host: both commands must say so (issue: only report did)."""
    from cpudoctor.probes.cpu import cpuid_check
    from cpudoctor.probes.software.stack import SoftwareProbe

    emulated = cpuid_check.CpuidResult(vendor_id="GenuineIntel", family=6, model=26, flags=["sse2", "sse4_2"])
    monkeypatch.setattr(cpuid_check, "run_child", lambda timeout=20.0: emulated)
    monkeypatch.setattr(SoftwareProbe, "complete", lambda self, **kw: self.quick())   # no real children here
    code, doctor, err = run_cli(capsys, "doctor", "--format", "json")
    assert code == 1, err                               # an error: code built for the host's flags dies of SIGILL
    isa7 = {f["code"]: f for f in json.loads(doctor)["findings"]}["ISA007"]
    assert isa7["severity"] == "error" and "GenuineIntel family 6 model 26" in isa7["why"]
    code, report, err = run_cli(capsys, "report", "--format", "json")
    assert code == 0, err
    data = json.loads(report)
    assert {f["code"]: f["severity"] for f in data["findings"]}["ISA007"] == "error"
    assert data["cpu"]["cpuid_check"]["emulated"] is True
    assert any("emulation" in n for n in data["cpu"]["notes"])
    code, fast, _ = run_cli(capsys, "doctor", "--fast", "--format", "json")
    assert "ISA007" not in {f["code"] for f in json.loads(fast)["findings"]}      # --fast: not checked, not guessed
