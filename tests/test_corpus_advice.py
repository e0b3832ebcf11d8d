"""The advisor on every corpus machine, as ``cpudoctor report --root`` builds it: no wrong advice.

A captured tree carries only file-based facts; the Python, packages and
environment of the machine running CPU Doctor say nothing about it, so rules
that need them stay silent instead of claiming "not installed" / "not set".
"""

from __future__ import annotations

import pytest
from conftest import MACHINES, machine_root, probe_tree

from cpudoctor import advisor

_REPORTS: dict = {}


def _report(name: str):
    if name not in _REPORTS:
        _REPORTS[name] = probe_tree(machine_root(name))
    return _REPORTS[name]


def _findings(name: str):
    return advisor.diagnose(_report(name))


@pytest.mark.parametrize("name", MACHINES)
def test_captured_tree_is_marked_and_env_rules_stay_silent(name):
    report = _report(name)
    assert report.software is not None and report.software.captured
    codes = {f.code for f in _findings(name) if f.severity != "ok"}
    # Python/env of this process are not the captured machine's: no "torch missing", no "OMP unset".
    assert not codes & {"TORCH001", "THR001"}, codes


@pytest.mark.parametrize("name", MACHINES)
def test_no_none_or_wrong_isa_claims(name):
    report = _report(name)
    for f in _findings(name):
        for text in (f.title, f.why or "", f.fix or ""):
            assert "None" not in text, (f.code, text)
        if f.code == "ISA001" and not (report.cpu.isa.avx2 and report.cpu.isa.fma):
            assert "AVX2 kernels are the best" not in f.title, f.title  # Opterons, Core 2, Westmere: no AVX2 kernels either


def test_k10_l3_size_is_exact_and_not_called_infinity_fabric(manifest):
    """Magny-Cours L3 is 5118 KiB: never floor it to '4 MiB'; K10 has HyperTransport, not IF."""
    name = "hwloc-32amd64-4s2n4c-cgroup2"
    assert manifest["machines"][name]["ground_truth"]["l3_size_kib_exact"] in (5118, [5118])
    f = next(f for f in _findings(name) if f.code == "TOPO002")
    assert "5118 KiB each" in f.why
    assert "Infinity Fabric" not in f.why and "CCX" not in f.title
    assert "HyperTransport" in f.why


def test_asymmetric_l3_sizes_read_naturally():
    """GB10: one 8 MiB and one 16 MiB L3, 10 CPUs each."""
    f = next(f for f in _findings("hwloc-nvidia-dgx-gb10") if f.code == "TOPO002")
    assert "(8 MiB and 16 MiB)" in f.why and "10 CPUs per L3" in f.why


def test_bulldozer_isa001_names_the_default_kernels():
    """Running DEFAULT kernels is not a pass (issue 15): a suggestion, not a warning (nothing to fix in software)."""
    f = next(f for f in _findings("hwloc-64amd64-4s2n4ca2co") if f.code == "ISA001")
    assert f.severity == "info" and "DEFAULT" in f.title


@pytest.mark.hardware
def test_live_report_still_gets_env_rules():
    """The live machine is not captured: THR001/TORCH001 keep working there."""
    report = probe_tree(software=True)
    assert not report.software.captured
    assert "TORCH001" in {f.code for f in advisor.diagnose(report)}


def _cli(capsys, *argv: str) -> tuple[int, str]:
    from cpudoctor.cli import main

    code = main(list(argv))
    return code, capsys.readouterr().out


def test_doctor_verbose_evidence_says_unknown_not_none(capsys):
    code, out = _cli(capsys, "doctor", "-v", "--root", str(machine_root("archspec-rocky9-zen5")))
    assert code == 0 and "Evidence:" in out
    assert ": None" not in out and ": True" not in out and ": False" not in out and "=None" not in out
    assert "hypervisor: no" in out and "cpu.hypervisor" not in out        # the field in words (issue 40 item 9)


def test_quick_report_does_not_claim_numpy_has_no_simd(capsys):
    code, out = _cli(capsys, "report", "--fast")
    assert code == 0
    line = next((ln for ln in out.splitlines() if ln.strip().startswith("numpy ") and ":" in ln), None)
    if line is not None:  # numpy is installed in the test venv
        assert "SIMD features not read (quick probe)" in line and "none" not in line


def test_doctor_header_counts_in_singular(capsys):
    """A one-entry cpuinfo dump: '1 thread', never '1 threads'."""
    code, out = _cli(capsys, "doctor", "--root", str(machine_root("archspec-ubuntu22.04-neoverse_v2")))
    assert code == 0 and "· 1 thread" in out.splitlines()[0] and "1 threads" not in out


def test_pin_target_labels_are_exact_and_short():
    """Cascade Lake SNC: 27.5 MiB L3s (not '27 MiB'), interleaved CPU sets as 'N CPUs: a-b step k'."""
    from cpudoctor.advisor.snippets import pin_targets

    labels = [t.label for t in pin_targets(_report("hwloc-memorysidecaches"))]
    assert "NUMA node 0 (20 CPUs: 0-76 step 4)" in labels
    assert "L3 domain 1 (40 CPUs: 1-79 step 2, 27.5 MiB L3)" in labels
    # K10 Opteron: an L3 per die is not a CCX (NUMA nodes dropped so the L3 targets are listed themselves).
    import copy

    k10 = copy.deepcopy(_report("hwloc-48amd64-4pa2n6c-sparse"))
    k10.topology.numa_nodes = []
    labels = [t.label for t in pin_targets(k10)]
    assert "L3 domain 0 (CPUs 0-5, 5118 KiB L3)" in labels and not any("CCX" in label for label in labels)


def test_cpus_of_an_offline_numa_node_are_not_called_one_clean_node(manifest):
    """offline-cpu0-node0: node 0 is offline, so package 0's CPUs have no local memory (corpus caveat 2)."""
    name = "hwloc-offline-cpu0-node0"
    assert manifest["machines"][name]["ground_truth"]["numa_nodes"] == 1
    f = next(f for f in _findings(name) if f.code == "TOPO001")
    assert f.severity == "warning" and f.title.startswith("9 of 17 CPUs have no local memory")
    assert "CPUs 4,6,8,10,12,14,16,18,20 belong to no online NUMA node" in f.why
    assert "numactl --cpunodebind=1 --membind=1" in f.snippet and "OMP_NUM_THREADS=8" in f.snippet
    # Every other corpus machine: no such claim.
    for other in MACHINES:
        if other != name:
            assert not any("no local memory" in g.title for g in _findings(other)), other


# Every warning or error the plain corpus machines get, each justified by the machine's ground truth.
JUSTIFIED = {
    ("hwloc-offline-cpu0-node0", "TOPO001"),                  # node 0 is offline: 9 CPUs without local memory
    ("pycpuinfo-fedora29-ryzen7-2700x-kvm", "ISA009"),        # a Zen+ (FMA, F16C in silicon) whose KVM model hides them
}


@pytest.mark.parametrize("name", MACHINES)
def test_plain_corpus_machines_get_no_unjustified_warning(name):
    problems = {(name, f.code) for f in _findings(name) if f.severity in ("warning", "error")}
    assert problems <= JUSTIFIED, problems - JUSTIFIED
