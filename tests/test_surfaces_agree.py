"""The same source gives the same findings on every surface.

For every machine tree of the corpus: ``cpudoctor report --root`` (its JSON),
``cpudoctor doctor --root``, ``cpudoctor doctor --from-report`` of the report
``report`` saved, and the window's collector (offscreen Qt) must raise the
same finding codes with the same severities. They all build the report with
:func:`cpudoctor.pipeline.build_report`; this catches any surface that
builds, filters or diagnoses it its own way again.

The job side the same way: one recorded observation of a real job
(tests/fixtures/jobs/conv_capped.json, made by tests/fixtures/jobs/record.py: a
convolution run with oneDNN capped to AVX2 and OMP_NUM_THREADS=6) is fed to every
surface that shows a job's findings (``run``'s text, Markdown, HTML and JSON, the
Inspector's "Run a script…", the lab's findings text; ``inspect``'s text and JSON, the
Inspector's model and page for the same process), and each must show the same
findings in the same words. They all diagnose through :mod:`cpudoctor.jobrun`.
"""

from __future__ import annotations

import dataclasses
import html
import json
import re
from pathlib import Path

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


# --- the job side: one recorded observation on every surface --------------------------------------------------

RECORDINGS = Path(__file__).resolve().parent / "fixtures" / "jobs"
RECORDED = RECORDINGS / "conv_capped.json"
# threads_in_code.json: tests/jobs/threads_in_code.py recorded with its probe (torch.set_num_threads(8) at line 12 on
# 2 CPUs): a finding from the job's own state (EVID013) whose fix names the line
RECORDED_RUNS = ["conv_capped.json", "threads_in_code.json"]


def _recorded(name: str = "conv_capped.json"):
    from cpudoctor.jobrun import Machine
    from cpudoctor.model import CpuInfo, RunObservation, Topology, from_data

    data = json.loads((RECORDINGS / name).read_text(encoding="utf-8"))
    return (from_data(RunObservation, data["observation"]),
            Machine(from_data(CpuInfo, data["cpu"]), from_data(Topology, data["topology"])))


def _plain(text: str) -> str:
    """A surface's text as words: tags out, entities and Markdown escapes undone, whitespace (wrapping) as one space."""
    text = html.unescape(re.sub(r"<[^>]+>", " ", text))
    return " ".join(re.sub(r"\\([\\`*_\[\]<>|#])", r"\1", text).split())


def _missing(findings, shown: str) -> list[str]:
    """What of each finding (code, severity, title, why, fix) a surface does not show."""
    from cpudoctor.render.finding_view import finding_view

    words = _plain(shown)
    out = []
    for f in findings:
        v = finding_view(f)
        out += [f"{f.code} {part}" for part, text in (("code", v.code), ("title", v.title), ("why", v.why),
                                                      ("fix", v.fix)) if _plain(text) not in words]
    return out


def _said(findings) -> list[tuple[str, str, str, str, str]]:
    return [(f.code, f.severity, f.title, f.why, f.fix) for f in findings]


def test_the_recorded_job_has_findings_of_both_rule_families():
    from cpudoctor.jobrun import diagnose_run

    obs, machine = _recorded()
    codes = {f.code for f in diagnose_run(obs, machine)}
    assert {"PROC009", "EVID007"} <= codes, codes       # the process rules and the evidence rules, one diagnosis


@pytest.mark.parametrize("recording", RECORDED_RUNS)
def test_every_surface_of_a_run_shows_the_same_findings_in_the_same_words(qtbot, recording):
    """``cpudoctor run`` (text, Markdown, HTML, JSON), the Inspector's "Run a script…" and the lab's findings."""
    from cpudoctor.gui.inspector_page import InspectorPage
    from cpudoctor.gui.model import AppModel
    from cpudoctor.jobrun import diagnose_run
    from cpudoctor.render import run_report
    from cpudoctor.render.lab import findings_text

    obs, machine = _recorded(recording)
    findings = diagnose_run(obs, machine)
    page = InspectorPage(AppModel())
    qtbot.addWidget(page)
    page._on_ran(obs, findings)                     # what "Run a script…" shows when the job pipeline answers
    shown = {"run text": run_report.render_text(obs, findings), "run md": run_report.render_md(obs, findings),
             "run html": run_report.render_html(obs, findings), "lab": findings_text(findings),
             "Inspector, Run a script": page.findings_view.toHtml()}
    assert {name: _missing(findings, text) for name, text in shown.items()} == {name: [] for name in shown}
    data = json.loads(run_report.render_json(obs, findings))
    assert [(f["code"], f["severity"], f["title"], f["why"], f["fix"]) for f in data["findings"]] == _said(findings)
    page.inspections.shutdown()


@pytest.mark.parametrize("recording", RECORDED_RUNS)
def test_run_and_inspect_give_the_same_job_the_same_findings(qtbot, recording):
    """The same process, seen by ``inspect`` (CLI and window) and by ``run``: one diagnosis, the same words.
    Only ``run`` switches oneDNN's verbose output and the recompile log on and loads the job's probe, so ``run``
    is given what both see."""
    from cpudoctor.gui import inspector_model as im
    from cpudoctor.gui.inspector_page import InspectorPage
    from cpudoctor.gui.model import AppModel
    from cpudoctor.jobrun import diagnose_run, inspect_job
    from cpudoctor.model import OneDnnLog, RecompileLog
    from cpudoctor.render import inspect as inspect_page

    obs, machine = _recorded(recording)
    insp = dataclasses.replace(obs.process, time=obs.breakdown)      # the job's process and breakdown, as sampled
    by_run = diagnose_run(dataclasses.replace(obs, onednn=OneDnnLog(), recompiles=RecompileLog(), state=None),
                          machine)
    assert by_run

    def sampled(pid, seconds, topology=None, should_stop=None):
        return insp

    _, by_cli = inspect_job(insp.pid, seconds=1.0, machine=machine, inspect=sampled)
    _, by_window, _ = im.inspect_job(sampled, lambda: machine, insp.pid, 1.0, None, lambda: False,
                                     owner=lambda pid: True)
    assert _said(by_cli) == _said(by_run) and _said(by_window) == _said(by_run)
    page = InspectorPage(AppModel())
    qtbot.addWidget(page)
    page.show_inspection(insp, by_window)
    shown = {"inspect text": inspect_page.render_text(insp, by_cli), "Inspector": page.findings_view.toHtml()}
    assert {name: _missing(by_run, text) for name, text in shown.items()} == {name: [] for name in shown}
    data = json.loads(inspect_page.render_json(insp, by_cli))
    assert [(f["code"], f["severity"], f["title"], f["why"], f["fix"]) for f in data["findings"]] == _said(by_run)
    page.inspections.shutdown()


def test_a_run_with_the_jobs_state_names_the_line_on_every_surface_and_inspect_says_it_needs_run(qtbot):
    """The job's own state (run's probe) adds findings inspect cannot have; every run surface shows them, with
    the script's line, and inspect's text, JSON and the Inspector say that reading them needs `run`."""
    from cpudoctor.gui import inspector_model as im
    from cpudoctor.jobrun import diagnose_run, inspect_job
    from cpudoctor.render import inspect as inspect_page
    from cpudoctor.render import run_report

    obs, machine = _recorded("threads_in_code.json")
    by_run = {f.code: f for f in diagnose_run(obs, machine)}
    f = by_run["EVID013"]
    assert "line 12 of /home/user/project/tests/jobs/threads_in_code.py" in f.fix
    assert f.snippet.endswith("torch.set_num_threads(2)") and "OMP_NUM_THREADS" not in f.snippet
    text = run_report.render_text(obs, list(by_run.values()))
    assert "torch.set_num_threads(8) (threads_in_code.py:12)" in _plain(text) and "8 intra-op" in text
    assert json.loads(run_report.render_json(obs, []))["state"]["calls"]
    insp = dataclasses.replace(obs.process, time=obs.breakdown)
    _, by_inspect = inspect_job(insp.pid, seconds=1.0, machine=machine, inspect=lambda *a, **k: insp)
    assert "EVID013" not in {x.code for x in by_inspect}
    assert set(by_run) - {x.code for x in by_inspect} <= {f"EVID{i:03d}" for i in range(10, 19)}
    needs_run = "`cpudoctor run -- COMMAND`"
    assert needs_run in inspect_page.render_text(insp, by_inspect)
    assert "cpudoctor run" in json.loads(inspect_page.render_json(insp, by_inspect))["inspection"]["state"]["why_not"]
    assert "Run a script" in im.time_caption(insp.time) and "set_num_threads(8)" in im.time_caption(obs.breakdown,
                                                                                                   obs.state)
