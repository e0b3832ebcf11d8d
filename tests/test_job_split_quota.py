"""PROC014 under a cgroup quota: the relaunch asks for the threads the quota pays for (issue 26).

Seen before: under a 0.5-CPU quota the split gave the job 2 threads on CPUs 0-1. The inspection is built
as the process probe fills it (a job and one peer of the same user on 4 CPUs, a 0.5-CPU quota on the inspected one) and the
printed relaunch lines are read back.
"""

from __future__ import annotations

import re

from cpudoctor.advisor.job_split import quota_threads
from cpudoctor.advisor.process_rules import run_process_rules
from cpudoctor.model.inspection import Inspection, PeerJob, ThreadInfo


def _inspection(quota: float | None) -> Inspection:
    threads = [ThreadInfo(10 + k, "python", "R", cpu_percent=45.0, last_cpu=k % 2, cpus_seen=[0, 1, 2, 3],
                          wait_percent=60.0) for k in range(2)]
    return Inspection(pid=10, uid=1000, name="python", argv=["python", "train.py"], cmdline="python train.py",
                      is_python=True, window_s=2.0, samples=20, num_threads=4, threads=threads, cpu_percent=50.0,
                      runnable_mean=3.5, runnable_max=4, wait_percent=120.0, affinity=[0, 1, 2, 3], usable_cpus=1 if quota else 4,
                      cpu_quota=quota, env={"OMP_NUM_THREADS": "4"}, env_readable=True,
                      peers=[PeerJob(pid=11, name="python", argv=["python", "b.py"], uid=1000, threads=4,
                                     cpu_percent=50.0, affinity=[0, 1, 2, 3], shared_cpus=[0, 1, 2, 3], omp_num_threads=4,
                                     env_readable=True)])


def test_quota_threads():
    assert [quota_threads(q) for q in (None, 0.5, 1.0, 2.5, 4.0)] == [None, 1, 1, 2, 4]


def test_a_half_cpu_quota_gives_the_relaunched_job_one_thread():
    findings = {f.code: f for f in run_process_rules(_inspection(0.5), None, strict=True)}
    assert "PROC014" in findings, sorted(findings)
    snippet = findings["PROC014"].snippet
    launches = [line for line in snippet.splitlines() if "taskset" in line]
    assert launches, snippet
    this = [line for line in launches if "train.py" in line]
    assert this and all(re.search(r"\bOMP_NUM_THREADS=1\b", line) for line in this), snippet
    assert not re.search(r"OMP_NUM_THREADS=2\b", "\n".join(this))


def test_without_a_quota_the_job_gets_its_share_of_threads():
    """The same jobs with no quota: the job gets the threads of its CPUs (so the quota is what made it 1)."""
    findings = {f.code: f for f in run_process_rules(_inspection(None), None, strict=True)}
    this = [line for line in findings["PROC014"].snippet.splitlines() if "taskset" in line and "train.py" in line]
    assert this and all(re.search(r"\bOMP_NUM_THREADS=2\b", line) for line in this), findings["PROC014"].snippet
