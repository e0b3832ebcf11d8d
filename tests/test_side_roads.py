"""No side roads around the pipeline: one "add a lab result and judge again", one way to make the
source of a chosen environment, and the window's no-display fallback runs the doctor command's code."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from cpudoctor import pipeline
from cpudoctor.model import BenchRun, Report, ThreadRecommendation
from cpudoctor.pipeline import KEEP, Source, chosen_source, diagnose, with_lab_result
from cpudoctor.report_file import load_report

SCENARIOS = Path(__file__).parent / "fixtures" / "scenarios"


def _judged(name: str = "k10-container-quota") -> Report:
    return diagnose(load_report(SCENARIOS / f"{name}.json"))


def _sweep() -> tuple[BenchRun, ThreadRecommendation]:
    rec = ThreadRecommendation(threads=1, cpus=[0], variant="1 thread", samples_per_s=1000.0,
                               default_samples_per_s=500.0, model="simplecnn")
    run = BenchRun("sweep", settings={"model": "simplecnn"}, metrics={"verdict": "recommended"})
    return run, rec


def _verdicts(report: Report) -> list[tuple[str, str, str]]:
    return sorted((f.code, f.severity, f.title) for f in report.findings)


# -- one "add a lab result and judge again" ------------------------------------------------------

def test_with_lab_result_makes_a_new_judged_report_and_leaves_its_input_alone():
    report = _judged()
    before = report.to_json()
    run, rec = _sweep()
    after = with_lab_result(report, run, recommendation=rec)
    assert report.to_json() == before                                  # nothing changed in place
    assert after is not report and after.benchmarks == [*report.benchmarks, run] and after.recommendation == rec
    assert _verdicts(after) == _verdicts(diagnose(dataclasses.replace(report, benchmarks=[run], recommendation=rec)))
    assert _verdicts(after) != _verdicts(report)                       # the measured thread count changed advice
    kept = with_lab_result(after, BenchRun("gemm"), judge=False)
    assert kept.recommendation == rec and kept.findings == after.findings and kept.findings is not after.findings
    cleared = with_lab_result(after, recommendation=None, judge=False)
    assert cleared.recommendation is None and cleared.benchmarks == after.benchmarks
    assert repr(KEEP) == "KEEP"


def test_a_failing_advisor_costs_a_note_not_the_lab_result(monkeypatch):
    from cpudoctor import advisor

    def broken(report, only=None):
        raise RuntimeError("rule exploded")

    monkeypatch.setattr(advisor, "diagnose", broken)
    report = _judged()
    after = with_lab_result(report, _sweep()[0])
    assert after.benchmarks[-1].kind == "sweep" and after.findings == report.findings
    assert any("the advisor failed (RuntimeError: rule exploded)" in n for n in after.notes)


def test_bench_into_goes_through_the_pipeline_and_changes_nothing_it_was_given(tmp_path, monkeypatch, capsys):
    """Seen before: `bench --into` appended to the loaded report and ran the advisor itself (a failing
    advisor was a traceback there, a note everywhere else)."""
    from cpudoctor import advisor
    from cpudoctor.commands.bench import _add_to_report
    from cpudoctor.commands.into import Target
    from cpudoctor.lab.results import read_outcome
    from test_lab_bench_cli import _sweep_outcome

    report = _judged()
    before = report.to_json()
    result = read_outcome("sweep", _sweep_outcome())
    path = tmp_path / "r.json"
    path.write_text(before)
    target = Target(given=str(path), path=path, brand="")        # (brand "": no check of the machine)
    _add_to_report(target, result)
    assert report.to_json() == before
    saved = load_report(path)
    expected = with_lab_result(report, result.bench_run(), recommendation=result.recommendation())
    assert _verdicts(saved) == _verdicts(expected) and saved.recommendation == result.recommendation()
    monkeypatch.setattr(advisor, "diagnose", lambda report, only=None: 1 / 0)
    _add_to_report(target, result)
    assert any("the advisor failed (ZeroDivisionError" in n for n in load_report(path).notes)
    assert "added the sweep run and its recommendation" in capsys.readouterr().err


def test_the_window_judges_a_lab_result_as_bench_into_does(qtbot):
    from cpudoctor.gui.model import AppModel

    report = _judged()
    run, rec = _sweep()
    model = AppModel()
    model.set_report(report)
    shown = model.report
    with qtbot.waitSignal(model.findings_changed, timeout=30_000):
        model.add_benchmark(run)
    assert model.report.benchmarks == [run] and shown.benchmarks == []   # a new report, the shown one untouched
    with qtbot.waitSignal(model.findings_changed, timeout=30_000):
        model.set_recommendation(rec)
    assert _verdicts(model.report) == _verdicts(with_lab_result(report, run, recommendation=rec))
    assert report.benchmarks == [] and report.recommendation is None    # the caller's report too


# -- one way to make the source of a chosen environment --------------------------------------------

def test_the_source_of_a_chosen_environment(monkeypatch, tmp_path):
    from cpudoctor.probes.software.envs import EnvError, PythonEnv

    env = PythonEnv(python="/opt/venvs/train/bin/python", prefix="/opt/venvs/train", kind="venv", name="train")
    assert Source.for_environment(env, "--python") == Source("machine", Path("/"), env.python, "--python")
    own = dataclasses.replace(env, own=True)
    assert Source.for_environment(own, "only-own").python is None and Source.for_environment(None).python is None
    monkeypatch.setenv("CPUDOCTOR_PYTHON", str(tmp_path / "missing" / "python"))
    with pytest.raises(EnvError):
        chosen_source()


def test_the_cli_and_the_window_make_the_source_the_same_way(monkeypatch):
    """`doctor`/`report`, the window's collector and the no-display fallback all ask the pipeline."""
    from cpudoctor.commands import source_from

    made = []
    real = pipeline.Source.for_environment.__func__

    def spy(cls, env, chosen_by=None):
        made.append(chosen_by)
        return real(cls, env, chosen_by)

    monkeypatch.setattr(pipeline.Source, "for_environment", classmethod(spy))
    args = type("Args", (), {"python": None, "from_report": None, "root": None})()
    assert source_from(args).live and made == ["$CPUDOCTOR_PYTHON"]


# -- the no-display fallback is the doctor command ---------------------------------------------------

def _hostile_report(source: Source, **_kwargs) -> Report:
    report = diagnose(load_report(SCENARIOS / "k10-container-quota.json"))
    report.cpu.brand = "\x1b]0;owned\x07AMD \x1b[31mOpteron\x1b[0m 2435"
    return report


def test_the_no_display_fallback_prints_what_doctor_prints_escaped(monkeypatch, capsys):
    """Seen before: the launcher wrote the page itself, and a brand string's escape sequences reached the terminal."""
    from conftest import run_cli

    from cpudoctor.gui import app

    monkeypatch.setattr(pipeline, "build_report", _hostile_report)
    code = app.terminal_report()
    printed = capsys.readouterr().out
    assert "\x1b" not in printed and "\x07" not in printed
    assert printed.startswith("CPU Doctor — this machine: AMD Opteron 2435")
    cli_code, cli_out, err = run_cli(capsys, "doctor")
    assert (code, printed) == (cli_code, cli_out), err
    data = json.loads(run_cli(capsys, "doctor", "--format", "json")[1])
    assert data["exit_code"] == code
