"""``run --verify``: the fixes that can be applied from outside, the rate of a window, and the verdicts, over fake
windows (each a probe state with a chosen rate, the thread count it saw and the load beside it).

The real measurement on a real job is tests/test_verify_job.py's one slow test."""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

import pytest

from cpudoctor.advisor.fix_plans import CODE, NONE, OUTSIDE, plan_fix, plan_fixes
from cpudoctor.lab import job_rate
from cpudoctor.model import Finding
from cpudoctor.model.jobstate import CodeLine, JobState, ModeSample, Progress, SettingCall
from cpudoctor import verify
from cpudoctor.verify import UNCHANGED, Variant, VerifyOptions, WindowRun, rank_findings, verify_job

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "jobs"


def finding(code: str, snippet: str, lang: str = "bash", severity: str = "warning") -> Finding:
    return Finding(code=code, symbol=code.lower(), category="evidence", severity=severity, title=f"{code} title",
                   fix="do it", snippet=snippet, snippet_lang=lang)


def state(rate: float, *, threads: int | None = 2, seconds: float = 8.0, start: float = 2.0, metric: str = "steps",
          affinity: str | None = None, calls: list[SettingCall] | None = None) -> JobState:
    """A probe's state for a window whose job did ``rate`` units a second from ``start`` on, a line a second."""
    progress = []
    t = start
    while t <= seconds:
        n = int(round(rate * (t - start))) + 1
        kw = {"steps": n} if metric == "steps" else {"forwards": n} if metric == "forwards" else {"batches": n,
                                                                                                  "samples": n}
        progress.append(Progress(t, last_step_s=t if metric == "steps" else None, **kw))
        t += 1.0
    last = progress[-1]
    st = JobState(loaded=True, steps=last.steps, forwards=last.forwards, samples_drawn=last.samples,
                  first_step_s=start if metric == "steps" else None, last_step_s=last.last_step_s,
                  progress=progress, calls=calls or [],
                  samples=[ModeSample(t_s=3.0, threads=threads, affinity=affinity)])
    return st


# --------------------------------------------------------------------------------------------- plans


def test_a_relaunch_line_is_applied_from_outside_and_a_python_snippet_is_a_code_change():
    env_fix = plan_fix(finding("EVID001", "OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 python train.py"))
    assert env_fix.kind == OUTSIDE and env_fix.env == {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    assert env_fix.threads == 1
    isa = plan_fix(finding("EVID007", "unset ONEDNN_MAX_CPU_ISA\n# or for one run:\n"
                                      "env -u ONEDNN_MAX_CPU_ISA python x.py"))
    assert isa.kind == OUTSIDE and isa.unset == ("ONEDNN_MAX_CPU_ISA",) and isa.threads is None
    pin = plan_fix(finding("PROC003", "taskset -c 0-3 python train.py"))
    assert pin.kind == OUTSIDE and pin.cpus == (0, 1, 2, 3)
    share = plan_fix(finding("PROC014", "# this job, CPUs 0-1, 1 thread:\ntaskset -c 0-1 env OMP_NUM_THREADS=1 "
                                        "MKL_NUM_THREADS=1 python tiny.py --seconds 30"))
    assert share.cpus == (0, 1) and share.env == {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    node = plan_fix(finding("PROC004", "numactl --cpunodebind=1 --membind=1 python train.py"))
    assert node.kind == OUTSIDE and node.nodes == (1,) and node.memory == "bind 1"
    code = plan_fix(finding("EVID013", "# line 12 of train.py:\ntorch.set_num_threads(2)", "python"))
    assert code.kind == CODE and code.change.endswith("torch.set_num_threads(2)")
    other = plan_fix(finding("ISA002", "pip install --upgrade torch"))
    assert other.kind == NONE and "not a relaunch" in other.reason
    assert plan_fix(finding("EVID009", "", severity="info")) is None


def test_the_same_change_printed_by_two_findings_is_measured_once():
    plans = plan_fixes([finding("PROC009", "env OMP_NUM_THREADS=2 python t.py"),
                        finding("EVID001", "OMP_NUM_THREADS=2 python t.py")])
    assert [p.kind for p in plans] == [OUTSIDE, NONE]
    assert "PROC009" in plans[1].reason


def test_the_recorded_capped_job_gets_its_outside_fixes_and_its_code_change():
    from cpudoctor.jobrun import Machine, diagnose_run
    from cpudoctor.model import CpuInfo, Topology
    from cpudoctor.model.evidence import RunObservation
    from cpudoctor.model.serde import from_data

    data = json.loads((FIXTURES / "conv_capped.json").read_text())
    obs = from_data(RunObservation, data["observation"])
    found = diagnose_run(obs, Machine(from_data(CpuInfo, data["cpu"]), from_data(Topology, data["topology"])))
    kinds = {p.code: p.kind for p in plan_fixes(found)}
    assert kinds["PROC009"] == OUTSIDE and kinds["EVID007"] == OUTSIDE and kinds["EVID022"] == CODE


# --------------------------------------------------------------------------------------------- rates


def test_the_window_rate_leaves_out_the_start_and_the_warm_up():
    st = state(10.0, seconds=10.0)
    r = job_rate.probe_rate(st, "steps")
    assert r.rate == pytest.approx(10.0, rel=0.02) and r.metric == "steps"
    assert job_rate.choose_metric(st) == "steps"
    fwd = state(40.0, metric="forwards")
    assert job_rate.choose_metric(fwd) == "forwards"
    assert job_rate.probe_rate(fwd, "forwards").rate == pytest.approx(40.0, rel=0.02)
    batches = state(30.0, metric="samples")
    assert job_rate.choose_metric(batches) == "samples"
    assert job_rate.probe_rate(batches, "samples").rate == pytest.approx(30.0, rel=0.03)
    short = state(10.0, seconds=2.5)
    assert job_rate.probe_rate(short, "steps").rate is None and "warm-up" in job_rate.probe_rate(short, "steps").why
    assert job_rate.choose_metric(JobState(why_not="not_python")) is None


def test_the_line_at_exit_does_not_count_as_a_forward_call_s_moment():
    st = state(40.0, metric="forwards", seconds=6.0)
    st.progress.append(Progress(30.0, forwards=st.progress[-1].forwards, at_exit=True))
    assert job_rate.probe_rate(st, "forwards").rate == pytest.approx(40.0, rel=0.02)


def test_a_printed_rate_is_read_with_metric():
    pattern = job_rate.compile_metric(r"([0-9.]+)it/s")
    lines = [(0.5, "loading"),
             (1.0, " 10%|#  | 10/100 [00:01<00:09, 3.00it/s]\r 20%|## | 20/100 [00:02<00:08, 9.50it/s]"),
             (3.0, " 30%|###| 30/100 [00:03<00:07, 10.50it/s]"), (4.0, "40% 10.00it/s")]
    r = job_rate.output_rate(lines, pattern, warmup_s=2.0)
    assert r.rate == pytest.approx(10.25) and r.metric == "output" and r.units == 2
    assert job_rate.output_rate([(1.0, "nothing")], pattern, 0.0).rate is None
    named = job_rate.compile_metric(r"samples/s=(?P<rate>[0-9,.]+)")
    assert job_rate.printed_values([(0, "samples/s=1,234.5")], named) == [(0, 1234.5)]
    with pytest.raises(ValueError, match="not a regular expression"):
        job_rate.compile_metric("([0-9")
    with pytest.raises(ValueError, match="groups"):
        job_rate.compile_metric("(a)(b)")


# --------------------------------------------------------------------------------------------- verdicts


class FakeWindows:
    """Windows whose rate each variant's function gives (round -> (rate, threads seen, other share))."""

    def __init__(self, rates: dict, threads: dict | None = None, load: float = 0.05, calls=None):
        self.rates, self.threads, self.load, self.calls = rates, threads or {}, load, calls or []
        self.order: list[str] = []
        self.rounds: dict[str, int] = {}

    def __call__(self, variant: Variant, seconds: float) -> WindowRun:
        n = self.rounds.get(variant.name, 0)
        self.rounds[variant.name] = n + 1
        self.order.append(variant.name)
        rate = self.rates[variant.name](n)
        st = state(rate, threads=self.threads.get(variant.name, 2), calls=self.calls)
        return WindowRun(st, seconds=seconds, ended="seconds", exit_code=130,
                         load={"other_share": self.load, "steal_share": 0.0})


ENV = {"PATH": os.environ.get("PATH", ""), "OMP_NUM_THREADS": "2"}
BASE_STATE = state(10.0)


def test_a_fix_that_doubles_the_rate_is_measured_faster_in_interleaved_rounds():
    windows = FakeWindows({UNCHANGED: lambda n: 10.0 + n * 0.3, "EVID001": lambda n: 20.0 - n * 0.2},
                          threads={"EVID001": 1})
    ver = verify_job(["python", "t.py"], [finding("EVID001", "OMP_NUM_THREADS=1 python t.py")], BASE_STATE,
                     env=ENV, run_window=windows, options=VerifyOptions(budget_s=120))
    check = ver.check_for("EVID001")
    assert check.status == "faster" and check.ratio.median == pytest.approx(2.0, rel=0.05)
    assert check.before.n == check.after.n == ver.rounds >= 2
    assert ver.metric == "steps"
    assert re.match(r"x1\.9\d faster \(x1\.9\d-x2\.00 over \d rounds; other programs took 5 %", check.reason)
    assert windows.order[:4] == [UNCHANGED, "EVID001", "EVID001", UNCHANGED]     # A B, B A: interleaved
    assert all(w.other_share == 0.05 for w in ver.windows)


def test_equal_rates_are_no_measurable_effect_and_a_scattered_pair_is_inconclusive():
    same = FakeWindows({UNCHANGED: lambda n: 10.0, "EVID001": lambda n: 10.1}, threads={"EVID001": 1})
    ver = verify_job(["python", "t.py"], [finding("EVID001", "OMP_NUM_THREADS=1 python t.py")], BASE_STATE,
                     env=ENV, run_window=same, options=VerifyOptions(budget_s=120))
    assert ver.check_for("EVID001").status == "no_effect"
    noisy = FakeWindows({UNCHANGED: lambda n: 10.0, "EVID001": lambda n: (8.0, 12.5, 9.0, 13.0)[n % 4]},
                        threads={"EVID001": 1}, load=0.6)
    ver = verify_job(["python", "t.py"], [finding("EVID001", "OMP_NUM_THREADS=1 python t.py")], BASE_STATE,
                     env=ENV, run_window=noisy, options=VerifyOptions(budget_s=120))
    check = ver.check_for("EVID001")
    assert check.status == "inconclusive" and "other programs took 60 %" in check.reason


def test_a_thread_count_the_script_sets_itself_does_not_take_effect_and_the_line_is_named():
    call = SettingCall("torch.set_num_threads", value="8", at=CodeLine("/home/u/train.py", 12, "<module>"))
    windows = FakeWindows({UNCHANGED: lambda n: 10.0, "PROC009": lambda n: 10.0}, threads={"PROC009": 8,
                                                                                          UNCHANGED: 8},
                          calls=[call])
    ver = verify_job(["python", "train.py"], [finding("PROC009", "env OMP_NUM_THREADS=2 python train.py")],
                     BASE_STATE, env={"PATH": "", "OMP_NUM_THREADS": "6"}, run_window=windows,
                     options=VerifyOptions(budget_s=60))
    check = ver.check_for("PROC009")
    assert check.status == "not_applied"
    assert check.reason == "the fix does not take effect: train.py:12 sets it (torch.set_num_threads(8))"
    assert check.target == "threads 8, not 2"


def test_code_changes_are_listed_with_the_change_and_a_healthy_job_has_nothing_to_verify():
    ver = verify_job(["python", "t.py"], [finding("EVID013", "# line 12 of t.py:\ntorch.set_num_threads(2)", "python")],
                     BASE_STATE, env=ENV, run_window=FakeWindows({}))
    assert ver.checks[0].status == "code_change" and "torch.set_num_threads(2)" in ver.checks[0].change
    assert ver.skipped.startswith("none of the printed fixes") and ver.windows == []
    healthy = verify_job(["python", "t.py"], [], BASE_STATE, env=ENV, run_window=FakeWindows({}))
    assert healthy.skipped == "no fix helps: the diagnosis found nothing to fix, so the job was not run again" and not healthy.checks


def test_a_fix_already_in_place_is_not_run_and_no_rate_says_what_to_give():
    ver = verify_job(["python", "t.py"], [finding("EVID001", "OMP_NUM_THREADS=2 python t.py")], BASE_STATE, env=ENV,
                     run_window=FakeWindows({}))
    assert ver.checks[0].status == "not_verified" and "changes nothing" in ver.checks[0].reason
    ver = verify_job(["python", "t.py"], [finding("EVID001", "OMP_NUM_THREADS=1 python t.py")],
                     JobState(loaded=True), env=ENV, run_window=FakeWindows({}))
    assert "--metric" in ver.skipped and ver.checks[0].status == "not_verified"


def test_a_small_budget_measures_fewer_fixes_and_says_which_were_left():
    windows = FakeWindows({UNCHANGED: lambda n: 10.0, "A1": lambda n: 20.0, "A2": lambda n: 15.0, "A3": lambda n: 5.0},
                          threads={"A1": 1, "A2": 3, "A3": 4})
    fixes = [finding("A1", "OMP_NUM_THREADS=1 python t.py"), finding("A2", "OMP_NUM_THREADS=3 python t.py"),
             finding("A3", "OMP_NUM_THREADS=4 python t.py")]
    ver = verify_job(["python", "t.py"], fixes, BASE_STATE, env=ENV, run_window=windows,
                     options=VerifyOptions(budget_s=45))
    statuses = {c.code: c.status for c in ver.checks}
    assert statuses["A1"] == "faster" and statuses["A3"] == "not_verified"
    assert "budget" in ver.check_for("A3").reason
    assert [c.code for c in ver.ranked()][0] == "A1"


def test_findings_are_ranked_by_measured_effect():
    fixes = [finding("A1", "OMP_NUM_THREADS=1 python t.py"), finding("A2", "OMP_NUM_THREADS=3 python t.py"),
             finding("A3", "OMP_NUM_THREADS=4 python t.py"), finding("B1", "# x\nx = 1", "python")]
    windows = FakeWindows({UNCHANGED: lambda n: 10.0, "A1": lambda n: 12.0, "A2": lambda n: 25.0, "A3": lambda n: 10.0},
                          threads={"A1": 1, "A2": 3, "A3": 4})
    ver = verify_job(["python", "t.py"], fixes, BASE_STATE, env=ENV, run_window=windows,
                     options=VerifyOptions(budget_s=400))
    assert [f.code for f in rank_findings(fixes, ver)] == ["A2", "A1", "B1", "A3"]


def test_a_stopped_verification_keeps_what_it_measured():
    stop = verify.Stopper()
    calls = []

    def window(variant, seconds):
        calls.append(variant.name)
        if len(calls) == 3:
            stop.stop()
        return WindowRun(state(10.0), seconds=seconds, ended="seconds")

    ver = verify_job(["python", "t.py"], [finding("EVID001", "OMP_NUM_THREADS=1 python t.py")], BASE_STATE, env=ENV,
                     run_window=window, should_stop=stop, options=VerifyOptions(budget_s=300))
    assert ver.cancelled and len(ver.windows) == 3


def test_the_window_fits_the_job_s_start_and_the_budget():
    window, rounds = verify.window_length(180, 2, startup_s=3.0)
    assert window >= 3.0 + job_rate.WARMUP_S + verify.MEASURE_S and rounds >= 3
    # a job that takes 10 s to start: its windows stay long enough, and the budget holds fewer rounds
    window, rounds = verify.window_length(30, 3, startup_s=10.0)
    assert window == 10.0 + job_rate.WARMUP_S + verify.MEASURE_S and rounds == 1


def test_files_open_for_writing_in_the_job_s_folder_are_seen(tmp_path):
    from cpudoctor.probes.process.writes import files_open_for_writing

    (tmp_path / "data.txt").write_text("x")
    with open(tmp_path / "ckpt.pt", "wb") as out, open(tmp_path / "data.txt", "rb"):
        out.write(b"1")
        seen = files_open_for_writing(os.getpid(), tmp_path)
        (tmp_path / "cpudoctor-probe-x").mkdir()
        with open(tmp_path / "cpudoctor-probe-x" / "state.jsonl", "w"):
            assert files_open_for_writing(os.getpid(), tmp_path, exclude=tmp_path / "cpudoctor-probe-x") == ["ckpt.pt"]
    assert seen == ["ckpt.pt"]
    assert files_open_for_writing(os.getpid(), tmp_path) == []


# --------------------------------------------------------------------------------------------- surfaces


def _verified_run():
    """A recorded run (tests/fixtures/jobs/conv_capped.json) with a verification measured over fake windows."""
    from cpudoctor.jobrun import Machine, diagnose_run
    from cpudoctor.model import CpuInfo, Topology
    from cpudoctor.model.evidence import RunObservation
    from cpudoctor.model.serde import from_data

    data = json.loads((FIXTURES / "conv_capped.json").read_text())
    obs = from_data(RunObservation, data["observation"])
    # recorded as "ONEDNN_MAX_CPU_ISA=AVX2 OMP_NUM_THREADS=6 python conv.py": the variables were the shell's
    obs.command = obs.command.split(" ", 2)[2]
    if obs.process is not None:
        obs.process.cmdline = obs.command
    found = diagnose_run(obs, Machine(from_data(CpuInfo, data["cpu"]), from_data(Topology, data["topology"])))
    windows = FakeWindows({UNCHANGED: lambda n: 10.0, "PROC009": lambda n: 10.05, "EVID007": lambda n: 14.0 + n * 0.1,
                           "EVID001": lambda n: 9.9}, threads={"PROC009": 2, UNCHANGED: 6, "EVID007": 6, "EVID001": 1})
    obs.verification = verify_job(["python", "conv.py"], found, BASE_STATE, run_window=windows, command=obs.command,
                                  env={"PATH": "", "OMP_NUM_THREADS": "6", "ONEDNN_MAX_CPU_ISA": "AVX2"},
                                  options=VerifyOptions(budget_s=150))
    return obs, rank_findings(found, obs.verification)


def test_every_surface_shows_the_measured_table_and_ranks_the_findings_by_it():
    from cpudoctor.render.run_report import render_html, render_json, render_md, render_text

    obs, ranked = _verified_run()
    ver = obs.verification
    assert ver.check_for("EVID007").status == "faster" and ver.check_for("PROC009").status == "no_effect"
    codes = [f.code for f in ranked]
    assert codes[0] == "EVID007" and codes.index("PROC009") > codes.index("EVID022")
    text = render_text(obs, ranked)
    assert "Verified     1 of 3 measured fixes made the job faster; the best: EVID007 x1.4" in text
    assert "EVID007  faster x1.4" in text and "-u ONEDNN_MAX_CPU_ISA" in text
    assert "PROC009  no measurable effect" in text
    assert "EVID022  not verified: a change to the script" in text and "| model = model.to(memory_format" in text
    assert "rate: optimizer steps/s (counted by the job's probe)" in text
    assert text.index("Verified") < text.index("Findings") and text.index("[!] EVID007") < text.index("[!] PROC009")
    md = render_md(obs, ranked)
    assert "## Verified on the job" in md and "| EVID007 | faster | x1.4" in md
    html = render_html(obs, ranked)
    assert "<h2>Verified on the job</h2>" in html and "<td>EVID007</td><td>faster</td>" in html
    data = json.loads(render_json(obs, ranked))
    assert [c["code"] for c in data["verification"]["checks"]][:2] == ["EVID007", "PROC009"]
    assert data["verification"]["checks"][0]["verdict"] == "faster"
    assert data["verification"]["metric"] == "steps" and data["findings"][0]["code"] == "EVID007"
    assert all(w["other_share"] == 0.05 for w in data["verification"]["windows"])


def test_a_saved_verification_is_a_lab_run_that_compare_and_doctor_from_report_show(tmp_path):
    from cpudoctor.compare import compare_reports
    from cpudoctor.model import Report
    from cpudoctor.render.doctor import render_json as doctor_json, render_text as doctor_text
    from cpudoctor.render.verify import saved_verifications
    from cpudoctor.report_file import lab_run_problem, load_report
    from cpudoctor.model.serde import to_data
    from cpudoctor.verify import bench_run

    obs, _ranked = _verified_run()
    run = bench_run(obs.verification)
    assert run.kind == "verify" and run.metrics["EVID007 speed-up"] == pytest.approx(1.4, abs=0.05)
    assert lab_run_problem(to_data(run)) is None
    path = tmp_path / "r.json"
    path.write_text(Report(benchmarks=[run]).to_json())
    report = load_report(path)
    saved = saved_verifications(report)
    assert saved[0].check_for("EVID007").status == "faster"
    text = doctor_text(report, [], "r.json")
    assert "Verified on a job: " in text and "EVID007  faster x1.4" in text
    assert json.loads(doctor_json(report, [], "r.json"))["verified"]["checks"][0]["code"] == "EVID007"
    other = Report(benchmarks=[bench_run(obs.verification)])
    other.benchmarks[0].metrics["EVID007 speed-up"] = 1.0
    changes = {c.item: c for c in compare_reports(report, other, "a.json", "b.json").changes}
    assert changes["verify.EVID007 speed-up"].b == 1.0


def test_a_thread_count_written_as_a_script_change_is_measured_from_outside_and_named_when_the_script_wins():
    code_fix = finding("EVID021", "import torch\ntorch.set_num_threads(1)   # first thing in the script", "python")
    code_fix.evidence["suggested_threads"] = 1
    plan = plan_fix(code_fix)
    assert plan.kind == OUTSIDE and plan.threads == 1 and plan.env["MKL_NUM_THREADS"] == "1"
    call = SettingCall("torch.set_num_threads", value="8", at=CodeLine("/home/u/threads_in_code.py", 12, "<module>"))
    windows = FakeWindows({UNCHANGED: lambda n: 10.0, "EVID021": lambda n: 10.0}, threads={"EVID021": 8, UNCHANGED: 8},
                          calls=[call])
    ver = verify_job(["python", "threads_in_code.py"], [code_fix], BASE_STATE, env={"PATH": ""}, run_window=windows,
                     options=VerifyOptions(budget_s=60))
    check = ver.check_for("EVID021")
    assert check.status == "not_applied"
    assert check.stands_for.endswith("torch.set_num_threads(1)   # first thing in the script")
    assert check.reason == ("the fix does not take effect: threads_in_code.py:12 sets it "
                            "(torch.set_num_threads(8))")
    from cpudoctor.render.verify import text_lines

    text = "\n".join(text_lines(ver))
    assert "EVID021  does not take effect: OMP_NUM_THREADS=1" in text and "threads_in_code.py:12 sets it" in text


def test_a_speed_up_measured_on_a_busy_machine_says_so():
    windows = FakeWindows({UNCHANGED: lambda n: 10.0, "EVID001": lambda n: 15.0}, threads={"EVID001": 1}, load=0.7)
    ver = verify_job(["python", "t.py"], [finding("EVID001", "OMP_NUM_THREADS=1 python t.py")], BASE_STATE,
                     env=ENV, run_window=windows, options=VerifyOptions(budget_s=120))
    check = ver.check_for("EVID001")
    assert check.status == "faster" and check.reason.endswith("measured on a busy machine: confirm on a quieter one")


# --------------------------------------------------------------------------------------------- the command line


@pytest.mark.parametrize("argv, said", [
    (["--budget", "60"], "--budget goes with --verify"),
    (["--yes", "--metric", "x"], "--metric, --yes go with --verify"),
    (["--verify", "--metric", "([0-9"], "is not a regular expression"),
    (["--verify", "--no-probe"], "--verify reads the job's rate through its probe"),
    (["--verify", "--budget", "5"], "out of range"),
])
def test_verify_s_options_are_checked_before_the_job_runs(capsys, tmp_path, argv, said):
    from conftest import run_cli

    marker = tmp_path / "ran"
    code, out, err = run_cli(capsys, "run", *argv, "--", sys.executable, "-c", f"open({str(marker)!r}, 'w')")
    assert code == 2 and said in err and not marker.exists()
