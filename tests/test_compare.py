"""Comparing two reports: structured diff, renderers, CLI round trip and bad files."""

from __future__ import annotations

import json

import pytest

from cpudoctor.compare import Change, Comparison, compare, render_json, render_markdown, render_text
from cpudoctor.model import Finding
from conftest import run_cli
from export_samples import epyc_topology, sample_report


def _after():
    b = sample_report()
    b.meta.generated_at = "2026-12-01T08:00:00+00:00"
    b.cpu.flags = [f for f in b.cpu.flags if f != "avx512_bf16"] + ["amx_tile"]
    b.topology = epyc_topology(packages=1)
    b.software.thread_env = {"OMP_NUM_THREADS": "32", "KMP_AFFINITY": "compact"}
    b.software.torch.version = "2.4.0+cpu"
    b.software.packages[1].version = "2.0.0"
    b.findings = [f for f in b.findings if f.code != "THR001"]
    b.findings[0].severity = "warning"                    # ISA001 ok -> warning
    b.findings.append(Finding(code="MEM002", symbol="thp-never", category="memory", severity="info",
                              title="Transparent huge pages are off"))
    for point in b.benchmarks[1].metrics["points"]:
        point["gflops"] *= 2                                # twice as fast after the fix
    b.benchmarks[0].metrics["points"][-1]["samples_per_s"] = 6276.0
    return b


def test_structured_diff():
    cmp = compare(sample_report(), _after())
    by = {(c.section, c.item): c for c in cmp.changes}
    assert by[("flags", "added")].b == ["amx_tile"]
    assert by[("flags", "removed")].a == ["avx512_bf16"]
    assert by[("topology", "packages")].a == 2 and by[("topology", "packages")].b == 1
    assert by[("threads", "OMP_NUM_THREADS")].note == "changed"
    assert by[("threads", "KMP_AFFINITY")].note == "set"
    assert by[("software", "torch.version")].b == "2.4.0+cpu"
    assert by[("packages", "numpy")].note == "changed"
    findings = {c.item.split()[0]: c.note for c in cmp.section("findings")}
    assert findings == {"THR001": "no longer applies", "ISA001": "worse", "MEM002": "new"}
    assert by[("benchmarks", "gemm.peak fp32 GFLOP/s")].note == "2.00x"
    assert by[("benchmarks", "gemm.peak bf16 GFLOP/s")].note == "2.00x"
    best = by[("benchmarks", "sweep.best samples/s")]
    assert (best.a, best.b, best.note) == (5230.0, 6276.0, "1.20x")
    assert not any(c.section == "chip" for c in cmp.changes)


def test_same_report_has_no_differences():
    cmp = compare(sample_report(), sample_report())
    assert cmp.same
    assert "No differences." in render_text(cmp)


def test_renderers():
    cmp = compare(sample_report(), _after())
    text = render_text(cmp)
    assert "Findings:" in text and "no longer applies" in text and "2.00x" in text
    md = render_markdown(cmp)
    assert "## Findings" in md and "<details>" in md and "| GEMM throughput: peak fp32 GFLOP/s |" in md
    assert "| | A | B | Change |" in md
    data = json.loads(render_json(cmp))
    assert data["changes"] and {"section", "item", "a", "b", "note"} <= set(data["changes"][0])


def test_wording_for_a_reader():
    """Found in real comparisons: raw field names, byte counts, a passed check "resolved", identical labels."""
    a, b = sample_report(), sample_report()
    b.meta.generated_at = a.meta.generated_at[:11] + "11:45:00+00:00"          # same day, later: before/after
    b.software.os.mem_total_bytes = 512 << 30
    b.topology = epyc_topology(packages=1)
    for d in b.topology.l3_domains:
        d.size_bytes = 96 << 20
    b.findings = [f for f in b.findings if f.code != "ISA001"]                 # a passed check not run in B
    b.cpu.brand = "AMD EPYC 9684X 96-Core Processor"
    cmp = compare(a, b)
    assert cmp.label_a.endswith("10:12 UTC)") and cmp.label_b.endswith("11:45 UTC)")
    text = render_text(cmp)
    assert "memory: 768 GiB -> 512 GiB" in text
    assert "L3 size: 32 MiB -> 96 MiB" in text
    assert "logical CPUs: 128 -> 64" in text and "logical_cpus" not in text
    assert "name: AMD EPYC 9354" in text
    isa = next(c for c in cmp.changes if c.item.startswith("ISA001"))
    assert isa.note == "checked only in A" and "no longer applies" not in text
    big = Change("benchmarks", "quant.peak int8 samples/s", 258911.7, 336585.2, "1.30x")
    assert "258,912 -> 336,585" in render_text(Comparison("A", "B", [big]))
    assert "Micro-training: — -> run" in render_text(Comparison("A", "B", [Change("benchmarks", "train", None, "run")]))
    # Cache sizes are exact (like lstopo), not rounded the way memory is: 27.5 MiB, Magny-Cours' 5118 KiB.
    for d in b.topology.l3_domains:
        d.size_bytes = 28160 << 10
    assert "L3 size: 32 MiB -> 27.5 MiB" in render_text(compare(a, b))
    for d in b.topology.l3_domains:
        d.size_bytes = 5118 << 10
    assert "L3 size: 32 MiB -> 5118 KiB" in render_text(compare(a, b))
    # Different days keep the short label.
    assert compare(sample_report(), _after()).label_b.endswith("(2026-12-01)")


def test_cli_round_trip(tmp_path, capsys):
    from cpudoctor.export import export_report

    a = export_report(sample_report(), "json", tmp_path / "a.json")
    b = export_report(_after(), "json", tmp_path / "b.json")
    code, out, err = run_cli(capsys, "compare", str(a), str(b), "--format", "json")
    assert code == 0, err
    items = {c["item"] for c in json.loads(out)["changes"]}
    assert "torch.version" in items and "added" in items
    code, out, _ = run_cli(capsys, "compare", str(a), str(b))
    assert code == 0 and "A: AMD EPYC 9354" in out


@pytest.mark.parametrize("content, message", [
    ("{not json", "not valid JSON"),
    ('{"hello": 1}', "not a CPU Doctor report"),
    ('{"schema_version": 99, "meta": {"kind": "cpudoctor-report"}}', "schema version 99"),
    ('[1, 2]', "not a CPU Doctor report"),
    ('{"schema_version": 1, "meta": {"kind": "cpudoctor-report"}, "cpu": {"flags": 7}}', "damaged"),
])
def test_cli_bad_files(tmp_path, capsys, content, message):
    from cpudoctor.export import export_report

    good = export_report(sample_report(), "json", tmp_path / "good.json")
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    code, out, err = run_cli(capsys, "compare", str(good), str(bad))
    assert code == 2 and out == ""
    assert message in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_cli_missing_and_binary_file(tmp_path, capsys):
    binary = tmp_path / "x.json"
    binary.write_bytes(b"\xff\xfe\x00\x81")
    code, _, err = run_cli(capsys, "compare", str(tmp_path / "nope.json"), str(binary))
    assert code == 2 and "cannot read" in err


def test_captured_tree_is_not_a_machine_without_python():
    """report --root has no Python/packages of its own: say so instead of 'torch removed, OMP unset'."""
    a, b = sample_report(), sample_report()
    b.software.captured = True
    b.software.packages, b.software.thread_env = [], {}
    b.software.torch.status = "not_installed"
    text = render_text(compare(a, b))
    assert "Python, packages and thread environment: read -> not read (captured tree)" in text
    assert "[removed]" not in text and "PyTorch status" not in text and "[unset]" not in text


def _interleaved(name):
    from conftest import machine_root

    from cpudoctor.pipeline import Source, build_report

    return build_report(Source.tree(machine_root(name)), children=False)


def test_interleaved_cpu_lists_are_short():
    """Round-robin numbered machines: counts first, then the kernel's a-b:stride form, not 20 CPUs spelled out."""
    from cpudoctor.kits.cpulist import parse_cpulist

    a, b = _interleaved("hwloc-memorysidecaches"), _interleaved("hwloc-96em64t-4no4pa3ca2co")
    cmp = compare(a, b)
    text = render_text(cmp)
    assert "A: 4 nodes × 20 CPUs: 0-76:4; 1-77:4; 2-78:4; 3-79:4" in text
    assert "B: 4 nodes × 24 CPUs: 0-23; 24-47; 48-71; 72-95" in text
    assert "A: 2 L3s × 40 CPUs: 0-78:2; 1-79:2" in text
    assert "B: 16 L3s × 6 CPUs: 0-20:4; 1-21:4; 2-22:4; 3-23:4; +12 more" in text
    assert "0,4,8,12" not in text
    assert max(len(line) for line in text.splitlines()) <= 100
    # The short forms are exact: they parse back to the probed sets.
    assert [parse_cpulist(x) for x in ("0-76:4", "1-77:4", "2-78:4", "3-79:4")] == [n.cpus for n in a.topology.numa_nodes]
    md = render_markdown(cmp)
    assert "| NUMA nodes (CPUs) | 4 nodes × 20 CPUs: 0-76:4; 1-77:4; 2-78:4; 3-79:4 | 4 nodes × 24 CPUs:" in md
    # The data (JSON, the GUI) keeps every CPU.
    numa = next(c for c in json.loads(render_json(cmp))["changes"] if c["item"] == "numa_nodes")
    assert parse_cpulist(numa["a"][0]) == a.topology.numa_nodes[0].cpus


def _omp_finding(**fields_used):
    return Finding(code="THR001", symbol="omp-num-threads-unset", category="threads", severity="info",
                   title="OMP_NUM_THREADS is not set",
                   fields_used=["software.thread_env.OMP_NUM_THREADS", "software.torch.intra_op_threads"],
                   evidence={"software.thread_env.OMP_NUM_THREADS": None, "software.torch.intra_op_threads": 64})


def _note(a, b, code="THR001"):
    return next(c.note for c in compare(a, b).section("findings") if c.item.startswith(code))


def test_a_rule_that_did_not_run_did_not_stop_applying():
    """Found by review: B made with --fast or from a captured tree has no THR001, which is not a fix."""
    a = sample_report()
    a.findings = [_omp_finding()]
    fixed = sample_report()
    fixed.findings = []
    assert _note(a, fixed) == "no longer applies"            # same kind of report, the rule says nothing
    fast = sample_report()
    fast.findings, fast.software.children_ran = [], False
    assert _note(a, fast) == "not checked in B"              # the rule needed the torch child
    captured = sample_report()
    captured.findings, captured.software.captured = [], True
    assert _note(a, captured) == "not checked in B"          # no environment of its own
    bare = sample_report()
    bare.findings, bare.software = [], None
    assert _note(a, bare) == "not checked in B"
    assert _note(fast, a) == "not checked in A"              # and the other way round, not "new"
    assert _note(fixed, a) == "new"
    text = render_text(compare(a, captured))
    assert "[not checked in B]" in text and "no longer applies" not in text


def test_fast_report_still_checks_what_it_reads():
    """--fast reads the environment (no children): a rule that used only env vars did run there."""
    a = sample_report()
    env_only = _omp_finding()
    env_only.fields_used = ["software.thread_env.OMP_NUM_THREADS", "topology.cores"]
    env_only.evidence = {}
    a.findings = [env_only]
    fast = sample_report()
    fast.findings, fast.software.children_ran = [], False
    assert _note(a, fast) == "no longer applies"
    # A captured tree knows its OS files: a governor finding gone there no longer applies unless the file was missing.
    gov = Finding(code="OS003", symbol="governor", category="os", severity="info", title="Governor is powersave",
                  fields_used=["software.os.governor"])
    a.findings = [gov]
    captured = sample_report()
    captured.findings, captured.software.captured = [], True
    captured.software.os.governor = "performance"
    assert _note(a, captured, "OS003") == "no longer applies"
    captured.software.os.governor = None
    assert _note(a, captured, "OS003") == "not checked in B"


# -- issue 26: the environment first, "fixed" vs "no longer applies", and nothing heavy ----------------

def _in_env(report, executable: str, name: str, version: str = "3.11.7"):
    p = report.software.python
    p.executable, p.prefix, p.env_name, p.env_kind, p.version = executable, executable.rsplit("/bin/", 1)[0], name, "venv", version
    return report


def test_different_environments_are_said_before_anything_else():
    """Seen before: two reports of different environments read as 'torch removed, numpy changed, resolved'."""
    a = _in_env(sample_report(), "/opt/envs/train/bin/python", "train")
    b = _in_env(_after(), "/usr/bin/python3", "python3", "3.11.2")
    cmp = compare(a, b)
    assert cmp.same_environment is False and cmp.environment_a.startswith("train (venv, Python 3.11.7)")
    text = render_text(cmp)
    first = text.split("\n\n")[1]                                   # right after the A/B labels
    assert first.startswith("Python environment: the reports describe different environments")
    assert "train (venv, Python 3.11.7)" in first and "python3 (venv, Python 3.11.2)" in first
    from cpudoctor.compare import SECTION_TITLES

    sections = [line[:-1] for line in text.splitlines() if line[:-1] in SECTION_TITLES.values()]
    assert sections[:3] == ["Python", "Packages", "Thread environment"]       # what changed in the environment first
    assert "version: 3.11.7 -> 3.11.2" in text
    md = render_markdown(cmp)
    assert md.index("**Python environment:**") < md.index("## Packages")
    assert json.loads(render_json(cmp))["environment"] == {"a": cmp.environment_a, "b": cmp.environment_b,
                                                            "same": False}


def test_one_environment_says_what_changed_in_it():
    a = _in_env(sample_report(), "/opt/envs/train/bin/python", "train")
    b = _in_env(_after(), "/opt/envs/train/bin/python", "train")
    text = render_text(compare(a, b))
    assert ("Python environment: the same in both, train (venv, Python 3.11.7); 1 package and 3 thread variables "
            "changed in it.") in " ".join(text.split())
    same = render_text(compare(a, _in_env(sample_report(), "/opt/envs/train/bin/python", "train")))
    assert "nothing in it changed" in same and "No differences." in same
    captured = sample_report()
    captured.software.captured = True
    assert "only B describes one" in render_text(compare(captured, a))


def test_fixed_only_when_the_check_passes_else_no_longer_applies():
    """A rule that stopped applying is not a fix: 'fixed' is a check that passes now."""
    a = sample_report()
    a.findings = [_omp_finding(), Finding(code="OS003", symbol="governor", category="os", severity="warning",
                                           title="Governor is powersave", fields_used=["software.os.governor"])]
    b = sample_report()
    b.findings = [Finding(code="OS003", symbol="governor", category="os", severity="ok",
                          title="Governor is performance", fields_used=["software.os.governor"])]
    notes = {c.item.split()[0]: c.note for c in compare(a, b).section("findings")}
    assert notes == {"OS003": "fixed", "THR001": "no longer applies"}
    text = render_text(compare(a, b))
    assert "[fixed]" in text and "[no longer applies]" in text and "resolved" not in text


def test_compare_files_labels_sides_and_names_a_bad_file(tmp_path):
    from cpudoctor.compare import compare_files
    from cpudoctor.export import export_report
    from cpudoctor.model import ReportError

    a = export_report(sample_report(), "json", tmp_path / "before.json")
    b = export_report(_after(), "json", tmp_path / "after.json")
    cmp = compare_files(a, b)
    assert cmp.label_a.endswith(", before.json") and cmp.label_b.endswith(", after.json")
    assert cmp.label_a.startswith("AMD EPYC 9354")
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(ReportError, match=r"bad\.json: .*not valid JSON"):
        compare_files(a, tmp_path / "bad.json")


def test_compare_reads_two_files_and_nothing_else(tmp_path):
    """Two saved reports are compared as saved: no advisor run, no probe, no other command imported (it took
    seconds: the schema compiled in every process, all nine commands and every probe imported)."""
    import subprocess
    import sys

    from cpudoctor.export import export_report

    a = export_report(sample_report(), "json", tmp_path / "a.json")
    b = export_report(_after(), "json", tmp_path / "b.json")
    code = ("import sys\nfrom cpudoctor.cli import main\nmain(['compare', sys.argv[1], sys.argv[2]])\n"
            "print('MODULES', ' '.join(sorted(sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code, str(a), str(b)], capture_output=True, text=True, timeout=120,
                         env={**__import__("os").environ, "CPUDOCTOR_CACHE_DIR": str(tmp_path / "cache")})
    assert out.returncode == 0, out.stderr
    modules = set(out.stdout.rsplit("MODULES ", 1)[1].split())
    assert "A: AMD EPYC 9354" in out.stdout
    heavy = {m for m in modules if m.startswith(("cpudoctor.advisor.rules", "cpudoctor.probes.cpu",
                                                  "cpudoctor.probes.software.stack", "cpudoctor.pipeline",
                                                  "cpudoctor.commands.", "torch", "PySide6", "psutil"))}
    assert heavy == {"cpudoctor.commands.compare"}
    assert list((tmp_path / "cache").glob("report-*.schema-code"))      # the schema compiled once, for the next run
