"""House rules for questions that were once answered in two or three places (issue 33).

- How wide is an instruction set, what may a library run on these flags, which flags compute bf16:
  one table, resources/isa_forcing.json (its loader cpudoctor/knowledge/isa.py). The parser of oneDNN's
  lines, the kernel census and the kernel rules each kept their own (ISA_FAMILY, cpu_vector_family,
  FAMILY_NAME, NATIVE_FLAGS, WIDTHS, BF16_ISAS).
- A finding as HTML: one function (render/finding_html.py); the export, the Advisor page and the
  Inspector each built their own.
- The shell of a snippet: chosen by the finding view when it is shown; the advisor and the commands
  rewrote findings in place (for_shell, localize to PowerShell, findings_for_shell).
"""

from __future__ import annotations

import ast
import copy
import json
import re
from pathlib import Path

import pytest

from cpudoctor import advisor
from cpudoctor.knowledge import ISA_FORCING
from cpudoctor.report_file import load_report

REPO = Path(__file__).resolve().parents[1]
SOURCES = [p for folder in ("advisor", "cpudoctor", "probes", "lab", "gui")
           for p in sorted((REPO / folder).rglob("*.py")) if ".venv" not in p.parts]
SCENARIOS = sorted((Path(__file__).parent / "fixtures" / "scenarios").glob("*.json"))
WINDOWS_REPORT = Path(__file__).parent / "fixtures" / "scenarios" / "threadripper-3990x-windows10-groups.json"


# -- one ISA width table -----------------------------------------------------------------------------------

def _isa_words() -> tuple[set[str], set[str], set[str]]:
    """(oneDNN's ISA names, the width names, the flags that compute a reduced dtype) as the table has them."""
    names = set(ISA_FORCING.onednn_names)
    widths = set(ISA_FORCING.data["widths"]["names"]) | {"SSE4.1", "AMX"}
    dtype_flags = {f for flags in ISA_FORCING.data["dot_products"]["dtypes"].values() for f in flags}
    return names, widths, dtype_flags


def _tables(tree: ast.AST) -> list[tuple[int, str]]:
    """Literal tables in a module that answer the table's questions: ISA names ranked or ordered, widths named,
    a dtype's own flags."""
    names, widths, dtype_flags = _isa_words()
    found = []
    outer = [n for n in ast.walk(tree) if isinstance(n, (ast.Dict, ast.Tuple, ast.List, ast.Set))]
    inner = {id(c) for n in outer for c in ast.walk(n) if c is not n}
    for node in (n for n in outer if id(n) not in inner):
        strings = [c.value for c in ast.walk(node) if isinstance(c, ast.Constant) and isinstance(c.value, str)]
        ints = [c.value for c in ast.walk(node) if isinstance(c, ast.Constant) and type(c.value) is int]
        named, worded = set(strings) & names, set(strings) & widths
        if len(named) >= 4:
            found.append((node.lineno, f"oneDNN ISA names in order: {sorted(named)}"))
        elif len(named) >= 2 and ints:
            found.append((node.lineno, f"oneDNN ISA names with numbers: {sorted(named)}"))
        elif len(worded) >= 3 and ints:
            found.append((node.lineno, f"vector widths named: {sorted(worded)}"))
        elif isinstance(node, ast.Dict) and _dtype_keyed(node) and len(set(strings) & dtype_flags) >= 2:
            found.append((node.lineno, f"a dtype's own flags: {sorted(set(strings) & dtype_flags)}"))
    return found


def _dtype_keyed(node: ast.Dict) -> bool:
    """A dict whose keys are dtypes (``{"bf16": (...flags...)}``)."""
    keys = [k.value for k in node.keys if isinstance(k, ast.Constant)]
    return bool(keys) and all(k in ("bf16", "f16", "fp16", "int8") for k in keys)


def test_one_isa_width_table_in_knowledge():
    offences = []
    for path in SOURCES:
        rel = path.relative_to(REPO).as_posix()
        if rel.startswith("cpudoctor/knowledge/") or "/jobs/" in rel or "/child/scripts/" in rel:
            continue
        offences += [f"{rel}:{line}: {what}" for line, what in _tables(ast.parse(path.read_text(encoding="utf-8")))]
    assert offences == [], ("a second table of instruction-set widths; ask cpudoctor.knowledge.ISA_FORCING "
                            f"(resources/isa_forcing.json): {offences}")


def test_the_table_check_finds_the_tables_it_replaced():
    """The three tables issue 33 found, as they were written, are each caught."""
    old = '''
ISA_FAMILY = {"sse41": 1, "avx": 2, "avx2": 3, "avx512_core": 4, "avx512_core_amx": 5}
FAMILY_NAME = {1: "SSE4.1", 2: "AVX", 3: "AVX2", 4: "AVX-512", 5: "AMX"}
NATIVE_FLAGS = {"bf16": ("avx512_bf16", "amx_bf16", "avx_ne_convert"), "f16": ("avx512_fp16", "amx_fp16")}
'''
    assert len(_tables(ast.parse(old))) == 3


def test_every_width_the_parser_and_the_rules_use_comes_from_the_table():
    from cpudoctor.model.kernels import Kernel
    from cpudoctor.probes import kernels as K
    from cpudoctor.probes.process.onednn_verbose import isa_of

    for name in ISA_FORCING.onednn_names:
        assert isa_of(f"brg_conv_fwd:{name}") == name
        assert K.kernel_width(Kernel("oneDNN", "convolution", name)) == ISA_FORCING.width_of("DNNL_MAX_CPU_ISA", name)
    assert ISA_FORCING.width_name(K.cpu_width("oneDNN", {"avx2", "fma", "avx"})) == "AVX2"


# -- one finding -> HTML -------------------------------------------------------------------------------------

HTML_SURFACES = ["cpudoctor/render/html.py", "gui/advisor_page.py", "gui/inspector_model.py",
                 "cpudoctor/render/run_report.py", "cpudoctor/render/job_findings.py", "gui/inspector_page.py"]
_VIEW_WORDS = re.compile(r"\b(?:v|view|f|finding)\.(?:why|fix|snippet|evidence|explain|docs_url|docs_label)\b")


@pytest.mark.parametrize("path", HTML_SURFACES)
def test_no_second_finding_html(path):
    """A line that puts a finding's words into markup belongs to render/finding_html.py (a tooltip of the
    title and why excepted)."""
    lines = (REPO / path).read_text(encoding="utf-8").splitlines()
    own = [line.strip() for line in lines if "<" in line and _VIEW_WORDS.search(line) and "setToolTip" not in line]
    assert own == [], f"{path} builds a finding's HTML itself; use render.finding_html.finding_html: {own}"


# -- the snippet's shell, chosen once ------------------------------------------------------------------------

@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.stem)
def test_the_advisor_writes_no_shell_but_bash(path):
    """No finding leaves the advisor written for a shell: bash, or the language a rule wrote (Python, a Windows
    rule's own PowerShell), never snippet_bash beside a translation."""
    report = load_report(path)
    for f in advisor.diagnose(report):
        assert not f.snippet_bash, f.code
        if f.snippet_lang == "powershell":
            assert f.code in ("TOPO004", "OS002"), f"{f.code}: bash translated to PowerShell by the advisor"


@pytest.mark.parametrize("shell", ["powershell", "cmd", "fish", None])
def test_no_surface_rewrites_the_findings(shell):
    """Every page shows the asked shell without changing a finding (they were rewritten in place before)."""
    from cpudoctor.export import render_export
    from cpudoctor.render import doctor, markdown, text
    from cpudoctor.render.html import render_html

    report = load_report(WINDOWS_REPORT)
    report.findings = advisor.diagnose(report)
    before = copy.deepcopy(report.findings)
    pages = [text.render(report, shell), markdown.render(report, shell), render_html(report, shell),
             doctor.render_text(report, report.findings, "x", shell=shell),
             doctor.render_md(report, report.findings, "x", shell=shell)]
    data = [json.loads(doctor.render_json(report, report.findings, "x", shell=shell))["findings"],
            json.loads(render_export(report, "json", shell=shell))["findings"]]
    assert report.findings == before
    if shell in ("powershell", "cmd", None):       # a Windows machine: its own shell unless another is asked
        assert all("taskset -c" not in page for page in pages)
        wanted = shell or "powershell"
        for findings in data:                      # the JSON: each snippet in that shell, the bash kept beside it
            pinned = [f for f in findings if "taskset -c" in (f.get("snippet_bash") or "")]
            assert pinned and all(f["snippet_lang"] == wanted and "taskset" not in f["snippet"] for f in pinned)


def test_nothing_but_the_view_translates_a_finding():
    """The places that chose a shell before (the advisor's localize and for_shell, the commands' findings_for_shell,
    the Advisor page's snippet_bash) are gone: a finding's snippet is translated only in render/finding_view.py."""
    offences = []
    for path in SOURCES:
        rel = path.relative_to(REPO).as_posix()
        source = path.read_text(encoding="utf-8")
        for name in ("for_shell(", "findings_for_shell("):
            if name in source:
                offences.append(f"{rel}: {name}")
        if rel != "cpudoctor/render/finding_view.py" and re.search(r"\.snippet_bash\b", source):
            offences.append(f"{rel}: reads snippet_bash")
        if re.search(r"replace\([^)]*snippet_lang=", source):
            offences.append(f"{rel}: rewrites a finding's snippet_lang")
    assert offences == []
