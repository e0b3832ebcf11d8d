"""The job's memory as the process sampler records it: kernel files parsed, fake /proc and cgroup trees stepped.

Everything here runs on crafted trees (tests/memory_fakes.py writes the kernel's formats): per-process unique,
shared and swapped memory, a worker that starts and copies pages, growth, the cgroup's limits and events
(v1 and v2), pressure, swap-ins, and hostile files. The real jobs are tests/test_memory_jobs.py's.
"""

from __future__ import annotations

import os

import pytest

from cpudoctor.probes.process import memfiles
from cpudoctor.probes.process.inspect import inspect_process
from cpudoctor.probes.process.memory import MemoryWatch, memory_here
from cpudoctor.render.job_memory import memory_lines, memory_rows
from inspect_fakes import FakeProc, StepClock
from memory_fakes import GiB, MiB, cgroup_v1, cgroup_v2, machine, psi_text, rollup_text, vmstat_text, write_memory


# --- parsers --------------------------------------------------------------------------------------


def test_rollup_unique_is_private_clean_plus_dirty_and_shared_is_apart():
    r = memfiles.parse_rollup(rollup_text(rss=500 * MiB, pss=300 * MiB, private=200 * MiB, shared=300 * MiB,
                                          swap=8 * MiB, swap_pss=4 * MiB))
    assert (r.rss, r.pss, r.uss, r.shared) == (500 * MiB, 300 * MiB, 200 * MiB, 300 * MiB)
    assert (r.swap, r.swap_pss) == (8 * MiB, 4 * MiB)


@pytest.mark.parametrize("text", ["", "garbage", "Rss: lots kB\n", "Rss: 99999999999999999999999 kB\n",
                                  "Rss:\t-5 kB\n", "\0\0\0"])
def test_rollup_garbage_is_unknown(text):
    assert memfiles.parse_rollup(text) is None


def test_status_memory_and_a_kernel_thread_without_it():
    s = memfiles.parse_status_memory("Name:\tpython\nVmHWM:\t  2048 kB\nVmRSS:\t  1024 kB\nVmSwap:\t 16 kB\n"
                                     "RssAnon:\t 900 kB\nRssFile:\t 124 kB\nRssShmem:\t 0 kB\n")
    assert (s.rss, s.hwm, s.swap, s.anon, s.file) == (1 << 20, 2 << 20, 16 << 10, 900 << 10, 124 << 10)
    assert memfiles.parse_status_memory("Name:\tkworker/0:1\nState:\tI (idle)\n") is None


def test_pressure_share_of_the_window_from_the_totals():
    first = memfiles.parse_psi(psi_text(1_000_000, 200_000), "/proc/pressure/memory")
    last = memfiles.parse_psi(psi_text(3_000_000, 700_000, some_avg10=18.5), "/proc/pressure/memory")
    p = memfiles.pressure(first, last, 10.0)
    assert (p.some_share, p.full_share, p.some_avg10) == (0.2, 0.05, 18.5)
    assert memfiles.parse_psi("some avg10=nan total=-4\nfull nothing\n", "x") is None
    assert memfiles.pressure(None, None, 10.0) is None


def test_vmstat_keeps_only_the_counters_it_needs():
    assert memfiles.parse_vmstat(vmstat_text(pswpin=7, oom_kill=2) + "pswpin garbage\n") == {
        "pgmajfault": 10, "pswpin": 7, "pswpout": 0, "oom_kill": 2}


# --- the memory cgroup of a process ---------------------------------------------------------------------


def test_cgroup_v2_tightest_limit_on_the_way_up_events_and_page_cache(tmp_path):
    fake = FakeProc(tmp_path)
    fake.add_process(100, cgroup="0::/user.slice/train.scope\n")
    cgroup_v2(tmp_path, "user.slice/train.scope", limit=8 * GiB, parent_limit=6 * GiB, current=5 * GiB,
              peak=int(5.5 * GiB), file=1 * GiB, high=7 * GiB, events={"oom_kill": 1, "high": 3})
    place = memfiles.cgroup_place(tmp_path, 100)
    assert (place.version, place.path) == (2, "/user.slice/train.scope")
    cg = memfiles.read_cgroup_memory(tmp_path, place)
    assert (cg.limit_bytes, cg.limit_at) == (6 * GiB, "/sys/fs/cgroup/user.slice")
    assert (cg.high_bytes, cg.current_bytes, cg.peak_bytes, cg.file_bytes) == (7 * GiB, 5 * GiB, int(5.5 * GiB), GiB)
    assert cg.events["oom_kill"] == 1 and cg.events["high"] == 3


def test_cgroup_v1_limit_oom_control_and_failcnt(tmp_path):
    fake = FakeProc(tmp_path)
    fake.add_process(100, cgroup="4:memory:/docker/abc\n1:cpu:/docker/abc\n0::/\n")
    cgroup_v1(tmp_path, "docker/abc", limit=2 * GiB, usage=GiB, max_usage=2 * GiB, oom_kill=1, failcnt=12,
              cache=256 * MiB)
    cg = memfiles.read_cgroup_memory(tmp_path, memfiles.cgroup_place(tmp_path, 100))
    assert (cg.version, cg.limit_bytes, cg.current_bytes, cg.peak_bytes) == (1, 2 * GiB, GiB, 2 * GiB)
    assert cg.events == {"oom_kill": 1, "max": 12} and cg.file_bytes == 256 * MiB


def test_cgroup_without_a_limit_and_hostile_files(tmp_path):
    fake = FakeProc(tmp_path)
    fake.add_process(100, cgroup="0::/a/../../../etc\n")
    assert memfiles.cgroup_place(tmp_path, 100) is None            # a path no kernel writes: not followed
    fake.add_process(101, cgroup="0::/job\n")
    leaf = cgroup_v2(tmp_path, "job", limit=None, current=3 * GiB)
    (leaf / "memory.high").write_text("12345678901234567890123456789\n")    # garbled: unknown, not a limit
    os.unlink(leaf / "memory.peak") if (leaf / "memory.peak").exists() else None
    os.mkfifo(leaf / "memory.peak")                                          # a FIFO is never opened
    cg = memfiles.read_cgroup_memory(tmp_path, memfiles.cgroup_place(tmp_path, 101))
    assert (cg.limit_bytes, cg.high_bytes, cg.peak_bytes, cg.current_bytes) == (None, None, None, 3 * GiB)


# --- a window over a fake tree --------------------------------------------------------------------------------


def _job_tree(tmp_path):
    fake = FakeProc(tmp_path)
    machine(tmp_path, total=16 * GiB, available=10 * GiB)
    fake.add_process(100, cgroup="0::/train.scope\n")
    cgroup_v2(tmp_path, "train.scope", limit=4 * GiB, current=GiB)
    write_memory(fake.pdir(100), rss=1 * GiB, shared=100 * MiB)
    return fake


def test_watch_a_leaking_trainer_and_a_worker_that_copies_pages(tmp_path):
    """The trainer's RSS rises 10 MiB a second; a worker starts at 4 s and its own memory rises 20 MiB/s while
    its RSS stays put (copy-on-access); the cgroup counts an OOM kill; swap-ins and pressure rise."""
    fake = _job_tree(tmp_path)

    def step(n, t):
        elapsed = t - 100.0
        write_memory(fake.pdir(100), rss=int(GiB + elapsed * 10 * MiB), shared=100 * MiB, hwm=int(GiB + elapsed * 10 * MiB))
        if n == 8:
            fake.add_process(200, "pt_data_worker", ppid=100, starttime=5000)
        if n >= 8:
            write_memory(fake.pdir(200), rss=900 * MiB, private=int(10 * MiB + (elapsed - 4) * 20 * MiB),
                         shared=800 * MiB)
        if n == 30:
            (tmp_path / "sys/fs/cgroup/train.scope/memory.events").write_text("high 0\nmax 4\noom 1\noom_kill 1\n")
        (tmp_path / "proc/vmstat").write_text(vmstat_text(pswpin=n * 50))
        (tmp_path / "proc/pressure/memory").write_text(psi_text(n * 100_000))

    clock = StepClock(step)
    insp = inspect_process(100, seconds=20.0, root=tmp_path, interval=0.5, clock=clock, sleep=clock.sleep)
    mem = insp.memory
    assert mem is not None and mem.window_s == pytest.approx(20.0)
    assert 9.5 * MiB < mem.growth_bytes_per_s < 10.5 * MiB and mem.growth_fit > 0.99 and mem.growth_still_rising
    worker = mem.workers[0]
    assert worker.pid == 200 and worker.started_in_window and worker.read_s >= 10
    assert 19 * MiB < worker.uss_growth_bytes_per_s < 21 * MiB
    assert worker.rss_bytes == 900 * MiB and worker.shared_bytes == 800 * MiB
    assert mem.cgroup.limit_bytes == 4 * GiB and mem.cgroup.events_in_window == {"max": 4, "oom": 1, "oom_kill": 1}
    assert mem.system.swap_in_per_s == pytest.approx(40 * 50 / 20.0, rel=0.05)
    assert mem.system.pressure.some_share == pytest.approx(40 * 0.1 / 20.0, rel=0.05)
    assert mem.total_pss_bytes == sum(p.pss_bytes for p in mem.processes)
    assert mem.worker_generations == 1
    # the words every surface uses
    rows = dict(memory_rows(mem))
    assert "1 worker" in rows["Workers"] and "growing" in rows["Workers"] and "limit 4 GiB" in rows["cgroup"]
    assert memory_lines(mem)[0].startswith("Memory       trainer: RSS")


def test_a_steady_job_has_no_growth_and_workers_share(tmp_path):
    fake = _job_tree(tmp_path)
    fake.add_process(200, "pt_data_worker", ppid=100)
    write_memory(fake.pdir(200), rss=900 * MiB, private=9 * MiB, shared=880 * MiB)

    def step(n, t):
        wobble = (n % 3) * MiB                  # the allocator's to and fro, no trend
        write_memory(fake.pdir(100), rss=GiB + wobble, shared=100 * MiB)

    clock = StepClock(step)
    mem = inspect_process(100, seconds=20.0, root=tmp_path, interval=0.5, clock=clock, sleep=clock.sleep).memory
    assert abs(mem.growth_bytes_per_s) < 0.2 * MiB
    assert mem.workers[0].uss_bytes == 9 * MiB and not mem.workers[0].started_in_window
    assert mem.total_rss_bytes > mem.total_pss_bytes          # the shared pages counted once in PSS


def test_short_window_gives_no_growth_and_a_missing_rollup_a_note(tmp_path):
    fake = _job_tree(tmp_path)
    (fake.pdir(100) / "smaps_rollup").unlink()
    clock = StepClock()
    mem = inspect_process(100, seconds=2.0, root=tmp_path, clock=clock, sleep=clock.sleep).memory
    assert mem.growth_bytes_per_s is None and mem.rss_bytes == GiB
    assert any("smaps_rollup" in n for n in mem.notes)


def test_samples_are_thinned_not_dropped(tmp_path, monkeypatch):
    import cpudoctor.probes.process.memory as memory_mod

    monkeypatch.setattr(memory_mod, "MAX_SAMPLES", 20)
    fake = _job_tree(tmp_path)
    watch = MemoryWatch(tmp_path, 100, 0.0)
    for i in range(1, 100):
        watch.sample(float(i))
    mem = watch.finish(100.0)
    assert len(mem.samples) <= 20 and mem.samples[-1].t > 90 and mem.samples[0].t == 0.0


def test_memory_here_reads_this_process_cgroup_and_wsl(tmp_path):
    fake = FakeProc(tmp_path)
    machine(tmp_path, total=8 * GiB, available=6 * GiB, wsl=True)
    (tmp_path / "proc/self").mkdir(parents=True)
    (tmp_path / "proc/self/cgroup").write_text("0::/user.slice\n")
    cgroup_v2(tmp_path, "user.slice", limit=5 * GiB, current=GiB)
    system, cg = memory_here(tmp_path)
    assert (system.total_bytes, system.available_bytes, system.wsl) == (8 * GiB, 6 * GiB, 2)
    assert cg.limit_bytes == 5 * GiB
    del fake


def test_a_job_that_enters_its_cgroup_after_it_started_is_followed_there(tmp_path):
    """A wrapper that moves itself into a limited cgroup and then execs the job (cgexec, systemd-run --scope, a
    container's entry point): the watch began in the parent's cgroup, with no limit. The limit that kills the job
    is the new cgroup's, and only the OOM kill after the move is the job's (make test caught `run` missing EVID030
    when the move came after the watch began, on a busy machine)."""
    fake = FakeProc(tmp_path)
    machine(tmp_path, total=16 * GiB, available=10 * GiB)
    fake.add_process(100, cgroup="0::/user.slice\n")
    cgroup_v2(tmp_path, "user.slice", limit=None, current=GiB)
    cgroup_v2(tmp_path, "user.slice/limited", limit=600 * MiB, current=100 * MiB)
    events = tmp_path / "sys/fs/cgroup/user.slice/limited/memory.events"
    events.write_text("high 0\nmax 0\noom 2\noom_kill 2\n")          # earlier jobs' kills there: not this one's
    write_memory(fake.pdir(100), rss=200 * MiB, shared=10 * MiB)

    def step(n, t):
        if n == 3:
            (fake.pdir(100) / "cgroup").write_text("0::/user.slice/limited\n")
        if n == 10:
            events.write_text("high 0\nmax 5\noom 3\noom_kill 3\n")

    clock = StepClock(step)
    insp = inspect_process(100, seconds=8.0, root=tmp_path, interval=0.5, clock=clock, sleep=clock.sleep)
    mem = insp.memory
    assert mem.cgroup.path == "/user.slice/limited" and mem.cgroup.limit_bytes == 600 * MiB
    assert mem.cgroup.events_in_window == {"max": 5, "oom": 1, "oom_kill": 1}
    assert any("moved to memory cgroup /user.slice/limited" in n and "from /user.slice" in n for n in mem.notes)
