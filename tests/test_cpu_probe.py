"""CPU probe: identity, flags, micro-architecture and ISA verdicts on every corpus machine.

Ground truth is the corpus manifest (our reading of each machine's cpuinfo and
archspec's expected target). Where archspec's label is only the "best
compatible target given the flags" rather than the silicon, the expected value
is our own family/model decode and the comment says why they differ.
"""

from __future__ import annotations

import json
import platform
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import MACHINES, MANIFEST, machine_root
from live_sources import kernel_cpuinfo, lscpu_fields
from cpudoctor.model import CpuInfo
from cpudoctor.probes.cpu.identity import cpu_from_cpuinfo_text, probe_cpu
from cpudoctor.probes.cpu.cpuid_check import CpuidResult, compare
from cpudoctor.probes.cpu._pycpuinfo import cpu_from_pycpuinfo, normalise_flags
from cpudoctor.probes.cpu.uarch import decode_x86
from cpudoctor.knowledge import FLAGS, LEVELS, MICROARCHITECTURES

X86_VENDORS = {"AuthenticAMD": "AMD", "GenuineIntel": "Intel"}

# Machines where the manifest's name is archspec's best *compatible* target, not the silicon.
SILICON_NOT_ARCHSPEC = {
    # Haswell-EP Xeon E5-2680 v3 (family 6 model 63) with AES disabled in the BIOS (the dump's COMMENT
    # says so); archspec cannot reach "haswell" without aes and answers the level x86_64_v3.
    "archspec-rhel7-x86_64_v3": "haswell",
    # Core Ultra 9 285 = Arrow Lake-S (family 6 model 0xC6), the same CPU as archspec-ubuntu26.04-arrowlake_s;
    # the Ubuntu 24.04 kernel hides avx_vnni_int16/sha512/sm3/sm4, so archspec falls back to alderlake.
    "archspec-ubuntu24.04-alderlake": "arrowlake_s",
    # Opteron 865 is K8 (family 15); archspec has no k8 target and says generic x86_64.
    "hwloc-16amd64-8n2c": "k8",
    "hwloc-16amd64-8n2c-cpusets": "k8",
    # Xeon 7400 Dunnington (family 6 model 0x1D, six Penryn cores); the old kernel omits ssse3, so
    # archspec says x86_64.
    "hwloc-96em64t-4no4pa3ca2co": "core2",
    # i7-1370P is Raptor Lake-P (family 6 model 0xBA); archspec has no raptorlake and picks alderlake.
    "hwloc-20em64t-hybrid-1p6c2t+2ca4co1t": "raptorlake",
    # Lakefield i5-L16G7 (model 0x8A) disables AVX, so by flags archspec calls it westmere.
    "hwloc-x86linux-5intel64-hybrid-lakefield": "lakefield",
    # Kunpeng 920 = HiSilicon TaiShan v110 (implementer 0x48 part 0xd01); archspec has no target: aarch64.
    "hwloc-128arm-2pa2n8cluster4co": "tsv110",
    # NVIDIA GB10 = 10x Cortex-X925 (0xd85) + 10x Cortex-A725 (0xd87); we name the big core,
    # archspec picks neoverse_v3ae as the closest Armv9.2 target.
    "hwloc-nvidia-dgx-gb10": "cortex_x925",
    # Ryzen 7 2700X (family 23 model 8, Zen+) in a KVM guest that masks fma: archspec reaches only x86_64_v2.
    "pycpuinfo-fedora29-ryzen7-2700x-kvm": "zen",
}


def _m(name: str) -> dict:
    return MANIFEST["machines"][name]


@pytest.fixture(scope="module")
def probed() -> dict[str, CpuInfo]:
    return {}


def _probe(name: str, cache: dict[str, CpuInfo]) -> CpuInfo:
    if name not in cache:
        cache[name] = probe_cpu(machine_root(name))
    return cache[name]


@pytest.mark.parametrize("name", MACHINES)
def test_identity_matches_manifest(name, corpus, probed):
    cpu = _probe(name, probed)
    ci = _m(name)["cpuinfo"]
    assert cpu.source == "procfs"
    if "vendor_id" in ci:
        assert cpu.vendor_id == ci["vendor_id"]
        assert cpu.vendor == X86_VENDORS[ci["vendor_id"]]
        assert (cpu.family, cpu.model, cpu.stepping) == (int(ci["cpu_family"]), int(ci["model"]), int(ci["stepping"]))
        assert cpu.brand == " ".join(ci["model_name"].split())
        assert cpu.arch == "x86_64"
    else:
        assert cpu.vendor_id == ci["cpu_implementer"]
        assert cpu.vendor == re.search(r"\((.+)\)", _m(name)["vendor"]).group(1)
        assert ci["cpu_part"] in cpu.arm_parts
        assert sorted(cpu.arm_parts) == sorted(ci.get("cpu_parts_all", [ci["cpu_part"]]))
        assert cpu.arm_variant == ci["cpu_variant"]
        assert cpu.arch == "aarch64"
        assert cpu.family is None and cpu.model is None
        assert cpu.brand, "ARM brand is decoded from implementer/part"
    assert cpu.logical_cpus_listed == ci["n_processor_entries"]


@pytest.mark.parametrize("name", MACHINES)
def test_key_flags_match_manifest(name, corpus, probed):
    cpu = _probe(name, probed)
    ci = _m(name)["cpuinfo"]
    flags = set(cpu.flags)
    checked = 0
    for flag, present in {**ci["flags_key"], **ci["flags_extra"]}.items():
        if present is None:          # x86 flag names do not apply on ARM
            continue
        assert (flag in flags) == present, flag
        checked += 1
    assert checked >= 6
    if ci["flags_identical_on_all_processors"]:
        assert not any("differ between processors" in n for n in cpu.notes)
    else:
        assert any("differ between processors" in n for n in cpu.notes)


@pytest.mark.parametrize("name", MACHINES)
def test_avx512_verdict(name, corpus, probed):
    cpu = _probe(name, probed)
    ci = _m(name)["cpuinfo"]
    key, extra = ci["flags_key"], ci["flags_extra"]
    assert cpu.isa.avx512_usable is bool(ci["avx512"])
    assert cpu.isa.avx512_usable is bool(key["avx512f"] and key["avx512cd"])
    torch = bool(key["avx512f"] and extra.get("avx512bw") and extra.get("avx512dq") and extra.get("avx512vl"))
    assert cpu.isa.avx512_torch_kernels is torch
    assert ("F" in cpu.isa.avx512_subsets) is bool(key["avx512f"])
    assert ("BF16" in cpu.isa.avx512_subsets) is bool(key["avx512_bf16"])
    assert ("VNNI" in cpu.isa.avx512_subsets) is bool(key["avx512_vnni"])
    assert cpu.isa.avx512_bf16 is bool(key["avx512_bf16"])
    assert cpu.isa.avx2 is bool(key["avx2"]) and cpu.isa.fma is bool(key["fma"])
    assert cpu.isa.avx_vnni is bool(extra.get("avx_vnni"))
    assert cpu.isa.amx == (["tile", "bf16", "int8"] if extra.get("amx_tile") else [])
    assert cpu.isa.avx512_reason
    if cpu.arch == "x86_64":
        assert cpu.isa.vector_width_bits == (512 if ci["avx512"] else 256 if extra["avx"] else 128)


@pytest.mark.parametrize("name", MACHINES)
def test_microarchitecture(name, corpus, probed):
    cpu = _probe(name, probed)
    archspec = _m(name)["microarchitecture"]["name"]
    expected = SILICON_NOT_ARCHSPEC.get(name, archspec)
    assert cpu.microarchitecture == expected
    assert cpu.microarchitecture_name


def test_overrides_cover_exactly_the_generic_labels(manifest):
    """Every archspec label that is not a silicon name is overridden, and nothing else is."""
    known = MICROARCHITECTURES.data["uarchs"]
    generic = {n for n, m in manifest["machines"].items() if m["microarchitecture"]["name"] not in known}
    assert generic == {n for n, e in SILICON_NOT_ARCHSPEC.items() if _m(n)["microarchitecture"]["name"] not in known}
    assert generic  # x86_64, x86_64_v2, x86_64_v3, aarch64 labels exist in the corpus


@pytest.mark.parametrize(
    "name, codename, line",
    [
        ("archspec-rhel7-zen", "Naples", "EPYC"),
        ("archspec-ubuntu20.04-zen3", "Vermeer", "Ryzen desktop"),
        ("archspec-rocky8.5-zen4", "Genoa", "EPYC"),
        ("archspec-rocky9-zen5", "Granite Ridge", "Ryzen desktop"),
        ("pycpuinfo-ubuntu22.04-ryzen7-2700x", "Pinnacle Ridge", "Ryzen desktop"),
        ("archspec-scientific7-k10", "Magny-Cours", "Opteron"),
        ("archspec-rhel6-piledriver", "Vishera", "FX"),
        ("archspec-scientific7-piledriver", "Abu Dhabi / Seoul", "Opteron"),
        ("archspec-unknown-sapphirerapids", "Sapphire Rapids", "Xeon"),
        ("archspec-rhel7-skylake_avx512", "Skylake-SP", "Xeon"),
        ("archspec-centos7-cascadelake", "Cascade Lake", "Xeon"),
        ("archspec-ubuntu26.04-arrowlake_s", "Arrow Lake", "Core Ultra"),
        ("hwloc-nvidia-dgx-gb10", "Cortex-X925 + Cortex-A725", None),
    ],
)
def test_codename_and_product_line(name, codename, line, corpus, probed):
    cpu = _probe(name, probed)
    assert cpu.codename == codename
    assert cpu.product_line == line


@pytest.mark.parametrize(
    "name, level",
    [
        ("archspec-rocky9-zen5", 4), ("archspec-rocky8.5-zen4", 4), ("archspec-ubuntu20.04-zen3", 3),
        ("archspec-rhel7-x86_64_v3", 3),            # archspec's own label is this level
        ("pycpuinfo-fedora29-ryzen7-2700x-kvm", 2),  # archspec: x86_64_v2 (fma masked)
        ("archspec-scientific7-k10", 1),             # K10 lacks SSSE3/SSE4.1
        ("hwloc-x86linux-5intel64-hybrid-lakefield", 2),  # no AVX at all
        ("archspec-rhel6-piledriver", 2),            # AVX but no AVX2
        ("archspec-ubuntu22.04-neoverse_v2", None),  # not x86
    ],
)
def test_x86_64_level(name, level, corpus, probed):
    assert _probe(name, probed).isa.x86_64_level == level


def test_datapath_notes(corpus, probed):
    zen4 = _probe("archspec-rocky8.5-zen4", probed).isa
    assert zen4.datapath_bits == 256 and "256-bit" in zen4.datapath_note and zen4.vector_width_bits == 512
    zen5 = _probe("archspec-rocky9-zen5", probed).isa
    assert zen5.datapath_bits == 512 and "full width" in zen5.datapath_note
    a64fx = _probe("archspec-rocky8-a64fx", probed).isa
    assert a64fx.vector_width_bits == 512 and a64fx.x86_64_level is None
    v2 = _probe("archspec-ubuntu22.04-neoverse_v2", probed).isa
    assert v2.vector_width_bits == 128 and not v2.avx512_usable and "not x86" in v2.avx512_reason


def test_zen5_mobile_runs_512_bit_on_256_bit_units(tmp_path):
    """Strix Point (family 26 model 0x24) has Zen 5 flags but a 256-bit datapath; the 9950X has 512."""
    text = (machine_root("archspec-rocky9-zen5") / "proc/cpuinfo").read_text()
    text = re.sub(r"model\s*:\s*68", "model\t\t: 36", text).replace("Ryzen 9 9950X 16-Core Processor", "Ryzen AI 9 HX 370 w/ Radeon 890M")
    cpu = cpu_from_cpuinfo_text(text)
    assert cpu.microarchitecture == "zen5" and cpu.codename == "Strix Point" and cpu.product_line == "Ryzen mobile"
    assert cpu.isa.datapath_bits == 256 and "256-bit" in cpu.isa.datapath_note


def test_hypervisor_masking_is_a_note_not_a_different_answer(corpus, probed):
    cpu = _probe("pycpuinfo-fedora29-ryzen7-2700x-kvm", probed)
    assert cpu.hypervisor is True and cpu.microarchitecture == "zen"
    assert any("fma" in n and "hypervisor" in n for n in cpu.notes)
    bare = _probe("pycpuinfo-ubuntu22.04-ryzen7-2700x", probed)
    assert bare.hypervisor is False and not any("normally reports" in n for n in bare.notes)


@pytest.mark.parametrize(
    "name, base, maxi",
    [
        ("hwloc-20em64t-hybrid-1p6c2t+2ca4co1t", 1900.0, 5200.0),   # cpufreq base_frequency / cpuinfo_max_freq (P-cores)
        ("hwloc-32amd64-4s2n4c-cgroup2", None, 2300.0),             # old per-CPU cpufreq dir, no base
        ("archspec-centos7-cascadelake", 2400.0, None),             # brand "@ 2.40GHz"
        ("hwloc-nvidia-dgx-gb10", 3900.0, 3900.0),                  # ACPI CPPC nominal_freq (X925 cores)
        ("archspec-rocky9-zen5", None, None),                       # single cpuinfo entry, no sysfs
    ],
)
def test_clocks(name, base, maxi, corpus, probed):
    cpu = _probe(name, probed)
    assert (cpu.base_mhz, cpu.max_mhz) == (base, maxi)


# -- garbled input never crashes --------------------------------------------

def _tree(tmp_path: Path, content: bytes | None) -> Path:
    (tmp_path / "proc").mkdir()
    if content is not None:
        (tmp_path / "proc" / "cpuinfo").write_bytes(content)
    return tmp_path


@pytest.mark.parametrize(
    "content, fragment",
    [
        (None, "no readable cpuinfo"),
        (b"", "empty"),
        (b"\x00\xff\xfe\x13\x88" * 200, "no usable entries"),
        (b"\n\n   \n", "empty"),
    ],
)
def test_missing_or_garbled_cpuinfo_is_unknown_with_note(tmp_path, content, fragment):
    cpu = probe_cpu(_tree(tmp_path, content))
    assert cpu.vendor is None and cpu.microarchitecture is None and cpu.flags == []
    assert cpu.source == "unknown" and cpu.isa.avx512_usable is False
    assert any(fragment in n for n in cpu.notes), cpu.notes


def test_cpuinfo_that_is_a_directory(tmp_path):
    (tmp_path / "proc" / "cpuinfo").mkdir(parents=True)
    cpu = probe_cpu(tmp_path)
    assert cpu.vendor is None and cpu.notes


def test_truncated_cpuinfo_keeps_what_it_has(tmp_path):
    full = (machine_root("archspec-rocky8.5-zen4") / "proc/cpuinfo").read_bytes()
    cut = full[: full.index(b"flags")]          # identity survives, the flag line is lost
    cpu = probe_cpu(_tree(tmp_path, cut))
    assert (cpu.vendor, cpu.family, cpu.model, cpu.microarchitecture) == ("AMD", 25, 17, "zen4")
    assert cpu.flags == [] and cpu.isa.avx512_usable is False
    assert any("no flags" in n for n in cpu.notes)
    half = full[: full.index(b"avx512f") + 4]    # the flag line is cut mid-word: "avx5"
    (tmp_path / "b").mkdir()
    cpu = probe_cpu(_tree(tmp_path / "b", half))
    assert cpu.microarchitecture == "zen4" and "avx2" in cpu.flags and "avx512f" not in cpu.flags
    assert cpu.isa.avx512_usable is False


def test_binary_noise_inside_a_real_file(tmp_path):
    text = (machine_root("archspec-rocky8.5-zen4") / "proc/cpuinfo").read_bytes()
    noisy = text.replace(b"model name", b"\xff\xfe\x00garbage line\nmodel name", 1)
    cpu = probe_cpu(_tree(tmp_path, noisy))
    assert cpu.microarchitecture == "zen4" and cpu.isa.avx512_usable
    assert any("unreadable" in n or "not text" in n for n in cpu.notes)


def test_substring_avx512_is_not_avx512(tmp_path):
    """The classic bug: flags containing 'avx512' but no avx512f+avx512cd do not make AVX-512 usable."""
    base = "processor\t: 0\nvendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 151\nstepping\t: 2\n"
    cpu = cpu_from_cpuinfo_text(base + "flags\t\t: fpu sse sse2 lm avx avx2 fma avx512_vnni_ish avx_vnni avx512cd\n")
    assert cpu.isa.avx512_usable is False and cpu.isa.avx512_subsets == ["CD"]
    assert "avx512f" in cpu.isa.avx512_reason
    cpu = cpu_from_cpuinfo_text(base + "flags\t\t: fpu sse sse2 lm avx512f avx512cd\n")
    assert cpu.isa.avx512_usable is True and cpu.isa.avx512_torch_kernels is False
    assert "BW" not in cpu.isa.avx512_subsets and "avx512bw" in cpu.isa.avx512_reason


def test_alder_lake_reason_mentions_fused_off(corpus, probed):
    cpu = _probe("hwloc-20em64t-hybrid-1p6c2t+2ca4co1t", probed)
    assert not cpu.isa.avx512_usable and "fused" in cpu.isa.avx512_reason


def test_arm_old_style_cpuinfo_with_features_after_blocks():
    text = ("processor\t: 0\nBogoMIPS\t: 50.00\n\nprocessor\t: 1\nBogoMIPS\t: 50.00\n\n"
            "Features\t: fp asimd evtstrm crc32 cpuid\nCPU implementer\t: 0x41\nCPU architecture: 8\n"
            "CPU variant\t: 0x0\nCPU part\t: 0xd08\nCPU revision\t: 3\n\nHardware\t: BCM2835\n")
    cpu = cpu_from_cpuinfo_text(text)
    assert cpu.vendor == "ARM" and cpu.microarchitecture == "cortex_a72" and "asimd" in cpu.flags
    assert cpu.brand == "BCM2835" and cpu.isa.vector_width_bits == 128


def test_unknown_model_is_null_with_note():
    match = decode_x86("AMD", 26, 0xF0, 0, "AMD Future")
    assert match.uarch is None and "not in CPU Doctor's table" in match.notes[0]


# -- py-cpuinfo path (non-Linux) and the CPUID cross-check -------------------

def test_pycpuinfo_path_normalises_names_and_applies_xcr0():
    info = {"arch_string_raw": "AMD64", "vendor_id_raw": "AuthenticAMD", "brand_raw": "AMD Ryzen 9 7950X 16-Core Processor",
            "family": 25, "model": 97, "stepping": 2, "hz_advertised": [4500000000, 0],
            "flags": ["sse3", "avx", "avx2", "fma", "avx512f", "avx512cd", "avx512bw", "avx512dq", "avx512vl", "avx512vnni"]}
    cpu = cpu_from_pycpuinfo(info, CpuidResult(flags=["avx512_bf16", "avx_vnni"], os_disabled=[]))
    assert cpu.source == "py-cpuinfo" and cpu.arch == "x86_64"
    assert (cpu.microarchitecture, cpu.codename, cpu.product_line) == ("zen4", "Raphael", "Ryzen desktop")
    assert "pni" in cpu.flags and "avx512_vnni" in cpu.flags and "avx512_bf16" in cpu.flags
    assert cpu.isa.avx512_usable and cpu.base_mhz == 4500.0
    masked = cpu_from_pycpuinfo(info, CpuidResult(flags=[], os_disabled=["avx512f", "avx512cd", "avx512bw", "avx512dq", "avx512vl"]))
    assert masked.isa.avx512_usable is False and any("XCR0" in n for n in masked.notes)
    assert normalise_flags(["SSE3", "rdrnd", "sse3"]) == ["pni", "rdrand"]


def test_pycpuinfo_apple_silicon():
    cpu = cpu_from_pycpuinfo({"arch_string_raw": "arm64", "brand_raw": "Apple M2 Pro", "flags": []})
    assert cpu.vendor == "Apple" and cpu.microarchitecture == "m2" and cpu.isa.vector_width_bits == 128


def test_cross_check_flags_emulation(corpus, probed):
    cpu = _probe("archspec-rocky9-zen5", probed)
    same = CpuidResult(vendor_id="AuthenticAMD", family=26, model=68, flags=[f for f in cpu.flags if f != "avx512f"])
    notes = compare(cpu, same)
    assert len(notes) == 1 and "avx512f" in notes[0] and "SIGILL" in notes[0]
    emulated = CpuidResult(vendor_id="GenuineIntel", family=6, model=85, flags=["sse2"])
    assert any("emulation" in n for n in compare(cpu, emulated))
    assert compare(cpu, CpuidResult(error="boom")) == ["CPUID cross-check skipped: boom"]


# -- knowledge files ------------------------------------------------------

def test_microarchitecture_table_is_consistent():
    table = MICROARCHITECTURES.data
    uarchs = table["uarchs"]
    for row in table["x86"] + table["arm"]:
        assert row["reason"], row
        assert row["uarch"] is None or row["uarch"] in uarchs, row["uarch"]
    for name, u in uarchs.items():
        assert re.fullmatch(r"[a-z0-9_]+", name) and u["reason"] and u["name"]
    # No two rows of equal specificity may claim the same vendor/family/model/stepping.
    seen: dict[tuple, str] = {}
    for row in table["x86"]:
        steps = row.get("steppings", "all")
        for spec in row["models"]:
            lo, _, hi = spec.partition("-")
            span = sum(int(h or l, 16) - int(l, 16) + 1 for l, _, h in (s.partition("-") for s in row["models"]))
            for model in range(int(lo, 16), int(hi or lo, 16) + 1):
                key = (row["vendor"], row["family"], model, steps, span)
                assert key not in seen, f"ambiguous rows for {key}: {seen[key]} / {row['uarch']}"
                seen[key] = row["uarch"]


def test_flag_table_covers_corpus_and_has_valid_cpuid_bits(corpus):
    # The corpus only: a user's newer kernel may print a flag the table does not know yet; the app shows it
    # under "other" (describe_flag), which is no reason for `make test` to fail on that machine.
    flags = FLAGS.data
    cats = flags["categories"]
    seen: set[str] = set()
    for path in corpus.glob("machines/*/proc/cpuinfo"):
        try:
            text = path.read_text(errors="replace")
        except OSError:
            continue
        for m in re.finditer(r"^(?:flags|Features)\s*:(.*)$", text, re.M):
            seen.update(m.group(1).split())
    assert not seen - set(flags["flags"]), sorted(seen - set(flags["flags"]))
    for name, e in flags["flags"].items():
        assert e["category"] in cats and e["meaning"], name
        if "cpuid" in e:
            leaf, sub, reg, bit = e["cpuid"].split(".")
            assert int(leaf, 0) >= 0 and int(sub) >= 0 and reg in {"eax", "ebx", "ecx", "edx"} and 0 <= int(bit) < 32
    subsets = FLAGS.avx512_subsets()
    assert list(subsets.values()) == ["F", "CD", "BW", "DQ", "VL", "IFMA", "VBMI", "VBMI2", "VNNI", "BF16", "FP16",
                                      "BITALG", "VPOPCNTDQ", "VP2INTERSECT", "ER", "PF"]


def test_levels_file_matches_psabi():
    levels = LEVELS.rows
    assert [lv["level"] for lv in levels] == [1, 2, 3, 4]
    assert set(levels[3]["flags"]) == {"avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl"}


def test_epyc_turin_guest_is_zen5_with_full_avx512(corpus):
    """An EPYC Turin (family 1Ah model 02h) KVM guest, built from the Zen 5 desktop's real cpuinfo: the same
    silicon generation and flags, the server model number and name, and the hypervisor bit a cloud VM adds."""
    text = (machine_root("archspec-rocky9-zen5") / "proc/cpuinfo").read_text()
    text = re.sub(r"(?m)^model\s*:.*$", "model\t\t: 2", text)
    text = re.sub(r"(?m)^model name\s*:.*$", "model name\t: AMD EPYC 9755 128-Core Processor", text)
    text = re.sub(r"(?m)^(flags\s*:)", r"\1 hypervisor", text)
    cpu = cpu_from_cpuinfo_text(text)
    assert (cpu.vendor, cpu.microarchitecture, cpu.codename, cpu.product_line) == ("AMD", "zen5", "Turin", "EPYC")
    assert cpu.isa.avx512_usable and cpu.isa.avx512_torch_kernels and cpu.isa.x86_64_level == 4
    assert cpu.isa.avx512_bf16 and cpu.isa.avx_vnni and cpu.isa.datapath_bits == 512
    assert {"F", "CD", "BW", "DQ", "VL", "VNNI", "BF16", "VP2INTERSECT"} <= set(cpu.isa.avx512_subsets)
    assert cpu.hypervisor is True and any("hypervisor" in n for n in cpu.notes)


# -- this machine: every answer is checked against the kernel's own text, never a constant ------------------

@pytest.mark.hardware
def test_this_machine_agrees_with_the_kernels_cpuinfo():
    """The probe against /proc/cpuinfo read here in a few lines of our own: identity, flags and verdicts."""
    kernel = kernel_cpuinfo()
    cpu = probe_cpu(Path("/"))
    assert cpu.source == "procfs"
    assert set(cpu.flags) == kernel.flags
    assert cpu.logical_cpus_listed == kernel.processors
    if "vendor_id" in kernel.first:                                   # x86
        assert (cpu.vendor_id, cpu.family, cpu.model, cpu.stepping) == (
            kernel.first["vendor_id"], kernel.int_field("cpu family"), kernel.int_field("model"),
            kernel.int_field("stepping"))
        assert cpu.brand == (" ".join(kernel.first.get("model name", "").split()) or None)
        assert cpu.isa.avx512_usable is ({"avx512f", "avx512cd"} <= kernel.flags)
        assert cpu.isa.avx2 is ("avx2" in kernel.flags) and cpu.isa.fma is ("fma" in kernel.flags)
        assert cpu.hypervisor is ("hypervisor" in kernel.flags)
    elif "CPU implementer" in kernel.first:                            # ARM
        assert cpu.vendor_id == kernel.first["CPU implementer"]
        assert kernel.first["CPU part"] in cpu.arm_parts


@pytest.mark.hardware
def test_this_machine_agrees_with_lscpu():
    """util-linux's reading of the same machine: vendor, family, model and the flags of the first CPU."""
    lscpu = lscpu_fields()
    cpu = probe_cpu(Path("/"))
    if "CPU family" not in lscpu:
        pytest.skip("lscpu shows no x86 identity here (an ARM machine): the x86 machines run this cross-check")
    assert (cpu.vendor_id, cpu.family, cpu.model) == (lscpu["Vendor ID"], int(lscpu["CPU family"]),
                                                      int(lscpu["Model"]))
    if "Flags" in lscpu:                        # lscpu prints the first CPU's flags; the probe keeps those on all
        assert set(cpu.flags) <= set(lscpu["Flags"].split())


def test_no_cpuid_child_on_a_machine_that_is_not_x86(monkeypatch):
    """On Arm the CPUID child is not started at all (its first instruction would be SIGILL): the reason instead."""
    from cpudoctor.kits.child import runner
    from cpudoctor.probes.cpu import cpuid_check

    monkeypatch.setattr(platform, "machine", lambda: "aarch64")
    monkeypatch.setattr(runner, "run_child", lambda *a, **k: pytest.fail("a child was started"))
    assert cpuid_check.run_child().error == "CPUID is x86-only; this is aarch64"


@pytest.mark.hardware
def test_this_machine_cpuid_child_agrees_with_the_kernel():
    """CPUID run in a child against the kernel's flags: whatever the kernel lists, the executing CPU has."""
    from cpudoctor.probes.cpu.cpuid_check import run_child

    kernel = kernel_cpuinfo()
    if platform.machine().lower() not in {"x86_64", "amd64"} or "vendor_id" not in kernel.first:
        pytest.skip(f"CPUID is x86-only; this is {platform.machine()}: the x86 machines run this test")
    result = run_child()
    assert result.error is None
    assert (result.vendor_id, result.family, result.model, result.stepping) == (
        kernel.first["vendor_id"], kernel.int_field("cpu family"), kernel.int_field("model"),
        kernel.int_field("stepping"))
    comparable = set(FLAGS.cpuid_bits())
    usable = set(result.flags) - set(result.os_disabled)
    # The kernel lists a flag only when the CPU has it and the OS saves its state. (The reverse may not
    # hold: a kernel older than the CPU, or a boot option, hides flags CPUID still reports.)
    assert kernel.flags & comparable <= usable, sorted(kernel.flags & comparable - usable)
    assert not any("emulation" in n or "SIGILL" in n for n in compare(probe_cpu(Path("/")), result))


QEMU_MODELS = {
    # qemu -cpu model: (vendor_id, family, model, our uarch decode) from qemu's target/i386/cpu.c definitions
    "EPYC-Milan": ("AuthenticAMD", 25, 1, "zen3"),     # the user: Zen 3, AVX2, no AVX-512
    "Nehalem": ("GenuineIntel", 6, 26, "nehalem"),     # no AVX at all
}


@pytest.mark.hardware
@pytest.mark.slow
@pytest.mark.alongside
@pytest.mark.parametrize("model", sorted(QEMU_MODELS))
def test_cpuid_child_under_qemu_sees_the_emulated_cpu_not_the_host(model):
    """qemu-user runs the CPUID child as another CPU while /proc/cpuinfo still describes this host: the
    cross-check must name the emulated CPU and flag every host flag the emulated one lacks."""
    from cpudoctor.probes.cpu.cpuid_check import CpuidResult

    qemu = shutil.which("qemu-x86_64")
    if qemu is None:
        pytest.skip("qemu-x86_64 is not installed (Debian/Ubuntu: apt-get install qemu-user): a machine with it "
                    "runs this test")
    if platform.machine().lower() not in {"x86_64", "amd64"}:
        pytest.skip(f"this Python is built for {platform.machine()}, not x86_64: an x86_64 machine runs this test")
    models = subprocess.run([qemu, "-cpu", "help"], capture_output=True, text=True, timeout=30).stdout
    if not re.search(rf"^x86\s+{re.escape(model)}\s", models, re.M):
        pytest.skip(f"this qemu-x86_64 has no {model} CPU model: a newer qemu runs this test")
    proc = subprocess.run([qemu, "-cpu", model, sys.executable, "-m", "cpudoctor.probes.cpu.cpuid_check"],
                          capture_output=True, text=True, timeout=240)
    if proc.returncode != 0:
        pytest.skip(f"this Python does not run on an emulated {model} (exit {proc.returncode}: "
                    f"{proc.stderr.strip()[-200:]}): it may be built for a newer x86-64 level")
    data = json.loads(proc.stdout.strip().splitlines()[-1])
    result = CpuidResult(**{k: v for k, v in data.items() if k in CpuidResult.__dataclass_fields__})
    vendor, family, model_no, uarch = QEMU_MODELS[model]
    assert result.error is None and (result.vendor_id, result.family, result.model) == (vendor, family, model_no)
    assert decode_x86(X86_VENDORS[vendor], family, model_no, result.stepping, result.brand).uarch == uarch
    assert not any(f.startswith("avx512") for f in result.flags)        # neither model has AVX-512
    if model == "Nehalem":
        assert "avx" not in result.flags          # (Milan's AVX depends on the qemu version's TCG support)
    kernel = kernel_cpuinfo()
    notes = compare(probe_cpu(Path("/")), result)
    host = (kernel.first.get("vendor_id"), kernel.int_field("cpu family"), kernel.int_field("model"))
    assert any("looks like emulation" in n for n in notes) is (host != (vendor, family, model_no))
    comparable = set(FLAGS.cpuid_bits())
    host_only = sorted(kernel.flags & comparable - set(result.flags))
    lacking = [n for n in notes if "would crash with SIGILL" in n]
    if host_only:
        assert len(lacking) == 1 and all(f in lacking[0] for f in host_only), (host_only, notes)
    else:
        assert not lacking


def test_emulation_is_noted_when_cpuinfo_and_interpreter_disagree(monkeypatch):
    """qemu-user on an ARM host: /proc/cpuinfo says aarch64 while this Python runs as x86_64."""
    import platform

    arm_text = (machine_root("archspec-ubuntu22.04-neoverse_v2") / "proc/cpuinfo").read_text()
    monkeypatch.setattr(platform, "machine", lambda: "x86_64")
    cpu = cpu_from_cpuinfo_text(arm_text, root=Path("/"))
    assert cpu.arch == "aarch64" and cpu.microarchitecture == "neoverse_v2"
    assert any("emulated" in n for n in cpu.notes)
    monkeypatch.setattr(platform, "machine", lambda: "aarch64")
    assert not any("emulated" in n for n in cpu_from_cpuinfo_text(arm_text, root=Path("/")).notes)


def test_arm_identity_from_sysfs_midr_when_cpuinfo_lacks_it(tmp_path):
    """Some ARM kernels/containers print only Features; MIDR_EL1 in sysfs still names the cores (GB10 here)."""
    import shutil

    src = machine_root("hwloc-nvidia-dgx-gb10")
    text = (src / "proc/cpuinfo").read_text()
    stripped = "\n".join(ln for ln in text.splitlines() if not ln.startswith("CPU "))
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc/cpuinfo").write_text(stripped)
    for cpu_dir in (src / "sys/devices/system/cpu").glob("cpu[0-9]*"):
        ident = cpu_dir / "regs/identification"
        if ident.is_dir():
            shutil.copytree(ident, tmp_path / "sys/devices/system/cpu" / cpu_dir.name / "regs/identification")
    cpu = probe_cpu(tmp_path)
    assert cpu.vendor == "ARM" and sorted(cpu.arm_parts) == ["0xd85", "0xd87"]
    assert cpu.microarchitecture == "cortex_x925" and cpu.arch == "aarch64" and "sve2" in cpu.flags
    assert any("MIDR_EL1" in n for n in cpu.notes)


def test_cut_down_pentium_is_explained_not_blamed_on_the_bios():
    """A Haswell Pentium G3258 (family 6 model 0x3C) has no AVX at all: that is the SKU, not a setting."""
    text = ("processor\t: 0\nvendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 60\n"
            "model name\t: Intel(R) Pentium(R) CPU G3258 @ 3.20GHz\nstepping\t: 3\n"
            "flags\t\t: fpu cmov cx8 fxsr mmx syscall sse sse2 lm pni ssse3 cx16 sse4_1 sse4_2 popcnt lahf_lm movbe\n")
    cpu = cpu_from_cpuinfo_text(text)
    assert (cpu.microarchitecture, cpu.product_line, cpu.base_mhz) == ("haswell", "Pentium", 3200.0)
    assert cpu.isa.x86_64_level == 2 and cpu.isa.vector_width_bits == 128
    assert any("Intel disables them on Pentium parts" in n for n in cpu.notes)
