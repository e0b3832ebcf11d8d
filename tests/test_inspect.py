"""The process inspector: /proc parsing on crafted trees, and real child processes."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest

from cpudoctor.probes.process import procfs
from cpudoctor.probes.process.procfs import PF_KTHREAD
from cpudoctor.probes.process.inspect import (
    InspectError, classify_libraries, inspect_process, list_processes, locate_cpu,
)
from cpudoctor.model import Topology
from cpudoctor.render.inspect import env_problem_text, inspect_error_text, inspection_notes, libraries_problem_text
from conftest import wait_for
from inspect_fakes import FakeProc, StepClock, stat_line, two_ccx_topology
import other_user

PY = sys.executable

# Acting as another user needs root (to switch) and setpriv; a root CI container runs these tests, from any
# checkout (tests/other_user.py makes a 0700 one reachable), or they skip saying why.
AS_ANOTHER_USER = other_user.runs_as_another_user
TORCH_LIB = Path(__import__("importlib.util").util.find_spec("torch").origin).parent / "lib"
HZ = procfs.CLK_TCK


# --- parsing ------------------------------------------------------------------------------


@pytest.mark.parametrize("comm", ["python", "my prog", "a) b (c", "))(", "x) S 1 2 3", ""])
def test_parse_stat_splits_at_last_paren(comm):
    st = procfs.parse_stat(stat_line(4242, comm, state="R", ppid=7, utime=150, stime=25, processor=5,
                                     num_threads=9, majflt=3, nice=-5, starttime=777))
    assert (st.tid, st.comm, st.state, st.ppid) == (4242, comm, "R", 7)
    assert (st.utime, st.stime, st.cpu_ticks, st.processor) == (150, 25, 175, 5)
    assert (st.num_threads, st.majflt, st.nice, st.starttime) == (9, 3, -5, 777)


@pytest.mark.hardware
def test_parse_stat_real_line_of_this_process():
    st = procfs.parse_stat(Path(f"/proc/{os.getpid()}/stat").read_text())
    assert st.tid == os.getpid() and st.ppid == os.getppid()
    assert st.processor in os.sched_getaffinity(0)


@pytest.mark.parametrize("bad", ["", "12 python S 1", "12 (x) S 1 2", "abc (x) S" + " 0" * 50])
def test_parse_stat_rejects_garbage(bad):
    with pytest.raises(procfs.StatParseError):
        procfs.parse_stat(bad)


def test_maps_paths_keep_spaces_and_drop_pseudo_entries():
    text = ("7f00-7f01 r-xp 00000000 08:01 12   /opt/my libs/libomp.so (deleted)\n"
            "7f01-7f02 r-xp 00000000 08:01 12   /opt/my libs/libomp.so\n"
            "7f02-7f03 rw-p 00000000 00:00 0    [heap]\n"
            "7f03-7f04 rw-p 00000000 00:00 0\n")
    assert procfs.parse_maps_paths(text) == ["/opt/my libs/libomp.so"]


def test_classify_libraries_names_only_and_origin():
    libs = classify_libraries([
        "/home/alice/.venv/lib/python3.11/site-packages/torch/lib/libgomp.so.1",
        "/home/alice/.venv/lib/python3.11/site-packages/torch/lib/libtorch_cpu.so",
        "/usr/lib/x86_64-linux-gnu/libgomp.so.1.0.0",
        "/opt/intel/oneapi/lib/libiomp5.so",
        "/usr/lib/libjemalloc.so.2",
        "/home/alice/.venv/lib/python3.11/site-packages/numpy.libs/libscipy_openblas64_-32a4b2a6.so",
        "/usr/lib/x86_64-linux-gnu/libQt6WaylandCompositor.so.6",     # "omp" inside a word: not OpenMP
        "/usr/lib/x86_64-linux-gnu/libc.so.6",
    ])
    got = [(lib.file, lib.kind, lib.runtime, lib.origin) for lib in libs]
    assert got == [
        ("libgomp.so.1", "openmp", "gomp", "torch"),
        ("libtorch_cpu.so", "framework", None, "torch"),
        ("libgomp.so.1.0.0", "openmp", "gomp", "system"),
        ("libiomp5.so", "openmp", "iomp", "system"),
        ("libjemalloc.so.2", "allocator", None, "system"),
        ("libscipy_openblas64_-32a4b2a6.so", "blas", None, "numpy.libs"),
    ]
    assert not any("/" in lib.file or "alice" in lib.file for lib in libs)


def test_redact_paths():
    assert procfs.redact_paths("python /home/alice/x/train.py --out /root/ckpt") == "python ~/x/train.py --out ~/ckpt"
    assert procfs.redact_paths("/rootfs/data") == "/rootfs/data"


def test_redact_args_hides_secret_values():
    args = ["python", "train.py", "--hf-token", "abc123", "--lr", "0.1", "WANDB_API_KEY=zzz", "--password=pw",
            "--auth", "--epochs", "3"]
    assert procfs.redact_args(args) == ["python", "train.py", "--hf-token", "<redacted>", "--lr", "0.1",
                                        "WANDB_API_KEY=<redacted>", "--password=<redacted>", "--auth",
                                        "--epochs", "3"]


@pytest.mark.parametrize("args, shown", [
    (["python", "train.py", "--key", "sk-live-abc123"], "python train.py --key <redacted>"),
    (["python", "train.py", "--pw", "hunter2", "-p", "1234"], "python train.py --pw <redacted> -p <redacted>"),
    (["python", "train.py", "--wandb-key", "0123abcd"], "python train.py --wandb-key <redacted>"),
    (["python", "etl.py", "postgres://u:PASSWORD@h/x"], "python etl.py <redacted>"),
    (["python", "etl.py", "--db=postgres://u:PASSWORD@h/x"], "python etl.py --db=<redacted>"),
    (["mysql", "-uroot", "-pPASSWORD"], "mysql -u<redacted> -p<redacted>"),
    (["python", "-c", "import wandb; wandb.login(key='k')"], "python -c <redacted>"),
    (["torchrun", "--nproc_per_node", "4", "train.py", "--batch-size", "64", "--dtype", "bf16"],
     "torchrun --nproc_per_node 4 train.py --batch-size 64 --dtype bf16"),
    (["python", "-m", "torch.distributed.run", "--nnodes=1", "train.py", "--epochs", "3"],
     "python -m torch.distributed.run --nnodes=1 train.py --epochs 3"),
    (["env", "OMP_NUM_THREADS=8", "HF_TOKEN=hf_x"], "env OMP_NUM_THREADS=8 HF_TOKEN=<redacted>"),
    (["python", "-c", "from multiprocessing.spawn import spawn_main; spawn_main(tracker_fd=5, pipe_handle=7)",
      "--multiprocessing-fork"],
     "python -c from multiprocessing.spawn import spawn_main; spawn_main(tracker_fd=5, pipe_handle=7) "
     "--multiprocessing-fork"),
])
def test_command_lines_are_shown_by_allow_list(args, shown):
    """Issue 19: keep the program, script/module and known-safe flag values; replace everything else."""
    assert " ".join(procfs.redact_args(args)) == shown


def test_cgroup_quota_v2_takes_the_tightest_parent(tmp_path):
    fp = FakeProc(tmp_path)
    fp.add_process(10, cgroup="0::/kubepods/pod1/ctr\n")
    fp.cgroup_v2("/kubepods", "max 100000")
    fp.cgroup_v2("/kubepods/pod1", "400000 100000")
    fp.cgroup_v2("/kubepods/pod1/ctr", "600000 100000")
    q = procfs.read_cgroup_quota(tmp_path, 10)
    assert (q.version, q.quota_cpus, q.limited_at, q.readable) == (2, 4.0, "/kubepods/pod1", True)
    assert procfs.usable_cpus(list(range(8)), q.quota_cpus) == 4
    assert procfs.usable_cpus([0, 1], 3.5) == 2
    assert procfs.usable_cpus(None, 2.5) == 3


def test_cgroup_quota_v1_cfs(tmp_path):
    fp = FakeProc(tmp_path)
    fp.add_process(10, cgroup="4:memory:/x\n3:cpu,cpuacct:/docker/abc\n0::/\n")
    d = tmp_path / "sys/fs/cgroup/cpu,cpuacct"
    (d / "docker/abc").mkdir(parents=True)
    for folder, quota in ((d, "-1"), (d / "docker", "-1"), (d / "docker/abc", "150000")):
        (folder / "cpu.cfs_quota_us").write_text(quota + "\n")
        (folder / "cpu.cfs_period_us").write_text("100000\n")
    q = procfs.read_cgroup_quota(tmp_path, 10)
    assert (q.version, q.quota_cpus, q.path) == (1, 1.5, "/docker/abc")


# --- fake /proc: sampling, migrations, mapping ---------------------------------------------------


def test_fake_tree_threads_cpu_migrations_and_topology(tmp_path):
    fp = FakeProc(tmp_path)
    comm = "pt main) (x"              # spaces and parentheses inside comm
    fp.add_process(500, comm, cmdline=["/home/alice/venv/bin/python", "/home/alice/train.py"],
                   environ={"OMP_NUM_THREADS": "4", "HF_TOKEN": "hunter2", "LD_PRELOAD": "/home/alice/libjemalloc.so.2"},
                   maps=["/srv/site-packages/torch/lib/libgomp.so.1", "/srv/site-packages/torch/lib/libtorch_cpu.so"],
                   cpus_allowed="0-7", swap_kib=2048, majflt=10,
                   threads={500: dict(processor=0, state="R"), 501: dict(processor=1, state="R"),
                            502: dict(processor=4, state="S", comm="pt_autograd_0")})
    fp.add_process(600, "pt_data_worker", ppid=500, threads={600: dict(processor=2), 601: dict(processor=2)})
    # Each sample: thread 500 stays on CPU 0 using a full CPU; 501 alternates 1 <-> 2 (crossing CCXs)
    # at half a CPU; 502 stays idle. The worker uses a quarter CPU.
    ticks_per_step = int(0.1 * HZ)

    def step(n: int, now: float) -> None:
        fp.set_thread(500, 500, state="R", processor=0, utime=n * ticks_per_step, wait_ns=n * 10_000_000)
        fp.set_thread(500, 501, state="R", processor=2 if n % 2 else 1, utime=n * ticks_per_step // 2)
        fp.set_thread(500, 502, comm="pt_autograd_0", processor=4)
        fp.set_proc_stat(500, utime=n * ticks_per_step * 3 // 2, num_threads=3, majflt=10 + 5 * n)
        fp.set_thread(600, 600, state="R" if n % 2 else "S", processor=2, utime=n * ticks_per_step // 4)
        fp._meta[600]["ppid"] = 500
        fp.set_proc_stat(600, utime=n * ticks_per_step // 4, num_threads=2)

    clock = StepClock(step)
    topo = two_ccx_topology()
    insp = inspect_process(500, seconds=1.0, root=tmp_path, topology=topo, interval=0.1,
                           clock=clock, sleep=clock.sleep)
    assert insp.status == "ok" and insp.name == comm
    assert insp.samples == 11 and insp.window_s == pytest.approx(1.0)
    by_tid = {t.tid: t for t in insp.threads}
    assert set(by_tid) == {500, 501, 502} and insp.num_threads == 3
    assert by_tid[500].cpu_percent == pytest.approx(100, abs=1)
    assert by_tid[501].cpu_percent == pytest.approx(50, abs=1)
    assert by_tid[502].cpu_percent == 0
    assert insp.cpu_percent == pytest.approx(150, abs=1)
    # 501 moved at every one of the 10 steps and was seen on CPUs 1 and 2.
    assert by_tid[501].migrations == 10 and by_tid[501].cpus_seen == [1, 2]
    assert by_tid[500].migrations == 0 and insp.migrations == 10
    # last CPUs mapped onto the topology: CPU 0 -> CCX 0 / node 0, CPU 2 -> CCX 1 / node 1.
    assert (by_tid[500].l3, by_tid[500].numa, by_tid[500].core) == (0, 0, 0)
    assert (by_tid[501].last_cpu, by_tid[501].l3, by_tid[501].numa) == (1, 0, 0)   # step 10 is even
    assert by_tid[502].name == "pt_autograd_0" and by_tid[502].core == 0     # CPU 4 is core 0's sibling
    assert by_tid[500].wait_percent == pytest.approx(10.0, abs=0.5)
    assert by_tid[500].runnable_share == 1.0
    # env through the whitelist; secret dropped; LD_PRELOAD reduced to a file name.
    assert insp.env == {"LD_PRELOAD": "libjemalloc.so.2", "OMP_NUM_THREADS": "4"}
    assert insp.preload == ["libjemalloc.so.2"] and insp.env_readable
    assert [lib.file for lib in insp.libraries] == ["libgomp.so.1", "libtorch_cpu.so"]
    assert insp.cmdline == "~/venv/bin/python ~/train.py" and insp.is_python
    assert insp.affinity == list(range(8)) and insp.usable_cpus == 8 and insp.uid == 1000
    assert insp.swap_bytes == 2048 * 1024 and insp.rss_bytes == 204800 * 1024
    assert insp.major_faults == 50 and insp.major_faults_per_s == pytest.approx(50.0)
    assert [c.pid for c in insp.children] == [600] and insp.children_threads == 2
    assert insp.children[0].cpu_percent == pytest.approx(25, abs=1)
    # runnable: 2 main threads always, plus the worker's thread on odd steps.
    assert insp.runnable_max == 3 and 2.0 < insp.runnable_mean < 3.0


def test_fake_tree_process_exits_mid_window(tmp_path):
    fp = FakeProc(tmp_path)
    fp.add_process(700, threads={700: dict(processor=3, utime=0)})

    def step(n: int, now: float) -> None:
        if n <= 3:
            fp.set_thread(700, 700, processor=3, utime=n * 10)
            fp.set_proc_stat(700, utime=n * 10)
        elif n == 4:
            fp.remove_process(700)

    clock = StepClock(step)
    insp = inspect_process(700, seconds=2.0, root=tmp_path, topology=Topology(), interval=0.2,
                           clock=clock, sleep=clock.sleep)
    assert insp.status == "exited"
    assert insp.samples == 4 and insp.window_s == pytest.approx(0.6)
    assert insp.threads[0].cpu_percent == pytest.approx(30 / HZ / 0.6 * 100, abs=1)
    assert insp.exited_after_s == pytest.approx(0.8)
    assert any("exited 0.8 s into the window" in n and "only the 0.6 s" in n for n in inspection_notes(insp))


def test_fake_tree_children_started_and_exited_during_window(tmp_path):
    fp = FakeProc(tmp_path)
    (tmp_path / "proc/uptime").write_text("1010.00 2000.00\n")          # booted 1010 s ago
    fp.add_process(40, "trainer", threads={40: dict(processor=0), 41: dict(processor=1)})
    fp.add_process(50, "pt_data_worker", ppid=40)                       # exits mid-window

    def step(n: int, now: float) -> None:
        if n == 2:
            fp.remove_process(50)
            # A new worker, started 0.5 s ago (starttime in ticks since boot), 0.25 s of CPU so far.
            fp.add_process(51, "pt_data_worker", ppid=40, starttime=int((1010.0 - 0.5) * HZ),
                           threads={51: dict(utime=HZ // 4)})
            fp.set_proc_stat(51, utime=HZ // 4)
        if n == 3:
            (fp.pdir(40) / "task" / "41").rename(tmp_path / "gone41")    # a thread ends

    clock = StepClock(step)
    insp = inspect_process(40, seconds=1.0, root=tmp_path, topology=Topology(), interval=0.25,
                           clock=clock, sleep=clock.sleep)
    kids = {c.pid: c for c in insp.children}
    assert kids[50].state == "exited" and kids[50].cpu_percent is None
    assert kids[51].state == "new" and kids[51].cpu_percent == pytest.approx(50.0)
    assert insp.children_threads == 1                                   # the exited worker no longer counts
    assert any("started during the window" in n for n in insp.notes)
    assert {t.tid: t.state for t in insp.threads} == {40: "S", 41: "exited"}


def test_fake_tree_pid_reuse_counts_as_exit(tmp_path):
    fp = FakeProc(tmp_path)
    fp.add_process(701, starttime=5)

    def step(n: int, now: float) -> None:
        fp._meta[701]["starttime"] = 99          # a new process got the same PID
        fp.set_proc_stat(701)

    clock = StepClock(step)
    insp = inspect_process(701, seconds=1.0, root=tmp_path, topology=Topology(), clock=clock, sleep=clock.sleep)
    assert insp.status == "exited" and insp.samples == 1


def test_fake_tree_environ_unreadable_messages(tmp_path):
    fp = FakeProc(tmp_path)
    fp.add_process(800, uid=1234)
    env = fp.pdir(800) / "environ"
    env.unlink()
    env.mkdir()                                   # reading a directory fails (EISDIR): "cannot read"
    (fp.pdir(800) / "maps").unlink()              # missing: "not available"
    clock = StepClock()
    insp = inspect_process(800, seconds=0.2, root=tmp_path, topology=Topology(), clock=clock, sleep=clock.sleep)
    assert not insp.env_readable and insp.env == {}
    assert insp.env_problem.problem == "error" and insp.libraries_problem.problem == "gone"
    assert env_problem_text(insp).startswith("cannot read the environment of process 800 (")
    assert libraries_problem_text(insp) == ("cannot read the loaded libraries of process 800: the process exited "
                                            "(or /proc lacks the file)")
    assert not insp.libraries_readable and env_problem_text(insp) in inspection_notes(insp)


def _nobody_tree() -> Path:
    """A temp folder nobody (uid 65534) can traverse: pytest's tmp_path is private to root."""
    d = Path(tempfile.mkdtemp(prefix="cpudoctor-insp-"))
    d.chmod(0o755)
    return d


@AS_ANOTHER_USER
def test_permission_denied_message_as_another_user():
    """Root ignores chmod 000, so the reader runs as nobody: a real EACCES on environ and maps."""
    root = _nobody_tree()
    try:
        fp = FakeProc(root)
        fp.add_process(900, uid=0, environ={"OMP_NUM_THREADS": "2"}, maps=["/usr/lib/libgomp.so.1"])
        for p in root.rglob("*"):
            p.chmod(0o755 if p.is_dir() else 0o644)
        (fp.pdir(900) / "environ").chmod(0o000)
        (fp.pdir(900) / "maps").chmod(0o000)
        code = ("import json,sys; from pathlib import Path; from cpudoctor.probes.process.inspect import inspect_process;"
                "from cpudoctor.probes.cpu.topology import Topology;"
                "from cpudoctor.render.inspect import env_problem_text, libraries_problem_text;"
                f"i=inspect_process(900, 0.0, Path({str(root)!r}), Topology());"
                "print(json.dumps([env_problem_text(i), libraries_problem_text(i), i.access_limited, i.uid]))")
        out = subprocess.run(other_user.as_user([PY, "-c", code], reach=[root]), capture_output=True, text=True,
                             timeout=60, cwd="/")
        assert out.returncode == 0, out.stderr
        import json

        env_error, libs_error, limited, uid = json.loads(out.stdout)
        assert env_error == ("cannot read the environment of process 900: permission denied - it belongs to "
                             "another user (uid 0); run CPU Doctor as that user or with sudo to see it")
        assert "loaded libraries" in libs_error and "permission denied" in libs_error
        assert limited is True and uid == 0
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _refusal(*args, **kwargs) -> InspectError:
    """The InspectError ``inspect_process`` raises (the probe records the kind; render words it)."""
    with pytest.raises(InspectError) as e:
        inspect_process(*args, **kwargs)
    return e.value


def test_missing_pid_and_kernel_thread_and_zombie(tmp_path):
    fp = FakeProc(tmp_path)
    e = _refusal(4, 0.1, root=tmp_path)
    assert e.kind == "no_such_process" and "no process with PID 4" in inspect_error_text(e)
    assert "pick one from `cpudoctor inspect --list`" in inspect_error_text(e)
    assert "not a process ID" in inspect_error_text(_refusal(0, 0.1, root=tmp_path))
    fp.add_process(3, "kworker/0:1", ppid=2, flags=PF_KTHREAD | 0x8040)
    assert "kernel thread" in inspect_error_text(_refusal(3, 0.1, root=tmp_path))
    fp.add_process(5, "python")
    fp.set_proc_stat(5, state="Z")
    e = _refusal(5, 0.1, root=tmp_path)
    assert e.kind == "zombie" and "already exited" in inspect_error_text(e)
    assert "needs Linux" in inspect_error_text(_refusal(5, 0.1, root=tmp_path / "nowhere"))


def test_pid_2_in_a_pid_namespace_is_a_program(tmp_path):
    """Inside a container PID 2 (and its children, PPID 2) are ordinary programs: the kernel-thread flag
    decides, never the number (issue 39: `inspect 2` refused a training job as "a kernel thread")."""
    fp = FakeProc(tmp_path)
    fp.add_process(1, "tini", ppid=0, cmdline=["tini", "--", "python", "train.py"])
    fp.add_process(2, "python", ppid=1, cmdline=["python", "train.py"])
    fp.add_process(7, "python", ppid=2, cmdline=["python", "-c", "worker"])
    for pid in (2, 7):
        insp = inspect_process(pid, 0.05, root=tmp_path, topology=Topology())
        assert insp.pid == pid
    entries = list_processes(tmp_path, interval=0.01, exclude_self=False)
    assert {1, 2, 7} <= {e.pid for e in entries}


def test_unreadable_task_dir_is_not_called_an_exit(tmp_path):
    fp = FakeProc(tmp_path)
    fp.add_process(77)
    import shutil as _sh

    _sh.rmtree(fp.pdir(77) / "task")
    e = _refusal(77, 0.1, root=tmp_path, topology=Topology())
    assert e.kind == "no_tasks" and "cannot list the threads of process 77" in inspect_error_text(e)


def test_locate_cpu_and_unknown_topology():
    topo = two_ccx_topology()
    p = locate_cpu(topo, 6)
    assert (p.l3, p.numa, p.core) == (1, 1, 2)
    assert locate_cpu(topo, 99).l3 is None
    assert locate_cpu(None, 1).core is None


def test_list_processes_fake_tree_python_first(tmp_path):
    fp = FakeProc(tmp_path)
    fp.add_process(10, "bash", cmdline=["bash"])
    fp.add_process(11, "python3", cmdline=["/home/bob/env/bin/python3", "-m", "train"])
    fp.add_process(12, "java", cmdline=["java", "-jar", "x.jar"])
    fp.add_process(13, "kthreadd", ppid=0, cmdline=[""], flags=PF_KTHREAD | 0x8040)
    (fp.pdir(13) / "cmdline").write_bytes(b"")
    fp.add_process(14, "python", cmdline=["python", "serve.py"])
    clock = StepClock(lambda n, now: (fp.set_proc_stat(12, utime=50), fp.set_proc_stat(14, utime=10),
                                      fp.set_proc_stat(11, utime=30)))
    entries = list_processes(tmp_path, interval=0.5, exclude_self=False, sleep=clock.sleep, clock=clock)
    assert [e.pid for e in entries] == [11, 14, 12, 10]
    first = entries[0]
    assert first.is_python and first.cmdline == "~/env/bin/python3 -m train"
    assert first.cpu_percent == pytest.approx(30 / HZ / 0.5 * 100)
    assert first.rss_bytes == 204800 * 1024 and first.threads == 1


# --- real child processes ---------------------------------------------------------------------

TRAIN = textwrap.dedent("""
    import sys, time, torch
    torch.set_num_threads(2)
    model = torch.nn.Sequential(torch.nn.Linear(128, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(256, 128), torch.randint(0, 10, (256,))
    started = False
    end = time.time() + 60
    while time.time() < end:
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad(); loss.backward(); opt.step()
        if not started:
            print("ready", flush=True); started = True
""")


def _start(code: str, env_extra: dict[str, str] | None = None, **kw) -> subprocess.Popen:
    env = dict(os.environ, **(env_extra or {}))
    proc = subprocess.Popen([PY, "-c", code], stdout=subprocess.PIPE, text=True, env=env, **kw)
    line = proc.stdout.readline()
    assert line.strip() == "ready", f"child did not start: {line!r}"
    return proc


def _stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@pytest.fixture(scope="module")
def torch_child():
    proc = _start(TRAIN, {"OMP_NUM_THREADS": "2", "CPUDOCTOR_TEST_SECRET": "s3cr3t-value",
                          "MKL_NUM_THREADS": "2"})
    yield proc
    _stop(proc)


@pytest.mark.hardware
@pytest.mark.slow
def test_real_torch_training_child(torch_child):
    insp = inspect_process(torch_child.pid, seconds=1.0)
    assert insp.status == "ok" and insp.is_python and insp.pid == torch_child.pid
    files = {lib.file for lib in insp.libraries}
    assert any(f.startswith("libgomp") for f in files), files
    assert {"libtorch_cpu.so", "libc10.so"} <= files
    gomp = [lib for lib in insp.openmp_runtimes]
    assert len(gomp) == 1 and gomp[0].origin == "torch" and gomp[0].runtime == "gomp"
    assert insp.env["OMP_NUM_THREADS"] == "2" and insp.env["MKL_NUM_THREADS"] == "2"
    assert "CPUDOCTOR_TEST_SECRET" not in insp.env
    assert "s3cr3t-value" not in repr(insp)
    assert insp.num_threads >= 2 and len(insp.threads) == insp.num_threads
    assert insp.cpu_percent > 10                      # it trains: a busy loop, whatever the load
    assert max(t.cpu_percent for t in insp.threads) > 5
    assert all(t.last_cpu in os.sched_getaffinity(torch_child.pid) for t in insp.threads)
    assert insp.affinity == sorted(os.sched_getaffinity(torch_child.pid))
    assert insp.usable_cpus is not None and insp.rss_bytes > 50 * 2**20
    assert insp.samples >= 2 and insp.nice == os.getpriority(os.PRIO_PROCESS, torch_child.pid)


def test_real_process_with_two_libgomp_copies():
    """torch's bundled libgomp plus the system one, loaded by path: two OpenMP pools in one process."""
    system = next((p for p in ("/usr/lib/x86_64-linux-gnu/libgomp.so.1", "/lib/x86_64-linux-gnu/libgomp.so.1")
                   if Path(p).exists()), None)
    bundled = TORCH_LIB / "libgomp.so.1"
    if system is None or not bundled.exists():
        pytest.skip("needs the system libgomp and torch's bundled copy")
    code = (f"import ctypes, sys, time; ctypes.CDLL({system!r}); ctypes.CDLL({str(bundled)!r});"
            "print('ready', flush=True); time.sleep(60)")
    proc = _start(code)
    try:
        insp = inspect_process(proc.pid, seconds=0.3)
    finally:
        _stop(proc)
    runtimes = insp.openmp_runtimes
    assert len(runtimes) == 2 and {lib.origin for lib in runtimes} == {"system", "torch"}
    assert {lib.runtime for lib in runtimes} == {"gomp"}


def test_real_process_exits_mid_inspection():
    """The child ends (its stdin closes) right after the first sample: no race with a timer."""
    proc = _start("import sys; print('ready', flush=True); sys.stdin.read()", stdin=subprocess.PIPE)

    def end_child_then_sleep(seconds: float) -> None:
        if proc.poll() is None:
            proc.stdin.close()
            proc.wait(timeout=60)                # reaped: its /proc entry is gone before the next sample
        time.sleep(seconds)

    try:
        insp = inspect_process(proc.pid, seconds=30.0, sleep=end_child_then_sleep)
    finally:
        _stop(proc)
    assert insp.status == "exited"
    assert insp.samples == 1 and insp.window_s < 30.0
    assert any("exited" in n for n in inspection_notes(insp))


def test_real_pid_that_does_not_exist():
    proc = subprocess.Popen([PY, "-c", "pass"])
    proc.wait()
    with pytest.raises(InspectError) as e:
        inspect_process(proc.pid, 0.1)
    assert e.value.kind in ("no_such_process", "exited")
    assert str(proc.pid) in inspect_error_text(e.value)


@AS_ANOTHER_USER
def test_real_process_of_another_user():
    proc = subprocess.Popen(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "sleep", "30"])
    try:
        # setpriv execs sleep after dropping privileges: until then /proc shows setpriv (still root).
        wait_for(lambda: Path(f"/proc/{proc.pid}/comm").read_text().strip() == "sleep", 60, "sleep's exec")
        # As root everything is readable; the owner is recorded.
        insp = inspect_process(proc.pid, 0.2)
        assert insp.uid == 65534 and insp.env_readable and insp.libraries_readable
        # As a third user (uid 65533), environ and maps are refused: a clear message, partial data.
        code = ("import json; from cpudoctor.probes.process.inspect import inspect_process;"
                "from cpudoctor.render.inspect import env_problem_text;"
                f"i=inspect_process({proc.pid}, 0.2);"
                "print(json.dumps([env_problem_text(i), i.access_limited, i.num_threads]))")
        out = subprocess.run(other_user.as_user([PY, "-c", code], uid=65533), capture_output=True, text=True,
                             timeout=60, cwd="/")
        assert out.returncode == 0, out.stderr
        import json

        env_error, limited, threads = json.loads(out.stdout)
        assert "permission denied - it belongs to another user (uid 65534)" in env_error
        assert limited is True and threads == 1
    finally:
        proc.kill()
        proc.wait()


def test_list_processes_live_excludes_self_and_children():
    proc = _start("import time; print('ready', flush=True); time.sleep(30)")
    try:
        mine = list_processes(interval=0.1)
        pids = {e.pid for e in mine}
        assert os.getpid() not in pids and proc.pid not in pids
        everything = list_processes(interval=0.1, exclude_self=False)
        entry = next(e for e in everything if e.pid == proc.pid)
        assert entry.is_python and entry.threads >= 1 and entry.rss_bytes > 0
        # Python processes come first.
        flags = [e.is_python for e in everything]
        assert flags == sorted(flags, reverse=True)
    finally:
        _stop(proc)


def test_thread_tracker_and_markers(tmp_path):
    fp = FakeProc(tmp_path)
    fp.add_process(55, "trainer", threads={55: dict(processor=1, utime=0), 56: dict(processor=3, utime=0)})
    clock = StepClock()
    tracker = __import__("cpudoctor.probes.process.inspect", fromlist=["ThreadTracker"]).ThreadTracker(55, tmp_path, clock)
    first = tracker.poll()
    assert [(p.tid, p.cpu, p.cpu_percent) for p in first] == [(55, 1, None), (56, 3, None)]
    clock.t += 1.0
    fp.set_thread(55, 55, processor=2, utime=HZ)            # one full CPU second
    fp.set_thread(55, 56, processor=3, utime=HZ // 10)
    second = tracker.poll()
    assert [(p.tid, p.cpu, p.cpu_percent) for p in second] == [(55, 2, 100.0), (56, 3, 10.0)]
    from cpudoctor.render.inspect import thread_markers as markers_by_cpu

    labels, load = markers_by_cpu(second)
    assert labels == {2: ["trainer 55 (100 %)"], 3: ["trainer 56 (10 %)"]}
    assert load == {2: 100.0, 3: 10.0}
    assert markers_by_cpu(second, busy_only=True)[0] == {2: ["trainer 55 (100 %)"]}
    fp._meta[55]["starttime"] = 4242                         # PID reused by another program
    fp.set_proc_stat(55)
    assert tracker.poll() is None
    fp.remove_process(55)
    assert tracker.poll() is None


def test_real_children_are_seen_with_their_threads():
    """A parent with two busy worker processes, like DataLoader workers."""
    worker = ("import os, time\np = os.getppid()\nend = time.time() + 20\n"
              "while os.getppid() == p and time.time() < end:\n    sum(range(1000))\n")
    code = ("import subprocess, sys, time\n"
            f"ps = [subprocess.Popen([sys.executable, '-c', {worker!r}]) for _ in range(2)]\n"
            "time.sleep(0.3)\nprint('ready', flush=True)\ntime.sleep(30)\n")
    proc = _start(code)
    try:
        insp = inspect_process(proc.pid, seconds=0.6)
    finally:
        _stop(proc)
        for c in insp.children if "insp" in locals() else []:
            try:
                os.kill(c.pid, 9)
            except ProcessLookupError:
                pass
    assert len(insp.children) == 2 and insp.children_threads == 2
    assert all(c.cpu_percent is not None and c.cpu_percent > 5 for c in insp.children)
    # python -c CODE: the code may hold anything (a key passed to a login call), so it is not shown.
    assert all(c.cmdline.endswith("-c <redacted>") and "os.getppid()" not in c.cmdline for c in insp.children)
    assert insp.children_cpu_percent == pytest.approx(sum(c.cpu_percent for c in insp.children), abs=0.2)
    assert insp.cpu_percent < 20                     # the parent itself only sleeps


def test_inspecting_an_ancestor_leaves_the_inspector_itself_out():
    """`cpudoctor inspect <my shell's pid>`: the inspector is a descendant, but not one of the job's workers."""
    import os

    from cpudoctor.probes.process.inspect import inspect_process

    insp = inspect_process(os.getppid(), seconds=0.2)
    assert os.getpid() not in [c.pid for c in insp.children]
