"""Advisor rules: the scenario table, one good and one bad report per rule, and the engine's contracts."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from cpudoctor.render.rules import explain_text
from cpudoctor.report_file import load_report, report_from_dict, report_from_json
from cpudoctor import advisor
from cpudoctor.advisor import engine
from cpudoctor.advisor.kernel_rules import report_lab_findings
from cpudoctor.model import Finding, Report, ThreadRecommendation

SCENARIOS = Path(__file__).parent / "fixtures" / "scenarios"
SCENARIO_FILES = sorted(SCENARIOS.glob("*.json"))


def _load(name: str) -> Report:
    return load_report(SCENARIOS / f"{name}.json")


def _by_code(findings) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for f in findings:
        out.setdefault(f.code, set()).add(f.severity)
    return out


# ------------------------------------------------------------------ scenario table

def test_enough_scenarios_on_several_machines():
    machines = {json.loads(p.read_text())["scenario"]["machine"] for p in SCENARIO_FILES}
    assert len(SCENARIO_FILES) >= 25
    assert len(machines) >= 10


def test_every_rule_fires_non_ok_in_some_scenario():
    """Each rule's problem (or suggestion) is exercised by at least one scenario expectation."""
    expected_non_ok = set()
    for p in SCENARIO_FILES:
        for code, sev in json.loads(p.read_text())["expect"].items():
            if sev not in ("ok", "absent"):
                expected_non_ok.add(code)
    missing = {r.code for r in advisor.registry()} - expected_non_ok - {"TORCH002"}
    # TORCH002's warning needs GPU facts a saved report cannot carry yet; tested in-memory below.
    assert missing == set()


@pytest.mark.parametrize("path", SCENARIO_FILES, ids=lambda p: p.stem)
def test_scenario(path: Path):
    data = json.loads(path.read_text())
    report = report_from_dict(data)
    findings = engine.run_rules(report, strict=True)
    lab = report_lab_findings(report, strict=True)     # the job rules over the report's lab runs (EVID007, EVID008)
    got = _by_code(findings + lab)
    for code, severity in data["expect"].items():
        if severity == "absent":
            assert not (got.get(code, set()) - {"ok"}), f"{code} should not report a problem here, got {got.get(code)}"
        else:
            assert severity in got.get(code, set()), f"{code}: expected {severity}, got {got.get(code)}"
    for f in lab:
        assert f.docs == f"docs/evidence_rules.md#{f.code.lower()}" and f.why and f.fix
    for f in findings:
        assert f.docs == f"docs/rules.md#{f.code.lower()}"
        assert f.title
        if f.severity in ("warning", "error"):
            assert f.why and f.fix, f"{f.code} problem without why/fix"
            assert f.fields_used and set(f.fields_used) == set(f.evidence)


def test_scenarios_are_valid_saved_reports():
    """Fixtures double as --from-report files: they load and round-trip."""
    for p in SCENARIO_FILES:
        r = load_report(p)
        assert report_from_json(r.to_json()).to_dict() == r.to_dict()


# ------------------------------------------------------------------ wrong advice never given

def test_bf16_never_advised_without_native_bf16():
    for p in SCENARIO_FILES:
        r = load_report(p)
        for f in engine.run_rules(r, only={"PREC001"}, strict=True):
            native = r.cpu.isa.avx512_bf16 or "bf16" in r.cpu.isa.amx
            if "can pay off" in f.title:
                assert native, p.stem
            if not native:
                assert "slower" in f.title or "fp32" in f.title.lower(), p.stem


def test_zentorch_only_on_amd_zen():
    for p in SCENARIO_FILES:
        r = load_report(p)
        if engine.run_rules(r, only={"TORCH006"}, strict=True):
            assert r.cpu.vendor == "AMD" and r.cpu.microarchitecture.startswith("zen"), p.stem


def test_bf16_measured_ratio_uses_the_benchmarks():
    f = engine.run_rules(_load("zen3-bf16-measured-slow"), only={"PREC001"}, strict=True)[0]
    assert f.severity == "warning"
    assert "3.0x" in f.title  # 1510 / 498 samples/s
    assert f.evidence["benchmarks[train]"] == {"fp32": 1510.0, "bf16": 498.0}


def test_emulation_is_judged_by_the_executing_cpu():
    """qemu-user on a Zen 5 host: /proc/cpuinfo shows AVX-512, the emulated Nehalem has no AVX. PyTorch's
    DEFAULT kernels are then the best there is (no 'update PyTorch'; a suggestion naming the emulated CPU
    as the cause, since DEFAULT kernels are never a pass), and the report says what runs the code."""
    r = _load("zen5-host-qemu-nehalem")
    found = {f.code: f for f in engine.run_rules(r, only={"ISA002", "ISA007"}, strict=True)}
    isa2 = found["ISA002"]
    assert isa2.severity == "info" and "emulated, see ISA007" in isa2.why
    assert isa2.fix.startswith("Nothing to change in software")
    isa7 = found["ISA007"]
    assert isa7.severity == "error" and "avx2" in isa7.title and "GenuineIntel family 6 model 26" in isa7.why
    assert isa7.evidence["cpu.cpuid_check.emulated"] is True
    # Emulated but with the host's flags (qemu -cpu host): a warning, nothing is missing.
    r.cpu.cpuid_check = dataclasses.replace(r.cpu.cpuid_check, missing_flags=[])
    assert engine.run_rules(r, only={"ISA007"}, strict=True)[0].severity == "warning"
    # Not checked (--fast, a captured tree): the rule stays silent instead of guessing.
    r.cpu.cpuid_check = None
    assert engine.run_rules(r, only={"ISA007"}, strict=True) == []


def test_quota_numbers_in_why():
    f = engine.run_rules(_load("k10-container-quota"), only={"THR002"}, strict=True)[0]
    assert "4 usable CPUs" in f.why and "48" in f.why and "12.0x" in f.why
    assert "export OMP_NUM_THREADS=4" in f.snippet
    assert f.evidence["topology.affinity.usable_cpus"] == 4


def test_cgroup_cpuset_tree_counts_the_allowed_cpus(manifest):
    """The cgroup2 corpus tree allows 6 of 32 CPUs (hwloc's own expected allowed view)."""
    r = _load("k10-cgroup-cpuset")
    allowed = manifest["machines"]["hwloc-32amd64-4s2n4c-cgroup2"]["ground_truth"]
    assert r.topology.logical_cpus == allowed["pus"]
    f = engine.run_rules(r, only={"THR002"}, strict=True)[0]
    assert f.severity == "warning"
    assert f"{r.topology.affinity.usable_cpus} usable CPUs" in f.why


# ------------------------------------------------------------------ good / bad per rule

# code -> (good scenario, bad scenario): with only that rule enabled, the bad one reports a
# problem (severity > ok) and the good one does not.
GOOD_BAD = {
    "ISA001": ("zen3-healthy", "zen4-avx512-hidden-bare-metal"),
    "ISA002": ("zen3-healthy", "zen4-aten-capability-forced"),
    "ISA003": ("zen3-healthy", "k10-tensorflow-sigill"),
    "ISA004": ("zen3-healthy", "import-segfault-and-timeout"),
    "ISA005": ("zen3-healthy", "k10-tensorflow-at-risk"),
    "ISA006": ("zen3-healthy", "ryzen2700x-fma-hidden-bare-metal"),
    "ISA007": ("zen3-healthy", "zen5-host-qemu-nehalem"),
    "ISA008": ("zen3-healthy", "qemu64-generic-vm"),
    "ISA009": ("zen3-healthy", "qemu64-generic-vm"),
    "KNOWN001": ("sapphirerapids-amx", "raptorlake-openblas-prescott"),
    "TORCH001": ("zen3-healthy", "torch-not-installed"),
    "TORCH002": ("zen3-healthy", "ryzen2700x-cuda-wheel"),
    "TORCH003": ("zen3-healthy", "zen3-rocm-on-wsl2"),
    "TORCH004": ("zen3-healthy", "custom-build-no-mkl-onednn"),
    "TORCH005": ("zen3-healthy", "custom-build-no-mkl-onednn"),
    "TORCH006": ("zen5-zentorch-installed", "zen3-healthy"),
    "THR001": ("zen3-healthy", "k10-container-quota"),
    "THR002": ("zen3-healthy", "k10-container-quota"),
    "THR003": ("zen3-healthy", "zen5-smt-threads"),
    "BLAS001": ("zen3-healthy", "cascadelake-2s-two-openmp"),
    "BLAS002": ("zen3-healthy", "openblas-and-mkl-fight"),
    "TOPO001": ("cascadelake-2s-numa-pinned", "cascadelake-2s-two-openmp"),
    "TOPO002": ("ryzen2700x-ccx-pinned", "ryzen2700x-cuda-wheel"),
    "TOPO003": ("raptorlake-hybrid-pinned", "raptorlake-hybrid-unpinned"),
    "OS001": ("zen3-healthy", "raptorlake-powersave"),
    "MEM001": ("zen3-healthy", "laptop-swap-low-memory"),
    "MEM002": ("zen3-healthy", "laptop-swap-low-memory"),
    "ENV001": ("zen3-healthy", "zen2-wsl2-plain"),
    "ENV002": ("zen3-healthy", "zen4-avx512-masked-by-kvm"),
    "ENV003": ("zen3-healthy", "k10-container-quota"),
    "PREC001": ("sapphirerapids-amx", "zen3-bf16-measured-slow"),
    "PREC002": ("zen4-aten-capability-forced", "zen3-healthy"),
    "ALLOC001": ("zen3-healthy", "no-allocator-preload"),
    "MYTH001": ("zen3-healthy", "skylake-avx512-no-bf16-myths"),
    "MYTH002": ("zen3-healthy", "skylake-avx512-no-bf16-myths"),
    "MYTH003": ("zen3-healthy", "skylake-avx512-no-bf16-myths"),
    "MYTH004": ("zen3-healthy", "pin-memory-cpu-build"),
    "AFF001": ("zen3-healthy", "zen3-gomp-cpu-affinity-0"),
    "OMP001": ("zen3-healthy", "zen3-two-libiomp-error15"),
    "OMP002": ("zen3-healthy", "conda-mkl-threading-layer-intel"),
    "OMP003": ("zen3-two-libiomp-error15", "zen3-kmp-duplicate-lib-ok"),
    "KERNEL001": ("zen3-healthy", "zen3-openblas-coretype-skylakex"),
    "ISAENV001": ("zen3-healthy", "zen3-openblas-coretype-skylakex"),
    "THR004": ("zen3-healthy", "taskset-interop-host-sized"),
    "THR005": ("zen3-healthy", "zen3-opencv-transforms"),
    "TOPO004": ("zen3-healthy", "threadripper-3990x-windows10-groups"),
    "OS002": ("threadripper-3990x-windows11", "threadripper-3990x-windows10-groups"),
    "INFER001": ("zen3-healthy", "zen3-infer-measured"),
}
# Rules whose "good" case is advice rather than silence (the rule always has something to say).
ADVICE_WHEN_GOOD = {"PREC001": "bf16 autocast can pay off", "PREC002": "int8 inference can pay off"}
ADVICE_WHEN_BAD = {"PREC002": "gains little"}


def test_good_bad_table_covers_every_rule():
    assert set(GOOD_BAD) == {r.code for r in advisor.registry()}


@pytest.mark.parametrize("code", sorted(GOOD_BAD))
def test_rule_good_and_bad(code):
    good, bad = GOOD_BAD[code]
    good_f = engine.run_rules(_load(good), only={code}, strict=True)
    bad_f = engine.run_rules(_load(bad), only={code}, strict=True)
    assert all(f.code == code for f in good_f + bad_f)
    if code in ADVICE_WHEN_GOOD:
        assert any(ADVICE_WHEN_GOOD[code] in f.title for f in good_f)
    else:
        assert all(f.severity == "ok" for f in good_f), [f.title for f in good_f]
    if code in ADVICE_WHEN_BAD:
        assert any(ADVICE_WHEN_BAD[code] in f.title for f in bad_f)
    else:
        assert any(f.severity != "ok" for f in bad_f), f"{code} silent on {bad}"


# The job rules a report's lab runs are judged by: (a scenario where they stay silent, one where they speak).
LAB_GOOD_BAD = {
    "EVID007": ("zen4-kernels-healthy", "zen4-onednn-capped-avx2"),
    "EVID008": ("zen4-kernels-healthy", "zen4-bf16-capped-avx512-core"),
}


@pytest.mark.parametrize("code", sorted(LAB_GOOD_BAD))
def test_lab_kernel_rule_good_and_bad(code):
    good, bad = LAB_GOOD_BAD[code]
    assert report_lab_findings(_load(good), {code}, strict=True) == []
    found = report_lab_findings(_load(bad), {code}, strict=True)
    assert found and all(f.code == code and f.severity == "warning" for f in found)
    assert all(f.docs == f"docs/evidence_rules.md#{code.lower()}" for f in found)
    # the report's diagnosis carries them, asked for by the old report-rule code too
    old = {"EVID007": "ISA010", "EVID008": "PREC003"}[code]
    assert [f.code for f in advisor.diagnose(_load(bad), only={old})] == [code] * len(found)


@pytest.mark.parametrize("old, new", [("ISA010", "EVID007"), ("PREC003", "EVID008")])
def test_merged_codes_still_explain_select_and_link(old, new):
    """ISA010 and PREC003 asked of a report's lab runs what EVID007 and EVID008 ask of a run: one family each now.
    The old codes explain, select (--only) and keep their anchor in the rule pages; no rule set reuses them."""
    text = explain_text(old)
    assert text.startswith(f"{new} (") and f"({old} was renamed to {new}.)" in text
    assert advisor.resolve_only([old]) == {new}
    for page in ("rules.md", "evidence_rules.md"):
        body = (Path(__file__).resolve().parents[1] / "docs" / page).read_text(encoding="utf-8")
        assert f'<a id="{old.lower()}"></a>`{old}` is now [{new}]' in body, page
    with pytest.raises(engine.RuleDefinitionError, match="retired"):
        engine.rule(old, "reused-code", category="isa", severity="info", title="x")(_documented)


def _documented(report):
    """
    What it checks:
        x
    Why it matters:
        x
    Fix:
        x
    """
    return []


def test_isa005_installed_risk_without_crash_is_an_error():
    r = _load("k10-tensorflow-sigill")
    # The crash is ISA003's, and no green "every floor is met" stands beside it (issue 41 item 4).
    assert engine.run_rules(r, only={"ISA005"}, strict=True) == []
    r.software.import_checks = [c for c in r.software.import_checks if c.package != "tensorflow"]
    f = engine.run_rules(r, only={"ISA005"}, strict=True)
    assert [x.severity for x in f] == ["error"]
    assert "avx" in f[0].title and "tensorflow" in f[0].title
    assert "tensorflow<1.6" in f[0].snippet  # the releases this Opteron runs, from the version ranges
    # Not installed: no longer ISA005's business; the forecast (ISA008) lists it for information.
    r.software.isa_risks[-1].installed = False
    r.software.packages = [p for p in r.software.packages if p.name != "tensorflow"]
    assert [x.severity for x in engine.run_rules(r, only={"ISA005"}, strict=True)] == ["ok"]
    f = {x.severity: x for x in engine.run_rules(r, only={"ISA008"}, strict=True)}
    assert "TensorFlow ≥ 1.6" in f["info"].title or "TensorFlow 1.6 and later" in f["info"].why
    # The installed numpy 2.1.3 still runs on this Opteron, but the next minor release will not: a trap.
    assert f["warning"].title == "NumPy 2.1.3 runs here, but NumPy 2.4 and later will not"
    assert "python -m pip install 'numpy<2.4'" in f["warning"].snippet


def test_torch002_warns_when_the_report_knows_there_is_no_gpu():
    """Forward-compatible: once the software probe records GPUs, a CUDA build without one is a warning."""
    r = _load("ryzen2700x-cuda-wheel")
    r.software.gpus = []  # the software probe's future field; in-memory here
    f = engine.run_rules(r, only={"TORCH002"}, strict=True)[0]
    assert f.severity == "warning"
    assert "download.pytorch.org/whl/cpu" in f.snippet
    assert "nvidia-" in f.snippet  # the runtime wheels go too
    assert "GB" in f.why


def test_myths_detect_only_what_is_set():
    r = _load("skylake-avx512-no-bf16-myths")
    got = {f.code: f for f in engine.run_rules(r, only={"myth"}, strict=True)}
    assert set(got) == {"MYTH001", "MYTH002", "MYTH003"}
    assert "unset TORCH_LOOP_CORE_PINNING" in got["MYTH001"].snippet
    assert got["MYTH003"].evidence["software.thread_env.MKL_DEBUG_CPU_TYPE"] == "5"
    assert "2024.2" in got["MYTH003"].why
    old = engine.run_rules(_load("cascadelake-old-mkl-debug"), only={"MYTH003"}, strict=True)[0]
    assert old.severity == "info" and "2019.0.5" in old.title


def test_empty_report_runs_every_rule_without_error():
    findings = engine.run_rules(Report(), strict=True)
    assert all(f.severity == "ok" for f in findings)


# ------------------------------------------------------------------ engine contracts

def test_every_rule_has_the_doc_sections_and_valid_metadata():
    for r in advisor.registry():
        sections = r.sections()
        for name in engine.DOC_SECTIONS:
            assert sections.get(name), f"{r.code} lacks '{name}'"
        assert r.category in engine.CATEGORIES
        assert r.severity in engine.SEVERITIES


def test_registration_rejects_missing_doc_section_and_reused_code():
    with pytest.raises(engine.RuleDefinitionError, match="Fix"):
        @engine.rule("ZZZ901", "zz-test-missing-fix", category="isa", severity="info", title="t")
        def _bad(report):
            """What it checks:
                x

            Why it matters:
                y
            """
            return []
    with pytest.raises(engine.RuleDefinitionError, match="never reused"):
        @engine.rule("ISA001", "zz-other", category="isa", severity="info", title="t")
        def _reuse(report):
            """What it checks:
                x

            Why it matters:
                y

            Fix:
                z
            """
            return []
    assert "ZZZ901" not in {r.code for r in advisor.registry()}


def test_codes_and_symbols_unique_and_stable():
    rules = advisor.registry()
    assert len({r.code for r in rules}) == len(rules)
    assert len({r.symbol for r in rules}) == len(rules)
    assert advisor.registry()[0].code == "ISA001"  # category order: isa first


def test_redirects_and_symbols_resolve(monkeypatch):
    monkeypatch.setitem(engine.REDIRECTS, "THR099", "THR002")
    assert engine.resolve("thr099").code == "THR002"
    assert engine.resolve("avx512-not-usable").code == "ISA001"
    assert "renamed" in explain_text("THR099")
    with pytest.raises(advisor.UnknownRuleError, match="ISA00"):
        engine.resolve("ISA999")


def test_only_accepts_codes_symbols_and_categories():
    r = _load("skylake-avx512-no-bf16-myths")
    assert {f.code for f in advisor.diagnose(r, only={"myth"})} == {"MYTH001", "MYTH002", "MYTH003"}
    assert {f.code for f in advisor.diagnose(r, only={"torch-loop-core-pinning", "isa001"})} == {"MYTH001", "ISA001"}


_DOC = """What it checks:
    x

Why it matters:
    y

Fix:
    z
"""


def test_a_rule_set_is_generic_over_its_input():
    """The machinery both registries share, on a fresh set whose rules take a plain dict."""
    rules = engine.RuleSet("toy rule", prefix="TOY", docs_page="docs/toy.md", crash_hint="the dict",
                           redirects={"TOY009": "TOY002"}, group_by_category=False)

    def make(code, symbol, category, severity, produce):
        def fn(subject):
            return produce(subject)
        fn.__doc__ = _DOC
        fn.__qualname__ = f"toy_{code}"
        return rules.rule(code, symbol, category=category, severity=severity, title=f"title {code}")(fn)

    mk = Finding
    make("TOY002", "toy-warn", "isa", "warning",
         lambda d: [mk("", "", "", "warning" if d["n"] > 1 else "ok", "t")])
    make("TOY001", "toy-crash", "threads", "info", lambda d: [mk("", "", "", "info", "t")] if d["ok"] else 1 / 0)
    make("TOY003", "toy-too-bad", "os", "info", lambda d: [mk("", "", "", "error", "t")] if d["n"] > 5 else [])
    assert [r.code for r in rules.all()] == ["TOY001", "TOY002", "TOY003"]      # by code, not category
    with pytest.raises(engine.RuleDefinitionError, match="TOY and 3 digits"):
        make("ISA123", "toy-x", "isa", "info", lambda d: [])
    with pytest.raises(engine.RuleDefinitionError, match="retired"):
        make("TOY009", "toy-y", "isa", "info", lambda d: [])

    # Findings are stamped with the rule's labels and docs anchor; a crash is one internal finding.
    found = rules.run({"n": 2, "ok": False})
    assert [(f.code, f.symbol, f.category, f.severity) for f in found] == [
        ("TOY001", "toy-crash", "internal", "info"), ("TOY002", "toy-warn", "isa", "warning")]
    assert "ZeroDivisionError" in found[0].why and "the dict" in found[0].fix
    assert found[1].docs == "docs/toy.md#toy002"
    with pytest.raises(ZeroDivisionError):
        rules.run({"n": 2, "ok": False}, strict=True)
    # A finding worse than the registered worst severity is a bug in the rule, crash or not.
    with pytest.raises(engine.RuleDefinitionError, match="at most info"):
        rules.run({"n": 9, "ok": True})
    # Selection by code, old code, symbol or category; explain follows redirects.
    assert rules.resolve_only(["toy009", "toy-crash", "os"]) == {"TOY002", "TOY001", "TOY003"}
    assert [f.code for f in rules.run({"n": 2, "ok": True}, {"isa"})] == ["TOY002"]
    text = explain_text("TOY009", rules)
    assert text.startswith("TOY002 (toy-warn) — title TOY002\n") and "(TOY009 was renamed to TOY002.)" in text
    with pytest.raises(engine.UnknownRuleError, match="no toy rule 'TOY404'.*TOY001"):
        rules.resolve("TOY404")
    assert "TOY001" not in {r.code for r in advisor.registry()}


def test_a_crashing_rule_becomes_an_internal_finding(monkeypatch):
    rule = engine.REPORT_RULES.resolve("ISA001")

    def boom(report):
        raise RuntimeError("kaput")

    monkeypatch.setitem(engine.REPORT_RULES._rules, "ISA001", dataclasses.replace(rule, func=boom))
    findings = advisor.diagnose(_load("zen3-healthy"), only={"ISA001"})
    assert [f.category for f in findings] == ["internal"]
    assert "kaput" in findings[0].why
    with pytest.raises(RuntimeError):
        engine.run_rules(_load("zen3-healthy"), only={"ISA001"}, strict=True)


def test_explain_prints_every_section():
    text = explain_text("ISA001")
    for name in engine.DOC_SECTIONS:
        assert f"{name}:" in text
    assert "docs/rules.md#isa001" in text


def test_docs_rules_md_is_in_sync():
    from cpudoctor.render.rules import render_rules_md

    path = Path(__file__).resolve().parents[1] / "docs" / "rules.md"
    assert path.read_text(encoding="utf-8") == render_rules_md(), (
        "docs/rules.md is out of date: run `python -m cpudoctor.render.rules > docs/rules.md`")


def test_smt_rule_defers_to_a_measured_sweep():
    r = _load("zen5-smt-threads")
    assert engine.run_rules(r, only={"THR003"}, strict=True)[0].severity == "warning"
    r.recommendation = ThreadRecommendation(threads=32, variant="all threads")
    f = engine.run_rules(r, only={"THR003"}, strict=True)[0]
    assert f.severity == "ok" and "sweep" in f.title


def test_knowledge_file_names_real_uarchs_and_carries_reasons():
    from cpudoctor.knowledge import ADVISOR_KNOWLEDGE, MICROARCHITECTURES

    know = ADVISOR_KNOWLEDGE.data
    known = set(MICROARCHITECTURES.data["uarchs"])
    names = set(know["avx512_silicon"]["uarchs"]) | set(know["zen_uarchs"]["uarchs"]) | set(know["zen_uarchs"]["best"])
    assert names <= known, names - known
    assert all(reason for reason in know["avx512_silicon"]["uarchs"].values())
    for section in ("zen_uarchs", "wheel_sizes", "bf16", "mkl_debug_cpu_type", "memory"):
        assert know[section].get("reason"), section
    assert all(know["myth_env"].values())
    # Every AVX-512 micro-architecture the CPU probe knows (by its expected flags) is in the silicon table.
    uarchs = MICROARCHITECTURES.data["uarchs"]
    with_avx512 = {k for k, v in uarchs.items() if "avx512f" in v.get("expected_flags", [])}
    assert with_avx512 <= set(know["avx512_silicon"]["uarchs"]), with_avx512 - set(know["avx512_silicon"]["uarchs"])


@pytest.mark.parametrize("path", SCENARIO_FILES[:12], ids=lambda p: p.stem)
def test_evidence_is_small_and_named_by_field_path(path):
    """Evidence names the fields a finding used, with small values — never whole sub-reports."""
    for f in engine.run_rules(load_report(path), strict=True):
        assert len(json.dumps(f.evidence, default=str)) < 2000, (f.code, f.evidence)
        for key, value in f.evidence.items():
            assert key.split(".")[0].split("[")[0] in ("cpu", "topology", "software", "recommendation", "benchmarks"), key
            assert not (isinstance(value, dict) and len(value) > 8), (f.code, key)


@pytest.mark.slow
def test_myths_hold_for_the_installed_torch():
    """Measure, don't trust guides: the installed torch has no such switch and no such variable."""
    import importlib.util
    import subprocess
    import sys

    spec = importlib.util.find_spec("torch")
    if spec is None or spec.origin is None:
        pytest.skip("torch is not installed in this environment")
    root = Path(spec.origin).parent
    hits = [p.name for p in root.rglob("*") if p.is_file() and p.suffix in (".py", ".so")
            and b"TORCH_LOOP_CORE_PINNING" in p.read_bytes()]
    assert hits == []
    # torch is imported in a child only (the test process never imports it).
    code = "import pkgutil, torch.backends as b; print(' '.join(m.name for m in pkgutil.iter_modules(b.__path__)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True).stdout
    backends = set(out.split())
    assert {"cpu", "mkl", "mkldnn", "openmp"} <= backends
    assert "openblas" not in backends


def test_bf16_on_native_cpu_follows_the_measured_lab_runs():
    """Native bf16 is not a promise: a measured run where fp32 was faster wins over the datasheet."""
    from cpudoctor.model import BenchRun

    r = _load("sapphirerapids-amx")
    r.benchmarks = [BenchRun("train", {"dtype": "fp32"}, {"samples_per_s": 7470.0}),
                    BenchRun("train", {"dtype": "bf16"}, {"samples_per_s": 5000.0})]
    (f,) = engine.run_rules(r, only={"PREC001"}, strict=True)
    assert "slower than fp32" in f.title and "0.67x" in f.why
    r.benchmarks[1].metrics["samples_per_s"] = 12000.0
    (f,) = engine.run_rules(r, only={"PREC001"}, strict=True)
    assert "paid off here: 1.61x fp32 measured" in f.title and "1.61x as fast" in f.why


def test_precision_findings_defer_to_measured_figures():
    """Issue 16: PREC002 said "int8 gains little" while bench quant measured 6.8x; a noisy run is not evidence."""
    from cpudoctor.model import BenchRun

    r = _load("zen3-healthy")                                            # no VNNI, no native bf16
    (f,) = engine.run_rules(r, only={"PREC002"}, strict=True)
    assert "gains little" in f.title
    quant = BenchRun("quant", {}, {"points": [{"batch": 1, "speedup": 1.1}, {"batch": 64, "speedup": 6.8}],
                                   "quiet": True})
    r.benchmarks = [quant]
    (f,) = engine.run_rules(r, only={"PREC002"}, strict=True)
    assert f.title == "int8 measured 6.8x fp32 here, even without VNNI" and "1.1x at batch 1" in f.why
    quant.metrics["quiet"] = False                                       # measured while others used the CPU
    (f,) = engine.run_rules(r, only={"PREC002"}, strict=True)
    assert "gains little" in f.title
    # An emulated bf16 path that measured as fast as fp32 in the same job is not called slower.
    r.benchmarks = [BenchRun("train", {"dtype": "bf16"}, {"samples_per_s": 1000.0, "fp32_samples_per_s": 950.0})]
    (f,) = engine.run_rules(r, only={"PREC001"}, strict=True)
    assert f.title == "bf16 autocast measured 1.05x as fast as fp32 here, though emulated"
    assert "in the same job" in f.why and f.evidence["benchmarks[train]"] == {"fp32": 950.0, "bf16": 1000.0}


def test_int8_with_vnni_measured_slower_says_so():
    from cpudoctor.model import BenchRun

    r = _load("zen4-aten-capability-forced")
    r.benchmarks = [BenchRun("quant", {}, {"points": [{"batch": 64, "speedup": 0.14}]})]
    (f,) = engine.run_rules(r, only={"PREC002"}, strict=True)
    assert f.title == "int8 inference was slower than fp32 in your measured run (0.1x at batch 64)"
