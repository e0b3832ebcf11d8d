"""Counted words read right when the count is 1, and hidden values are not printed as values (issue 26).

Seen before: "All 1 import checks passed", "1 CPUs", "1 threads", "TORCH_LOOP_CORE_PINNING=set is set" (the
report hides a value whose shape it does not know as "set"). Every rule's words (title, why, fix and the
snippet's comments) are checked on every scenario, made small: one usable CPU (taskset, a cgroup quota of 1
CPU), one thread everywhere, a single import check, and the variables of guides set to values the report hides;
and the process rules on a one-CPU job.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path

import pytest

from cpudoctor import advisor
from cpudoctor.advisor.process_rules import run_process_rules
from cpudoctor.model import ImportCheck
from cpudoctor.model.inspection import Inspection, PeerJob, ThreadInfo
from cpudoctor.report_file import load_report

SCENARIOS = sorted((Path(__file__).parent / "fixtures" / "scenarios").glob("*.json"))
NOUNS = ("CPUs", "threads", "cores", "physical cores", "performance cores", "checks", "import checks", "workers",
         "jobs", "processes", "packages", "nodes", "NUMA nodes", "copies", "runtimes", "pools", "usable CPUs",
         "compute threads", "busy threads", "L3 domains", "CCXs", "child processes", "hardware threads", "segments")
WRONG = [re.compile(rf"(?<![\d.,])1 (?:{'|'.join(map(re.escape, NOUNS))})\b"), re.compile(r"\bAll 1 "),
         re.compile(r"=set is set\b"), re.compile(r"\b[A-Z][A-Z0-9_]+=set\b")]


def _wrong(findings) -> list[str]:
    out = []
    for f in findings:
        comments = "\n".join(line for line in f.snippet.splitlines() if line.lstrip().startswith(("#", "rem ")))
        for part, text in (("title", f.title), ("why", f.why), ("fix", f.fix), ("snippet", comments)):
            for rx in WRONG:
                m = rx.search(text or "")
                if m:
                    out.append(f"{f.code} {part}: {m.group(0)!r} in {text[max(0, m.start() - 60):m.end() + 40]!r}")
    return out


def _one_cpu(report, *, quota: bool):
    r = copy.deepcopy(report)
    aff = r.topology.affinity
    if quota:
        aff.cpu_quota = 1.0
    else:
        first = (aff.allowed_cpus or r.topology.online_cpus or [0])[0]
        aff.allowed_cpus = [first]
    aff.usable_cpus = 1
    if r.software is not None and not r.software.captured:
        env = r.software.thread_env
        env.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", TORCH_LOOP_CORE_PINNING="set",
                   MKL_DEBUG_CPU_TYPE="set")
        r.software.torch.intra_op_threads = 2
        r.software.torch.inter_op_threads = 2
        for lib in r.software.loaded_libs:
            lib.num_threads = 2
        r.software.import_checks = [ImportCheck("torch", "torch", "ok", message="import torch works")]
        r.software.children_ran = True
    return r


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.stem)
def test_counted_words_on_one_cpu(path):
    report = load_report(path)
    problems = _wrong(advisor.diagnose(report))
    for quota in (False, True):
        problems += _wrong(advisor.diagnose(_one_cpu(report, quota=quota)))
    assert problems == []


def test_process_rules_on_a_one_cpu_job():
    threads = [ThreadInfo(10 + k, "python", "R", cpu_percent=60.0, last_cpu=0, cpus_seen=[0], wait_percent=80.0)
               for k in range(3)]
    insp = Inspection(pid=10, uid=1000, name="python", argv=["python", "train.py"], cmdline="python train.py",
                      is_python=True, window_s=2.0, samples=20, num_threads=3, threads=threads, cpu_percent=99.0,
                      runnable_mean=3.0, runnable_max=3, wait_percent=200.0, affinity=[0], usable_cpus=1,
                      env={"OMP_NUM_THREADS": "3", "TORCH_LOOP_CORE_PINNING": "set"}, env_readable=True,
                      peers=[PeerJob(pid=11, name="python", argv=["python", "b.py"], uid=1000, threads=1,
                                     cpu_percent=50.0, affinity=[0], shared_cpus=[0], omp_num_threads=1,
                                     env_readable=True)])
    assert _wrong(run_process_rules(insp, None, strict=True)) == []


def test_only_errors_name_the_categories_too(capsys):
    from conftest import run_cli

    code, _, err = run_cli(capsys, "doctor", "--fast", "--only", "treads")
    assert code == 2 and "no rule or category 'treads'" in err
    assert "categories: isa, torch, threads" in err and "known codes include" in err
    code, _, _ = run_cli(capsys, "doctor", "--fast", "--only", "threads", "--format", "json")
    assert code in (0, 1)


@pytest.mark.slow
def test_torch001_points_to_python_and_the_environment_picker(tmp_path, capsys):
    """A real environment without torch, chosen with --python: the finding says how to choose the right one."""
    import json
    import venv

    from conftest import run_cli

    venv.EnvBuilder(with_pip=False, symlinks=True).create(tmp_path / "notorch")
    python = tmp_path / "notorch" / "bin" / "python"
    code, out, _ = run_cli(capsys, "doctor", "--fast", "--python", str(python), "--only", "TORCH001", "--format", "json")
    [finding] = [f for f in json.loads(out)["findings"] if f["code"] == "TORCH001"]
    assert finding["severity"] == "warning"
    assert "run CPU Doctor from there" not in finding["why"]
    assert "--python" in finding["why"] and "Environment picker" in finding["why"]


def test_lab_progress_at_one_thread():
    from cpudoctor.render.training import progress_text

    partial = progress_text("gemm", "gemm", {"phase": "partial", "threads": 1, "gflops_so_far": {"fp32": 40.0}})
    step = progress_text("gemm", "gemm", {"step": 1, "total": 2, "backend": "fp32", "threads": 1, "gflops": 40.0})
    assert partial.startswith("GEMM at 1 thread:") and "at 1 thread," in step
