"""One answer per question, as house rules: how a child process is run, whether a root is this machine,
whether an architecture is Arm, how a percentage is written.

Static checks over every module of the package (as pyproject maps it), in the
manner of test_architecture.py and test_knowledge_boundaries.py (whose
``test_one_answer_to_is_this_x86`` is the model). Each failed on the code as it
was: four ways to run a child (``run``'s job, py-spy, the interpreter queries
and the kit), five "is this the live machine?" with two behaviours, five "is
this Arm?" with four lists of names, seven percent formatters.
"""

from __future__ import annotations

import ast
import functools
import re
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _package_files() -> list[Path]:
    mapping = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    return sorted({p for folder in mapping.values() for p in (REPO / folder).glob("*.py")})


def _rel(path: Path) -> str:
    return path.relative_to(REPO).as_posix()


@functools.lru_cache(maxsize=1)
def _parsed() -> tuple[tuple[str, ast.AST], ...]:
    return tuple((_rel(p), ast.parse(p.read_text(encoding="utf-8"))) for p in _package_files())


def _trees() -> list[tuple[str, ast.AST]]:
    return list(_parsed())


# --- one way to run a child ------------------------------------------------------------------------

# The kit runs children; the probes' child scripts run inside another interpreter (any Python the user has,
# never CPU Doctor's own), where the kit is not importable: they are the only others allowed.
RUNS_CHILDREN = ("cpudoctor/kits/child/", "probes/child/scripts/")
_STARTERS = {
    "subprocess": {"Popen", "run", "call", "check_call", "check_output", "getoutput", "getstatusoutput"},
    "os": {"system", "popen", "fork", "forkpty", "posix_spawn", "posix_spawnp", "spawnl", "spawnle", "spawnlp",
           "spawnlpe", "spawnv", "spawnve", "spawnvp", "spawnvpe", "execl", "execle", "execlp", "execlpe", "execv",
           "execve", "execvp", "execvpe", "startfile"},
    "asyncio": {"create_subprocess_exec", "create_subprocess_shell"},
    "pty": {"spawn", "fork"},
}


def _starts_a_child(node: ast.AST) -> str | None:
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        if node.attr in _STARTERS.get(node.value.id, ()):
            return f"{node.value.id}.{node.attr}"
    if isinstance(node, ast.ImportFrom) and node.module in _STARTERS:
        names = [a.name for a in node.names if a.name in _STARTERS[node.module]]
        if names:
            return f"from {node.module} import {', '.join(names)}"
    if isinstance(node, ast.Name) and node.id == "QProcess":
        return "QProcess"
    return None


def child_starters() -> list[str]:
    return [f"{rel}:{node.lineno} {what}" for rel, tree in _trees() if not rel.startswith(RUNS_CHILDREN)
            for node in ast.walk(tree) if (what := _starts_a_child(node))]


def test_one_way_to_run_a_child():
    """Every child process (a job, py-spy, an interpreter asked its version, conda, sysctl) runs through the kit's
    runner, with its deadline, output caps and process-group handling: cpudoctor.kits.child.runner.ChildProcess
    (or kits.child.captured for a short program whose output is the answer)."""
    bad = child_starters()
    assert not bad, "start children with cpudoctor.kits.child (runner.ChildProcess, captured.run_captured):\n" + \
        "\n".join(bad)


@pytest.mark.parametrize("code", ["import subprocess\nsubprocess.run(['x'])", "from subprocess import Popen",
                                  "import os\nos.execvp('x', ['x'])", "import os\nos.posix_spawn('x', ['x'], {})",
                                  "QProcess()"])
def test_the_child_check_sees_each_way(code):
    assert any(_starts_a_child(n) for n in ast.walk(ast.parse(code)))


# --- one answer to "is this root the live machine?" -------------------------------------------------


def _is_system_root(node: ast.AST) -> bool:
    """``"/"``, ``os.sep``, ``Path("/")``, ``Path("/").resolve()``, ``os.path.realpath(os.sep)``."""
    if isinstance(node, ast.Constant):
        return node.value == "/"
    if isinstance(node, ast.Attribute) and node.attr == "sep" and isinstance(node.value, ast.Name):
        return node.value.id == "os"
    if isinstance(node, ast.Call):
        inner = node.func.value if isinstance(node.func, ast.Attribute) and not node.args else None
        if inner is not None and node.func.attr == "resolve":
            return _is_system_root(inner)
        name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
        return name in ("Path", "PurePath", "realpath", "abspath") and len(node.args) == 1 and _is_system_root(node.args[0])
    return False


def _mentions_root(node: ast.AST) -> bool:
    """A root being looked at (``root``, ``self.root``, ``Path(root)``); a saved report's ``meta.root`` is recorded
    text ("/" when it was made on its own machine), not a folder."""
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "meta":
        return False
    return any((isinstance(n, ast.Name) and "root" in n.id.lower()) or (isinstance(n, ast.Attribute) and "root" in
               n.attr.lower()) for n in ast.walk(node))


def live_root_answers() -> list[str]:
    bad = []
    for rel, tree in _trees():
        if rel == "cpudoctor/kits/rooted.py":
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Compare) and len(node.comparators) == 1:
                pair = (node.left, node.comparators[0])
                if any(_is_system_root(a) and _mentions_root(b) for a, b in (pair, pair[::-1])):
                    bad.append(f"{rel}:{node.lineno} compares a root with the system's /")
            if isinstance(node, ast.FunctionDef) and re.search(r"is_live|is_slash|live_root", node.name) and \
                    rel != "cpudoctor/kits/rooted.py":
                bad.append(f"{rel}:{node.lineno} defines {node.name}(root)")
    return bad


def test_one_answer_to_is_this_root_the_live_machine():
    """``cpudoctor.kits.rooted.is_live_root`` only: five answers with two behaviours before (``str(root) == "/"``
    said no to ``//`` and to a link to ``/``; ``root.resolve() == Path("/")`` said yes)."""
    bad = live_root_answers()
    assert not bad, "use cpudoctor.kits.rooted.is_live_root:\n" + "\n".join(bad)


@pytest.mark.parametrize("code", ['str(root) == "/"', 'Path(root) != Path("/")', "root.resolve() == Path('/').resolve()",
                                  "os.path.realpath(self.root) == os.path.realpath(os.sep)",
                                  "def _is_live(root):\n    return True"])
def test_the_live_root_check_sees_each_way(code, monkeypatch):
    import test_one_answer as me

    monkeypatch.setattr(me, "_trees", lambda: [("probes/x.py", ast.parse(code))])
    assert me.live_root_answers()


def test_the_live_root_is_this_machines_slash_however_spelled(tmp_path):
    from cpudoctor.kits.rooted import is_live_root

    link = tmp_path / "slash"
    link.symlink_to("/")
    assert is_live_root(Path("/")) and is_live_root("//") and is_live_root(link) and is_live_root("/proc/..")
    assert not is_live_root(tmp_path) and not is_live_root(tmp_path / "missing") and not is_live_root("bad\0name")


# --- one answer to "is this Arm?" --------------------------------------------------------------------


def _arm_names(node: ast.AST) -> list[str]:
    from cpudoctor.model import ARM_ARCHES

    if isinstance(node, (ast.Set, ast.Tuple, ast.List)):
        elements = node.elts
    elif isinstance(node, ast.Dict):
        elements = [k for k in node.keys if k is not None]
    else:
        return []
    return [e.value for e in elements if isinstance(e, ast.Constant) and isinstance(e.value, str)
            and e.value.lower() in ARM_ARCHES]


def arm_answers() -> list[str]:
    from cpudoctor.model import ARM_ARCHES

    bad = []
    for rel, tree in _trees():
        if rel.startswith("cpudoctor/model/"):
            continue
        for node in ast.walk(tree):
            if len(_arm_names(node)) >= 2:
                bad.append(f"{rel}:{node.lineno} lists Arm architectures {_arm_names(node)}")
            operands = [node.left, *node.comparators] if isinstance(node, ast.Compare) else []
            about_arch = any(re.search(r"arch|machine", ast.unparse(c)) for c in operands
                             if not isinstance(c, ast.Constant))
            if about_arch and any(isinstance(c, ast.Constant) and isinstance(c.value, str) and c.value.lower() in
                                  ARM_ARCHES for c in operands) and not any(
                    not isinstance(c, ast.Constant) and "arch_family" in ast.unparse(c) for c in operands):
                bad.append(f"{rel}:{node.lineno} compares an architecture with an Arm name")
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "startswith" \
                    and any(_arm_names(a) or (isinstance(a, ast.Constant) and a.value in ARM_ARCHES) for a in node.args):
                bad.append(f"{rel}:{node.lineno} asks startswith() of Arm names")
    return bad


def test_one_answer_to_is_this_arm():
    """``cpudoctor.model.arch_family`` / ``CpuInfo.is_arm`` only (five answers, four lists of names before:
    ``("aarch64", "arm")``, ``startswith(("aarch64", "arm"))``, lab's ``ARM`` tuple, the model's ``ARM_ARCHES``)."""
    bad = arm_answers()
    assert not bad, "use arch_family / CpuInfo.is_arm:\n" + "\n".join(bad)


@pytest.mark.parametrize("arch, arm", [("aarch64", True), ("arm64", True), ("ARM64", True), ("armv7l", True),
                                       ("armv8", True), ("x86_64", False), ("AMD64", False), ("riscv64", False),
                                       (None, None)])
def test_the_model_answers_is_this_arm(arch, arm):
    from cpudoctor.model import CpuInfo, canonical_arch

    assert CpuInfo(arch=arch).is_arm is arm
    if arch:
        assert canonical_arch(arch) == {"arm64": "aarch64", "amd64": "x86_64", "armv8": "aarch64"}.get(
            arch.lower(), arch.lower())


# --- one percent format -----------------------------------------------------------------------------

_PERCENT_FUNCTIONS = ("pct", "percent", "percent_1")
# Code that runs inside another interpreter (the user's), where CPU Doctor's kits are not importable.
STANDALONE = ("probes/child/scripts/", "lab/jobs/")


def _percent_sign(text: object) -> bool:
    """Text that puts a percent sign after a number (CSS's ``width:40%;`` is no percentage for people)."""
    rest = str(text).lstrip(" ")
    return rest.startswith("%") and not rest.startswith(("%;", '%"', "%'")) and not rest[1:2].isalpha()


def percent_answers() -> list[str]:
    """f-strings that write a percentage themselves, ``+ " %"``, and functions named like a percent formatter."""
    bad = []
    for rel, tree in _trees():
        if rel == "cpudoctor/kits/format.py" or rel.startswith(STANDALONE):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add) and isinstance(node.right, ast.Constant) \
                    and _percent_sign(node.right.value):
                bad.append(f"{rel}:{node.lineno} appends a percent sign")
            if isinstance(node, ast.JoinedStr):
                parts = node.values
                for i, part in enumerate(parts):
                    if not isinstance(part, ast.FormattedValue):
                        continue
                    spec = part.format_spec
                    if spec is not None and isinstance(spec, ast.JoinedStr) and spec.values and isinstance(
                            spec.values[-1], ast.Constant) and str(spec.values[-1].value).endswith("%"):
                        bad.append(f"{rel}:{node.lineno} formats a percentage with ':%'")
                    following = parts[i + 1] if i + 1 < len(parts) else None
                    if isinstance(following, ast.Constant) and _percent_sign(following.value):
                        bad.append(f"{rel}:{node.lineno} writes a number followed by %")
            if isinstance(node, ast.FunctionDef) and node.name.strip("_").lower() in _PERCENT_FUNCTIONS:
                bad.append(f"{rel}:{node.lineno} defines {node.name}()")
    return bad


@pytest.mark.parametrize("code", ['f"{x:.0%}"', 'f"{x * 100:.0f}%"', 'f"{x:g} % CPU"', 'str(x) + " %"',
                                  "def _pct(x):\n    return x"])
def test_the_percent_check_sees_each_way(code, tmp_path, monkeypatch):
    import test_one_answer as me

    monkeypatch.setattr(me, "_trees", lambda: [("cpudoctor/render/x.py", ast.parse(code))])
    assert me.percent_answers()


def test_one_percent_format():
    """``cpudoctor.kits.format.percent`` only: seven formatters before, "48%" beside "48 %" (the render layer
    mostly wrote "48 %": that is the one)."""
    bad = percent_answers()
    assert not bad, "use cpudoctor.kits.format.percent:\n" + "\n".join(bad)


def test_the_percent_format():
    from cpudoctor.kits.format import percent

    assert percent(48.2) == "48 %" and percent(0.482, fraction=True) == "48 %"
    assert percent(0.3115, digits=1, fraction=True) == "31.1 %" and percent(250, symbol=False) == "250"
    assert percent(None) == "unknown" and percent(float("nan"), "-") == "-" and percent(None, "—", fraction=True) == "—"


# --- no import cycle, not even one hidden inside a function -----------------------------------------


def _module_names() -> dict[str, Path]:
    mapping = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    return {(pkg if p.stem == "__init__" else f"{pkg}.{p.stem}"): p
            for pkg, folder in mapping.items() for p in (REPO / folder).glob("*.py")}


def import_cycles() -> list[list[str]]:
    """Groups of package modules that import each other, counting imports inside functions (which hide a
    cycle from the import-linter's layers and from Python until the function runs)."""
    modules = _module_names()
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        package = name if path.stem == "__init__" else name.rsplit(".", 1)[0]
        deps: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")
                    base = ".".join(parts[: len(parts) - node.level + 1] + ([node.module] if node.module else []))
                for alias in node.names:
                    full = f"{base}.{alias.name}"
                    deps.add(full if full in modules else base)
            elif isinstance(node, ast.Import):
                deps.update(alias.name for alias in node.names)
        graph[name] = {d for d in deps if d in modules and d != name}
    cycles, index, low, stack, on_stack = [], {}, {}, [], set()

    def visit(v: str) -> None:            # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                cycles.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return cycles


def test_no_import_cycle_even_inside_functions():
    """Two were hidden inside functions: probes.cpu.identity <-> probes.cpu._pycpuinfo (the brand and clock
    helpers now in probes.cpu.uarch and probes.cpu.clocks) and lab.results <-> lab.roofline (what both need now
    in lab.result_base)."""
    assert import_cycles() == []
