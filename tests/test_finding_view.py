"""One finding, one set of words: every surface lays out the same finding view.

A finding is rendered in every format (text, Markdown, HTML, the doctor's text,
Markdown and JSON, ``inspect``, the window's Advisor page offscreen) from one
object, and each must carry the title, why, fix, snippet and rule link the view
words. The CPU identity rows of the exports and of the Overview's Processor card
come from one function too. A house rule keeps it so: no renderer reads a
finding's words itself.
"""

from __future__ import annotations

import html as html_module
import json
import re
from pathlib import Path

import pytest

from cpudoctor.model import CpuInfo, Finding, Report
from cpudoctor.render import doctor, markdown, text
from cpudoctor.render.cpu_facts import cpu_facts
from cpudoctor.render.finding_view import EVIDENCE_LIMIT, finding_view, shell_snippet
from cpudoctor.render.html import render_html

REPO = Path(__file__).resolve().parents[1]
SCENARIOS = Path(__file__).parent / "fixtures" / "scenarios"


def _finding() -> Finding:
    return Finding(
        code="THR002", symbol="threads-exceed-cpus", category="threads", severity="warning",
        title="OMP_NUM_THREADS=16 asks for more threads than the 4 usable CPUs",
        why=("The cgroup quota allows 4 CPUs, so 16 OpenMP threads take turns on them and every parallel "
             "region waits for the slowest; training runs slower than with 4 threads."),
        fix="Set the thread count to the usable CPUs and pin the job to them.",
        snippet="export OMP_NUM_THREADS=4\nunset KMP_AFFINITY\ntaskset -c 0-3 python train.py",
        docs="docs/rules.md#thr002",
        evidence={"topology.affinity.usable_cpus": 4, "software.thread_env.OMP_NUM_THREADS": "16",
                  "software.preload_libs": [], "cpu.isa.avx2": True, "software.torch.version": None})


def _report(*findings: Finding) -> Report:
    report = Report()
    report.cpu.brand = "AMD EPYC 7763 64-Core Processor"
    report.findings = list(findings)
    return report


def _words(value: str) -> str:
    return " ".join(value.split())


def _from_markdown(value: str) -> str:
    return _words(re.sub(r"\\([\\`*_\[\]<>|#])", r"\1", value))


def _from_html(value: str) -> str:
    return _words(html_module.unescape(re.sub(r"<[^>]+>", " ", value)))


def _surfaces(f: Finding, qtbot) -> dict[str, str]:
    """Every place a finding is shown, as plain words."""
    from cpudoctor.gui.advisor_page import AdvisorPage
    from cpudoctor.gui.model import AppModel

    report = _report(f)
    page = AdvisorPage(AppModel())
    qtbot.addWidget(page)
    page._show_details(f)
    advisor = f"{page.details_title.text()} {page.details.toPlainText()} {page.snippet_text()}"
    from cpudoctor.gui.inspector_model import findings_html
    from cpudoctor.render import run_report
    from cpudoctor.render.inspect import render_text as inspect_text
    from cpudoctor.render.lab import findings_text

    run = _observation()
    return {
        "text": _words(text.render(report)),
        "md": _from_markdown(markdown.render(report)),
        "html": _from_html(render_html(report)),
        "doctor text": _words(doctor.render_text(report, report.findings, "this machine")),
        "doctor md": _from_markdown(doctor.render_md(report, report.findings, "this machine")),
        "Advisor page": _words(advisor),
        "run text": _words(run_report.render_text(run, [f])),
        "run md": _from_markdown(run_report.render_md(run, [f])),
        "run html": _from_html(run_report.render_html(run, [f])),
        "inspect": _words(inspect_text(_inspection(), [f])),
        "Inspector page": _from_html(findings_html([f])),
        "bench": _words(findings_text([f])),
    }


def _observation():
    from cpudoctor.probes.process.observe import RunObservation

    return RunObservation(command="python train.py", exit_code=0, duration_s=3.0)


def _inspection():
    from cpudoctor.probes.process.inspect import Inspection

    return Inspection(pid=10, name="python", cmdline="python train.py", is_python=True, window_s=1.0)


def test_one_finding_reads_the_same_on_every_surface(qtbot):
    f = _finding()
    view = finding_view(f)
    seen = _surfaces(f, qtbot)
    for surface, words in seen.items():
        for part in (view.title, view.why, view.fix, view.code):
            assert _words(part) in words, (surface, part)
        for line in view.snippet.text.splitlines():
            assert _words(line) in words, (surface, line)
    # The doctor's JSON is data: the same finding, field for field.
    data = json.loads(doctor.render_json(_report(f), [f], "this machine"))["findings"][0]
    assert (data["title"], data["why"], data["fix"]) == (view.title, view.why, view.fix)


def test_a_measured_inference_finding_reads_the_same_on_every_surface(qtbot):
    """INFER001 words a lab measurement (bench infer's pick, its figures, the code that was measured): a Python
    snippet, the same in every shell, laid out through the one view on every surface and in the real report's
    pages beside the run it comes from."""
    from cpudoctor import advisor
    from cpudoctor.report_file import load_report

    report = load_report(SCENARIOS / "zen3-infer-measured.json")
    report.findings = advisor.diagnose(report)
    (f,) = [f for f in report.findings if f.code == "INFER001"]
    view = finding_view(f)
    assert view.snippet.shell is None and "torch.set_num_threads(1)" in view.snippet.text
    assert {finding_view(f, s).snippet.text for s in ("bash", "fish", "powershell", "cmd")} == {view.snippet.text}
    seen = _surfaces(f, qtbot)
    # the doctor's text gives a suggestion's why and code with --verbose (its fix line only without)
    seen["doctor text"] = _words(doctor.render_text(_report(f), [f], "this machine", verbose=True))
    for surface, words in seen.items():
        for part in (view.title, view.why, view.fix, view.code):
            assert _words(part) in words, (surface, part)
        for line in view.snippet.text.splitlines():
            assert _words(line) in words, (surface, line)
    data = json.loads(doctor.render_json(_report(f), [f], "this machine"))["findings"][0]
    assert (data["title"], data["why"], data["fix"], data["snippet"]) == (view.title, view.why, view.fix,
                                                                          view.snippet.text)
    pages = {"text": _words(text.render(report)), "md": _from_markdown(markdown.render(report)),
             "html": _from_html(render_html(report))}
    for surface, words in pages.items():
        for part in (view.title, view.why, view.fix):
            assert _words(part) in words, (surface, part)


def test_the_rule_link_and_the_evidence_are_worded_once(qtbot):
    from cpudoctor.gui.advisor_page import AdvisorPage
    from cpudoctor.gui.model import AppModel

    f = _finding()
    view = finding_view(f)
    assert view.docs_url.endswith("docs/rules.md#thr002") and view.explain == "cpudoctor explain THR002"
    report = _report(f)
    page = AdvisorPage(AppModel())
    qtbot.addWidget(page)
    page._show_details(f)
    for surface, out in (("md", markdown.render(report)), ("html", render_html(report)),
                         ("doctor md", doctor.render_md(report, report.findings, "x")),
                         ("Advisor page", page.details.toHtml())):
        assert view.docs_url in out, surface
    for surface, out in (("md", _from_markdown(markdown.render(report))), ("html", _from_html(render_html(report))),
                         ("Advisor page", _words(page.details.toPlainText()))):
        assert view.docs_label in out and view.explain in out, surface
        # evidence: the view's words (no Python reprs), under the view's heading
        assert "Evidence" in out and "From the report" not in out, surface
        for line in view.evidence:
            assert line.value in out, (surface, line)
        assert "True" not in out and "None" not in out and "[]" not in out, surface
    verbose = doctor.render_text(report, report.findings, "x", verbose=True)
    assert _words(f"Evidence: {view.evidence_text()}") in _words(verbose)


def test_evidence_values_are_cut_the_same_everywhere():
    f = _finding()
    f.evidence = {"software.packages": ["pkg%03d" % i for i in range(200)]}
    (line,) = finding_view(f).evidence
    assert len(line.value) == EVIDENCE_LIMIT and line.value.endswith("…")
    assert line.value in _from_html(render_html(_report(f)))
    assert line.value in _from_markdown(markdown.render(_report(f)))


@pytest.mark.parametrize("shell, expected", [
    ("bash", "export OMP_NUM_THREADS=4"), ("zsh", "export OMP_NUM_THREADS=4"),
    ("fish", "set -gx OMP_NUM_THREADS 4"), ("powershell", "$env:OMP_NUM_THREADS = '4'"),
    ("cmd", "set OMP_NUM_THREADS=4")])
def test_snippets_per_shell(shell, expected, qtbot):
    """The view writes the snippet for a shell; the Advisor page's shell selector shows exactly that."""
    from cpudoctor.gui.advisor_page import AdvisorPage
    from cpudoctor.gui.model import AppModel

    f = _finding()
    view = finding_view(f, shell)
    assert expected in view.snippet.text and view.snippet.shell == shell
    page = AdvisorPage(AppModel())
    qtbot.addWidget(page)
    page.shell.setCurrentIndex(page.shell.findData(shell))
    page._show_details(f)
    assert page.snippet_text() == view.snippet.text
    wanted = [line.strip() for line in view.snippet.text.splitlines()]
    lines = text.findings_lines(_report(f), shell)          # the snippet, then a blank line and the counts
    assert [line.strip() for line in lines[-len(wanted) - 2:-2]] == wanted
    if shell in ("powershell", "cmd"):      # a pinned launch is a Windows command there, not taskset
        assert "taskset" not in view.snippet.text


def test_python_snippets_are_the_same_in_every_shell():
    code = "torch.set_num_threads(4)"
    assert {shell_snippet(code, "python", s).text for s in ("bash", "fish", "cmd")} == {code}
    assert shell_snippet(code, "python", "cmd").shell is None
    with pytest.raises(ValueError, match="unknown shell"):
        finding_view(_finding(), "tcsh")


def test_every_finding_of_a_real_report_reads_the_same_in_text_and_html():
    from cpudoctor import advisor
    from cpudoctor.report_file import load_report

    report = load_report(SCENARIOS / "k10-container-quota.json")
    report.findings = advisor.diagnose(report)
    plain, page = _words(text.render(report)), _from_html(render_html(report))
    md = _from_markdown(markdown.render(report))
    for f in report.findings:
        view = finding_view(f)
        assert _words(view.title) in plain and _words(view.title) in page and _words(view.title) in md, f.code
        if f.severity != "ok":
            for part in (view.why, view.fix):
                assert _words(part) in plain and _words(part) in page and _words(part) in md, (f.code, part)


# Modules that lay findings out: they read a finding's code, title and severity to sort and
# group it, never its words (why, fix, snippet, evidence, docs): those come from the view.
LAYOUTS = ["cpudoctor/render/text.py", "cpudoctor/render/md_extra.py", "cpudoctor/render/markdown.py",
           "cpudoctor/render/doctor.py", "cpudoctor/render/html.py", "cpudoctor/render/inspect.py",
           "cpudoctor/render/run_report.py", "cpudoctor/render/lab.py", "cpudoctor/render/job_findings.py",
           "cpudoctor/render/finding_html.py", "cpudoctor/render/training.py", "gui/advisor_page.py",
           "gui/inspector_model.py", "gui/inspector_page.py"]
_OWN_WORDS = re.compile(r"\b(?:f|finding|findings\[[^]]+\])\.(?:why|fix|snippet|snippet_lang|docs|evidence)\b")


@pytest.mark.parametrize("path", LAYOUTS)
def test_no_layout_words_a_finding_itself(path):
    source = (REPO / path).read_text(encoding="utf-8")
    own = [line.strip() for line in source.splitlines() if _OWN_WORDS.search(line)
           and "_set_snippet(" not in line]
    assert own == [], f"{path} words a finding itself; take the words from render.finding_view: {own}"


# -- CPU facts: the Overview and the exports -------------------------------------------------

def _vm_cpu() -> CpuInfo:
    cpu = CpuInfo(vendor="AMD", vendor_id="AuthenticAMD", brand="AMD EPYC 9354 32-Core Processor",
                  family=25, model=17, stepping=1, microarchitecture="zen4", codename="Genoa",
                  product_line="EPYC", arch="x86_64", base_mhz=3250.0, max_mhz=3800.0, hypervisor=True,
                  source="/proc/cpuinfo")
    cpu.isa.x86_64_level = 4
    return cpu


def test_cpu_facts_read_the_same_in_the_window_and_the_exports(qtbot):
    from cpudoctor.gui.model import AppModel
    from cpudoctor.gui.overview_page import PROCESSOR_ELSEWHERE, OverviewPage

    report = Report(cpu=_vm_cpu())
    facts = cpu_facts(report.cpu)
    model = AppModel()
    page = OverviewPage(model)
    qtbot.addWidget(page)
    model.set_report(report)
    shown = page.cards["Processor"].rows()
    assert shown == [(f.label, f.text) for f in facts if f.label not in PROCESSOR_ELSEWHERE]
    assert page.name.text() == report.cpu.brand                     # the Model row is the page's heading
    plain, md, page_html = text.render(report), _from_markdown(markdown.render(report)), _from_html(render_html(report))
    for fact in facts:
        assert re.search(rf"^  {re.escape(fact.label)} +{re.escape(fact.text)}$", plain, re.MULTILINE), fact
        assert f"| {fact.label} | {fact.text} |" in md, fact
        assert _words(f"{fact.label} {fact.text}") in page_html, fact


def test_one_wording_for_a_virtual_machine(qtbot):
    """Seen before: the window said 'Virtual machine: yes — the hypervisor may hide CPU features', the export
    'Hypervisor: yes: flags may be masked by the VM'."""
    from cpudoctor.gui.model import AppModel
    from cpudoctor.gui.overview_page import OverviewPage

    report = Report(cpu=_vm_cpu())
    model = AppModel()
    page = OverviewPage(model)
    qtbot.addWidget(page)
    model.set_report(report)
    wanted = "yes — the hypervisor may hide CPU features"
    assert page.cards["Processor"].value("Virtual machine") == wanted
    assert re.search(rf"^  Virtual machine +{wanted}$", text.render(report), re.MULTILINE)
    for out in (text.render(report), markdown.render(report), render_html(report)):
        assert "Hypervisor" not in out and "masked by the VM" not in out
    report.cpu.hypervisor = False
    model.set_report(report)
    assert page.cards["Processor"].value("Virtual machine") == "no — bare metal"
    assert "no — bare metal" in text.render(report)


# -- the job pages (run, inspect, bench) and the one finding HTML ----------------------------------

def test_a_snippet_holding_a_code_fence_stays_inside_its_block_on_the_run_page():
    """The run page made its own ``` fence: a snippet with three backticks closed it early and the rest of the
    snippet became Markdown. The fence is one function (kits.escape.md_fence), longer than any backtick run."""
    from cpudoctor.render import run_report

    f = _finding()
    f.snippet = "cat <<'EOF' > README.md\n```\nexport OMP_NUM_THREADS=4\n```\nEOF"
    page = run_report.render_md(_observation(), [f])
    fence = re.search(r"^(`{3,})bash$", page, re.MULTILINE)
    assert fence and len(fence.group(1)) == 4, page
    body = page.split(fence.group(0), 1)[1]
    closing = re.search(rf"^{fence.group(1)}$", body, re.MULTILINE)
    assert closing and body[:closing.start()].strip() == f.snippet


def test_one_finding_html_for_the_export_the_advisor_and_the_inspector(qtbot):
    """Finding HTML is built in one place (render.finding_html): the export page, the Advisor's details and the
    Inspector's list show the same words in the same order, in their own style."""
    from cpudoctor.gui.advisor_page import AdvisorPage
    from cpudoctor.gui.inspector_model import findings_html
    from cpudoctor.gui.model import AppModel
    from cpudoctor.render.finding_html import finding_html

    f = _finding()
    view = finding_view(f)
    page = AdvisorPage(AppModel())
    qtbot.addWidget(page)
    page._show_details(f)
    assert page.details.toHtml().count(view.explain) == 1
    assert findings_html([f]) == finding_html(view, "widget", evidence=False, copy_href="copy:0")
    exported = render_html(_report(f))
    assert finding_html(view, "page") in exported
    order = [view.why, view.fix, view.explain]
    for html_text in (finding_html(view, "page"), findings_html([f]), page.details.toHtml()):
        words = _from_html(html_text)
        at = [words.find(_words(w)) for w in order]
        assert -1 not in at and at == sorted(at), (html_text[:200], at)
