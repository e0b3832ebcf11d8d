"""The whole software probe: captured trees, the quick part, secrets, a crashing torch, the real torch."""

from __future__ import annotations

import importlib.metadata as metadata
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import machine_root, probe_tree

from cpudoctor.report_file import report_from_json
from cpudoctor.model import Software
from cpudoctor.probes import probe_software
from cpudoctor.model import Report


def test_captured_tree_gets_file_facts_only(corpus):
    sw = probe_software(machine_root("hwloc-offline-cpu0-node0"))
    assert sw.os.vm is False
    assert sw.python.version is None and sw.packages == [] and sw.import_checks == [] and sw.thread_env == {}
    assert not sw.children_ran
    assert any("captured tree" in n for n in sw.notes)


def test_quick_part_runs_no_children(monkeypatch):
    import cpudoctor.probes.software.stack as stack

    monkeypatch.setattr(stack, "run_children", lambda specs: pytest.fail("children=False must not start children"))
    sw = probe_software(children=False)
    assert not sw.children_ran
    assert sw.python.version and sw.os.system == "Linux"
    assert {p.name for p in sw.packages} >= {"numpy"}
    assert sw.isa_risks and sw.torch.status in ("skipped", "not_installed")


@pytest.mark.parametrize("children", [False, True])
def test_planted_secrets_never_reach_the_report(monkeypatch, tmp_path, children):
    monkeypatch.setenv("CPUDOCTOR_TEST_SECRET", "hunter2")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI-hunter2-EXAMPLEKEY")
    monkeypatch.setenv("TORCH_HUB_TOKEN", "hunter2-token")
    monkeypatch.setenv("LD_PRELOAD", "/home/alice/secretdir/libjemalloc.so.2" if not children else "")
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    report = Report(software=probe_software(children=children, cache=tmp_path))
    text = report.to_json()
    assert "hunter2" not in text and "EXAMPLEKEY" not in text
    # Nor in the children's cache, which stores a hash of the environment only.
    for cached in tmp_path.iterdir():
        assert "hunter2" not in cached.read_text()
    if children:
        assert report.software.children_ran and report.software.thread_env["OMP_NUM_THREADS"] == "2"
        return
    assert "alice" not in text and "secretdir" not in text
    sw = report_from_json(text).software
    assert sw.thread_env["OMP_NUM_THREADS"] == "2"
    assert sw.preload_libs == ["libjemalloc.so.2"] and sw.thread_env["LD_PRELOAD"] == "libjemalloc.so.2"


def test_fake_torch_dying_of_sigill_is_reported_as_illegal_instruction(tmp_path):
    # A "torch" earlier on PYTHONPATH than the real one kills itself the way an AVX2 build does on an old CPU.
    fake = tmp_path / "torch"
    fake.mkdir()
    (fake / "__init__.py").write_text("import os, signal\nos.kill(os.getpid(), signal.SIGILL)\n")
    env = dict(os.environ, PYTHONPATH=str(tmp_path))
    sw = probe_software(environ=env, timeout=60, cache=False)
    if not any(p.name == "torch" for p in sw.packages):
        pytest.skip("torch is not installed in this environment")
    assert sw.torch.status == "crashed" and sw.torch.signal_name == "SIGILL"
    assert sw.torch.error.startswith("Illegal instruction")
    assert "this CPU" in sw.torch.error  # names what the CPU has or lacks
    check = next(c for c in sw.import_checks if c.package == "torch")
    assert check.status == "crashed" and check.signal_name == "SIGILL"
    assert next(r for r in sw.isa_risks if r.package == "torch").at_risk
    # numpy was probed before torch in the same child and survives the crash.
    assert sw.numpy.version == metadata.version("numpy")


TORCH_READER = """
import json, torch
print(json.dumps({"capability": torch.backends.cpu.get_cpu_capability(), "threads": torch.get_num_threads(),
                  "mkldnn": torch.backends.mkldnn.is_available(), "parallel": torch.__config__.parallel_info(),
                  "version": torch.__version__}))
"""


@pytest.mark.hardware
def test_real_run_against_this_machines_torch():
    """The probe's torch facts against torch itself, asked in a separate child with the same environment
    (so OMP_NUM_THREADS or a `taskset` of the shell count the same for both)."""
    try:
        torch_version = metadata.version("torch")
    except metadata.PackageNotFoundError:
        pytest.skip("torch is not installed")
    report = probe_tree(Path("/"), software=False)
    sw: Software = probe_software(cache=False)
    report.software = sw
    witness = subprocess.run([sys.executable, "-c", TORCH_READER], capture_output=True, text=True, timeout=300)
    assert witness.returncode == 0, witness.stderr[-2000:]
    torch_says = json.loads(witness.stdout.strip().splitlines()[-1])
    assert sw.children_ran and not sw.children_cached
    assert sw.torch.status == "ok" and sw.torch.version == torch_version == torch_says["version"]
    assert sw.torch.cpu_capability == torch_says["capability"]
    assert sw.torch.intra_op_threads == torch_says["threads"]
    assert sw.torch.mkldnn_available is torch_says["mkldnn"]
    assert sw.torch.parallel_backend and f"ATen parallel backend: {sw.torch.parallel_backend}" in torch_says["parallel"]
    if sw.torch.parallel_backend == "OpenMP":
        assert sw.torch.openmp
    assert {c.package: c.status for c in sw.import_checks}["torch"] == "ok"
    assert sw.numpy.version == metadata.version("numpy") and sw.numpy.simd_baseline
    assert all("/" not in (lib.library or "") for lib in sw.loaded_libs + sw.numpy.blas)
    # The report round-trips through JSON unchanged.
    assert report_from_json(report.to_json()).software == sw


@pytest.mark.parametrize(
    "body, timeout, status, text",
    [
        # A timeout long enough for a loaded machine: the child must get as far as importing the fake torch.
        ("raise ImportError('libcudart.so.12: cannot open shared object file')", 120, "error", "libcudart.so.12"),
        ("import time\ntime.sleep(300)", 1.5, "timeout", "did not finish in time"),
    ],
)
def test_fake_torch_import_error_and_hang(tmp_path, body, timeout, status, text):
    fake = tmp_path / "torch"
    fake.mkdir()
    (fake / "__init__.py").write_text(body + "\n")
    sw = probe_software(environ=dict(os.environ, PYTHONPATH=str(tmp_path)), timeout=timeout, cache=False)
    if not any(p.name == "torch" for p in sw.packages):
        pytest.skip("torch is not installed in this environment")
    assert sw.torch.status == status and text in sw.torch.error
    assert sw.torch.version == metadata.version("torch")  # from metadata when the child could not say
    check = next(c for c in sw.import_checks if c.package == "torch")
    assert check.status == status
    assert not next(r for r in sw.isa_risks if r.package == "torch").at_risk  # not an ISA problem


def test_numpy_dying_first_is_not_blamed_on_torch(tmp_path):
    fake = tmp_path / "numpy"
    fake.mkdir()
    (fake / "__init__.py").write_text("import os, signal\nos.kill(os.getpid(), signal.SIGILL)\n")
    sw = probe_software(environ=dict(os.environ, PYTHONPATH=str(tmp_path)), cache=False)
    names = {p.name for p in sw.packages}
    if not {"torch", "numpy"} <= names:
        pytest.skip("needs torch and numpy installed")
    checks = {c.package: c for c in sw.import_checks}
    assert checks["numpy"].status == "crashed" and checks["numpy"].signal_name == "SIGILL"
    assert checks["torch"].status == "skipped"
    assert sw.torch.status == "error" and "importing numpy" in sw.torch.error
    assert next(r for r in sw.isa_risks if r.package == "numpy").at_risk
    assert not next(r for r in sw.isa_risks if r.package == "torch").at_risk
