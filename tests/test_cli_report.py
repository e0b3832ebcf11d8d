"""``cpudoctor report`` through the real entry point (in-process ``main`` and the installed script)."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import MANIFEST, REPO, machine_root, run_cli
from cpudoctor.report_file import load_report, report_from_json
from cpudoctor.cli import main
from cpudoctor.model import Report

SCRIPT = Path(sys.executable).with_name("cpudoctor")
ZEN5 = "archspec-rocky9-zen5"
GENOA = "archspec-rocky8.5-zen4"
RAPTOR = "hwloc-20em64t-hybrid-1p6c2t+2ca4co1t"


def _brand(name: str) -> str:
    return " ".join(MANIFEST["machines"][name]["cpuinfo"]["model_name"].split())


@pytest.mark.parametrize("name", [ZEN5, GENOA, RAPTOR, "hwloc-128arm-2pa2n8cluster4co", "pycpuinfo-fedora29-ryzen7-2700x-kvm"])
def test_json_on_corpus_root_matches_manifest_and_round_trips(name, corpus, capsys):
    code, out, err = run_cli(capsys, "report", "--fast", "--root", str(machine_root(name)), "--format", "json")
    assert code == 0, err
    data = json.loads(out)
    ci = MANIFEST["machines"][name]["cpuinfo"]
    cpu = data["cpu"]
    if "vendor_id" in ci:
        assert (cpu["vendor_id"], cpu["family"], cpu["model"], cpu["stepping"]) == (
            ci["vendor_id"], int(ci["cpu_family"]), int(ci["model"]), int(ci["stepping"]))
        assert cpu["brand"] == _brand(name)
    else:
        assert cpu["vendor_id"] == ci["cpu_implementer"] and ci["cpu_part"] in cpu["arm_parts"]
    assert cpu["isa"]["avx512_usable"] is bool(ci["avx512"])
    assert isinstance(cpu["isa"]["avx512_subsets"], list) and isinstance(cpu["flags"], list)
    # Redacted by default: where the tree lies on this disk is nobody's business, its name is kept.
    assert data["meta"]["root"] == f"…/{name}" and data["meta"]["redacted"] is True
    report = report_from_json(out)
    assert report.to_dict() == data                      # lossless round trip
    assert report_from_json(report.to_json()).to_dict() == data


def test_markdown_and_text_contain_brand_and_verdicts(corpus, capsys):
    root = str(machine_root(GENOA))
    code, md, _ = run_cli(capsys, "report", "--fast", "--root", root, "--format", "md")
    assert code == 0
    assert md.startswith(f"# CPU Doctor report: {_brand(GENOA)}")
    assert "| [✓] | AVX-512 |" in md and "Genoa" in md and "256-bit units" in md
    assert "<details>" in md and "## Topology" in md and "## Software" in md
    code, text, _ = run_cli(capsys, "report", "--fast", "--root", root, "--format", "text")
    assert code == 0
    assert text.startswith(f"CPU Doctor report: {_brand(GENOA)}")
    for needle in ("Instruction sets for deep learning", "[✓] AVX-512", "zen4", "x86-64-v4", "Topology", "Software"):
        assert needle in text
    # The CPU sections (ours) wrap at 100 columns; topology/software sections are checked by their owners.
    cpu_part = text.split("\nTopology\n", 1)[0].splitlines()[3:]
    assert max(len(line) for line in cpu_part) <= 100


def test_format_is_inferred_from_output_name(corpus, tmp_path, capsys):
    out = tmp_path / "zen5.json"
    code, stdout, err = run_cli(capsys, "report", "--fast", "--root", str(machine_root(ZEN5)), "-o", str(out))
    assert code == 0 and stdout == "" and err == ""
    assert load_report(out).cpu.microarchitecture == "zen5"
    md = tmp_path / "zen5.md"
    assert run_cli(capsys, "report", "--fast", "--root", str(machine_root(ZEN5)), "-o", str(md))[0] == 0
    assert md.read_text().startswith("# CPU Doctor report: AMD Ryzen 9 9950X")


def test_live_machine_fast(capsys):
    code, out, err = run_cli(capsys, "report", "--fast", "--format", "json")
    assert code == 0, err
    report = report_from_json(out)
    assert report.cpu.source in ("procfs", "py-cpuinfo")
    assert report.cpu.brand and report.cpu.brand in run_cli(capsys, "report", "--fast")[1]
    assert not any("CPUID" in n for n in report.cpu.notes), "--fast must not run the CPUID child"


@pytest.mark.parametrize(
    "argv, fragment",
    [
        (["--root", "/definitely/not/here"], "no such folder"),
        (["--root", __file__], "not a folder"),
        (["--format", "xml"], "invalid choice"),
        (["-o", "/definitely/not/here/report.json"], "does not exist"),
        (["--bogus"], "unrecognized arguments"),
    ],
)
def test_bad_usage_is_one_line_exit_2(argv, fragment, capsys):
    code, out, err = run_cli(capsys, "report", "--fast", *argv)
    assert code == 2 and out == ""
    _assert_one_line(err, fragment)


def test_root_without_proc_or_sys_is_rejected(tmp_path, capsys):
    (tmp_path / "something").write_text("x")
    code, _, err = run_cli(capsys, "report", "--fast", "--root", str(tmp_path))
    assert code == 2
    _assert_one_line(err, "no proc/cpuinfo")


def test_output_is_a_folder(tmp_path, capsys):
    code, _, err = run_cli(capsys, "report", "--fast", "--root", str(machine_root(ZEN5)), "-o", str(tmp_path))
    assert code == 2
    _assert_one_line(err, "it is a folder")


def test_garbled_tree_still_reports(tmp_path, capsys):
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc" / "cpuinfo").write_bytes(b"\x00\xff garbage \x13" * 50)
    code, out, err = run_cli(capsys, "report", "--fast", "--root", str(tmp_path), "--format", "json")
    assert code == 0, err
    report = report_from_json(out)
    assert report.cpu.vendor is None and report.cpu.notes


# -- through the installed console script --------------------------------

def test_script_json_round_trip(corpus):
    proc = subprocess.run([str(SCRIPT), "report", "--fast", "--root", str(machine_root(RAPTOR)), "--format", "json"],
                          capture_output=True, text=True, timeout=120, cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    report = report_from_json(proc.stdout)
    assert report.cpu.microarchitecture == "raptorlake" and report.cpu.max_mhz == 5200.0
    assert report.topology.logical_cpus == MANIFEST["machines"][RAPTOR]["ground_truth"]["pus"]


@pytest.mark.parametrize("argv, fragment", [
    (["--root", "/definitely/not/here"], "no such folder"),
    (["--format", "yaml"], "invalid choice"),
    (["-o", "/proc/cpudoctor-cannot-write.txt"], "cannot write"),
])
def test_script_errors_have_no_traceback(argv, fragment):
    proc = subprocess.run([str(SCRIPT), "report", "--fast", *argv], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    _assert_one_line(proc.stderr, fragment)


@pytest.mark.hardware
@pytest.mark.slow
@pytest.mark.alongside
def test_full_live_report_runs_the_cpuid_cross_check():
    """Without --fast the live report runs its child checks; on x86 the CPUID cross-check adds no emulation warning."""
    proc = subprocess.run([str(SCRIPT), "report", "--format", "json"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    report = report_from_json(proc.stdout)
    if report.cpu.arch == "x86_64":
        assert not any("emulation" in n or "cross-check skipped" in n for n in report.cpu.notes), report.cpu.notes


def _assert_one_line(err: str, fragment: str) -> None:
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1, err
    assert fragment in lines[0] and "Traceback" not in err
    assert lines[0].startswith(("cpudoctor report: error:", "cpudoctor: error:"))


@pytest.mark.parametrize("name, mark", [
    ("archspec-ubuntu20.04-zen3", "[-] AVX-512"),       # Zen 3 has no AVX-512: neutral, not an error
    ("archspec-rocky9-zen5", "[✓] AVX-512"),
    ("pycpuinfo-fedora29-ryzen7-2700x-kvm", "[✗] AVX2 + FMA"),   # the hypervisor hides FMA: a real problem
])
def test_text_marks(name, mark, corpus, capsys):
    code, text, _ = run_cli(capsys, "report", "--fast", "--no-findings", "--root", str(machine_root(name)))
    assert code == 0 and mark in text


def test_masked_avx512_on_zen4_guest_is_a_warning(corpus):
    """A Genoa guest whose hypervisor hides AVX-512: still zen4 by family/model, AVX-512 row warns."""
    import re as _re

    from cpudoctor.probes.cpu.identity import cpu_from_cpuinfo_text
    from cpudoctor.render.cpu import WARN, isa_rows

    text = (machine_root(GENOA) / "proc/cpuinfo").read_text()
    text = _re.sub(r"\bavx512\w*", "", text).replace("flags\t\t:", "flags\t\t: hypervisor")
    cpu = cpu_from_cpuinfo_text(text)
    assert cpu.microarchitecture == "zen4" and cpu.hypervisor and not cpu.isa.avx512_usable
    row = next(r for r in isa_rows(cpu) if r.name == "AVX-512")
    assert row.mark == WARN and "has AVX-512 but the OS does not report" in row.explain
    assert any("hypervisor masks them" in n for n in cpu.notes)


def test_render_dispatch_and_no_qt_for_text():
    """Text, Markdown and JSON never import Qt (only the PDF path may)."""
    code = ("import sys; from cpudoctor.pipeline import Source, build_report; "
            "from cpudoctor.render import render, FORMATS; "
            "r = build_report(Source.this_machine(), children=False); "
            "[render(r, f) for f in ('text', 'md', 'json')]; "
            "assert not [m for m in sys.modules if m.startswith('PySide6')], 'Qt imported'; "
            "print(sorted(FORMATS))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert {"json", "md", "text"} <= set(ast.literal_eval(proc.stdout.strip()))
    from cpudoctor.render import render

    with pytest.raises(KeyError, match="unknown report format"):
        render(Report(), "yaml")


def test_text_benchmarks_use_the_apps_words():
    """Job names, units and the recommendation read as on the Training page, never as Python reprs."""
    from cpudoctor.render.text import benchmarks_lines
    from cpudoctor.model import BenchRun, Report, ThreadRecommendation

    r = Report(recommendation=ThreadRecommendation(threads=1, variant="1 thread", samples_per_s=7470.0,
                                                   default_samples_per_s=6000.0))
    r.benchmarks = [BenchRun("train", {"model": "simplecnn", "cpus": None}, {"samples_per_s": 258912.4})]
    text = "\n".join(benchmarks_lines(r))
    assert "Recommended: 1 thread:" in text and "1 threads" not in text
    assert "Micro-training" in text and "samples/s: 258,912" in text
    assert "None" not in text and "{" not in text


def test_include_identifying_keeps_the_full_root(corpus, capsys):
    root = machine_root("archspec-rocky9-zen5")
    code = main(["report", "--fast", "--root", str(root), "--format", "json", "--include-identifying"])
    assert code == 0
    assert json.loads(capsys.readouterr().out)["meta"]["root"] == str(root)
