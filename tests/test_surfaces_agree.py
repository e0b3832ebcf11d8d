"""The same source gives the same findings on every surface.

For every machine tree of the corpus: ``cpudoctor report --root`` (its JSON),
``cpudoctor doctor --root``, ``cpudoctor doctor --from-report`` of the report
``report`` saved, and the window's collector (offscreen Qt) must raise the
same finding codes with the same severities. They all build the report with
:func:`cpudoctor.pipeline.build_report`; this catches any surface that
builds, filters or diagnoses it its own way again.
"""

from __future__ import annotations

import json

import pytest
from conftest import MACHINES, machine_root, run_cli

Verdicts = set[tuple[str, str]]


def _verdicts(findings) -> Verdicts:
    return {(f["code"], f["severity"]) if isinstance(f, dict) else (f.code, f.severity) for f in findings}


def _cli_surfaces(capsys, root, tmp_path) -> dict[str, Verdicts]:
    saved = tmp_path / "saved.json"
    code, _, err = run_cli(capsys, "report", "--root", str(root), "-o", str(saved))
    assert code == 0, err
    code, doctor, err = run_cli(capsys, "doctor", "--root", str(root), "--format", "json")
    assert code in (0, 1), err
    code, from_report, err = run_cli(capsys, "doctor", "--from-report", str(saved), "--format", "json")
    assert code in (0, 1), err
    return {
        "report --root (JSON)": _verdicts(json.loads(saved.read_text())["findings"]),
        "doctor --root": _verdicts(json.loads(doctor)["findings"]),
        "doctor --from-report": _verdicts(json.loads(from_report)["findings"]),
    }


@pytest.mark.parametrize("name", MACHINES)
def test_cli_surfaces_agree_on_every_corpus_tree(name, corpus, capsys, tmp_path):
    seen = _cli_surfaces(capsys, machine_root(name), tmp_path)
    first = next(iter(seen.values()))
    assert first, f"{name}: no findings at all"
    assert all(v == first for v in seen.values()), {k: sorted(v ^ first) for k, v in seen.items()}


def test_window_agrees_with_the_cli_on_every_corpus_tree(corpus, capsys, tmp_path, qtbot):
    """The collector's model, tree by tree, against `doctor --root` (offscreen Qt)."""
    from cpudoctor.gui.collector import ReportCollector
    from cpudoctor.gui.model import AppModel

    differ = {}
    for name in MACHINES:
        root = machine_root(name)
        model = AppModel()
        collector = ReportCollector(model, root=root)
        stages: list[str] = []
        collector.stage_done.connect(stages.append)
        collector.start()
        qtbot.waitUntil(lambda c=collector: not c.busy, timeout=30_000)
        assert stages[-1] == "advisor", (name, stages)
        code, doctor, err = run_cli(capsys, "doctor", "--root", str(root), "--format", "json")
        assert code in (0, 1), err
        gui, cli = _verdicts(model.report.findings), _verdicts(json.loads(doctor)["findings"])
        if gui != cli:
            differ[name] = sorted(gui ^ cli)
    assert differ == {}


def test_a_saved_report_is_diagnosed_the_same_on_every_surface(capsys, tmp_path, qtbot):
    """This machine, quickly: report's JSON, doctor --from-report and the window opening the file agree."""
    from cpudoctor.gui.collector import ReportCollector
    from cpudoctor.gui.model import AppModel

    saved = tmp_path / "here.json"
    code, _, err = run_cli(capsys, "report", "--fast", "-o", str(saved))
    assert code == 0, err
    code, doctor, err = run_cli(capsys, "doctor", "--from-report", str(saved), "--format", "json")
    assert code in (0, 1), err
    model = AppModel()
    collector = ReportCollector(model)
    with qtbot.waitSignal(collector.stage_done, timeout=20_000, check_params_cb=lambda s: s == "advisor"):
        collector.open(saved)
    expected = _verdicts(json.loads(saved.read_text())["findings"])
    assert _verdicts(json.loads(doctor)["findings"]) == expected
    assert _verdicts(model.report.findings) == expected and model.read_only
