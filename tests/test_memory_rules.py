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


def test_growth_measured_before_the_first_step_is_start_up_not_a_leak():
    """A healthy job beside two busy loops: the later half of its window still held `import torch` and the model's
    build, and grew 'like a leak'. With the job's probe, growth counts only after its first optimizer step."""
    from cpudoctor.model.jobstate import JobState

    mem = _load("EVID033-bad")[0]
    began = mem.window_s - mem.growth_window_s

    def with_state(**kw):
        return run_evidence_rules(Evidence(memory=mem, state=JobState(loaded=True, **kw)), {"EVID033"}, strict=True)

    assert with_state(steps=5, forwards=5, first_step_s=began + 0.5) == []          # still starting
    assert with_state(steps=0, forwards=0) == []                                  # never trained in the window
    assert [f.code for f in with_state(steps=50, forwards=50, first_step_s=max(0.0, began - 3))] == ["EVID033"]
    assert [f.code for f in with_state(steps=0, forwards=40)] == ["EVID033"]      # a serving loop that keeps memory
    assert [f.code for f in _run("EVID033", mem)] == ["EVID033"]                  # no probe: the later half stands
