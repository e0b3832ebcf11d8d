"""The memory rules (EVID030-EVID035): one good and one bad fixture each, run with only that rule enabled.

The fixtures (tests/fixtures/memory/, written by make_fixtures.py) are JobMemory facts as ``cpudoctor run``
saves them. Each bad one must give its finding, with the job's numbers in it; each good one nothing.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cpudoctor.advisor.evidence_rules import EVIDENCE_RULES, Evidence, run_evidence_rules
from cpudoctor.jobrun import Machine, diagnose
from cpudoctor.model.evidence import JobEvidence
from cpudoctor.model.memory import JobMemory
from cpudoctor.model.serde import from_data

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "memory"
CODES = [f"EVID{i:03d}" for i in range(30, 36)]


def _load(name: str) -> tuple[JobMemory, str | None]:
    data = json.loads((FIXTURES / f"{name}.json").read_text())
    return from_data(JobMemory, data["memory"]), data["expect"]


def _run(code: str, mem: JobMemory):
    return run_evidence_rules(Evidence(memory=mem), {code}, strict=True)


@pytest.mark.parametrize("code", CODES)
def test_bad_fixture_gives_the_finding_and_good_none(code):
    mem, expect = _load(f"{code}-bad")
    found = _run(code, mem)
    assert [f.severity for f in found] == [expect], found
    f = found[0]
    assert f.code == code and f.category == "memory" and f.why and f.fix and f.snippet
    assert f.docs == f"docs/evidence_rules.md#{code.lower()}" and set(f.fields_used) == set(f.evidence)
    good, expect_good = _load(f"{code}-good")
    assert expect_good is None and _run(code, good) == []


def test_every_memory_rule_has_its_fixtures():
    codes = [r.code for r in EVIDENCE_RULES.all() if r.category == "memory"]
    assert codes == CODES
    for code in codes:
        assert (FIXTURES / f"{code}-bad.json").is_file() and (FIXTURES / f"{code}-good.json").is_file()


def test_killed_at_the_limit_quotes_the_numbers_and_names_fit():
    f = _run("EVID030", _load("EVID030-bad")[0])[0]
    assert "2 GiB" in f.title and "exit code 137" in f.title
    assert "1.9 GiB" in f.why and "/sys/fs/cgroup/system.slice" in f.why and "no traceback" in f.why
    assert "cpudoctor fit --model MODULE:CALLABLE" in f.snippet and "--memory 2048M" in f.snippet


def test_with_the_jobs_own_sizes_the_fix_is_the_batch_that_fits():
    """The probe's hook: parameters, optimizer state and activations per sample known -> fit's planner sizes the
    batch and the accumulation that keeps the update (512 at 6 MiB per sample in 2 GiB: no)."""
    f = _run("EVID030", _load("EVID030-sized")[0])[0]
    assert f.fix.startswith("Train batch 512 as ") and "gradient accumulation" in f.fix
    assert f.snippet.startswith("accum = ") and f.snippet_lang == "python"


def test_close_to_the_limit_is_a_warning():
    mem, _ = _load("EVID030-good")
    mem.peak_total_bytes = mem.peak_rss_bytes = int(7.2 * (1 << 30))
    f = _run("EVID030", mem)[0]
    assert f.severity == "warning" and "7.2 GiB of 8 GiB" in f.title and "90 %" in f.why


def test_wsl1_gets_no_wslconfig_block_but_the_machine_oom():
    mem, _ = _load("EVID034-good")
    assert _run("EVID034", mem) == []
    f = _run("EVID035", mem)[0]
    assert "[wsl2]" not in f.snippet and ".wslconfig" not in f.fix


def test_wsl2_fix_is_the_wslconfig_lines():
    f = _run("EVID034", _load("EVID034-bad")[0])[0]
    assert f.snippet.startswith("# %UserProfile%\\.wslconfig") and "[wsl2]\nmemory=10GB" in f.snippet
    assert f.snippet_lang == "ini"


def test_workers_finding_names_copy_on_access_and_the_fix():
    f = _run("EVID032", _load("EVID032-bad")[0])[0]
    assert "2 DataLoader workers hold 600 MiB" in f.title and "copy-on-access" in f.why and "20 MiB/s" in f.why
    assert "gc.freeze()" in f.snippet and "torch.from_numpy" in f.snippet


def test_growth_projects_to_the_limit():
    f = _run("EVID033", _load("EVID033-bad")[0])[0]
    assert "10 MiB/s" in f.title and "100 MiB" in f.why and "loss.item()" in f.snippet


def test_run_and_inspect_diagnose_memory_the_same_way():
    """One diagnosis: the job pipeline runs the memory rules for every way of watching a job."""
    mem, _ = _load("EVID032-bad")
    found = diagnose(JobEvidence(memory=mem), Machine())
    assert [f.code for f in found] == ["EVID032"]


def test_growth_measured_before_the_first_steps_is_start_up_not_a_leak():
    """A healthy job beside two busy loops: the later half of its window still held `import torch`, the model's build
    and its first steps, and grew 'like a leak'. With the job's probe, growth counts after its first 5 steps, over
    5 more at least."""
    from cpudoctor.model.jobstate import JobState, Progress

    mem = _load("EVID033-bad")[0]
    began = mem.window_s - mem.growth_window_s
    end = mem.window_s

    def with_state(points, **kw):
        progress = [Progress(t, steps=n) for t, n in points]
        state = JobState(loaded=True, progress=progress, **kw)
        return [f.code for f in run_evidence_rules(Evidence(memory=mem, state=state), {"EVID033"}, strict=True)]

    assert with_state([(began - 2, 2), (began + 0.5, 6), (end, 40)], steps=40, forwards=40) == []   # still settling
    assert with_state([(began - 2, 30), (end, 32)], steps=32, forwards=32) == []    # two steps: no step to step
    assert with_state([], steps=0, forwards=0) == []                                # never ran its loop here
    assert with_state([(began - 2, 10), (end, 60)], steps=60, forwards=60) == ["EVID033"]
    forwards = [Progress(began - 2, forwards=10), Progress(end, forwards=90)]       # a serving loop keeping memory
    assert [f.code for f in run_evidence_rules(Evidence(memory=mem, state=JobState(
        loaded=True, forwards=90, progress=forwards)), {"EVID033"}, strict=True)] == ["EVID033"]
    assert [f.code for f in _run("EVID033", mem)] == ["EVID033"]                  # no probe: the later half stands


# --- with what the job's probe counted ------------------------------------------------------------------------

MiB, GiB = 1 << 20, 1 << 30


def _probed(training, peak, limit, exit_code=None, oom=0):
    from cpudoctor.model.memory import CgroupMemory

    mem, _ = _load("EVID030-bad")
    mem.training = training
    mem.peak_total_bytes = mem.peak_rss_bytes = peak
    mem.exit_code = exit_code
    mem.cgroup = CgroupMemory("/train", 2, limit, current_bytes=0, events_in_window={"oom_kill": oom} if oom else {})
    return mem


def test_the_probes_parts_are_named_with_the_largest_and_the_batch_that_fits():
    from cpudoctor.model.memory import TrainingMemory

    t = TrainingMemory("probe", 25_000_000, 100 * MiB, 0, 100 * MiB, "adam", 200 * MiB, 6 * MiB, 512)
    f = _run("EVID030", _probed(t, int(1.95 * GiB), 2 * GiB, 137, oom=1))[0]
    assert "parameters 100 MiB, gradients 100 MiB, optimizer state 200 MiB (adam), activations 3 GiB at batch 512 " \
           "(6 MiB per sample)" in f.why
    assert "of these the largest is the activations (88 %)" in f.why
    # fit's planner: (90 % of 2 GiB - 330 MiB framework - 400 MiB of state) / (6 MiB x 1.3 per sample) -> batch 142
    assert f.fix.startswith("Train batch 512 as 4 steps of 128 ") and "batch 142 is the largest" in f.fix
    assert f.evidence["training"]["activations"] == 512 * 6 * MiB


def test_a_model_whose_own_state_leaves_no_room_gets_a_smaller_state_not_a_smaller_batch():
    """500 M fp32 parameters under Adam: 2 + 2 + 4 GiB before any activation, 6 GiB allowed: fit ranks first the
    state strategy that makes it fit (bf16 weights halve parameters and gradients; SGD's momentum alone would not)."""
    from cpudoctor.model.memory import TrainingMemory

    t = TrainingMemory("probe", 500_000_000, 2 * GiB, 0, 2 * GiB, "adam", 4 * GiB, 256 * 1024, 8)
    f = _run("EVID030", _probed(t, int(5.9 * GiB), 6 * GiB, 137, oom=1))[0]
    assert "of these the largest is the optimizer state" in f.why
    assert "8 GiB of parameters, gradients and optimizer state" in f.fix and "a smaller batch cannot make it fit" in f.fix
    assert "Use bf16 weights (saves 4 GiB)" in f.fix and "Train batch" not in f.fix and "bfloat16" in f.snippet


def test_close_to_the_limit_with_the_probes_sizes_says_the_largest_batch():
    from cpudoctor.model.memory import TrainingMemory

    t = TrainingMemory("probe", 1_000_000, 4 * MiB, 0, 4 * MiB, "adam", 8 * MiB, 2 * MiB, 64)
    f = _run("EVID030", _probed(t, int(0.9 * GiB), GiB))[0]
    assert f.severity == "warning" and "of these the largest is the activations" in f.why
    assert "fit's estimate for batch 64 is" in f.why and "the largest batch that fits the limit" in f.why


def test_the_machines_oom_killer_with_the_probes_sizes_is_sized_too():
    from cpudoctor.model.memory import SystemMemory, TrainingMemory

    mem, _ = _load("EVID035-bad")
    mem.training = TrainingMemory("probe", 25_000_000, 100 * MiB, 0, 100 * MiB, "adam", 200 * MiB, 60 * MiB, 512)
    mem.system = SystemMemory(total_bytes=16 * GiB, available_bytes=0, oom_kills_in_window=1)
    f = _run("EVID035", mem)[0]
    assert "of these the largest is the activations" in f.why and f.fix.startswith("Train batch 512 as ")
    assert f.snippet_lang == "python"


def test_a_job_killed_before_its_activations_were_counted_says_so():
    from cpudoctor.model.memory import TrainingMemory

    t = TrainingMemory("probe", 1_000_000, 4 * MiB, None, 4 * MiB, "adam", 8 * MiB, None, 1024)
    f = _run("EVID030", _probed(t, int(1.95 * GiB), 2 * GiB, 137, oom=1))[0]
    assert "its activations were not counted" in f.why and "cpudoctor fit" in f.snippet


def test_the_wsl2_cap_names_the_probes_parts_too():
    from cpudoctor.model.memory import TrainingMemory

    mem, _ = _load("EVID034-bad")
    mem.training = TrainingMemory("probe", 25_000_000, 100 * MiB, 0, 100 * MiB, "adam", 200 * MiB, 12 * MiB, 512)
    f = _run("EVID034", mem)[0]
    assert "[wsl2]" in f.snippet and "of these the largest is the activations" in f.why
