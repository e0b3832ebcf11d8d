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
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _package_files() -> list[Path]:
    mapping = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    return sorted({p for folder in mapping.values() for p in (REPO / folder).glob("*.py")})


def _rel(path: Path) -> str:
    return path.relative_to(REPO).as_posix()


def _trees() -> list[tuple[str, ast.AST]]:
    return [(_rel(p), ast.parse(p.read_text(encoding="utf-8"))) for p in _package_files()]


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
