"""`cpudoctor doctor` and `cpudoctor explain` through the real entry point."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import run_cli

from cpudoctor.render.rules import explain_text
from cpudoctor import advisor
from cpudoctor.cli import main

SCENARIOS = Path(__file__).parent / "fixtures" / "scenarios"
REPO = Path(__file__).resolve().parents[1]


def test_clean_report_exits_0_with_green_lines(capsys):
    code, out, err = run_cli(capsys, "doctor", "--from-report", str(SCENARIOS / "zen3-healthy.json"))
    assert code == 0, err
    assert "[✓] CPU instruction sets" in out
    assert "✓ AVX-512: not part of zen3" in out
    assert out.rstrip().splitlines()[-1].startswith("No issues found!")
    assert "AMD Ryzen 9 5950X" in out.splitlines()[0]


def test_error_finding_exits_1_with_fix_indented(capsys):
    code, out, _ = run_cli(capsys, "doctor", "--from-report", str(SCENARIOS / "k10-tensorflow-sigill.json"))
    assert code == 1
    lines = out.splitlines()
    i = next(n for n, line in enumerate(lines) if "tensorflow crashes on import" in line)
    assert lines[i].startswith("    ✗ ")
    assert lines[i + 1].startswith("        ") and "SIGILL" in out
    assert any(line.startswith("        Fix: ") for line in lines[i:i + 8])
    assert "[✗] CPU instruction sets" in out
    assert "Doctor found issues in" in lines[-2] or "Doctor found issues in" in lines[-1]


def test_summary_counts_categories(capsys):
    code, out, _ = run_cli(capsys, "doctor", "--from-report", str(SCENARIOS / "laptop-swap-low-memory.json"))
    assert code == 0  # warnings only
    assert "Doctor found issues in 1 category (2 warnings" in out
    assert "[!] Memory and swap" in out


def test_warnings_only_exit_0_and_only_filter(capsys):
    code, out, _ = run_cli(capsys, "doctor", "--from-report", str(SCENARIOS / "skylake-avx512-no-bf16-myths.json"),
                        "--only", "myth")
    assert code == 0
    assert "[!] Myths from tuning guides" in out
    assert "CPU instruction sets" not in out
    assert out.count("(MYTH00") == 3


def test_json_format(capsys):
    code, out, _ = run_cli(capsys, "doctor", "--from-report", str(SCENARIOS / "k8-torch-sigill.json"), "--format", "json")
    assert code == 1
    data = json.loads(out)
    assert data["exit_code"] == 1
    assert data["counts"]["error"] >= 1
    codes = {f["code"]: f for f in data["findings"]}
    assert codes["ISA003"]["severity"] == "error"
    assert codes["ISA003"]["fields_used"]
    assert codes["TOPO001"]["docs"] == "docs/rules.md#topo001"


def test_md_format(capsys):
    code, out, _ = run_cli(capsys, "doctor", "--from-report", str(SCENARIOS / "k10-container-quota.json"), "--format", "md")
    assert code == 0
    assert out.startswith("## CPU Doctor")
    assert "### ⚠️ Thread counts" in out
    assert "```bash" in out and "export OMP_NUM_THREADS=4" in out


def test_list_rules_text_json_md(capsys):
    code, out, _ = run_cli(capsys, "doctor", "--list-rules")
    assert code == 0
    for r in advisor.registry():
        assert r.code in out and r.symbol in out
    assert "more (PROC001-PROC0" in out and "cpudoctor inspect PID" in out   # the process rules are pointed at
    code, out, _ = run_cli(capsys, "doctor", "--list-rules", "--format", "json")
    assert [r["code"] for r in json.loads(out)] == [r.code for r in advisor.registry()]
    code, out, _ = run_cli(capsys, "doctor", "--list-rules", "--format", "md")
    assert out.count("\n| [") == len(advisor.registry())


@pytest.mark.parametrize("argv,needle", [
    (["doctor", "--from-report", "/nonexistent/report.json"], "cannot read"),
    (["doctor", "--only", ",", "--from-report", str(SCENARIOS / "zen3-healthy.json")], "at least one rule code"),
    (["doctor", "--only", "XYZ999", "--from-report", str(SCENARIOS / "zen3-healthy.json")], "no rule or category 'XYZ999'"),
    (["doctor", "--root", "/nonexistent-root"], "no such folder"),
    (["doctor", "--format", "yaml"], "invalid choice"),
    (["explain", "NOPE999"], "no rule"),
])
def test_bad_usage_exits_2_with_one_line(capsys, argv, needle):
    code, out, err = run_cli(capsys, *argv)
    assert code == 2
    assert len(err.strip().splitlines()) == 1, err
    assert needle in err
    assert "Traceback" not in err


def test_root_and_from_report_are_exclusive(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["doctor", "--root", "/", "--from-report", "x.json"])
    assert exc.value.code == 2
    assert "not allowed with" in capsys.readouterr().err


def test_not_a_report_and_damaged_report(tmp_path, capsys):
    other = tmp_path / "other.json"
    other.write_text('{"hello": 1}')
    code, _, err = run_cli(capsys, "doctor", "--from-report", str(other))
    assert code == 2 and "not a CPU Doctor report" in err
    broken = tmp_path / "broken.json"
    broken.write_text('{"schema_version": 1, "meta": {"kind": "cpudoctor-report"}, "cpu": {"flags": 7}}')
    code, _, err = run_cli(capsys, "doctor", "--from-report", str(broken))
    assert code == 2 and "damaged" in err


def test_captured_tree_root(capsys, corpus):
    code, out, err = run_cli(capsys, "doctor", "--root", str(corpus / "machines" / "hwloc-memorysidecaches"))
    assert code == 0, err
    assert "captured tree" in out.splitlines()[0]
    assert "4 NUMA nodes: bind each job to one (TOPO001)" in out  # env unknown for a captured tree: advice
    assert "PyTorch" not in out  # the software of this process says nothing about that tree


def test_output_file(tmp_path, capsys):
    target = tmp_path / "doctor.md"
    code, out, _ = run_cli(capsys, "doctor", "--from-report", str(SCENARIOS / "zen3-healthy.json"), "--format", "md",
                        "-o", str(target))
    assert code == 0 and out == ""
    assert target.read_text().startswith("## CPU Doctor")


def test_ascii_fallback_when_stdout_cannot_encode_marks():
    env = {**os.environ, "PYTHONIOENCODING": "ascii"}
    res = subprocess.run([sys.executable, "-m", "cpudoctor", "doctor", "--from-report",
                          str(SCENARIOS / "k10-tensorflow-sigill.json")],
                         capture_output=True, env=env, cwd=REPO, timeout=60)
    assert res.returncode == 1, res.stderr.decode()
    out = res.stdout.decode("ascii")
    assert "[x] CPU instruction sets" in out and "[+] " in out
    assert "✓" not in out


def test_explain_prints_sections(capsys):
    code, out, _ = run_cli(capsys, "explain", "thr002")
    assert code == 0
    assert out.startswith("THR002 (threads-above-usable-cpus)")
    for section in ("What it checks:", "Why it matters:", "Fix:"):
        assert section in out
    code, out, _ = run_cli(capsys, "explain", "torch-loop-core-pinning")
    assert code == 0 and out.startswith("MYTH001")


@pytest.mark.hardware
def test_this_machine_fast(capsys):
    """--fast: no child processes, and the findings `report --fast` gives (--no-software is its old name)."""
    code, out, err = run_cli(capsys, "doctor", "--fast", "--format", "json")
    assert code in (0, 1), err
    data = json.loads(out)
    assert data["source"] == "this machine"
    cats = {f["category"] for f in data["findings"]}
    assert "isa" in cats and "topology" in cats
    torch = [f for f in data["findings"] if f["code"].startswith("TORCH")]
    assert all(f["evidence"].get("software.torch.status") in (None, "skipped", "not_installed") for f in torch)
    _, report_json, _ = run_cli(capsys, "report", "--fast", "--format", "json")
    codes = {(f["code"], f["severity"]) for f in data["findings"]}
    assert codes == {(f["code"], f["severity"]) for f in json.loads(report_json)["findings"]}
    code, old, _ = run_cli(capsys, "doctor", "--no-software", "--format", "json")
    assert {(f["code"], f["severity"]) for f in json.loads(old)["findings"]} == codes


def test_explain_covers_process_rules_too():
    """PROC rules live in the inspector's registry; `cpudoctor explain` must still know them."""
    from cpudoctor import advisor

    text = explain_text("PROC001")
    assert text.startswith("PROC001") and "What it checks" in text and "Fix" in text
