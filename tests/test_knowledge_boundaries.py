"""One answer per question: who may read the data files, where fixes live, what "x86" and "x86_64_level" mean.

Static checks over every module of the package (as pyproject maps it), in the
manner of test_architecture.py:

* only ``cpudoctor.knowledge`` reads a data file of ``resources/`` (one module
  per file), and ``cpudoctor.report_file`` the saved report's schema;
* the probes (facts) and knowledge (data) hold no fix commands: a command to
  run is advice, and advice is the advisor's and render's;
* "is this x86?" is answered by ``cpudoctor.model.arch_family`` /
  ``CpuInfo.is_x86`` alone: no literal set of x86 architecture names elsewhere,
  no comparison of an architecture with an x86 name;
* ``x86_64_level`` has one meaning, the one ``cpu.isa.x86_64_level`` holds.
"""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

import pytest

from cpudoctor.model import X86_ARCHES, CpuInfo

REPO = Path(__file__).resolve().parents[1]
RESOURCES = REPO / "resources"
KNOWLEDGE = REPO / "cpudoctor" / "knowledge"
REPORT_SCHEMA = "report.schema.json"
# The saved report's contracts, which cpudoctor.report_file alone reads: the report and its lab runs' metrics.
REPORT_SCHEMAS = {REPORT_SCHEMA, "lab_metrics.schema.json"}
# A command that installs, removes or upgrades software: advice, never a probe's fact.
FIX_COMMAND = re.compile(r"\b(pip3?|conda|mamba|micromamba|uv|apt(-get)?|dnf|yum|brew)\s+(install|uninstall|remove|upgrade)\b"
                         r"|-m\s+pip\b")


def _package_files() -> list[Path]:
    mapping = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    return sorted({p for folder in mapping.values() for p in (REPO / folder).glob("*.py")})


def _rel(path: Path) -> str:
    return path.relative_to(REPO).as_posix()


def _docstrings(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def _strings(path: Path) -> list[tuple[int, str]]:
    """(line, text) of every string constant that is not a docstring (f-string parts included)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docs = _docstrings(tree)
    return [(n.lineno, n.value) for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs]


def _json_names() -> set[str]:
    return {p.name for p in RESOURCES.glob("*.json")}


def _names_file(text: str, names: set[str]) -> str | None:
    for name in names:
        if text == name or text.endswith("/" + name):
            return name
    return None


def test_only_the_knowledge_layer_reads_the_data_files():
    bad = []
    for path in _package_files():
        rel = _rel(path)
        if path.is_relative_to(KNOWLEDGE):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            name = node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else None
            if name == "load_json" and rel != "cpudoctor/report_file.py" and rel != "resources/__init__.py":
                bad.append(f"{rel}:{node.lineno} calls load_json (ask cpudoctor.knowledge)")
        for line, text in _strings(path):
            named = _names_file(text, _json_names())
            if named and not (rel == "cpudoctor/report_file.py" and named in REPORT_SCHEMAS):
                bad.append(f"{rel}:{line} names resources/{named} (read it through cpudoctor.knowledge)")
    assert not bad, "\n".join(bad)


def test_each_data_file_is_named_by_one_knowledge_module():
    """flags.json (read at ten places in five files before the knowledge layer) and every other file: one reader."""
    readers: dict[str, list[str]] = {}
    for path in sorted(KNOWLEDGE.glob("*.py")):
        for _line, text in _strings(path):
            named = _names_file(text, _json_names())
            if named:
                readers.setdefault(named, []).append(_rel(path))
    data_files = {n for n in _json_names() if not n.endswith(".schema.json")}
    assert set(readers) == data_files - REPORT_SCHEMAS
    assert {n: r for n, r in readers.items() if len(r) != 1} == {}
    assert readers["flags.json"] == ["cpudoctor/knowledge/flags.py"]


@pytest.mark.parametrize("folder", ["probes", "cpudoctor/knowledge"])
def test_probes_and_knowledge_hold_no_fix_commands(folder):
    """Facts only: `python -m pip install 'numpy<2.4'` is the advisor's fix (advisor/floors.py), not a probe's note."""
    bad = [f"{_rel(path)}:{line}: {text.strip()[:100]}"
           for path in sorted((REPO / folder).rglob("*.py")) for line, text in _strings(path) if FIX_COMMAND.search(text)]
    assert not bad, "\n".join(bad)


def test_the_fix_command_pattern_finds_what_it_is_for():
    for text in ("python -m pip install 'numpy<2.4'", "pip install py-cpuinfo", "conda install -c conda-forge x",
                 "; fix: python -m pip install --upgrade torch", "sudo apt-get install qemu-user"):
        assert FIX_COMMAND.search(text), text
    for text in ("pip's metadata", "installed packages", "conda environments", "the install hint"):
        assert not FIX_COMMAND.search(text), text


def _x86_names(node: ast.AST) -> list[str]:
    if isinstance(node, (ast.Set, ast.Tuple, ast.List)):
        elements = node.elts
    elif isinstance(node, ast.Dict):
        elements = [k for k in node.keys if k is not None]
    else:
        return []
    return [e.value for e in elements if isinstance(e, ast.Constant) and isinstance(e.value, str)
            and e.value.lower() in X86_ARCHES]


def _asks_the_model(node: ast.AST) -> bool:
    """``arch_family(x)`` or ``cpu.arch_family``: comparing those with "x86" is using the one answer."""
    if isinstance(node, ast.Call):
        node = node.func
    return (isinstance(node, ast.Name) and node.id == "arch_family") or (
        isinstance(node, ast.Attribute) and node.attr == "arch_family")


def test_one_answer_to_is_this_x86():
    """No set of x86 architecture names and no `arch == "x86_64"` outside cpudoctor.model (8 sets, 2 functions before)."""
    bad = []
    for path in _package_files():
        rel = _rel(path)
        if rel.startswith("cpudoctor/model/"):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if len(_x86_names(node)) >= 2:
                bad.append(f"{rel}:{node.lineno} lists x86 architectures {_x86_names(node)}: use arch_family / CpuInfo.is_x86")
            operands = [node.left, *node.comparators] if isinstance(node, ast.Compare) else []
            if any(isinstance(c, ast.Constant) and isinstance(c.value, str) and c.value.lower() in X86_ARCHES
                   for c in operands) and not any(_asks_the_model(c) for c in operands):
                bad.append(f"{rel}:{node.lineno} compares an architecture with an x86 name: use arch_family")
            if isinstance(node, ast.FunctionDef) and node.name == "is_x86" and rel != "advisor/machine.py":
                bad.append(f"{rel}:{node.lineno} defines is_x86: use CpuInfo.is_x86")
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("arch", ["x86_64", "AMD64", "amd64", "i686", "i586", "x86", "aarch64", "arm64", "armv7l",
                                  "riscv64", "ppc64le", None])
def test_the_advisor_asks_the_model_about_x86(arch):
    """advisor.machine.is_x86 is CpuInfo.is_x86 read through Facts (which records cpu.arch as evidence)."""
    from cpudoctor.advisor.engine import Facts
    from cpudoctor.advisor.machine import is_x86
    from cpudoctor.model import Report

    cpu = CpuInfo(arch=arch, vendor="AMD", flags=["sse2", "lm"])
    f = Facts(Report(cpu=cpu))
    assert is_x86(f) == cpu.is_x86 and "cpu.arch" in f.used


def test_x86_64_level_has_one_meaning():
    """``x86_64_level`` is cpu.isa.x86_64_level's (every flag of the level and those below); the lenient
    reading used for words about a crash has a name that says so (level_counting_sse2_as_v1)."""
    defined = [f"{_rel(path)}:{node.lineno}" for path in _package_files()
               for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
               if isinstance(node, ast.FunctionDef) and node.name == "x86_64_level"]
    assert defined and all(d.startswith("cpudoctor/knowledge/levels.py:") for d in defined), defined


# --- probes record facts: no words, no judgement (the job side above all) -------------------------------------
#
# A probe that words or judges hides a decision where no rule or renderer can see it: probes/process/breakdown.py's
# _judge wrote a verdict and advice ("sample longer", "run it again on a quiet machine") into the breakdown, and
# probes/process/classify.py held the categories' labels and colours. Three checks keep the job side's facts plain.

# Advice: a command to type (in backticks), or an imperative starting a clause ("; run it", "(sample longer").
ADVICE = re.compile(
    r"`[^`\n]*\b(cpudoctor|sudo|sysctl|docker|taskset|numactl|pip|export|env)\b[^`\n]*`"
    r"|(?:^|[;:(]\s*|\bor\s+|\bthen\s+|,\s+)(?:run|rerun|start|sample|pick|reinstall|install|use|give|set|unset|try|"
    r"allow|choose|upgrade|update|remove|relaunch|restart|ask)\s+(?:it|the|a|an|cpudoctor|cpu doctor|`|longer|again|"
    r"with|one|this|that|your|them|as|from|on)\b", re.IGNORECASE)
# A dataclass field that holds words or a judgement instead of a fact.
WORDING_FIELD = re.compile(r"(^|_)(labels?|colou?rs?|verdicts?|advice|hints?|fix|fixes|why|titles?|messages?|"
                           r"sentences?|words|reasons?)($|_)")
# A function that words or judges, or a knowledge entry's display key read by a probe.
WORDING_FUNCTION = re.compile(r"(^|_)(labels?|colou?rs?|judge|judged|verdicts?|advice|advise|hints?|words|refusal|"
                              r"sentences?|explain)(_|$)")
DISPLAY_KEYS = {"label", "colour", "color"}
# The job side: its model (plain data) and its probes.
JOB_MODEL = [REPO / "cpudoctor" / "model" / f"{name}.py" for name in ("breakdown", "inspection", "joblogs", "evidence")]
JOB_PROBES = sorted((REPO / "probes" / "process").glob("*.py")) + [REPO / "probes" / "kernels.py"]
# Advice the report side's probes still write (found when these checks were made; issue 33 moved the job side's
# to render). This list only shrinks: a string no longer found fails the test until it is removed here.
STILL_ADVISING = {
    "this x86 Python runs under Rosetta 2 on Apple silicon",       # probes/cpu/_pycpuinfo.py, probes/platforms/_macos.py
    "not asked: the time for finding environments ran out first",  # probes/software/pyquery.py
    "--python: give an interpreter path or an environment name",   # probes/software/envs.py (a CLI error)
    "--python {}: no environment of that name",
    "permission denied: it cannot be read (run CPU Doctor as its owner",
}


def _texts(source: str) -> list[tuple[int, str]]:
    """(line, text) of every string a module writes, an f-string as one text ({} for its values), docstrings aside."""
    tree = ast.parse(source)
    docs = _docstrings(tree)
    parts = {id(v) for n in ast.walk(tree) if isinstance(n, ast.JoinedStr) for v in n.values}
    out = []
    for n in ast.walk(tree):
        if isinstance(n, ast.JoinedStr):
            out.append((n.lineno, "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in n.values)))
        elif isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs and id(n) not in parts:
            out.append((n.lineno, n.value))
    return out


def advice_in(source: str) -> list[tuple[int, str]]:
    return [(line, text) for line, text in _texts(source) if ADVICE.search(text)]


def wording_fields(source: str) -> list[str]:
    """``Class.field`` of every dataclass field named for words or a judgement."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ClassDef) and any(
                "dataclass" in ast.unparse(d) for d in node.decorator_list):
            found += [f"{node.name}.{st.target.id}" for st in node.body
                      if isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name)
                      and WORDING_FIELD.search(st.target.id)]
    return found


def wording_functions(source: str) -> list[str]:
    """Functions named for wording or judging, and reads of a knowledge entry's label or colour."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and WORDING_FUNCTION.search(node.name):
            found.append(f"def {node.name}")
        key = (node.slice if isinstance(node, ast.Subscript) else
               node.args[0] if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
               and node.func.attr == "get" and node.args else None)
        if isinstance(key, ast.Constant) and key.value in DISPLAY_KEYS:
            found.append(f"reads [{key.value!r}] at line {node.lineno}")
    return found


def test_probes_write_no_advice():
    """What to do is render's (stacks_line, denied_hint, inspect_error_text), never a probe's note or error."""
    bad, allowed_seen = [], set()
    for path in sorted((REPO / "probes").rglob("*.py")):
        for line, text in advice_in(path.read_text(encoding="utf-8")):
            allowed = next((a for a in STILL_ADVISING if a in text), None)
            if allowed:
                allowed_seen.add(allowed)
            else:
                bad.append(f"{_rel(path)}:{line}: {text.strip()[:110]}")
    assert not bad, "probes advise (move the words to render):\n" + "\n".join(bad)
    assert STILL_ADVISING <= allowed_seen, f"no longer found, remove from STILL_ADVISING: {STILL_ADVISING - allowed_seen}"


@pytest.mark.parametrize("path", JOB_MODEL + JOB_PROBES, ids=lambda p: _rel(p))
def test_the_job_sides_data_and_probes_hold_facts_not_words(path):
    """No label, colour, verdict or advice field in the job side's dataclasses; no function that words or judges
    and no knowledge label or colour read in its probes (render and the advisor own those)."""
    source = path.read_text(encoding="utf-8")
    assert wording_fields(source) == []
    if path in JOB_PROBES:
        assert wording_functions(source) == []


def test_the_wording_checks_catch_what_they_are_for():
    """The shapes issue 33 found in the probes: each check fails on them, and passes on plain facts."""
    judged = '''
@dataclass
class TimeBreakdown:
    samples: int = 0
    verdict: str = "ok"
    verdict_reason: str = ""

def _judge(bd):
    bd.verdict_reason = (f"only {bd.samples} samples: too few to say where the time goes (sample longer, "
                         "while the job trains)")
    bd.verdict_reason = "other programs used the CPUs: its waits may be theirs; run it again on a quiet machine"
'''
    labelled = '''
@dataclass(frozen=True)
class Rules:
    categories: tuple

    def label(self, category):
        return next(c["label"] for c in self.categories if c["id"] == category)

    def colour(self, category):
        return next((c["colour"] for c in self.categories), "#b8b8b8")
'''
    refused = '''
def refusal(pid, again):
    return f"the stack sampler may not attach: run `sudo {again}`, or start the job with `cpudoctor run -- COMMAND`"
'''
    assert wording_fields(judged) == ["TimeBreakdown.verdict", "TimeBreakdown.verdict_reason"]
    assert [t for _, t in advice_in(judged)] and len(advice_in(judged)) == 2
    assert wording_functions(judged) == ["def _judge"]
    assert sorted(wording_functions(labelled)) == ["def colour", "def label", "reads ['colour'] at line 10",
                                                   "reads ['label'] at line 7"]
    assert len(advice_in(refused)) == 1 and wording_functions(refused) == ["def refusal"]
    facts = '''
@dataclass
class TimeBreakdown:
    samples: int = 0
    stacks_error_kind: str | None = None
    job_cpus: float | None = None

def build(lines):
    return [line for line in lines if line.startswith("run-queue")], "no stacks were sampled from a captured tree"
'''
    assert wording_fields(facts) == [] and wording_functions(facts) == [] and advice_in(facts) == []
