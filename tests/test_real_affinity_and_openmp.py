"""Issue 15 classes 1 and 2, set up for real: binding variables that shrink a job, and OpenMP runtimes that meet.

Each test creates the situation (a variable in the environment, a package that
narrows the affinity on import, two real copies of an OpenMP runtime loaded by
two packages), checks CPU Doctor's finding, runs the fix it printed and checks
the problem is gone. CPU sets come from os.sched_getaffinity, never constants.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cpudoctor.advisor import engine, pinning, snippets
from cpudoctor.kits.child.runner import ChildSpec, run_child
from cpudoctor.probes.child.scripts import script_argv
from cpudoctor.probes.software.importcheck import to_import_check, to_order_check
from cpudoctor.probes.software.stack import child_environment, initial_environment
from real_situations import (
    child_command,
    clean_environ,
    find_library,
    live_report,
    loader_package,
    make_venv,
    need_cpus,
    need_module,
    run_shell,
)

pytestmark = [pytest.mark.slow, pytest.mark.alongside]


def _findings(report, code):
    return [f for f in engine.run_rules(report, only={code}, strict=True) if f.code == code]


# ----------------------------------------------------------------- class 1: binding variables


@pytest.mark.parametrize("variable", ["GOMP_CPU_AFFINITY", "OMP_PROC_BIND"])
def test_binding_variable_that_shrinks_torch_is_named_and_the_printed_relaunch_fixes_it(variable):
    need_module("torch")
    cpus = need_cpus(2)
    first = cpus[0]
    value = str(first) if variable == "GOMP_CPU_AFFINITY" else "true"
    environ = clean_environ(**{variable: value})

    report = live_report(environ)
    torch_check = next(c for c in report.software.import_checks if c.package == "torch")
    assert torch_check.cpus_before == cpus
    assert torch_check.cpus_after == [first], "libgomp binds the main thread to its first place at import torch"
    [warning] = [f for f in _findings(report, "AFF001") if f.severity == "warning"]
    assert variable in warning.title and variable in warning.why
    lost = sorted(set(cpus) - {first})
    assert pinning.affinity_vars_to_clear(report.software.thread_env) == [variable]
    assert f"{len(lost)} CPU" in warning.why

    # The fix as printed: `env -u VARIABLE python train.py`, pasted into the same shell.
    [relaunch] = [line for line in warning.snippet.splitlines() if line.startswith("env -u ")]
    command = relaunch.replace("python train.py", child_command("torch_facts", "--workload"))
    code, data, err = run_shell(command, environ)
    assert code == 0, err
    assert data["affinity"]["import torch"] == cpus
    assert set(data["workload_threads"]["torch"]["cpus"] or cpus) | set(data["affinity"]["workload torch"]) == set(cpus)

    # Every pinned relaunch CPU Doctor prints clears the variable too (taskset form of the pinning map).
    plan = pinning.pinning_plan(cpus, report.topology, "python train.py", environ=report.software.thread_env)
    taskset = plan.snippet("taskset").text
    assert taskset.startswith(f"env -u {variable} ")
    code, data, err = run_shell(taskset.replace("python train.py", child_command("torch_facts")), environ)
    if code == 127 or "taskset: not found" in err:
        pytest.skip("taskset is not installed")
    assert code == 0, err
    assert data["affinity"]["import torch"] == cpus

    # And the doctor run in the fixed environment says nothing is lost (once: a full probe costs seconds).
    if variable == "GOMP_CPU_AFFINITY":
        fixed = live_report(clean_environ())
        assert all(f.severity == "ok" for f in _findings(fixed, "AFF001"))


def test_a_package_that_narrows_the_affinity_on_import_is_blamed_and_the_snippet_restores_it(tmp_path):
    cpus = need_cpus(2)
    pin = (
        "import os\n"
        f"os.sched_setaffinity(0, {{{cpus[-1]}}})  # what a badly behaved native package does at import\n"
    )
    python = make_venv(tmp_path / "env", {"pinner": pin})
    result = run_child(ChildSpec(script_argv("import_check", "--workload", "pinner", python=python), what="import pinner",
                                 timeout=60, env=clean_environ()))
    check = to_import_check("pinner", "pinner", result)
    assert check.status == "ok" and check.cpus_before == cpus and check.cpus_after == [cpus[-1]]

    report = live_report(clean_environ(), children=False)
    report.software.import_checks = [check]
    report.software.children_ran = True
    [warning] = _findings(report, "AFF001")
    assert warning.severity == "warning" and "import pinner" in warning.title
    assert "No binding variable is set" in warning.why

    # The printed Python snippet, run for real in that environment, keeps the CPUs.
    script = tmp_path / "fixed.py"
    script.write_text(warning.snippet + "\nprint(sorted(os.sched_getaffinity(0)))\n")
    import subprocess

    out = subprocess.run([python, str(script)], capture_output=True, text=True, timeout=60, env=clean_environ())
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == str(cpus)


# ----------------------------------------------------------------- class 2: runtimes that meet


def _threadpoolctl_sets_kmp_here(monkeypatch) -> None:
    """The situation: threadpoolctl imported in this process sets KMP_DUPLICATE_LIB_OK (not the user)."""
    initial = initial_environment()
    if initial is None:
        pytest.skip("no /proc/self/environ here")
    if "KMP_DUPLICATE_LIB_OK" in initial:
        pytest.skip("KMP_DUPLICATE_LIB_OK was set by whoever started the tests")
    need_module("threadpoolctl")
    import threadpoolctl  # noqa: F401 - the import is the situation: it sets KMP_DUPLICATE_LIB_OK here

    monkeypatch.setenv("KMP_DUPLICATE_LIB_OK", os.environ.get("KMP_DUPLICATE_LIB_OK", "True"))


def test_threadpoolctl_in_this_process_does_not_hide_error_15_from_the_children(monkeypatch):
    _threadpoolctl_sets_kmp_here(monkeypatch)
    env, removed = child_environment(os.environ, own_environ=True)
    assert removed == ["KMP_DUPLICATE_LIB_OK"] and "KMP_DUPLICATE_LIB_OK" not in env
    # A variable the user really set is kept: the checks then see what the user's script sees.
    env, removed = child_environment({"KMP_DUPLICATE_LIB_OK": "TRUE"}, own_environ=False)
    assert removed == [] and env["KMP_DUPLICATE_LIB_OK"] == "TRUE"


def _two_packages(tmp_path: Path, library: Path) -> str:
    """A venv with packages 'omp_a' and 'omp_b', each vendoring its own copy of ``library``."""
    root = tmp_path / "vendored"
    return make_venv(tmp_path / "env", {
        "omp_a": loader_package(library, root / "a"),
        "omp_b": loader_package(library, root / "b"),
    })


def _order_report(tmp_path: Path, python: str, modules: list[str], environ: dict[str, str]):
    alone = [to_import_check(m, m, run_child(ChildSpec(script_argv("import_check", "--workload", m, python=python),
                                                       what=f"import {m}", timeout=60, env=environ)))
             for m in modules]
    order = to_order_check(modules, run_child(ChildSpec(script_argv("import_check", "--workload", *modules, python=python),
                                                        what="order", timeout=60, env=environ)))
    report = live_report(clean_environ(), children=False)
    report.software.import_checks = alone
    report.software.import_orders = [order]
    report.software.children_ran = True
    return report, order


def test_two_copies_of_intel_openmp_abort_with_error_15_and_one_shared_copy_fixes_it(tmp_path):
    library = find_library("libiomp5.so")
    if library is None:
        pytest.skip("Intel OpenMP (libiomp5, the intel-openmp package) is not installed")
    python = _two_packages(tmp_path, library)
    environ = clean_environ()
    report, order = _order_report(tmp_path, python, ["omp_a", "omp_b"], environ)
    assert [c.status for c in report.software.import_checks] == ["ok", "ok"], "each package imports fine alone"
    assert order.status == "crashed" and order.openmp_error and "#15" in order.openmp_error
    [omp] = _findings(report, "OMP001")
    assert omp.severity == "error" and "Error #15" in omp.why
    [blas] = _findings(report, "BLAS001")
    assert blas.severity == "error" and "copies" in blas.title

    # What the fix says (one runtime, loaded once): the second package uses the first one's copy.
    (Path(python).parents[1] / "shared").mkdir()
    shared = loader_package(library, tmp_path / "vendored" / "a")
    site = Path(python).parents[1] / "lib"
    for init in site.glob("python*/site-packages/omp_b/__init__.py"):
        init.write_text(shared)
    fixed, order = _order_report(tmp_path, python, ["omp_a", "omp_b"], environ)
    assert order.status == "ok", order.message
    assert [f.severity for f in _findings(fixed, "OMP001")] == ["ok"]
    assert [f.severity for f in _findings(fixed, "BLAS001")] == ["ok"]


def test_kmp_duplicate_lib_ok_set_by_the_user_is_named_with_what_it_hides_and_unsetting_shows_it(tmp_path):
    """Issue 26: the unsafe workaround for Error #15, set for real, over two real copies of Intel's OpenMP."""
    library = find_library("libiomp5.so")
    if library is None:
        pytest.skip("Intel OpenMP (libiomp5, the intel-openmp package) is not installed")
    python = _two_packages(tmp_path, library)
    environ = clean_environ(KMP_DUPLICATE_LIB_OK="TRUE")
    report, order = _order_report(tmp_path, python, ["omp_a", "omp_b"], environ)
    report.software.thread_env = dict(live_report(environ, children=False).software.thread_env)
    assert order.status == "ok", "the variable hides the duplicate: both copies start"
    [omp] = _findings(report, "OMP003")
    assert omp.severity == "warning" and omp.title == "KMP_DUPLICATE_LIB_OK=TRUE hides duplicate OpenMP runtimes"
    assert "hides a real duplicate" in omp.why and "incorrect results" in omp.why
    assert omp.snippet.splitlines()[0] == "unset KMP_DUPLICATE_LIB_OK"

    # The printed fix's first line (unset it): the duplicate shows again, as Error #15, for the rules that explain it.
    fixed, order = _order_report(tmp_path, python, ["omp_a", "omp_b"], clean_environ())
    fixed.software.thread_env = dict(live_report(clean_environ(), children=False).software.thread_env)
    assert order.status == "crashed" and "#15" in (order.openmp_error or "")
    assert [f.severity for f in _findings(fixed, "OMP003")] == ["ok"]


def test_kmp_duplicate_lib_ok_set_inside_cpu_doctor_by_threadpoolctl_is_not_the_users(monkeypatch):
    _threadpoolctl_sets_kmp_here(monkeypatch)
    from cpudoctor.probes.software.stack import probe_software

    report = live_report(clean_environ(), children=False)
    report.software = probe_software(Path("/"), children=False, cache=False)   # this process's own environment
    assert "KMP_DUPLICATE_LIB_OK" not in report.software.thread_env
    assert [f.severity for f in _findings(report, "OMP003")] == ["ok"]


def test_two_copies_of_gnu_openmp_are_an_error_finding(tmp_path):
    library = find_library("libgomp.so.1", "libgomp-*.so*", "libgomp.so*")
    if library is None:
        pytest.skip("no libgomp on this machine")
    python = _two_packages(tmp_path, library)
    report, order = _order_report(tmp_path, python, ["omp_a", "omp_b"], clean_environ())
    assert order.status == "ok" and len(order.openmp_libs) == 2   # libgomp does not abort: two silent pools
    [blas] = _findings(report, "BLAS001")
    assert blas.severity == "error" and "2 copies of GNU libgomp" in blas.title


def test_mkl_threading_layer_is_checked_against_the_runtime_torch_loaded():
    need_module("torch")
    report = live_report(clean_environ(MKL_THREADING_LAYER="INTEL"))
    runtimes = {lib.library for lib in report.software.loaded_libs if lib.user_api == "openmp"}
    if not any(name.startswith("libgomp") for name in runtimes) or any(n.startswith("libiomp") for n in runtimes):
        pytest.skip(f"this torch does not run GNU libgomp alone ({sorted(runtimes)})")
    [finding] = _findings(report, "OMP002")
    assert finding.severity in ("warning", "error") and "GNU libgomp" in finding.title
    assert finding.snippet == "export MKL_THREADING_LAYER=GNU"

    fixed = live_report(clean_environ(MKL_THREADING_LAYER="GNU"))
    assert [f.severity for f in _findings(fixed, "OMP002")] == ["ok"]


def test_children_import_in_both_orders_users_do():
    need_module("torch")
    need_module("numpy")
    report = live_report(clean_environ())
    orders = {tuple(o.modules): o for o in report.software.import_orders}
    assert set(orders) == {("numpy", "torch"), ("torch", "numpy")}
    assert all(o.status == "ok" and o.openmp_libs for o in orders.values())
    assert snippets.binding_vars_set(report) == []
