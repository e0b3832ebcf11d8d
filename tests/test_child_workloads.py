"""The child scripts' workloads, native pools and affinity records, and how the parent reads them."""

from __future__ import annotations

import importlib.util
import os
import re
import signal

import pytest

from cpudoctor.advisor.rules.affinity import parse_gomp_affinity
from cpudoctor.kits.child.exitstatus import diagnose_exit
from cpudoctor.kits.child.runner import ChildResult, ChildSpec, run_child
from cpudoctor.probes.child.scripts import script_argv
from cpudoctor.probes.child.scripts import FOLDER, native_pools, workloads
from cpudoctor.probes.software.importcheck import openmp_error, to_import_check, to_order_check


def _result(data: dict, returncode: int = 0, stderr: str = "") -> ChildResult:
    res = ChildResult(what="import numpy", returncode=returncode, data=data, stderr_tail=stderr, seconds=1.0)
    res.diagnosis = diagnose_exit(returncode, stderr_tail=stderr, what="import numpy")
    return res


def test_a_crash_in_the_workload_is_the_workloads_not_the_imports():
    pools = [{"user_api": "blas", "internal_api": "openblas", "library": "libopenblas.so", "version": "0.3.27",
              "architecture": "SkylakeX"}]
    data = {"imported": {"numpy": 0.2}, "pools": pools, "stage": "workload numpy",
            "affinity": {"start": [0, 1], "import numpy": [0, 1]}}
    check = to_import_check("numpy", "numpy", _result(data, -signal.SIGILL))
    assert check.status == "ok" and check.message == "import numpy works" and check.seconds == 0.2
    assert check.workload_status == "crashed" and check.signal_name == "SIGILL"
    assert check.workload_library == "OpenBLAS 0.3.27 (libopenblas.so, SkylakeX kernels)"
    assert check.cpus_before == [0, 1] and check.cpus_after == [0, 1]


def test_a_crash_during_the_import_stays_the_imports():
    check = to_import_check("numpy", "numpy", _result({"stage": "import numpy"}, -signal.SIGILL))
    assert check.status == "crashed" and check.workload_status is None


def test_error_15_is_quoted_from_stderr():
    stderr = ("OMP: Error #15: Initializing libiomp5.so, but found libiomp5.so already initialized.\n"
              "OMP: Hint This means that multiple copies of the OpenMP runtime have been linked into the program.")
    assert openmp_error(stderr).startswith("OMP: Error #15: Initializing libiomp5.so")
    order = to_order_check(["numpy", "torch"], _result({"stage": "import torch", "openmp_libs": ["libiomp5.so"]},
                                                       -signal.SIGABRT, stderr))
    assert order.status == "crashed" and order.signal_name == "SIGABRT" and "Error #15" in order.message


def test_cpulists_and_new_threads():
    assert native_pools.parse_cpulist("0-3,8,10-11\n") == [0, 1, 2, 3, 8, 10, 11]
    assert native_pools.parse_cpulist("") == []
    fresh = native_pools.new_threads({1: [0, 1]}, {1: [0], 7: [1], 9: [0]})
    assert fresh == {"threads": 2, "cpus": [0, 1], "per_thread": [[1], [0]]}
    assert parse_gomp_affinity("0 3 1-2 4-10:2") == [0, 1, 2, 3, 4, 6, 8, 10]
    assert parse_gomp_affinity("0,1") == [0, 1] and parse_gomp_affinity("junk") is None


@pytest.mark.hardware
def test_this_process_affinity_is_read_like_os_sched_getaffinity():
    if not hasattr(os, "sched_getaffinity"):
        pytest.skip("no sched_getaffinity here")
    assert native_pools.main_thread_cpus() == sorted(os.sched_getaffinity(0))
    threads = native_pools.thread_cpus()
    assert threads and all(set(cpus) >= set(os.sched_getaffinity(0)) or cpus for cpus in threads.values())


def test_the_onnx_model_bytes_are_protobuf():
    model = workloads.onnx_matmul_model(8)
    assert model[:2] == b"\x08\x07"          # field 1 (ir_version), varint 7
    assert b"MatMul" in model and b"smoke" in model


@pytest.mark.slow
@pytest.mark.alongside
@pytest.mark.parametrize("module", ["numpy", "torch", "cv2", "onnxruntime", "scipy", "tensorflow", "jax"])
def test_each_installed_packages_workload_runs_in_its_child(module):
    if importlib.util.find_spec(module) is None:
        pytest.skip(f"{module} is not installed here")
    result = run_child(ChildSpec(script_argv("import_check", "--workload", module), what=f"import {module}",
                                 timeout=180))
    check = to_import_check(module, module, result)
    assert check.status == "ok", result.stderr_tail[-500:]
    assert check.workload_status == "ok" and check.workload, check.workload_message


def test_the_child_scripts_stay_standalone():
    """They run in the user's Python (issue 14): standard library and their siblings only, no cpudoctor."""
    imports = re.compile(r"^\s*(?:import|from)\s+(cpudoctor|threadpoolctl|psutil)\b", re.MULTILINE)
    for path in FOLDER.glob("*.py"):
        if path.name == "__init__.py":          # the parent's index of the scripts (their paths); never run there
            continue
        assert not imports.search(path.read_text()), path.name
