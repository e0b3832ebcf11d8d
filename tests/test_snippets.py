"""Snippet generators: real shells parse what we print, and CPU lists match the topology."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from cpudoctor.report_file import load_report
from cpudoctor.advisor import snippets
from cpudoctor.advisor.engine import run_rules
from cpudoctor.kits.cpulist import parse_cpulist
from cpudoctor.model import Report, ThreadRecommendation

SCENARIOS = Path(__file__).parent / "fixtures" / "scenarios"
ALL = sorted(SCENARIOS.glob("*.json"))
# One multi-NUMA Intel, one multi-CCX AMD (hand-made L3 sets), one Kunpeng ARM, one plain zen3.
VARIED = ["cascadelake-2s-two-openmp", "ryzen2700x-cuda-wheel", "kunpeng-arm-numa", "zen3-healthy",
          "k10-container-quota", "ryzen2700x-sweep-recommends-one-ccx"]


def _load(name: str) -> Report:
    return load_report(SCENARIOS / f"{name}.json")


def _bash_n(text: str, tmp_path: Path, shell: str = "bash") -> None:
    path = tmp_path / "snippet.sh"
    path.write_text(text)
    res = subprocess.run([shell, "-n", str(path)], capture_output=True, text=True, timeout=20)
    assert res.returncode == 0, f"{shell} -n failed:\n{res.stderr}\n---\n{text}"


# ------------------------------------------------------------------ bash

@pytest.mark.parametrize("path", ALL, ids=lambda p: p.stem)
def test_every_bash_snippet_of_every_scenario_parses(path, tmp_path):
    report = load_report(path)
    for f in run_rules(report, strict=True):
        if f.snippet and f.snippet_lang == "bash":
            _bash_n(f.snippet, tmp_path)


@pytest.mark.parametrize("name", VARIED)
def test_generated_shell_code_parses(name, tmp_path):
    r = _load(name)
    _bash_n(snippets.shell_exports(r, "bash"), tmp_path)
    _bash_n(snippets.shell_exports(r, "bash", pinned=True), tmp_path)
    _bash_n(snippets.install_commands(r), tmp_path)
    _bash_n(snippets.pinned_launches(r) or ":", tmp_path)
    _bash_n(snippets.launch_script(r, "bash"), tmp_path)
    _bash_n(snippets.launch_script(r, "zsh"), tmp_path, "dash")  # POSIX subset; zsh itself may be absent
    compile(snippets.python_settings(r).replace("dataset,", "[],"), "<python_settings>", "exec")


def test_bash_launch_script_runs_and_sets_the_threads(tmp_path):
    """Execute the saved script for real: it exports the counts and runs the given program."""
    r = _load("zen3-healthy")
    script = tmp_path / "launch.sh"
    script.write_text(snippets.launch_script(r, "bash"))
    script.chmod(0o755)
    probe = tmp_path / "probe.py"
    probe.write_text("import os; print(os.environ['OMP_NUM_THREADS'], os.environ['MKL_NUM_THREADS'])\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMP_", "MKL_"))}
    env["PYTHON"] = shutil.which("python3") or "python3"
    res = subprocess.run([str(script), str(probe)], capture_output=True, text=True, env=env, timeout=30)
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == ["16", "16"]  # Ryzen 9 5950X: 16 physical cores
    usage = subprocess.run([str(script)], capture_output=True, text=True, env=env, timeout=30)
    assert usage.returncode == 2 and "usage" in usage.stderr


# ------------------------------------------------------------------ fish / PowerShell / cmd

def _fish_sanity(text: str) -> None:
    assert "export " not in text and "$(" not in text and "${" not in text
    opens = sum(1 for line in text.splitlines() if re.match(r"\s*(if|for|while|function|begin)\b", line))
    ends = sum(1 for line in text.splitlines() if line.strip() == "end")
    assert opens == ends


@pytest.mark.parametrize("name", VARIED)
def test_fish(name, tmp_path):
    r = _load(name)
    for text in (snippets.shell_exports(r, "fish"), snippets.launch_script(r, "fish")):
        _fish_sanity(text)
        if shutil.which("fish"):
            path = tmp_path / "s.fish"
            path.write_text(text)
            res = subprocess.run(["fish", "--no-execute", str(path)], capture_output=True, text=True, timeout=20)
            assert res.returncode == 0, res.stderr + "\n" + text


def _powershell_sanity(text: str) -> None:
    for line in text.splitlines():
        s = line.strip()
        if not s or s.startswith("#"):
            continue
        assert not s.startswith(("export ", "set ", "unset ")), s
        assert s.count("'") % 2 == 0 and s.count('"') % 2 == 0, s
        assert s.count("{") == s.count("}") and s.count("(") == s.count(")"), s
    for m in re.finditer(r"^\$env:(\w+) = '([^']*)'$", text, re.M):
        assert m.group(1).isupper()


@pytest.mark.parametrize("name", VARIED)
def test_powershell_and_cmd(name):
    r = _load(name)
    ps = snippets.shell_exports(r, "powershell")
    _powershell_sanity(ps)
    assert re.search(r"^\$env:OMP_NUM_THREADS = '\d+'$", ps, re.M)
    _powershell_sanity(snippets.launch_script(r, "powershell"))
    if shutil.which("pwsh"):
        res = subprocess.run(["pwsh", "-NoProfile", "-Command", ps], capture_output=True, text=True, timeout=60)
        assert res.returncode == 0, res.stderr
    cmd = snippets.launch_script(r, "cmd")
    assert cmd.startswith("@echo off\r\n") and cmd.endswith("\r\n")
    assert re.search(r"^set OMP_NUM_THREADS=\d+\r$", cmd, re.M)


def test_windows_affinity_mask_matches_the_cpus():
    r = _load("ryzen2700x-sweep-recommends-one-ccx")
    assert "/affinity F " in snippets.launch_script(r, "cmd")            # CPUs 0-3
    assert "[IntPtr]0xF" in snippets.launch_script(r, "powershell")
    from cpudoctor.advisor import winpin

    assert winpin.windows_pin([0, 64], None).absolute_mask is None         # two processor groups: no one mask


def test_unknown_shell_is_a_clear_error():
    with pytest.raises(ValueError, match="fish"):
        snippets.shell_exports(_load("zen3-healthy"), "tcsh")
    assert snippets.normalise_shell("pwsh") == "powershell"


# ------------------------------------------------------------------ numbers from the report

def test_threads_come_from_the_recommendation_first():
    r = _load("zen3-healthy")
    assert snippets.thread_plan(r).threads == 16            # usable physical cores
    r.recommendation = ThreadRecommendation(threads=12, interop_threads=2, variant="all cores, no SMT")
    plan = snippets.thread_plan(r)
    assert (plan.threads, plan.interop) == (12, 2)
    assert "export OMP_NUM_THREADS=12" in snippets.shell_exports(r)
    py = snippets.python_settings(r)
    assert "torch.set_num_threads(12)" in py and "torch.set_num_interop_threads(2)" in py


def test_threads_respect_quota_and_cpuset(manifest):
    assert snippets.thread_plan(_load("k10-container-quota")).threads == 4
    cg = _load("k10-cgroup-cpuset")
    allowed = cg.topology.affinity.allowed_cpus
    assert snippets.thread_plan(cg).threads == len(allowed) == cg.topology.affinity.usable_cpus


def _cpus_of_command(cmd: str, numa: dict[int, list[int]]) -> list[int]:
    """The CPUs a taskset/numactl command line confines the job to."""
    if m := re.search(r"taskset -c (\S+) ", cmd):
        return parse_cpulist(m.group(1))
    if m := re.search(r"--physcpubind=(\S+) ", cmd):
        return parse_cpulist(m.group(1))
    m = re.search(r"--cpunodebind=(\S+) --membind=(\S+) ", cmd)
    assert m and m.group(1) == m.group(2), cmd
    return sorted(c for node in parse_cpulist(m.group(1)) for c in numa[node])


@pytest.mark.parametrize("name", ["cascadelake-2s-two-openmp", "kunpeng-arm-numa", "ryzen2700x-cuda-wheel"])
def test_pinned_cpu_lists_match_the_topology(name, manifest):
    r = _load(name)
    targets = snippets.pin_targets(r)
    numa = {n.id: sorted(n.cpus) for n in r.topology.numa_nodes if n.cpus}
    l3 = [sorted(d.cpus) for d in r.topology.l3_domains]
    text = snippets.pinned_launches(r)
    for t in targets:
        if t.kind == "numa":
            assert t.cpus == numa[t.index]
            assert f"numactl --cpunodebind={t.index} --membind={t.index}" in text
        else:
            assert t.cpus == l3[t.index]
            assert _cpus_of_command(snippets.pinned_command(r, t), numa) == l3[t.index]
    assert len([t for t in targets if t.kind == "numa"]) == (len(numa) if len(numa) > 1 else 0)
    machine = r.to_dict().get("meta", {}).get("root", "").split("/")[-1]
    truth = manifest["machines"].get(machine, {}).get("ground_truth")
    if truth and truth.get("numa_nodes_detail"):
        expected = {n["os_index"]: parse_cpulist(n["pus"]) for n in truth["numa_nodes_detail"]}
        got = {t.index: t.cpus for t in targets if t.kind == "numa"}
        assert got == expected


def test_install_commands_follow_os_manager_and_build():
    r = _load("ryzen2700x-cuda-wheel")
    pip = snippets.install_commands(r)
    assert pip.splitlines()[0] == "python -m pip uninstall -y torch"
    assert pip.endswith("--index-url https://download.pytorch.org/whl/cpu")
    r.software.python.env_kind = "conda"
    assert "conda install --yes -c conda-forge pytorch-cpu" in snippets.install_commands(r)
    r.software.python.env_kind = "venv"
    r.software.os.system = "Windows"
    win = snippets.install_commands(r)
    assert win.startswith("py -m pip uninstall") and "grep" not in win
    r.software.os.system = "Darwin"
    assert "--index-url" not in snippets.install_commands(r).splitlines()[-1]


def test_workers_use_spare_cpus_only():
    r = _load("zen3-healthy")                       # 16 cores, 32 threads
    assert snippets.thread_plan(r).workers == 4
    r.recommendation = ThreadRecommendation(threads=32)
    plan = snippets.thread_plan(r)
    assert plan.workers == 0 and plan.notes
    assert "num_workers=0" in snippets.python_settings(r)


def test_translate_rewrites_exports_for_each_shell(tmp_path):
    bash = ("# 4 threads\nexport OMP_NUM_THREADS=4\nexport OMP_PLACES=cores OMP_PROC_BIND=close\n"
            "unset TORCH_LOOP_CORE_PINNING\nexport LD_PRELOAD=\"$(ldconfig -p | head -1)\"\nnumactl -N 0 python t.py")
    assert snippets.translate(bash, "zsh") == bash
    fish = snippets.translate(bash, "fish")
    assert "set -gx OMP_PLACES cores\nset -gx OMP_PROC_BIND close" in fish and "set -e TORCH_LOOP_CORE_PINNING" in fish
    assert "numactl -N 0 python t.py" in fish
    ps = snippets.translate(bash, "powershell")
    assert "$env:OMP_NUM_THREADS = '4'" in ps and "Remove-Item Env:TORCH_LOOP_CORE_PINNING" in ps
    assert 'export LD_PRELOAD="$(ldconfig' in ps  # command substitutions are left alone, not mangled
    cmd = snippets.translate(bash, "cmd")
    assert cmd.startswith("rem 4 threads") and "set OMP_NUM_THREADS=4" in cmd and "set TORCH_LOOP_CORE_PINNING=" in cmd
    if shutil.which("fish"):
        path = tmp_path / "t.fish"
        path.write_text(snippets.translate("export A=1\nunset B", "fish"))
        assert subprocess.run(["fish", "--no-execute", str(path)]).returncode == 0


def test_big_machine_leaves_cores_for_dataloader_workers(corpus):
    """96 cores without SMT: not num_workers=0 with 96 compute threads, but a few cores for the workers."""
    from conftest import machine_root
    from cpudoctor.advisor.snippets import python_settings, thread_plan
    from cpudoctor.probes import probe_cpu
    from cpudoctor.probes import probe_topology
    from cpudoctor.model import Report, ThreadRecommendation

    root = machine_root("hwloc-96em64t-4no4pa3ca2co")
    report = Report(cpu=probe_cpu(root), topology=probe_topology(root))
    plan = thread_plan(report)
    assert plan.workers == 4 and plan.threads == 92
    assert "num_workers=4" in python_settings(report)
    report.recommendation = ThreadRecommendation(threads=96)        # a measured sweep is kept as it is
    assert thread_plan(report).threads == 96


# ------------------------------------------------------------------ hybrid CPUs (P/E cores)

def _topo003_launch(report: Report) -> tuple[int, list[int]]:
    """OMP_NUM_THREADS and the taskset CPUs of rule TOPO003's snippet."""
    topo = next(f for f in run_rules(report) if f.code == "TOPO003")
    m = re.search(r"OMP_NUM_THREADS=(\d+) taskset -c (\S+) ", topo.snippet)
    assert m, topo.snippet
    return int(m.group(1)), parse_cpulist(m.group(2))


def test_hybrid_plan_uses_the_performance_cores_like_topo003(tmp_path):
    """i7-1370P: 6 P-cores with SMT (CPUs 0-11) + 8 E-cores. Not 14 threads over both kinds, as TOPO003 warns."""
    r = _load("raptorlake-hybrid-threads-unset")
    kinds = r.topology.cpu_kinds
    p_cpus, e_cpus = kinds[-1].cpus, kinds[0].cpus
    assert (p_cpus, e_cpus) == (list(range(12)), list(range(12, 20)))
    plan = snippets.thread_plan(r)
    assert (plan.threads, plan.cpus, plan.worker_cpus) == (6, p_cpus, e_cpus)
    assert _topo003_launch(r) == (plan.threads, plan.cpus)
    assert any("TOPO003" in n and "efficiency cores (CPUs 12-19)" in n for n in plan.notes)
    # THR001's fix and snippet say the same: 6 threads, pinned to CPUs 0-11.
    thr = next(f for f in run_rules(r) if f.code == "THR001")
    assert "to 6 before Python starts as a start, launched pinned to CPUs 0-11" in thr.fix
    assert "export OMP_NUM_THREADS=6" in thr.snippet and "taskset -c 0-11 python train.py" in thr.snippet
    _bash_n(thr.snippet, tmp_path)
    # The launch script pins to the same CPUs with the same count.
    script = snippets.launch_script(r, "bash")
    _bash_n(script, tmp_path)
    assert "export OMP_NUM_THREADS=6" in script and 'exec taskset -c 0-11 "$PYTHON" "$@"' in script
    assert "# Pinned to performance cores (CPUs 0-11)." in script
    # Windows: the same P-cores as an affinity mask (CPUs 0-11 = 0xFFF).
    assert "[IntPtr]0xFFF" in snippets.launch_script(r, "powershell")


@pytest.mark.hardware
def test_hybrid_dataloader_workers_move_to_the_efficiency_cores():
    """taskset's mask is inherited by forked workers: the Python settings move them to the E-cores."""
    r = _load("raptorlake-hybrid-threads-unset")
    py = snippets.python_settings(r)
    compile(py, "settings.py", "exec")
    assert "EFFICIENCY_CORES = {12, 13, 14, 15, 16, 17, 18, 19}" in py
    assert "worker_init_fn=to_efficiency_cores," in py and "num_workers=4," in py
    assert "torch.set_num_threads(6)" in py
    # The function really moves the calling process (run it on this machine's own CPUs).
    if hasattr(os, "sched_setaffinity"):
        before = os.sched_getaffinity(0)
        mine = sorted(before)[:1]
        code = py.split("torch.set_num_threads")[0].replace("import torch", "")
        code = re.sub(r"EFFICIENCY_CORES = \{[^}]*\}", f"EFFICIENCY_CORES = {set(mine)}", code)
        ns: dict = {}
        exec(code, ns)
        try:
            ns["to_efficiency_cores"](0)
            assert os.sched_getaffinity(0) == set(mine)
        finally:
            os.sched_setaffinity(0, before)


def test_measured_sweep_wins_over_the_hybrid_default():
    r = _load("raptorlake-hybrid-sweep-all-cores")          # the sweep measured 14 threads, unpinned, as best
    plan = snippets.thread_plan(r)
    assert (plan.threads, plan.cpus, plan.worker_cpus) == (14, None, None)
    assert "thread sweep" in plan.source and not any("TOPO003" in n for n in plan.notes)
    assert "taskset" not in snippets.shell_exports(r) and "to_efficiency_cores" not in snippets.python_settings(r)
    topo = next(f for f in run_rules(r) if f.code == "TOPO003")
    assert topo.severity == "ok" and "measured 14 threads" in topo.title
    # A sweep that chose a set of its own is pinned to that set, not to the P-cores.
    r.recommendation = ThreadRecommendation(threads=4, cpus=[0, 2, 4, 6], variant="performance cores, 4 threads")
    plan = snippets.thread_plan(r)
    assert (plan.threads, plan.cpus) == (4, [0, 2, 4, 6])


def test_hybrid_plan_on_other_chips(corpus):
    """Lakefield (one P-core) keeps every core; the GB10 pins to its Cortex-X925s; a uniform chip is not pinned."""
    from conftest import machine_root

    from conftest import probe_tree

    lakefield = probe_tree(machine_root("hwloc-x86linux-5intel64-hybrid-lakefield"), software=False)
    plan = snippets.thread_plan(lakefield)
    assert (plan.threads, plan.cpus) == (5, None)
    gb10 = probe_tree(machine_root("hwloc-nvidia-dgx-gb10"), software=False)
    plan = snippets.thread_plan(gb10)
    assert plan.threads == 10 and plan.cpus == gb10.topology.cpu_kinds[-1].cpus == [5, 6, 7, 8, 9, 15, 16, 17, 18, 19]
    assert _topo003_launch(gb10) == (plan.threads, plan.cpus)
    assert snippets.thread_plan(_load("zen3-healthy")).cpus is None


def test_pinned_launches_have_real_windows_equivalents():
    """PowerShell and cmd are not told `OMP_NUM_THREADS=8 numactl ...`: start /affinity, start /node, ProcessorAffinity."""
    line = "OMP_NUM_THREADS=8 taskset -c 0-7 python train.py --epochs 3"
    cmd = snippets.translate(line, "cmd").splitlines()
    assert cmd == ["set OMP_NUM_THREADS=8", 'start "" /b /wait /affinity FF python train.py --epochs 3']
    ps = snippets.translate(line, "powershell")
    assert "$env:OMP_NUM_THREADS = '8'" in ps and "taskset" not in ps
    assert "Start-Process -FilePath 'python' -ArgumentList 'train.py --epochs 3'" in ps
    assert "$p.ProcessorAffinity = [IntPtr]0xFF" in ps and "$p.WaitForExit()" in ps
    node = "OMP_NUM_THREADS=16 numactl --cpunodebind=1 --membind=1 python train.py"
    assert snippets.translate(node, "cmd").splitlines()[-1] == 'start "" /b /wait /node 1 python train.py'
    assert "/node 1" in snippets.translate(node, "powershell") and "numactl" not in snippets.translate(node, "powershell")
    part = snippets.translate("OMP_NUM_THREADS=4 numactl --physcpubind=0-3 --membind=0 python t.py", "cmd")
    assert "/affinity F " in part and part.count("rem ") == 1            # memory placement explained
    far = snippets.translate("OMP_NUM_THREADS=8 taskset -c 0-7,64-71 python t.py", "powershell")
    assert "processor group" in far and "ProcessorAffinity" not in far   # no mask can say CPU 64+
    plain = snippets.translate('OMP_NUM_THREADS=4 GOMP_CPU_AFFINITY="0 1 2 3" python t.py', "cmd").splitlines()
    assert plain == ["set OMP_NUM_THREADS=4", "set GOMP_CPU_AFFINITY=0 1 2 3", "python t.py"]
    assert snippets.translate("numactl -N 0 python t.py", "fish") == "numactl -N 0 python t.py"
    piped = "python -m pip list --format=freeze | grep -o '^nvidia-[^=]*' | xargs -r python -m pip uninstall -y"
    assert snippets.translate(piped, "powershell") == (                           # Windows' own pipeline (issue 26)
        "python -m pip list --format=freeze | Select-String -Pattern '^nvidia-[^=]*' | "
        "ForEach-Object { python -m pip uninstall -y $_.Matches[0].Value }")
    assert snippets.translate(piped, "cmd") == (
        'for /f "delims==" %p in (\'python -m pip list --format^=freeze ^| findstr /b "nvidia-"\') '
        "do python -m pip uninstall -y %p")
    for name in ("zen5-smt-threads", "cascadelake-2s-numa-pinned", "raptorlake-hybrid-pinned"):
        r = _load(name)
        for f in run_rules(r):
            for shell in ("cmd", "powershell"):
                text = snippets.translate(f.snippet, shell) if f.snippet_lang == "bash" else ""
                assert not re.search(r"^\s*(?:\w+=\S+\s+)+(?:taskset|numactl)\b", text, re.M), (f.code, shell, text)


def test_fish_launch_script_prints_its_own_name(tmp_path):
    text = snippets.launch_script(_load("zen3-healthy"), "fish")
    assert '"usage: "(status filename)" SCRIPT.py' in text
    if shutil.which("fish"):
        path = tmp_path / "launch.fish"
        path.write_text(text)
        res = subprocess.run(["fish", str(path)], capture_output=True, text=True, timeout=30)
        assert res.returncode == 2 and str(path) in res.stderr and "(status filename)" not in res.stderr


def test_conda_cuda_build_is_replaced_with_the_conda_package_names():
    r = _load("ryzen2700x-cuda-wheel")
    torch_pkg = next(p for p in r.software.packages if p.name == "torch")
    r.software.python.env_kind = "conda"
    torch_pkg.installer = "conda"
    conda = snippets.install_commands(r)
    assert conda.splitlines()[0].startswith("conda remove --yes pytorch") and "pytorch-cuda" in conda
    assert " torch " not in f" {conda.splitlines()[0]} "                      # conda calls it pytorch
    torch_pkg.installer = "pip"                                              # pip install inside a conda env
    pip = snippets.install_commands(r)
    commands = [line for line in pip.splitlines() if not line.startswith("#")]
    assert not any(line.startswith("conda") for line in commands) and "python -m pip uninstall -y torch" in commands
    torch_pkg.installer = None                                               # an older report: conda assumed
    assert snippets.install_commands(r).startswith("conda remove --yes pytorch")
