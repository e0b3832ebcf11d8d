"""No finding ends mid-sentence: every rule's words on every corpus tree, scenario and real crash message.

Seen before the fix: "…died with SIGILL (Illegal instruction: … fix: pip)" and "…without AVX, or )",
because a rule quoted ``message[:160]`` and closed a parenthesis after it.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import MACHINES, machine_root
from text_checks import cut_mid_sentence, finding_text_problems

from cpudoctor.report_file import load_report
from cpudoctor import advisor
from cpudoctor.advisor.quoting import quote_message
from conftest import probe_tree
from cpudoctor.probes import probe_cpu
from cpudoctor.kits.child.exitstatus import diagnose_exit
from cpudoctor.probes.software.isarisk import shortfall
from cpudoctor.model import ImportCheck
from cpudoctor.model import Report
from cpudoctor.knowledge import FLOORS

SCENARIOS = sorted((Path(__file__).parent / "fixtures" / "scenarios").glob("*.json"))


@pytest.mark.parametrize("name", MACHINES)
def test_no_cut_sentences_on_corpus_trees(name):
    report = probe_tree(machine_root(name), software=True)
    assert finding_text_problems(advisor.diagnose(report)) == []


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.stem)
def test_no_cut_sentences_in_scenarios(path):
    assert finding_text_problems(advisor.diagnose(load_report(path))) == []


@pytest.mark.parametrize("package", list(FLOORS.packages))
def test_real_sigill_messages_are_quoted_whole(package):
    """The message the runner really builds (diagnose_exit + the probe's shortfall) on a CPU without AVX or SSE4.2."""
    report = load_report(Path(__file__).parent / "fixtures" / "scenarios" / "k10-tensorflow-sigill.json")
    report.cpu = probe_cpu(machine_root("archspec-scientific7-k10"))
    message = diagnose_exit(-4, isa_hint=shortfall(report.cpu, package, "99.0"), what=f"import {package}").message
    report.software.import_checks = [ImportCheck(package, package, "crashed", 4, "SIGILL", message, 0.3)]
    if package == "torch":
        report.software.torch.status, report.software.torch.signal_name = "crashed", "SIGILL"
        report.software.torch.error = message
    findings = advisor.diagnose(report)
    assert any(f.code == "ISA003" and package in f.title for f in findings)
    assert finding_text_problems(findings) == []


def test_doctor_output_has_no_cut_fix(capsys, tmp_path):
    """The rendered doctor text of a real-format SIGILL report: no "fix: pip)" style leftovers."""
    from conftest import run_cli

    report = load_report(Path(__file__).parent / "fixtures" / "scenarios" / "k10-tensorflow-sigill.json")
    long_hint = shortfall(report.cpu, "numpy", "2.4.0")
    message = diagnose_exit(-4, isa_hint=long_hint, what="import numpy").message
    report.software.import_checks.append(ImportCheck("numpy", "numpy", "crashed", 4, "SIGILL", message, 0.2))
    path = tmp_path / "r.json"
    path.write_text(report.to_json(), encoding="utf-8")
    code, out, _ = run_cli(capsys, "doctor", "--from-report", str(path))
    assert code == 1
    for line in out.splitlines():
        assert not line.rstrip().endswith((" or )", "pip)", "( )")), line


def test_quote_message_keeps_short_text_whole_and_cuts_long_text_cleanly():
    short = "ImportError: libgomp.so.1: cannot open shared object file (No such file or directory)"
    assert quote_message(short) == short
    long = ("RuntimeError: the first sentence is fine. " * 3 + "then (a clause that opens a bracket and goes on "
            + "and on " * 80 + ")")
    quoted = quote_message(long, limit=200)
    assert quoted.endswith("[…]") and len(quoted) < 210
    assert cut_mid_sentence(quoted) is None, quoted
    no_sentence = "x" * 10 + " (" + "word " * 100
    assert cut_mid_sentence(quote_message(no_sentence, limit=120)) is None


@pytest.mark.parametrize("text, why", [
    ("Install it with pip)", "unbalanced"),
    ("Build TensorFlow from source without AVX, or", "ends on"),
    ("Use the ( ) option", "empty"),
    ("Run `cpudoctor doctor", "unbalanced"),
    ("Run it (fix: pip install 'numpy<2.4')", None),
    ("torch.__config__.show() lists it.", None),
])
def test_cut_detector(text, why):
    reason = cut_mid_sentence(text)
    assert (reason is None) if why is None else (why in reason), (text, reason)
