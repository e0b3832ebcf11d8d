"""Text and Markdown sections of the software stack say the same things, problems marked."""

from __future__ import annotations

import signal

from cpudoctor.model import (BlasLib, ImportCheck, IsaRisk, NumpyInfo, OsInfo, PackageInfo, PythonInfo, Software,
    TorchBuild)
from cpudoctor.render.software import markdown_lines, text_lines


def sample() -> Software:
    return Software(
        os=OsInfo(system="Linux", distro="Ubuntu", distro_version="22.04", kernel="5.15.0", libc="glibc 2.35", wsl=2,
                  vm=True, virtualization="hyperv", governor="performance", cpufreq_driver="amd-pstate-epp", boost=True,
                  thp="madvise", mem_total_bytes=64 << 30, mem_available_bytes=60 << 30, swap_total_bytes=0,
                  swap_used_bytes=0, cgroup_memory_limit_bytes=16 << 30),
        python=PythonInfo(version="3.11.7", implementation="cpython", executable="/usr/bin/python3", env_kind="conda", env_name="dl"),
        packages=[PackageInfo("torch", "2.3.1+cu121", "cuda", "+cu121 (CUDA 12.1)"), PackageInfo("tensorflow", "2.16.1", "unknown")],
        torch=TorchBuild(status="ok", version="2.3.1+cu121", cpu_capability="AVX2", mkl_available=True, mkl_version="2024.2",
                         mkldnn_available=True, mkldnn_version="3.3.6", openmp="GNU libgomp + Intel OpenMP (libiomp5)",
                         parallel_backend="OpenMP", intra_op_threads=16, inter_op_threads=16, bf16_supported=False,
                         cuda_version="12.1"),
        numpy=NumpyInfo(version="1.26.4", simd_baseline=["SSE", "SSE2", "SSE3"], simd_dispatched=["AVX2"]),
        loaded_libs=[BlasLib("openmp", "openmp", "libgomp.so.1", None, 16), BlasLib("openmp", "openmp", "libiomp5.so", None, 16),
                     BlasLib("blas", "openblas", "libopenblas64_p-r0.so", "0.3.23", 16, "pthreads", "Zen")],
        thread_env={"OMP_NUM_THREADS": "16", "LD_PRELOAD": "libjemalloc.so.2"},
        preload_libs=["libjemalloc.so.2"],
        isa_risks=[IsaRisk("tensorflow", True, "2.16.1", ["avx"], ["avx"], True, "TensorFlow 2.16.1 dies ..."),
                   IsaRisk("torch", True, "2.3.1+cu121", [], [], False, "")],
        import_checks=[ImportCheck("torch", "torch", "ok", seconds=0.9),
                       ImportCheck("tensorflow", "tensorflow", "crashed", signal.SIGILL, "SIGILL",
                                   "Illegal instruction: import tensorflow was killed by SIGILL (needs avx)")],
        children_ran=True,
        notes=["several OpenMP runtimes are loaded together (libgomp, libiomp5): their thread pools compete"],
    )


def test_text_sections_and_marks():
    text = "\n".join(text_lines(sample()))
    for title in ("Operating system", "Python", "PyTorch build", "NumPy and thread pools",
                  "Thread and allocator environment", "Import checks", "Illegal-instruction risk", "Notes"):
        assert f"\n{title}\n" in f"\n{text}\n"
    assert "WSL2" in text and "virtual machine (hyperv)" in text and "cgroup limit: 16 GiB" in text
    assert "CUDA 12.1" in text and "CPU capability: AVX2" in text and "bf16 natively supported: no" in text
    assert "[✓] import torch (0.90 s)" in text
    assert "[✗] import tensorflow: Illegal instruction" in text
    assert "[✗] tensorflow 2.16.1: missing avx" in text
    assert "OMP_NUM_THREADS=16" in text and "libiomp5.so" in text


def test_markdown_has_tables_and_escapes_pipes():
    sw = sample()
    sw.notes.append("a | b")
    md = markdown_lines(sw)
    assert "### PyTorch build" in md
    assert "| package | version | build | detail |" in md
    assert any(line.startswith("| torch | 2.3.1+cu121 | cuda |") for line in md)
    assert "- `OMP_NUM_THREADS=16`" in md
    assert "- a \\| b" in md


def test_empty_and_missing_software():
    assert text_lines(None) == ["(software stack not probed)"]
    lines = text_lines(Software())
    assert lines[0] == "Operating system" and "Python" not in lines
    crashed = Software(python=PythonInfo(version="3.11"), torch=TorchBuild(status="crashed", version="2.3.0",
                                                                            error="Illegal instruction: boom"))
    assert any(line.startswith("  [✗] torch 2.3.0: Illegal instruction") for line in text_lines(crashed))
    ok = Software(isa_risks=[IsaRisk("numpy", True, "2.4.6", ["x86-64-v2"])])
    assert any("[✓] this CPU meets the ISA floor" in line for line in text_lines(ok))


def test_markdown_escapes_report_data_from_a_captured_tree():
    """A distro name read from someone's os-release must not become HTML in a pasted issue."""
    from cpudoctor.model import OsInfo, Software
    from cpudoctor.render.software import markdown_lines

    md = "\n".join(markdown_lines(Software(os=OsInfo(system="Linux", distro="<img src=x onerror=alert(1)>"))))
    assert md.count("<img") == md.count("\\<img") == 1    # shown as text, never as a tag
