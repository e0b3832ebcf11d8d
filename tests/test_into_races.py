"""`bench --into` and `-o` lose nothing (issue 29, items 1-5 and 19).

A measurement takes minutes; while it runs, the report it goes into may be
written by another `bench --into`, edited, regenerated, deleted or swapped for
a link. The result is merged into what the file holds *at the end*, under a
lock, fields this version does not know are kept, only the file that was read
is written, and "added" is said only when the result is in the file. ``-o``
follows the shell's ``>``: a hard-linked file is written through. Empty paths
are refused.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from conftest import REPO, run_cli, wait_for
from cpudoctor.lab import session
from cpudoctor.lab.results import read_outcome
from cpudoctor.lab.runner import JobOutcome
from cpudoctor.model import Report
from cpudoctor.report_file import load_report


def _train_outcome(samples_per_s: float = 900.0) -> JobOutcome:
    return JobOutcome(result={"status": "ok", "dtype": "fp32", "samples_per_s": samples_per_s, "steps": 50,
                              "interference": {"other_share": 0.01, "steal_share": 0.0},
                              "settings": {"model": "simplecnn", "dtype": "fp32", "batch_size": 64}})


def this_machine_report(path: Path, **extra) -> Path:
    """A saved report of this machine (so --into accepts it), with ``extra`` top-level fields."""
    from cpudoctor.probes import probe_cpu

    report = Report(cpu=probe_cpu(Path("/")))
    report.meta.generated_at = "2026-12-01T08:00:00+00:00"
    data = json.loads(report.to_json())
    data.update(extra)
    path.write_text(json.dumps(data, indent=2))
    return path


def _fake_run(during=None, samples_per_s: float = 900.0):
    """session.run without a child: ``during()`` happens while the "job" runs."""
    def fake(job, settings, *, context=None, stop=None, **kw):
        if during is not None:
            during()
        outcome = _train_outcome(samples_per_s)
        return outcome, read_outcome(job, outcome, settings, context)
    return fake


def _bench_into(capsys, path: Path | str, *extra: str) -> tuple[int, str, str]:
    return run_cli(capsys, "bench", "train", "--seconds", "1", "--into", str(path), "--quiet", *extra)


def test_an_edit_made_while_the_job_runs_is_kept(tmp_path, capsys, monkeypatch):
    path = this_machine_report(tmp_path / "r.json")

    def edit():
        data = json.loads(path.read_text())
        data["notes"] = ["written by hand while the job ran"]
        path.write_text(json.dumps(data))

    monkeypatch.setattr(session, "run", _fake_run(edit))
    code, out, err = _bench_into(capsys, path)
    assert code == 0 and "added the train run" in err, err
    report = load_report(path)
    assert report.notes == ["written by hand while the job ran"]
    assert [b.kind for b in report.benchmarks] == ["train"]


def test_a_report_regenerated_while_the_job_runs_gets_the_result(tmp_path, capsys, monkeypatch):
    path = this_machine_report(tmp_path / "r.json", notes=["old"])
    monkeypatch.setattr(session, "run", _fake_run(lambda: this_machine_report(path, notes=["regenerated"])))
    code, out, err = _bench_into(capsys, path)
    assert code == 0, err
    report = load_report(path)
    assert report.notes == ["regenerated"] and len(report.benchmarks) == 1


def test_a_report_deleted_while_the_job_runs_is_not_brought_back(tmp_path, capsys, monkeypatch):
    path = this_machine_report(tmp_path / "r.json")
    monkeypatch.setattr(session, "run", _fake_run(path.unlink))
    code, out, err = _bench_into(capsys, path)
    assert code == 1, err
    assert not path.exists()
    assert "added" not in err.replace("not added", "") and "was deleted while the job ran" in err, err
    assert "samples/s" in out                                   # the figures were shown all the same
    assert err.count("\n") == 1 and "Traceback" not in err


def test_a_report_damaged_while_the_job_runs_is_left_alone(tmp_path, capsys, monkeypatch):
    path = this_machine_report(tmp_path / "r.json")
    monkeypatch.setattr(session, "run", _fake_run(lambda: path.write_text("{half a rep")))
    code, out, err = _bench_into(capsys, path)
    assert code == 1 and "not added" in err and "changed while the job ran" in err, err
    assert path.read_text() == "{half a rep"


def test_fields_this_version_does_not_know_are_kept(tmp_path, capsys, monkeypatch):
    path = this_machine_report(tmp_path / "r.json", future_section={"from": "a newer CPU Doctor", "n": [1, 2]})
    data = json.loads(path.read_text())
    data["cpu"]["future_cpu_fact"] = "kept"
    data["benchmarks"] = [{"kind": "gemm", "settings": {}, "metrics": {}, "status": "ok",
                          "started_at": None, "note": "", "future_run_field": 7}]
    path.write_text(json.dumps(data))
    monkeypatch.setattr(session, "run", _fake_run())
    code, out, err = _bench_into(capsys, path)
    assert code == 0, err
    after = json.loads(path.read_text())
    assert after["future_section"] == {"from": "a newer CPU Doctor", "n": [1, 2]}
    assert after["cpu"]["future_cpu_fact"] == "kept"
    assert after["benchmarks"][0]["future_run_field"] == 7 and after["benchmarks"][1]["kind"] == "train"


def test_a_link_swapped_in_while_the_job_runs_writes_nothing_else(tmp_path, capsys, monkeypatch):
    path = this_machine_report(tmp_path / "r.json")
    victim = tmp_path / "unrelated.json"
    this_machine_report(victim, notes=["someone else's file"])
    before = victim.read_bytes()

    def swap():
        path.unlink()
        path.symlink_to(victim)

    monkeypatch.setattr(session, "run", _fake_run(swap))
    code, out, err = _bench_into(capsys, path)
    assert victim.read_bytes() == before
    assert code == 1 and "not added" in err and "link" in err, err
    assert path.is_symlink()


def test_a_link_given_at_the_start_is_written_through(tmp_path, capsys, monkeypatch):
    real = this_machine_report(tmp_path / "reports-r1.json")
    link = tmp_path / "latest.json"
    link.symlink_to(real.name)
    monkeypatch.setattr(session, "run", _fake_run())
    code, out, err = _bench_into(capsys, link)
    assert code == 0, err
    assert link.is_symlink() and len(load_report(real).benchmarks) == 1


def test_every_into_keeps_compiled_unknown_as_it_was(tmp_path, capsys, monkeypatch):
    """Item 19: diagnosing must not change the report (the ISA rule extended a list of the report's in place)."""
    from cpudoctor.model import Finding, IsaRisk, Software

    report = load_report(this_machine_report(tmp_path / "r.json"))
    report.software = Software(compiled_unknown=["mystery-ext"],
                               isa_risks=[IsaRisk(package="numpy", installed=True, status="ok")])
    report.findings = [Finding(code="XX001", symbol="x", category="isa", title="t", severity="ok")]
    path = tmp_path / "r.json"
    path.write_text(report.to_json())
    monkeypatch.setattr(session, "run", _fake_run())
    for _ in range(3):
        assert _bench_into(capsys, path)[0] == 0
    after = load_report(path)
    assert after.software.compiled_unknown == ["mystery-ext"] and len(after.benchmarks) == 3


def test_the_isa_floor_rule_leaves_compiled_unknown_alone():
    from cpudoctor import advisor
    from cpudoctor.model import CpuInfo, IsaRisk, Software

    report = Report(cpu=CpuInfo(brand="AMD Ryzen 9 7950X", arch="x86_64", vendor="AMD", flags=["avx2"]))
    report.software = Software(compiled_unknown=["mystery-ext"],
                               isa_risks=[IsaRisk(package="numpy", installed=True, status="unknown")])
    findings = advisor.diagnose(report)
    assert any("mystery-ext" in f.title for f in findings)
    advisor.diagnose(report)
    assert report.software.compiled_unknown == ["mystery-ext"]


@pytest.mark.parametrize("name", sorted(p.name for p in (REPO / "tests/fixtures/scenarios").glob("*.json")))
def test_diagnosing_never_changes_the_report(name):
    from cpudoctor import advisor

    report = load_report(REPO / "tests/fixtures/scenarios" / name)
    if report.software is not None:
        report.software.compiled_unknown = ["mystery-ext"]
    before = report.to_json()
    advisor.diagnose(report)
    advisor.diagnose(report)
    assert report.to_json() == before


# ---------------------------------------------------------------------------- several `bench --into` at once

RACER = textwrap.dedent("""
    import os, sys, time
    from pathlib import Path
    from cpudoctor.lab import session
    from cpudoctor.lab.results import read_outcome
    from cpudoctor.lab.runner import JobOutcome

    go, speed = Path(sys.argv[1]), float(sys.argv[2])

    def fake(job, settings, *, context=None, stop=None, **kw):
        Path(str(go) + "." + sys.argv[2]).touch()        # "started": read the report, now measuring
        while not go.exists():
            time.sleep(0.01)
        outcome = JobOutcome(result={"status": "ok", "dtype": "fp32", "samples_per_s": speed, "steps": 5,
                                     "interference": {"other_share": 0.0, "steal_share": 0.0},
                                     "settings": {"model": "simplecnn", "dtype": "fp32", "batch_size": 64}})
        return outcome, read_outcome(job, outcome, settings, context)

    session.run = fake
    from cpudoctor.cli import main
    sys.exit(main(["bench", "train", "--seconds", "1", "--quiet", "--into", sys.argv[3]]))
""")


def racing_benches(path: Path, speeds: list[float], work: Path, timeout: float = 120.0):
    """Start one `bench train --into path` per speed; all read the report, then all finish together."""
    go = work / "go"
    procs = [subprocess.Popen([sys.executable, "-c", RACER, str(go), str(s), str(path)], cwd=work,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for s in speeds]
    try:
        wait_for(lambda: all(Path(f"{go}.{s}").exists() or p.poll() is not None for s, p in zip(speeds, procs)),
                 timeout, "every bench reaching its measurement")
        go.touch()
        return [(p.wait(timeout),) + p.communicate() for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()


def test_four_benches_into_one_report_keep_four_results(tmp_path):
    path = this_machine_report(tmp_path / "r.json", notes=["first"])
    speeds = [101.0, 202.0, 303.0, 404.0]
    ends = racing_benches(path, speeds, tmp_path)
    for code, out, err in ends:
        assert code == 0 and "added the train run" in err, err
    runs = load_report(path).benchmarks
    assert sorted(r.metrics["samples_per_s"] for r in runs) == speeds
    assert load_report(path).notes == ["first"]


# ---------------------------------------------------------------------------- -o like the shell's >, no empty names

def test_output_onto_a_hard_link_writes_through(tmp_path, capsys):
    from cpudoctor.fileio import atomic_write

    first = tmp_path / "a.txt"
    first.write_text("old\n")
    second = tmp_path / "b.txt"
    os.link(first, second)
    atomic_write(second, "new\n")
    assert first.read_text() == "new\n" and os.stat(first).st_ino == os.stat(second).st_ino
    code, out, err = run_cli(capsys, "explain", "ISA001")
    assert code == 0
    code, out, err = run_cli(capsys, "doctor", "--list-rules", "-o", str(second))
    assert code == 0, err
    assert first.read_text() == second.read_text() and "ISA001" in first.read_text()
    assert os.stat(first).st_nlink == 2


def test_output_onto_a_hard_link_on_a_full_disk_changes_nothing(tmp_path):
    from cpudoctor.fileio import WriteError, _write_through

    if not Path("/dev/full").exists():
        pytest.skip("no /dev/full here")
    first = tmp_path / "a.txt"
    first.write_text("old\n")
    with pytest.raises(WriteError):
        _write_through(Path("/dev/full"), b"x" * 10, Path("/dev/full"))
    assert first.read_text() == "old\n"


@pytest.mark.parametrize("argv", [
    ["report", "--fast", "-o", ""], ["doctor", "--fast", "-o", ""], ["doctor", "--list-rules", "-o", ""],
    ["envs", "-o", ""], ["compare", "a.json", "b.json", "-o", ""], ["inspect", "1", "-o", ""],
    ["capture", "-o", ""], ["bench", "train", "-o", ""], ["bench", "gemm", "--into", ""],
    ["bench", "quant", "--into", " "], ["report", "--fast", "--output="], ["run", "-o", "", "--", "true"],
])
def test_empty_output_names_are_refused(argv, capsys, monkeypatch):
    def refuse(*a, **kw):
        raise AssertionError("a job was started although the arguments were bad")

    monkeypatch.setattr(session, "run", refuse)
    code, out, err = run_cli(capsys, *argv)
    assert code == 2 and out == "", (argv, out, err)
    assert "empty" in err and err.count("\n") == 1, err
