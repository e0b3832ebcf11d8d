"""resources/isa_floors.json: valid against its schema, every floor sourced, ranges that packaging reads exactly."""

from __future__ import annotations

import re

import pytest
import schema_tools
from conftest import machine_root
from packaging.specifiers import SpecifierSet

from cpudoctor.knowledge import FLAGS as CATALOGUE
from cpudoctor.knowledge import FLOORS, LEVELS
from cpudoctor.knowledge.versions import normalize
from cpudoctor.probes import probe_cpu
from cpudoctor.probes.software import isarisk
from cpudoctor.model import PackageInfo

DATA = FLOORS.data
PACKAGES = DATA["packages"]
FLAGS = set(CATALOGUE.entries)
# Operators whose bounds lower_bound()/upper_bound() read exactly; others would need more than a bound.
OPERATORS = {">=", "<", "==", "!="}


def test_the_file_validates_against_its_schema():
    schema_tools.validate(DATA, FLOORS.schema())


def test_the_table_covers_every_kind_the_issue_names():
    kinds = {p["kind"] for p in PACKAGES}
    assert kinds == {"dl-framework", "inference-runtime", "vector-search", "image-audio", "tokenizer", "scientific"}
    names = {p["name"] for p in PACKAGES}
    assert {"torch", "tensorflow", "jaxlib", "paddlepaddle", "mxnet", "onnxruntime", "openvino", "tflite-runtime",
            "ctranslate2", "llama-cpp-python", "faiss-cpu", "hnswlib", "opencv-python", "pillow-simd", "torchaudio",
            "tokenizers", "numpy", "scipy", "scikit-learn"} <= names


def test_names_and_distributions_are_unique_and_normalised():
    names = [p["name"] for p in PACKAGES]
    assert len(names) == len(set(names))
    dists = [normalize(d) for p in PACKAGES for d in p["distributions"]]
    assert len(dists) == len(set(dists)), "a distribution belongs to one package"
    for p in PACKAGES:
        assert normalize(p["distributions"][0]) == p["name"], p["name"]


@pytest.mark.parametrize("package", PACKAGES, ids=lambda p: p["name"])
def test_every_floor_has_a_range_packaging_reads_sources_and_known_flags(package):
    for floor in package["floors"]:
        spec = SpecifierSet(floor["versions"])  # raises InvalidSpecifier on a typo
        assert {s.operator for s in spec} <= OPERATORS, floor["versions"]
        assert floor["sources"], f"{package['name']} {floor['versions']}: a floor needs a source"
        assert (floor["confidence"] == "unverified") == floor["reason"].startswith("unverified:"), package["name"]
        for need in floor["needs"]:
            assert re.fullmatch(r"x86-64-v[1-4]", need) or need in FLAGS, need
    if not package["floors"]:
        why = package.get("without_floor")
        assert why, f"{package['name']} has no floor and does not say why"
        honest = why["reason"].startswith(("unverified:", "unknown:")) or why["status"] in ("follows", "pure_python")
        assert why["sources"] or honest, f"{package['name']}: sourced, or marked unverified/unknown"


def test_ranges_of_one_package_do_not_overlap():
    """One version, one floor: overlapping ranges would make the answer depend on the order in the file."""
    probes = ["0.1", "1.5.0", "1.5.1", "1.6.0", "1.9.0", "1.10.0", "1.20.0", "2.3.5", "2.4.0", "2.4.6", "99.0"]
    for p in PACKAGES:
        for v in probes:
            hits = [f["versions"] for f in p["floors"] if SpecifierSet(f["versions"]).contains(v)]
            assert len(hits) <= 1, (p["name"], v, hits)


def test_install_hints_are_whole_sentences_or_commands():
    for p in PACKAGES:
        hint = p.get("install_hint")
        if hint:
            assert hint.startswith("python -m pip ") or hint.endswith("."), (p["name"], hint)


K10 = "archspec-scientific7-k10"            # Opteron 6136: SSE4a, no SSSE3/SSE4.1/SSE4.2, no AVX
SANDY = "archspec-rhel6-piledriver"         # Piledriver: AVX, FMA, no AVX2


@pytest.mark.parametrize("package, version, machine, safe", [
    ("numpy", "2.4.6", K10, "<2.4"),                 # 2.4 raised the baseline to x86-64-v2
    ("tensorflow", "2.16.1", K10, "<1.6,!=1.5.1"),   # AVX since 1.6, and the 1.5.1 mistake
    ("jaxlib", "0.4.30", K10, ""),                   # every release needs AVX: none runs
    ("intel-extension-for-pytorch", "2.3.0", SANDY, ""),  # >=1.10 needs AVX2, <1.10 AVX-512
])
def test_safe_versions_from_real_cpus(corpus, package, version, machine, safe):
    cpu = probe_cpu(machine_root(machine))
    risk = {r.package: r for r in isarisk.assess(cpu, [PackageInfo(package, version)])}[package]
    assert risk.at_risk and risk.safe_versions == safe
    if safe:
        # What the finding prints is a specifier pip accepts, and the releases it admits run on this CPU.
        for v in ("1.4.0", "1.5.0", "1.5.1", "2.3.5"):
            if SpecifierSet(safe).contains(v):
                floor = FLOORS.applicable_floor(package, v)
                assert floor is None or not LEVELS.missing_for(floor.needs, set(cpu.flags)), (v, floor)


def test_torch_160_avx_regression_is_a_floor_of_that_release_only(corpus):
    cpu = probe_cpu(machine_root(K10))
    risks = {v: {r.package: r for r in isarisk.assess(cpu, [PackageInfo("torch", v)])}["torch"]
             for v in ("1.5.1", "1.6.0+cpu", "2.13.0+cpu")}
    assert risks["1.6.0+cpu"].at_risk and risks["1.6.0+cpu"].safe_versions is None  # current releases run: upgrade
    assert not risks["1.5.1"].at_risk and not risks["2.13.0+cpu"].at_risk


def test_unknown_compiled_packages_are_reported_as_unknown():
    assert FLOORS.compiled_without_floor(["numpy", "PySide6_Essentials", "torch", "psutil"]) == ["psutil",
                                                                                                 "PySide6_Essentials"]


def test_packages_without_a_floor_say_so_honestly(corpus):
    cpu = probe_cpu(machine_root(K10))
    risks = {r.package: r for r in isarisk.assess(cpu, [PackageInfo("hnswlib", "0.8.0"), PackageInfo("tokenizers", "0.20")])}
    assert risks["hnswlib"].status == "unknown" and "-march=native" in risks["hnswlib"].note
    assert risks["tokenizers"].status == "unknown" and not risks["tokenizers"].at_risk
    assert risks["faiss-cpu"].status == "no_floor"
