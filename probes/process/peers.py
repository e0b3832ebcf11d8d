"""Other training processes on the same CPUs: several PyTorch jobs each sized for every core.

Two or three experiments started side by side each take PyTorch's default
thread count (every core), so the machine runs two or three times as many
compute threads as it has CPUs; each job alone looks fine. The inspector
looks for them while it samples its own process: Python processes outside
the inspected job's tree with ``libtorch_cpu`` in their memory map, their CPU
use over the same window, their thread count, ``OMP_NUM_THREADS`` (when the
environment is readable), the CPUs they share with the job, their owner, and
whether a CPU Doctor started them (its lab jobs carry its child token in their
environment). DataLoader workers of another job are folded into their parent.
Nothing here judges; process rule PROC014 does.
"""

from __future__ import annotations

from pathlib import Path

from cpudoctor.kits.child.tree import TOKEN_VARIABLE as CHILD_TOKEN
from cpudoctor.kits.rooted import read_text
from cpudoctor.model.inspection import PeerJob
from cpudoctor.probes.process import procfs

# A process counts as training when it used a tenth of a CPU over the window: an idle notebook kernel
# with torch loaded uses ~0%, a training job far more, even when the jobs starve each other of CPU.
BUSY_PERCENT = 10.0
TORCH_LIBRARY = "libtorch_cpu"


def snapshot(root: Path) -> dict[int, procfs.TaskStat]:
    """CPU times of every process now; give it to :func:`find_peer_jobs` after the window."""
    return procfs.read_all_stats(root)


def _has_torch(root: Path, pid: int) -> bool:
    text = read_text(procfs.proc_dir(root, pid) / "maps")
    return bool(text) and TORCH_LIBRARY in text


def find_peer_jobs(root: Path, pid: int, affinity: list[int] | None, before: dict[int, procfs.TaskStat],
                   seconds: float, *, exclude: set[int] | None = None) -> list[PeerJob]:
    """Busy PyTorch processes outside ``pid``'s job tree that share CPUs with it, busiest first.

    ``before`` is a :func:`snapshot` taken ``seconds`` ago. ``exclude`` adds
    PIDs to skip (the caller itself and what it started).
    """
    root = Path(root)
    after = procfs.read_all_stats(root)
    skip = {pid, *procfs.descendants(root, pid, after), *(exclude or set())}
    mine = set(affinity or [])
    candidates: dict[int, PeerJob] = {}
    for other, st in after.items():
        if other in skip or st.state in ("Z", "X"):
            continue
        prev = before.get(other)
        if prev is None or prev.starttime != st.starttime or seconds <= 0:
            continue
        cpu = (st.cpu_ticks - prev.cpu_ticks) / procfs.CLK_TCK / seconds * 100
        if cpu < BUSY_PERCENT or not _has_torch(root, other):
            continue
        status = procfs.parse_status(read_text(procfs.proc_dir(root, other) / "status") or "")
        allowed = procfs.status_cpus_allowed(status) or []
        shared = sorted(mine & set(allowed)) if mine else sorted(allowed)
        if not shared:
            continue
        cmd = procfs.read_cmdline(root, other)
        argv = procfs.shown_argv(cmd) if cmd else []
        text = " ".join(" ".join(a.split()) for a in argv)
        job = PeerJob(pid=other, name=st.comm, cmdline=text[:300], argv=argv, uid=procfs.status_uid(status),
                      threads=st.num_threads, cpu_percent=round(cpu, 1), affinity=allowed, shared_cpus=shared)
        env = procfs.read_reason(procfs.proc_dir(root, other) / "environ", binary_nul=True)
        if env.text is not None:
            job.env_readable = True
            environ = procfs.parse_environ(env.text)
            job.cpudoctor_child = CHILD_TOKEN in environ
            value = environ.get("OMP_NUM_THREADS", "")
            try:
                job.omp_num_threads = int(value.split(",")[0])
            except ValueError:
                job.omp_num_threads = None
        candidates[other] = job
    # A DataLoader worker of another job has torch mapped too: fold it into its parent.
    peers = [job for p, job in candidates.items() if after[p].ppid not in candidates]
    for p, job in candidates.items():
        parent = candidates.get(after[p].ppid)
        if parent is not None and parent is not job:
            parent.cpu_percent = round((parent.cpu_percent or 0.0) + (job.cpu_percent or 0.0), 1)
    return sorted(peers, key=lambda j: (-(j.cpu_percent or 0.0), j.pid))
