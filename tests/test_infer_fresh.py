"""The inference lab's pick measured again in new processes of its own (``lab/infer_fresh.py``): which workers it
starts and with what, how it measures them, why a pick has no such figure, and how every surface shows it.
Quick: fake workers, no child process."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import pytest

from cpudoctor.lab import infer, infer_fresh
from cpudoctor.lab.infer import WorkerPlan
from cpudoctor.lab.infer_fresh import FreshCell, Pick, check
from cpudoctor.lab.results import read_outcome
from cpudoctor.lab.stats import Figure
from test_infer_lab import fake_run, outcome


class FakeWorker:
    """Speaks like an InferWorker; its segments' medians are given, and it records what was asked of it."""

    def __init__(self, plan: WorkerPlan, batches: list[int], medians: list[float], log: list, ready: bool = True,
                 status: str = "ok", failure: str | None = None):
        self.plan, self.batches, self.medians, self.log = plan, batches, list(medians), log
        self._will_be_ready, self._status, self._failure = ready, status, failure
        self.ready: dict[str, Any] | None = None
        self.prepared: dict[str, dict[str, Any]] = {}
        self.paused = self.started = self.stopped = self.reaped = False

    def start(self) -> "FakeWorker":
        self.started = True
        if self._will_be_ready:
            self.ready = {"threads": 2}
            self.prepared = {v["name"]: {"status": self._status, "reason": "broke" if self._status != "ok" else ""}
                             for v in self.plan.variants}
        return self

    @property
    def alive(self) -> bool:
        return self.started and not self.stopped and self._failure is None

    def wait_ready(self, stop, deadline: float) -> bool:
        return self.ready is not None

    def pause(self) -> bool:
        self.paused = True
        return True

    def resume(self) -> None:
        self.paused = False

    def measure(self, variant: str, batch: int, seconds: float, stop, until: float) -> dict[str, Any] | None:
        self.log.append((self.plan.key, variant, batch, self.paused))
        if not self.medians:
            return None
        return {"median_ms": self.medians.pop(0), "calls": 5,
                "interference": {"cpus": [0, 1], "wall_s": seconds, "other_share": 0.02, "steal_share": 0.0}}

    def failure(self) -> str | None:
        return self._failure

    def request_stop(self) -> None:
        self.stopped = True

    def reap(self) -> None:
        self.reaped = True


def picks() -> list[Pick]:
    main = WorkerPlan("main", [infer._spec("1 thread", "threads", 2, threads=1, same_threads_as="inference_mode"),
                               infer._spec("bf16 autocast", "precision", 4, autocast="bf16")])
    jemalloc = WorkerPlan("jemalloc (LD_PRELOAD)", [infer._spec("jemalloc (LD_PRELOAD)", "allocator", 3)],
                          env={"LD_PRELOAD": "/usr/lib/libjemalloc.so.2"}, preload="jemalloc",
                          preload_path="/usr/lib/libjemalloc.so.2", cpus=[0, 1])
    return [Pick("1 thread", 1, main.variants[0], main),
            Pick("jemalloc (LD_PRELOAD)", 8, jemalloc.variants[0], jemalloc)]


def test_each_pick_runs_alone_in_two_new_processes_started_like_its_own_worker():
    made: list[FakeWorker] = []
    log: list = []

    def make(plan, batches):
        made.append(FakeWorker(plan, batches, [10.0 + len(made), 10.5 + len(made)] * 4, log))
        return made[-1]

    out = check(picks(), make, time.monotonic() + 30, threading.Event())
    assert len(made) == 4 and all(w.started and w.stopped and w.reaped for w in made)
    by_key = {w.plan.key: w for w in made}
    assert set(by_key) == {"main · fresh 1", "main · fresh 2", "jemalloc (LD_PRELOAD) · fresh 1",
                           "jemalloc (LD_PRELOAD) · fresh 2"}
    alone = by_key["main · fresh 1"]
    assert [v["name"] for v in alone.plan.variants] == ["1 thread"]           # the pick alone, not bf16 beside it
    assert "same_threads_as" not in alone.plan.variants[0] and alone.plan.variants[0]["threads"] == 1
    assert alone.batches == [1]
    started_like = by_key["jemalloc (LD_PRELOAD) · fresh 2"]
    assert started_like.plan.env == {"LD_PRELOAD": "/usr/lib/libjemalloc.so.2"} and started_like.plan.cpus == [0, 1]
    assert started_like.plan.preload == "jemalloc" and started_like.batches == [8]
    assert not any(paused for *_, paused in log)                                # measured awake, paused between
    assert len(log) == 4 * infer_fresh.ROUNDS
    cell = out.cells[("1 thread", 1)]
    assert set(cell.medians) == {0, 1} and all(len(ms) == infer_fresh.ROUNDS for ms in cell.medians.values())
    fig = cell.figure
    everything = [m for ms in cell.medians.values() for m in ms]
    assert (fig.lo, fig.hi) == (min(everything), max(everything))              # the whole range, not the IQR
    assert not out.skipped


def test_the_processes_alternate_and_the_order_turns_each_round():
    log: list = []
    out = check(picks()[:1], lambda plan, batches: FakeWorker(plan, batches, [5.0] * infer_fresh.ROUNDS, log),
                time.monotonic() + 30, threading.Event())
    keys = [key for key, *_ in log]
    assert keys[:4] == ["main · fresh 1", "main · fresh 2", "main · fresh 2", "main · fresh 1"]
    assert out.cells[("1 thread", 1)].figure == Figure(5.0, 5.0, 5.0, 2 * infer_fresh.ROUNDS)


@pytest.mark.parametrize("ready, status, failure, why", [
    ((True, False), "ok", None, "only one of the 2 new processes got ready (a new process was not prepared"),
    ((False, False), "ok", "the worker ended: exit code 3", "a new process failed: the worker ended: exit code 3"),
    ((False, False), "ok", None, "was not prepared within"),
    ((True, True), "error", None, "a new process could not prepare it: broke"),
])
def test_a_pick_without_two_measured_processes_says_why(ready, status, failure, why):
    count = iter(range(10))

    def make(plan, batches):
        return FakeWorker(plan, batches, [5.0] * 8, [], ready=ready[next(count) % 2], status=status, failure=failure)

    out = check(picks()[:1], make, time.monotonic() + 30, threading.Event())
    assert why in out.skipped[("1 thread", 1)] and ("1 thread", 1) not in out.cells


def test_no_time_left_or_a_stop_measures_nothing_and_says_so():
    make = lambda plan, batches: FakeWorker(plan, batches, [5.0] * 8, [])      # noqa: E731
    late = check(picks()[:1], make, time.monotonic() + 0.01, threading.Event())
    assert late.skipped[("1 thread", 1)] == "the budget ended before each new process was measured"
    stop = threading.Event()
    stop.set()
    stopped = check(picks()[:1], make, time.monotonic() + 30, stop)
    assert stopped.skipped[("1 thread", 1)] == "stopped before each new process was measured"


def test_the_reserve_is_kept_only_where_a_check_fits():
    assert infer.fresh_reserve(60) == pytest.approx(15.0)
    assert infer.fresh_reserve(20) == 0.0          # 5 s would start processes it cannot measure: ranking gets it


def test_a_fresh_figure_apart_from_the_lab_says_which_to_expect():
    lab = [11.9, 12.0, 12.1, 12.0, 11.95, 12.05]
    slower = FreshCell("x", 1, {0: [14.0, 14.2], 1: [13.9, 14.1]}).fields(lab, 2, 0.5)
    assert slower["offset"] == "slower" and slower["vs_lab"] == pytest.approx(14.05 / 12.0, abs=1e-3)
    assert slower["process_ms"] == [14.1, 14.0] and slower["segment_ms"] == [14.0, 14.2, 13.9, 14.1]
    near = FreshCell("x", 1, {0: [12.0, 12.6], 1: [11.5, 12.2]}).fields(lab, 2, 0.5)
    assert near["offset"] is None and (near["latency_ms_lo"], near["latency_ms_hi"]) == (11.5, 12.6)


def test_the_range_to_expect_takes_the_drift_the_whole_run_saw():
    """Ten seconds of new processes see one stretch of a drift; the rounds saw the pick for longer. Its extremes
    there, relative to their median, widen the range at the new processes' level (not at the lab's)."""
    from cpudoctor.render.infer import fresh_text

    lab = [18.0, 18.2, 21.6, 18.1, 17.1, 18.0]                  # a slow spell and a fast one, median 18.05
    f = FreshCell("x", 1, {0: [19.0, 19.2], 1: [19.1, 18.9]}).fields(lab, 2, 0.6)
    assert (f["measured_ms_lo"], f["measured_ms_hi"]) == (18.9, 19.2)
    assert f["drift_lo"] == pytest.approx(17.1 / 18.05, abs=1e-4) and f["drift_hi"] == pytest.approx(21.6 / 18.05,
                                                                                                     abs=1e-4)
    assert f["latency_ms_lo"] == pytest.approx(19.05 * 17.1 / 18.05, abs=1e-3)
    assert f["latency_ms_hi"] == pytest.approx(19.05 * 21.6 / 18.05, abs=1e-3)
    said = fresh_text({"fresh": f})
    assert said.startswith("; in 2 new processes of its own: 19.1 ms (18.9–19.2); expect 18.0–22.8 ms, as its "
                           "latency drifted 5 % down and 20 % up over the interleaved rounds")
    steady = FreshCell("x", 1, {0: [19.0, 19.2], 1: [19.1, 18.9]}).fields([18.0, 18.05, 18.1], 2, 0.6)
    assert (steady["latency_ms_lo"], steady["latency_ms_hi"]) == (18.9, 19.2)         # inside: nothing to widen
    few = FreshCell("x", 1, {0: [19.0], 1: [19.1]}).fields([18.0, 25.0], 2, 0.6)
    assert "drift_lo" not in few and few["latency_ms_hi"] == 19.1                     # two segments say no drift


def test_the_fresh_figure_reaches_every_surface():
    from cpudoctor import advisor
    from cpudoctor.kits.escape import md_escape, md_fence
    from cpudoctor.model import Report
    from cpudoctor.model.serde import to_data
    from cpudoctor.pipeline import with_lab_result
    from cpudoctor.render.infer import box_plot_svg, html_block, markdown_lines, text_lines
    from cpudoctor.report_file import lab_run_problem

    result = fake_run(fresh={0: [13.6, 13.9], 1: [13.8, 14.0]})
    d = result["decisions"][0]
    assert d["fresh"]["latency_ms"] == pytest.approx(13.85) and d["fresh"]["offset"] == "slower"
    run = read_outcome("infer", outcome(result), None).bench_run()
    assert lab_run_problem(to_data(run)) is None
    metrics = run.metrics
    said = "in 2 new processes of its own: 13.8 ms (13.6–14.0), 15 % slower than beside the other variants"
    for text in ("\n".join(text_lines(metrics)), html_block(metrics),
                 "\n".join(markdown_lines(metrics, md_escape, md_fence))):
        assert said in text
    svg = box_plot_svg(metrics, 1)
    assert "1 thread · new processes" in svg and infer_fresh.__name__ and "range of segment medians" in svg
    found = advisor.diagnose(with_lab_result(Report(), run), only={"INFER001"})
    assert "in 2 new processes holding it alone, as a serving script runs it: 13.85 ms (13.6–14.0 ms)" in found[0].why


def test_a_pick_not_measured_again_says_why_on_the_verdict():
    from cpudoctor import advisor
    from cpudoctor.model import Report
    from cpudoctor.pipeline import with_lab_result
    from cpudoctor.render.infer import text_lines

    result = fake_run(fresh_skipped="the interleaved rounds left 2 s of the 60 s budget")
    run = read_outcome("infer", outcome(result), None).bench_run()
    text = "\n".join(text_lines(run.metrics))
    assert "use '1 thread'" in text
    assert "not measured again in new processes of its own: the interleaved rounds left 2 s of the 60 s budget" in text
    found = advisor.diagnose(with_lab_result(Report(), run), only={"INFER001"})
    assert "not measured again in new processes: the interleaved rounds left 2 s" in found[0].why


@pytest.mark.parametrize("value", ['"abc"', "-1", '{"x": 1}'])
def test_a_damaged_fresh_figure_is_left_out(value):
    from cpudoctor.model.serde import to_data
    from cpudoctor.report_file import lab_run_problem

    run = to_data(read_outcome("infer", outcome(fake_run(fresh={0: [12.0], 1: [12.2]})), None).bench_run())
    run["metrics"]["decisions"][0]["fresh"]["latency_ms"] = json.loads(value)
    assert lab_run_problem(run)


def test_a_wide_spread_on_idle_cpus_is_called_drift_and_a_busy_one_names_the_others():
    from cpudoctor.render.infer import fresh_text

    drift = {"fresh": {"latency_ms": 19.0, "latency_ms_lo": 17.6, "latency_ms_hi": 22.6, "processes": 2,
                       "other_share": 0.02}}
    assert "a 26 % range with no other program on these CPUs" in fresh_text(drift)
    busy = {"fresh": {**drift["fresh"], "other_share": 0.4}}
    assert "while other programs took 40 % of the CPUs" in fresh_text(busy) and "range with" not in fresh_text(busy)
    steady = {"fresh": {"latency_ms": 19.0, "latency_ms_lo": 18.8, "latency_ms_hi": 19.3, "other_share": 0.0}}
    assert fresh_text(steady) == "; in a new process of its own: 19.0 ms (18.8–19.3)"
