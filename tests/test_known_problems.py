"""KNOWN001 and resources/known_problems.json: valid data, every entry triggered and then fixed, real situations."""

from __future__ import annotations

import copy
import os
import re
from pathlib import Path

import pytest
import schema_tools
from conftest import machine_root
from fake_wheels import Venv, build_wheel
from packaging.specifiers import SpecifierSet

from cpudoctor.report_file import load_report
from cpudoctor.advisor import engine, known
from conftest import probe_tree
from cpudoctor.probes import probe_cpu
from cpudoctor.probes.software.envvars import filter_thread_env
from cpudoctor.model import BlasLib, PackageInfo, Software
from cpudoctor.probes.software.packages import probe_packages
from cpudoctor.model import Report
from cpudoctor.knowledge import FLAGS, KNOWN_PROBLEMS, MICROARCHITECTURES

DATA = KNOWN_PROBLEMS.data
PROBLEMS = {p["id"]: p for p in DATA["problems"]}
SCENARIOS = Path(__file__).parent / "fixtures" / "scenarios"


def test_the_file_validates_against_its_schema():
    schema_tools.validate(DATA, KNOWN_PROBLEMS.schema())


@pytest.mark.parametrize("problem", DATA["problems"], ids=lambda p: p["id"])
def test_every_entry_is_linked_evaluable_and_whole(problem):
    assert problem["links"] and problem["verified"]
    assert problem["why"].endswith(".") and problem["fix"].endswith(".")
    assert set(re.findall(r"{(\w+)}", problem["title"])) <= {"version", "cpus"}
    flags = set(FLAGS.entries)
    uarchs = set(MICROARCHITECTURES.data["uarchs"])
    for key, cond in problem["when"].items():
        assert key in known.CONDITIONS
        if "versions" in cond:
            SpecifierSet(cond["versions"])
        for flag in cond.get("flags_all", []) + cond.get("flags_any", []) + cond.get("flags_none", []):
            assert flag in flags, flag
        assert set(cond.get("uarch", [])) <= uarchs
        if "file_pattern" in cond:
            re.compile(cond["file_pattern"])
    assert [p["id"] for p in DATA["problems"]].count(problem["id"]) == 1


def _run(report: Report):
    return [f for f in engine.run_rules(report, only={"KNOWN001"}, strict=True) if f.severity != "ok"]


def _titles(report: Report) -> list[str]:
    return [f.title for f in _run(report)]


def _base(machine_scenario: str = "zen3-healthy") -> Report:
    return load_report(SCENARIOS / f"{machine_scenario}.json")


def _with_cpu(report: Report, machine: str) -> Report:
    report.cpu = probe_cpu(machine_root(machine))
    return report


def _set_pkg(report: Report, name: str, version: str) -> None:
    sw = report.software
    sw.packages = [p for p in sw.packages if p.name != name] + [PackageInfo(name, version)]
    if name == "torch":
        sw.torch.version = version


def _set_blas(report: Report, version: str, arch: str, filename: str = "libopenblasp-r0.so") -> None:
    report.software.loaded_libs = [BlasLib("blas", "openblas", filename, version, 8, "pthreads", arch)]
    report.software.numpy.blas = []


# id -> (machine scenario, corpus machine for the CPU or None, set the problem up, apply the printed fix)
CASES = {
    "openblas-avx512-dgemm-wrong-results": (
        "skylake-avx512-no-bf16-myths", None,
        lambda r: _set_blas(r, "0.3.5", "SkylakeX"), lambda r: _set_blas(r, "0.3.7", "SkylakeX")),
    "openblas-0.3.11-sgemm-skylakex": (
        "skylake-avx512-no-bf16-myths", None,
        lambda r: _set_blas(r, "0.3.11", "SkylakeX"), lambda r: _set_blas(r, "0.3.12", "SkylakeX")),
    "openblas-prescott-fallback": (
        "raptorlake-openblas-prescott", None,
        lambda r: None, lambda r: _set_blas(r, "0.3.25", "Haswell")),
    "openblas-pypi-num-threads-64": (
        "k10-container-quota", "hwloc-96em64t-4no4pa3ca2co",
        lambda r: (_set_blas(r, "0.3.27", "Haswell", "libscipy_openblas64_-ff651d7f.so"),
                   r.software.thread_env.clear(), setattr(r.topology.affinity, "cpu_quota", None),
                   setattr(r.topology.affinity, "usable_cpus", None)),
        lambda r: r.software.thread_env.update(OPENBLAS_NUM_THREADS="64")),
    "torch-int-mm-onednn-without-vnni": (
        "zen3-healthy", None, lambda r: _set_pkg(r, "torch", "2.5.1+cpu"), lambda r: _set_pkg(r, "torch", "2.6.0+cpu")),
    "torch-2.14-onednn-3.12.3-f16-reference-matmul": (
        "sapphirerapids-amx", None,
        lambda r: (r.cpu.flags.append("amx_fp16"), setattr(r.software.torch, "mkldnn_version", "3.12.3")),
        lambda r: setattr(r.software.torch, "mkldnn_version", "3.12.4")),
    "openvino-zen4-sigfpe-compile-model": (
        "zen4-aten-capability-forced", None,
        lambda r: _set_pkg(r, "openvino", "2025.4.1"), lambda r: _set_pkg(r, "openvino", "2025.2.0")),
    "numpy-1.19.4-windows-fmod": (
        "zen3-healthy", None,
        lambda r: (_set_pkg(r, "numpy", "1.19.4"), setattr(r.software.os, "system", "Windows")),
        lambda r: _set_pkg(r, "numpy", "1.19.3")),
}


def test_every_entry_has_a_case():
    assert set(CASES) == set(PROBLEMS)


@pytest.mark.parametrize("pid", sorted(CASES))
def test_entry_fires_then_its_fix_clears_it(pid):
    scenario, machine, setup, fix = CASES[pid]
    report = _base(scenario)
    if machine:
        collected = probe_tree(machine_root(machine), software=False)
        report.cpu, report.topology = collected.cpu, collected.topology
    setup(report)
    expected = PROBLEMS[pid]["title"].split("{")[0].strip()
    hits = [f for f in _run(report) if f.title.startswith(expected)]
    assert len(hits) == 1, (pid, _titles(report))
    assert PROBLEMS[pid]["links"][0] in hits[0].why and hits[0].severity == PROBLEMS[pid]["severity"]
    fixed = copy.deepcopy(report)
    fix(fixed)
    assert not [t for t in _titles(fixed) if t.startswith(expected)], pid


def test_captured_tree_stays_silent_on_versions(corpus):
    """No package versions in a captured tree: entries that need them are not guessed."""
    report = probe_tree(machine_root("archspec-rocky8.5-zen4"), software=True)
    assert _run(report) == []


# ------------------------------------------------------------------ real situations

@pytest.mark.slow
@pytest.mark.alongside
def test_openvino_regression_on_zen4_from_a_real_install_then_the_printed_fix(tmp_path, corpus):
    """pip installs OpenVINO 2025.3.0 (a fake wheel, real metadata) for a Zen 4 CPU; the printed pin clears it."""
    wheels = tmp_path / "wheels"
    for version in ("2025.2.0", "2025.3.0"):
        build_wheel(wheels, "openvino", version)
    venv = Venv(tmp_path / "venv", wheels)
    assert venv.shell("python -m pip install openvino==2025.3.0").returncode == 0

    def report() -> Report:
        r = probe_tree(machine_root("archspec-rocky8.5-zen4"), software=False)
        r.software = Software(packages=probe_packages(venv.distributions()))
        return r

    hit = [f for f in _run(report()) if "OpenVINO 2025.3.0" in f.title]
    assert hit and "35943" in hit[0].why
    fixed = venv.shell(hit[0].snippet)                     # python -m pip install 'openvino<2025.3', as printed
    assert fixed.returncode == 0, fixed.stderr
    assert not [f for f in _run(report()) if "OpenVINO" in f.title]


@pytest.mark.slow
@pytest.mark.alongside
def test_pypi_openblas_on_a_96_cpu_machine_then_the_printed_cap(corpus):
    """The OpenBLAS this venv's NumPy really loads (threadpoolctl), on a 96-CPU machine's topology."""
    import numpy  # noqa: F401 - loads its OpenBLAS so threadpoolctl can see it
    import threadpoolctl

    libs = [BlasLib(**{k: info.get(k) for k in BlasLib.__dataclass_fields__ if k != "library"},
                    library=os.path.basename(info.get("filepath", "")))
            for info in threadpoolctl.threadpool_info() if info.get("internal_api") == "openblas"]
    if not libs or not re.search(PROBLEMS["openblas-pypi-num-threads-64"]["when"]["library"]["file_pattern"],
                                 libs[0].library):
        pytest.skip("this NumPy does not load the PyPI wheels' OpenBLAS")
    report = probe_tree(machine_root("hwloc-96em64t-4no4pa3ca2co"), software=False)
    env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS")}
    report.software = Software(loaded_libs=libs, thread_env=filter_thread_env(env), children_ran=True)
    hit = [f for f in _run(report) if "64 threads" in f.title]
    assert hit and hit[0].snippet == "export OPENBLAS_NUM_THREADS=64" and "96 CPUs" in hit[0].title
    env["OPENBLAS_NUM_THREADS"] = hit[0].snippet.split("=", 1)[1]   # the printed export, applied
    report.software.thread_env = filter_thread_env(env)
    assert not [f for f in _run(report) if "64 threads" in f.title]
