"""One place builds pip commands, so PyTorch always comes from its CPU wheel index (issue 26).

ISA004's generic "reinstall in a fresh venv" printed a bare ``pip install torch``: on Linux that pulls the
multi-GB CUDA build TORCH002 tells people to remove. Every pip line any finding prints for a distribution of
PyTorch's family, on every corpus machine and scenario (and in the crash situations that name torch), must carry
the CPU index of resources/torch_wheels.json for the report's OS, and only advisor/torch_install.py builds it.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from conftest import MACHINES, machine_root, probe_tree
from fake_wheels import Venv, build_wheel

from cpudoctor import advisor
from cpudoctor.advisor.torch_install import Platform, cpu_index, is_torch, pip_install, platform_of
from cpudoctor.advisor.torch_setup import install_command
from cpudoctor.kits.child.runner import ChildSpec, run_child
from cpudoctor.model import ImportCheck, IsaRisk
from cpudoctor.probes.child.scripts import script_argv
from cpudoctor.probes.software.importcheck import to_import_check
from cpudoctor.report_file import load_report

REPO = Path(__file__).resolve().parents[1]
SCENARIOS = sorted((REPO / "tests" / "fixtures" / "scenarios").glob("*.json"))
_PIP = re.compile(r"\bpip\d?(?:\.exe)? install\b")


def _torch_pip_lines(findings) -> list[tuple[str, str]]:
    """(code, line) for every printed line that pip-installs a distribution of PyTorch's family."""
    out = []
    for f in findings:
        for line in f"{f.snippet}\n{f.fix}".splitlines():
            command = line.split("#")[0]
            if _PIP.search(command) and any(is_torch(w.strip("'\"")) for w in command.split()):
                out.append((f.code, command.strip()))
    return out


def _check(report, findings) -> None:
    index = cpu_index(platform_of(report))
    for code, line in _torch_pip_lines(findings):
        if index:
            assert f"--index-url {index}" in line, (code, line)
        else:
            assert "--index-url" not in line, (code, line)


def _with_torch_failures(report):
    """The report as the doctor sees torch fail: an import error, a crash after import, an ISA-floor risk."""
    sw = report.software
    sw.children_ran = True
    sw.import_checks = [ImportCheck("torch", "torch", "error", message="ImportError: libtorch_cpu.so: cannot open"),
                        ImportCheck("torchvision", "torchvision", "ok", workload_status="crashed",
                                    signal_name="SIGILL"),
                        ImportCheck("torchaudio", "torchaudio", "ok", workload_status="error")]
    sw.isa_risks = [*sw.isa_risks, IsaRisk("torch", True, "1.6.0", ["avx"], ["avx"], True, status="at_risk",
                                           confidence="documented", safe_versions=None)]
    return report


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.stem)
def test_every_torch_pip_line_of_every_scenario_uses_the_cpu_index(path):
    report = load_report(path)
    _check(report, advisor.diagnose(report))
    if report.software is not None:
        _check(report, advisor.diagnose(_with_torch_failures(report)))


@pytest.mark.parametrize("name", MACHINES)
def test_every_torch_pip_line_on_corpus_machines_uses_the_cpu_index(name):
    report = probe_tree(machine_root(name), software=True)
    _check(report, advisor.diagnose(_with_torch_failures(report)))


def test_the_commands_agree_between_the_training_page_and_the_findings():
    for os_name, arch in (("Linux", "x86_64"), ("Linux", "aarch64"), ("Windows", "x86_64"), ("Darwin", "arm64"),
                          ("Darwin", "x86_64")):
        page, source = install_command(os_name, arch, None)
        finding = pip_install(["torch"], Platform(os_name, arch), pip="PIP")
        assert finding.split("PIP ", 1)[1] in page, (os_name, arch, page, finding)
        assert (source.get("index") is not None) == ("--index-url" in page)
    assert pip_install(["torch"], Platform("Darwin", "x86_64")).endswith("torch==2.2.2")   # the last Intel Mac build
    assert pip_install(["torch"], Platform("Linux", "riscv64")) == ""                      # no official build


def test_only_torch_install_builds_an_index_url():
    builders = [p.relative_to(REPO).as_posix() for folder in ("advisor", "cpudoctor", "gui", "lab", "probes")
                for p in (REPO / folder).rglob("*.py") if "--index-url" in p.read_text(encoding="utf-8")]
    assert builders == ["advisor/torch_install.py"]


@pytest.mark.hardware
@pytest.mark.slow
@pytest.mark.alongside
def test_isa004_fresh_venv_for_a_torch_that_fails_to_import_installs_the_cpu_build(tmp_path):
    """A real failing ``import torch`` (a broken install), the printed fresh-venv fix run as printed."""
    wheels = tmp_path / "wheels"
    build_wheel(wheels, "torch", "2.5.0", {"torch/__init__.py":
                b"raise ImportError('libtorch_cpu.so: cannot open shared object file: No such file or directory')\n"})
    broken = Venv(tmp_path / "broken", wheels)
    assert broken.shell("python -m pip install torch==2.5.0").returncode == 0
    result = run_child(ChildSpec(script_argv("import_check", "torch", python=str(broken.bin / "python")),
                                 what="import torch", timeout=120))
    check = to_import_check("torch", "torch", result)
    assert check.status == "error" and "libtorch_cpu" in check.message

    report = probe_tree(software=True)
    report.software.import_checks = [check]
    report.software.children_ran = True
    [finding] = [f for f in advisor.diagnose(report, only={"ISA004"}) if f.severity != "ok"]
    index = cpu_index(platform_of(report))
    assert f"pip install torch --index-url {index}" in finding.snippet, finding.snippet

    # The printed lines, run as printed in a fresh folder (pip is offline on the wheel folder: the index
    # URL is accepted and the good build found there).
    build_wheel(wheels, "torch", "2.5.1")
    (wheels / "torch-2.5.0-py3-none-any.whl").unlink()
    run = subprocess.run(["bash", "-c", finding.snippet + "\npython -c 'import torch'"], cwd=tmp_path,
                         env=broken.env(), capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-800:]
    assert list((tmp_path / "fresh-env").glob("lib/python*/site-packages/torch-2.5.1.dist-info"))
