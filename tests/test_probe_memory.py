"""What the job's probe counts of its training (parameters, gradients, optimizer state, activations), on fakes.

The probe's lines -> JobState (hostile values counted, never raised) -> TrainingMemory(source="probe") on the run's
memory -> run's text, Markdown, HTML and JSON, and ``cpudoctor fit --from-run``. The probe itself is run on a real
torch job in tests/test_job_probe.py (exact bytes) and in tests/test_memory_jobs.py (against fit's measurement).
"""

from __future__ import annotations

import json

from cpudoctor.fitrun import FitRequest, run_fit
from cpudoctor.model.evidence import JobEvidence, RunObservation, training_of
from cpudoctor.model.inspection import Inspection
from cpudoctor.model.jobstate import ForwardMemory, JobState, LoaderInfo, StepMemory
from cpudoctor.model.memory import CgroupMemory, JobMemory, SystemMemory
from cpudoctor.probes.process.jobprobe import parse_probe

MiB, GiB = 1 << 20, 1 << 30


def _line(kind: str, **data) -> bytes:
    return json.dumps({"k": kind, "pid": 7, "t": 1.0, **data}).encode()


FORWARD = dict(module="Net", parameters=1_000_000, param_bytes=4 * MiB, buffer_bytes=4096, batch=64,
               saved_bytes=64 * 3 * MiB, saved_tensors=40, nodes=120, complete=True)


def test_the_probes_lines_become_the_jobs_training():
    lines = [_line("hello"), _line("memory_forward", chosen=False, **dict(FORWARD, module="Loss")),
             _line("memory_forward", chosen=True, **FORWARD),
             _line("memory_forward", chosen=False, **dict(FORWARD, module="Later")),    # the chosen model's stays
             _line("memory_step", optimizer="AdamW", parameters=1_000_000, param_bytes=4 * MiB, grad_bytes=4 * MiB,
                   state_bytes=8 * MiB, state_tensors=3),
             _line("loader", num_workers=2, batch_size=32)]
    state = parse_probe(lines, 7)
    assert state.forward_memory.module == "Net" and state.forward_memory.bytes_per_sample == 3 * MiB
    t = training_of(state)
    assert (t.source, t.parameters, t.param_bytes, t.buffer_bytes, t.grad_bytes) == ("probe", 1_000_000, 4 * MiB,
                                                                                     4096, 4 * MiB)
    assert (t.optimizer, t.optimizer_state_bytes, t.activation_bytes_per_sample) == ("adamw", 8 * MiB, 3 * MiB)
    assert t.batch_size == 64 and t.workers == 2        # the batch the pass saw (a micro batch), not the loader's


def test_hostile_memory_lines_are_counted_not_raised():
    lines = [_line("hello"), _line("memory_forward", saved_bytes=-5, batch="many", module={"x": 1}, complete="yes"),
             _line("memory_step", optimizer=None, grad_bytes=1e400, state_bytes=[1]), b'{"k": "memory_step"}']
    state = parse_probe(lines * 3, 7)
    f = state.forward_memory
    assert f.saved_bytes == 0 and f.batch is None and f.bytes_per_sample is None and f.complete is False
    assert len(state.step_memory) == 3 and state.step_memory[0].grad_bytes == 0
    assert parse_probe([_line("memory_step", optimizer="SGD")] * 20, 7).step_memory.__len__() == 8


def test_an_incomplete_walk_a_checkpointed_pass_or_nothing_counted_gives_no_activations():
    from cpudoctor.render.job_memory import training_text

    state = JobState(loaded=True, forward_memory=ForwardMemory(**dict(FORWARD, complete=False)))
    t = training_of(state)
    assert t.activation_bytes_per_sample is None and t.grad_bytes is None and t.param_bytes == 4 * MiB
    assert t.activations_unknown == "incomplete" and "too large to read in full" in training_text(t)
    # what checkpointing keeps (each block's inputs, its recomputation) is not in the graph: too low to plan with
    hooked = training_of(JobState(loaded=True, forward_memory=ForwardMemory(**dict(FORWARD, hooked=12))))
    assert hooked.activation_bytes_per_sample is None and hooked.activations_unknown == "hooks"
    assert "kept by checkpointing" in training_text(hooked) and "cpudoctor fit --model" in training_text(hooked)
    assert parse_probe([_line("memory_forward", hooked=3, **FORWARD)], 7).forward_memory.hooked == 3
    assert training_of(JobState(loaded=True)) is None and training_of(None) is None
    only_steps = JobState(loaded=True, step_memory=[StepMemory("SGD", 10, 40, 40, 0)], loaders=[LoaderInfo(batch_size=16)])
    t = training_of(only_steps)
    assert (t.param_bytes, t.optimizer, t.batch_size, t.activation_bytes_per_sample) == (40, "sgd", 16, None)


def _observed() -> RunObservation:
    state = JobState(loaded=True, forward_memory=ForwardMemory(**FORWARD),
                     step_memory=[StepMemory("Adam", 1_000_000, 4 * MiB, 4 * MiB, 8 * MiB, 3)])
    mem = JobMemory(rss_bytes=600 * MiB, peak_rss_bytes=900 * MiB, peak_total_bytes=900 * MiB,
                    cgroup=CgroupMemory("/train", 2, GiB, current_bytes=0),
                    system=SystemMemory(total_bytes=16 * GiB, available_bytes=12 * GiB))
    return RunObservation("python train.py", pid=7, exit_code=0, duration_s=3.0, state=state,
                          process=Inspection(pid=7, memory=mem))


def test_every_surface_of_run_shows_the_counted_parts_and_the_finding_uses_them():
    from cpudoctor.jobrun import Machine, diagnose_run
    from cpudoctor.render import run_report

    obs = _observed()
    findings = diagnose_run(obs, Machine())
    assert JobEvidence.of_run(obs).memory.training.source == "probe"
    limit = next(f for f in findings if f.code == "EVID030")
    assert "of these the largest is the activations" in limit.why and "the largest batch that fits" in limit.why
    row = ("parameters 4 MiB (1,000,000) and buffers 4 KiB, gradients 4 MiB, optimizer state 8 MiB (adam), "
           "activations 192 MiB at batch 64 (3 MiB per sample); of these the largest: activations (92 %)")
    assert row in run_report.render_text(obs, findings)
    assert row in run_report.render_md(obs, findings)
    html = run_report.render_html(obs, findings)
    assert "<h2>Memory</h2>" in html and row in html
    data = json.loads(run_report.render_json(obs, findings))
    assert data["memory"]["training"]["activation_bytes_per_sample"] == 3 * MiB


def test_fit_from_a_saved_run_plans_with_the_probes_figures(tmp_path):
    from cpudoctor.render import run_report

    obs = _observed()
    path = tmp_path / "run.json"
    path.write_text(run_report.render_json(obs, []))           # memory without training: read from the state
    out = run_fit(FitRequest(from_run=str(path)), root=tmp_path)
    plan = out.plan
    assert plan.source == "probe" and plan.batch == 64 and plan.budget.binding == "cgroup"
    parts = {p.part: (p.bytes, p.how) for p in plan.parts}
    assert parts["activations"] == (192 * MiB, "counted") and parts["optimizer"] == (8 * MiB, "counted")
    assert parts["parameters"] == (4 * MiB + 4096, "counted") and plan.largest_batch > 64


def test_the_inspectors_run_a_script_shows_the_counted_parts_in_its_memory_card(qtbot):
    from cpudoctor.gui.inspector_page import InspectorPage
    from cpudoctor.gui.model import AppModel
    from cpudoctor.jobrun import Machine, diagnose_run

    obs = _observed()
    findings = diagnose_run(obs, Machine())
    page = InspectorPage(AppModel())
    qtbot.addWidget(page)
    page.memory_card.set("Workers", "stale: the previous process's")
    page._on_ran(obs, findings)
    rows = dict(page.memory_card.rows())
    assert "Workers" not in rows and rows["Training"].startswith("parameters 4 MiB (1,000,000)")
    assert "of these the largest: activations (92 %)" in rows["Training"]
    page.inspections.shutdown()
