"""Rules for the test suite itself: a test that reads the real machine says so with the ``hardware`` marker.

``pytest -m hardware`` is the set to run on a new machine (a Zen 3 VM, a laptop, a container under
``taskset``); it only means something if every live-machine test is in it. Live here means a CPU,
topology or affinity reading of the running machine: a probe called without a root (or on ``/``),
``os.sched_getaffinity``, or one of the independent readers in ``live_sources``.
"""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent
# Probes whose first argument is the root they read: no argument, or Path("/"), is this machine.
ROOTED_PROBES = {"probe_cpu", "probe_topology", "cpu_for_risk", "probe_tree", "Sampler"}
LIVE_READERS = {"sched_getaffinity", "kernel_cpuinfo", "lscpu_rows", "lscpu_fields", "sysfs_online_cpus"}


def _name(func: ast.expr) -> str | None:
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return None


def _is_slash(node: ast.expr) -> bool:
    """``Path("/")``, the live root spelled out."""
    return (isinstance(node, ast.Call) and _name(node.func) == "Path" and len(node.args) == 1
            and isinstance(node.args[0], ast.Constant) and node.args[0].value == "/")


def reads_this_machine(fn: ast.FunctionDef) -> list[str]:
    """The live readings in a test's body, as "name (line)"."""
    found = []
    for node in ast.walk(fn):
        if not isinstance(node, ast.Call):
            continue
        name = _name(node.func)
        root_given = node.args or any(kw.arg == "root" for kw in node.keywords)
        if name in LIVE_READERS or (name in ROOTED_PROBES and (not root_given or (node.args and _is_slash(node.args[0])))):
            found.append(f"{name} (line {node.lineno})")
    return found


def _marked_hardware(fn: ast.FunctionDef) -> bool:
    return any("hardware" in ast.unparse(d) for d in fn.decorator_list)


def test_every_test_that_reads_this_machine_is_marked_hardware():
    missing = []
    for path in sorted(TESTS.glob("test_*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for fn in tree.body:
            if isinstance(fn, ast.FunctionDef) and fn.name.startswith("test_"):
                live = reads_this_machine(fn)
                if live and not _marked_hardware(fn):
                    missing.append(f"{path.name}::{fn.name} reads {', '.join(live)}")
    assert not missing, "add @pytest.mark.hardware to:\n" + "\n".join(missing)


def test_the_rule_sees_live_calls_and_leaves_trees_alone():
    """The checker itself, on three small tests: live, on a tree, and live spelled with Path("/")."""
    code = ("def test_a():\n    probe_topology()\n"
            "def test_b(tmp_path):\n    probe_topology(tmp_path)\n    probe_cpu(root=tmp_path)\n"
            "def test_c():\n    cpu_for_risk(Path('/'))\n    os.sched_getaffinity(0)\n")
    a, b, c = ast.parse(code).body
    assert reads_this_machine(a) == ["probe_topology (line 2)"]
    assert reads_this_machine(b) == []
    assert reads_this_machine(c) == ["cpu_for_risk (line 7)", "sched_getaffinity (line 8)"]
