"""ISA009: the VM's CPU model as the cause — data, faked and corpus trees, and real QEMU CPU models."""

from __future__ import annotations

import json
import signal

import pytest
import schema_tools
from conftest import CORPUS, MACHINES, machine_root
from qemu_guest import QEMU, cpuid_under, guest_tree, python_under

from cpudoctor import advisor
from conftest import probe_tree
from cpudoctor.probes import probe_cpu
from cpudoctor.knowledge import MICROARCHITECTURES, SOFTWARE_FACTS, VM_CPU_MODELS

DATA = VM_CPU_MODELS.data


def _findings(root):
    return {f.code: f for f in advisor.diagnose(probe_tree(root, software=True))}


def _tree(tmp_path, vendor, family, model, brand, flags, hypervisor=True):
    (tmp_path / "proc").mkdir(parents=True)
    flags = flags + (["hypervisor"] if hypervisor else [])
    (tmp_path / "proc" / "cpuinfo").write_text(
        f"processor\t: 0\nvendor_id\t: {vendor}\ncpu family\t: {family}\nmodel\t\t: {model}\n"
        f"model name\t: {brand}\nstepping\t: 1\nflags\t\t: {' '.join(flags)}\n", encoding="utf-8")
    return tmp_path


BASE = "fpu de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush mmx fxsr sse sse2 syscall nx lm pni".split()
V2 = ["ssse3", "cx16", "sse4_1", "sse4_2", "popcnt", "lahf_lm"]
V3 = ["avx", "avx2", "fma", "f16c", "bmi1", "bmi2", "movbe", "abm", "xsave"]
V4 = ["avx512f", "avx512cd", "avx512bw", "avx512dq", "avx512vl"]


# ------------------------------------------------------------------ the data

def test_data_validates_against_its_schema():
    schema_tools.validate(DATA, VM_CPU_MODELS.schema())


def test_silicon_table_matches_archspec(corpus):
    """Re-derived from archspec-json's microarchitectures.json (the table's stated source)."""
    path = CORPUS / "originals" / "archspec-json" / "cpu" / "microarchitectures.json"
    archspec = json.loads(path.read_text())["microarchitectures"]
    for uarch, flags in DATA["silicon_isa"].items():
        features = set(archspec[uarch]["features"])
        assert [f for f in DATA["flag_labels"] if f in features] == flags, uarch
    assert set(DATA["silicon_isa"]) <= set(MICROARCHITECTURES.data["uarchs"])


def test_every_fix_names_known_hypervisors_and_a_source_or_says_unverified():
    known = {e["virtualization"] for e in SOFTWARE_FACTS.data["dmi_virtualization"]} | {"kvm", "xen"}
    for fix in DATA["fixes"]:
        assert set(fix["hypervisors"]) <= known, fix["name"]
        assert fix["text"].endswith("."), fix["name"]
    covered = {h for fix in DATA["fixes"] for h in fix["hypervisors"]}
    assert {"kvm", "qemu", "virtualbox", "hyperv", "vmware", "amazon", "google"} <= covered


# ------------------------------------------------------------------ faked trees

def test_generic_kvm64_model_hides_everything(tmp_path):
    found = _findings(_tree(tmp_path, "GenuineIntel", 15, 6, "Common KVM processor", BASE))
    f = found["ISA009"]
    assert f.severity == "warning" and "AVX, AVX2, FMA, AVX-512F" in f.title
    assert "DEFAULT" in f.why and "NumPy ≥ 2.4" in f.why
    assert "ISA001" not in found and "ISA006" not in found     # one cause, one finding
    assert probe_cpu(tmp_path).microarchitecture is None        # family 15 model 6 is no Pentium 4 here


def test_zen4_model_without_avx512_is_the_vm(tmp_path):
    found = _findings(_tree(tmp_path, "AuthenticAMD", 25, 17, "AMD EPYC 9654 96-Core Processor", BASE + V2 + V3))
    f = found["ISA009"]
    assert f.severity == "warning" and "AVX-512F" in f.title and "AVX512-BF16" in f.title
    assert "AVX2 kernels instead of AVX512" in f.why
    assert "ISA001" not in found


def test_skylake_without_avx2_is_the_vm(tmp_path):
    found = _findings(_tree(tmp_path, "GenuineIntel", 6, 94, "Intel(R) Core(TM) i7-6700 CPU @ 3.40GHz", BASE + V2 + ["avx"]))
    assert found["ISA009"].severity == "warning" and "AVX2, FMA, F16C" in found["ISA009"].title


def test_pentium_without_avx_is_the_silicon_not_the_vm(tmp_path):
    """Intel disables AVX on Pentium/Celeron parts: a Skylake Pentium guest missing AVX is not masked."""
    found = _findings(_tree(tmp_path, "GenuineIntel", 6, 94, "Intel(R) Pentium(R) CPU G4400 @ 3.30GHz", BASE + V2))
    assert found["ISA009"].severity == "ok"


def test_bare_metal_never_blames_a_vm(tmp_path):
    found = _findings(_tree(tmp_path, "AuthenticAMD", 25, 17, "AMD EPYC 9654 96-Core Processor", BASE + V2 + V3,
                            hypervisor=False))
    assert "ISA009" not in found and found["ISA001"].severity == "warning"


def test_named_qemu_model_is_a_note_not_a_warning(tmp_path):
    found = _findings(_tree(tmp_path, "GenuineIntel", 6, 60, "Intel Core Processor (Haswell, no TSX)", BASE + V2 + V3))
    assert found["ISA009"].severity == "info" and "named" in found["ISA009"].title


# ------------------------------------------------------------------ corpus

def test_corpus_kvm_guest_of_a_ryzen_2700x(corpus):
    """The real KVM guest in the corpus: a Zen+ with AVX2 but no FMA/F16C/BMI — its CPU model strips them."""
    found = _findings(machine_root("pycpuinfo-fedora29-ryzen7-2700x-kvm"))
    assert found["ISA009"].severity == "warning" and "FMA, F16C" in found["ISA009"].title
    assert "PyTorch runs its DEFAULT kernels instead of AVX2" in found["ISA009"].why


@pytest.mark.parametrize("name", MACHINES)
def test_no_vm_warning_on_corpus_machines_without_one(name):
    found = _findings(machine_root(name))
    if name != "pycpuinfo-fedora29-ryzen7-2700x-kvm":
        assert "ISA009" not in found or found["ISA009"].severity in ("ok", "info"), name


# ------------------------------------------------------------------ real QEMU CPU models

needs_qemu = pytest.mark.skipif(QEMU is None, reason="qemu-x86_64 (qemu-user) is not installed")


@needs_qemu
@pytest.mark.slow
@pytest.mark.alongside
def test_qemu64_guest_is_caught_and_host_model_fixes_it(tmp_path):
    """qemu64 (QEMU's default model) for real: the finding, NumPy 2.4 dying, and the fix making both go away."""
    import numpy

    bad = guest_tree(tmp_path / "qemu64", cpuid_under("qemu64"))
    found = _findings(bad)
    f = found["ISA009"]
    assert f.severity == "warning" and "AVX, AVX2, FMA, AVX-512F" in f.title
    assert "-cpu host" in f.snippet and "host-passthrough" in f.snippet      # DMI says QEMU: the KVM/QEMU fixes
    assert "NumPy ≥ 2.4" in found["ISA008"].title
    numpy_24 = tuple(int(x) for x in numpy.__version__.split(".")[:2]) >= (2, 4)
    if numpy_24:  # the forecast, observed: this very NumPy dies on the emulated qemu64
        assert python_under("qemu64", "import numpy").returncode in (-signal.SIGILL, 128 + signal.SIGILL)
    # The fix: give the guest a model with the host's instruction sets. In user mode there is no -cpu host;
    # QEMU's named Haswell model stands for a host-passthrough guest on a Haswell host.
    good = guest_tree(tmp_path / "haswell", cpuid_under("Haswell-noTSX-IBRS"))
    found = _findings(good)
    assert found["ISA009"].severity == "info"                   # a named model: noted, not a problem
    assert found["ISA008"].severity == "ok"
    assert found["ISA002"].severity != "warning" if "ISA002" in found else True
    if numpy_24:
        run = python_under("Haswell-noTSX-IBRS", "import numpy; print((numpy.ones((64, 64)) @ numpy.ones((64, 64)))[0, 0])")
        assert run.returncode == 0 and run.stdout.strip() == "64.0"


@pytest.mark.hardware
@needs_qemu
@pytest.mark.slow
@pytest.mark.alongside
def test_emulated_cpuid_disagrees_with_the_host_cpuinfo():
    """Under qemu-user the CPUID cross-check sees the emulated CPU while /proc/cpuinfo shows the host."""
    from cpudoctor.probes.cpu import cpuid_check

    emulated = cpuid_check.CpuidResult(**{k: v for k, v in cpuid_under("qemu64").items()
                                          if k in cpuid_check.CpuidResult.__dataclass_fields__})
    host = probe_cpu()
    if not host.vendor_id or "avx2" not in host.flags:
        pytest.skip("the host's /proc/cpuinfo has no AVX2 to lose")
    notes = cpuid_check.compare(host, emulated)
    assert any("emulation" in n for n in notes) and any("SIGILL" in n for n in notes)
