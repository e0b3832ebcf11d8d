"""The PyTorch build: installed at all, the right flavour, its math libraries, plug-ins."""

from __future__ import annotations

from cpudoctor.advisor import machine, snippets
from cpudoctor.advisor.engine import Facts, rule
from cpudoctor.advisor.torch_install import cpu_index, platform_of
from cpudoctor.model import Finding, Report


@rule("TORCH001", "torch-missing", category="torch", severity="warning",
      title="PyTorch is not installed in this Python")
def torch_missing(report: Report) -> list[Finding]:
    """What it checks:
        Whether the Python environment CPU Doctor inspected has PyTorch installed.

    Why it matters:
        Most advice here is about PyTorch's CPU build (thread pools, MKL, oneDNN, kernels). Without
        it installed in *this* environment — often it lives in another venv or conda env — none
        of it can be checked, and a plain ``pip install torch`` on Linux pulls the multi-GB CUDA
        build.

    Fix:
        Install the CPU build from PyTorch's CPU wheel index (about 0.7 GB installed instead of
        ~5 GB for the CUDA build), or point CPU Doctor at the environment that has PyTorch
        (``--python``, or the Environment picker in the window).
    """
    f = Facts(report)
    if not machine.env_known(f):
        return []
    if not machine.torch_installed(f):
        env = f.get("software.python.env_kind")
        ver = f.get("software.python.version")
        known = [p for p in (f"Python {ver}" if ver else "", f"{env} environment" if env else "") if p]
        which = f" ({', '.join(known)})" if known else ""
        return [f.finding(
            "warning", "PyTorch is not installed in this Python",
            why=(f"The Python CPU Doctor looked at{which} has no torch package. If you train in another "
                 "environment, point CPU Doctor at it: `cpudoctor doctor --python PATH` (its interpreter, its folder "
                 "or a name from `cpudoctor envs`), or the Environment picker in the window's toolbar."),
            fix="Install the CPU build from PyTorch's CPU index (a plain pip install on Linux pulls the CUDA build).",
            snippet=snippets.install_commands(report))]
    return [f.finding("ok", f"PyTorch {f.get('software.torch.version') or ''} is installed".replace("  ", " "))]


@rule("TORCH002", "gpu-build-without-gpu", category="torch", severity="warning",
      title="A CUDA or ROCm build of PyTorch on a machine without that GPU")
def gpu_build_without_gpu(report: Report) -> list[Finding]:
    """What it checks:
        Whether the installed torch is a CUDA (``+cu…``) or ROCm (``+rocm…``) build, and whether
        the report saw a matching GPU. When the report cannot tell whether a GPU exists, it says so
        instead of guessing.

    Why it matters:
        The GPU builds carry their runtime libraries: a CUDA torch with its nvidia-* wheels takes
        about 5 GB on disk, ROCm about 6 GB, against about 0.7 GB for the CPU build — and the CPU
        code inside is the same. On a CPU-only machine that is multi-GB of waste and slower
        imports.

    Fix:
        Uninstall the GPU build (and the nvidia-* runtime wheels) and install from the CPU wheel
        index ``https://download.pytorch.org/whl/cpu``.
    """
    f = Facts(report)
    if not machine.torch_installed(f):
        return []
    build = machine.torch_build(f)
    if build not in ("cuda", "rocm"):
        return [f.finding("ok", "PyTorch is the CPU build")] if build == "cpu" else []
    gpu = machine.gpu_present(f, build)
    k = machine.knowledge()["wheel_sizes"]
    size = k["cuda_gb"] if build == "cuda" else k["rocm_gb"]
    vendor = "NVIDIA" if build == "cuda" else "AMD Radeon/Instinct"
    version = f.get("software.torch.version") or "torch"
    waste = f"about {size - k['cpu_gb']:.0f} GB more disk than the CPU build (~{size:.0f} GB vs ~{k['cpu_gb']} GB)"
    if gpu is True:
        return [f.finding("ok", f"PyTorch is a {build.upper()} build and a matching GPU is present")]
    if gpu is None:
        return [f.finding(
            "info", f"PyTorch is a {build.upper()} build ({version}); is there an {vendor} GPU?",
            why=(f"This report cannot see GPUs. If this machine has no {vendor} GPU, the {build.upper()} build costs "
                 f"{waste} and imports slower, for the same CPU code."),
            fix="If there is no such GPU, replace it with the CPU build.",
            snippet=snippets.install_commands(report))]
    return [f.finding(
        "warning", f"PyTorch is a {build.upper()} build but there is no {vendor} GPU",
        why=(f"{version} carries the {build.upper()} runtime, {waste}; with no {vendor} GPU none of it is used and "
             "the CPU code inside is the same as the CPU build's."),
        fix=f"Uninstall it and install the CPU build from {cpu_index(platform_of(report)) or 'PyPI'}.",
        snippet=snippets.install_commands(report))]


@rule("TORCH003", "rocm-on-wsl2", category="torch", severity="warning",
      title="A ROCm build of PyTorch under WSL2")
def rocm_on_wsl2(report: Report) -> list[Finding]:
    """What it checks:
        A ROCm build of PyTorch installed inside WSL2.

    Why it matters:
        WSL2 exposes GPUs through Microsoft's ``/dev/dxg`` paravirtual driver, not the ``amdgpu``
        kernel driver that stock ROCm wheels expect. Only AMD's WSL-specific ROCm runtime, on a
        short list of Radeon RX 7000 / PRO cards, works there; everywhere else ``torch.cuda``
        reports no device, and several GB of HIP libraries sit unused while training runs on CPU.

    Fix:
        For CPU training install the CPU build. For GPU training under WSL2 follow AMD's "ROCm on
        WSL" guide with a supported Radeon card, or use native Linux.
    """
    f = Facts(report)
    if f.get("software.os.wsl") != 2 or not machine.torch_installed(f):
        return []
    if machine.torch_build(f) != "rocm":
        return []
    return [f.finding(
        "warning", "ROCm build of PyTorch under WSL2",
        why=("WSL2 has no amdgpu kernel driver; stock ROCm wheels find no GPU there (only AMD's WSL runtime on a few "
             f"Radeon RX 7000/PRO cards does). This build ({f.get('software.torch.version') or 'torch'}) then runs on the "
             f"CPU while carrying ~{machine.knowledge()['wheel_sizes']['rocm_gb']:.0f} GB of HIP libraries."),
        fix="Install the CPU build for CPU training; for GPU use AMD's ROCm-on-WSL runtime or native Linux.",
        snippet=snippets.install_commands(report))]


def _math_lib_rule(report: Report, *, field: str, version_field: str, name: str, what: str) -> list[Finding]:
    f = Facts(report)
    if f.get("software.torch.status") != "ok":
        return []
    available = f.get(f"software.torch.{field}")
    if available is None:
        return []
    if available:
        version = f.get(f"software.torch.{version_field}")
        return [f.finding("ok", f"{name} is available to PyTorch" + (f" ({version})" if version else ""))]
    if name == "MKL" and machine.is_x86(f) is False:
        return [f.finding("ok", f"MKL is not used on {f.get('cpu.arch') or 'this architecture'} (expected)")]
    return [f.finding(
        "warning", f"{name} is not available to PyTorch",
        why=(f"This PyTorch ({f.get('software.torch.version') or '?'}) reports {name} unavailable. {what}"),
        fix="Install an official PyTorch build (pip CPU wheel index or conda-forge), which includes it.",
        snippet=snippets.install_commands(report))]


@rule("TORCH004", "mkl-unavailable", category="torch", severity="warning",
      title="PyTorch was built without MKL")
def mkl_unavailable(report: Report) -> list[Finding]:
    """What it checks:
        ``torch.backends.mkl.is_available()`` as reported by the torch child (x86 only; ARM builds
        never use MKL).

    Why it matters:
        On x86, official PyTorch wheels link MKL for fp32 GEMM fallbacks, FFT and some linear
        algebra. A custom or distribution build without it falls back to a reference BLAS or
        OpenBLAS and can be several times slower on those operators.

    Fix:
        Install an official build (pip CPU wheel index or conda-forge ``pytorch-cpu``).
    """
    return _math_lib_rule(report, field="mkl_available", version_field="mkl_version", name="MKL",
                          what="GEMM fallbacks, FFT and linear algebra then use slower libraries.")


@rule("TORCH005", "onednn-unavailable", category="torch", severity="warning",
      title="PyTorch was built without oneDNN (mkldnn)")
def onednn_unavailable(report: Report) -> list[Finding]:
    """What it checks:
        ``torch.backends.mkldnn.is_available()`` as reported by the torch child.

    Why it matters:
        oneDNN supplies PyTorch's fast CPU convolutions, fused linear layers and the bf16/int8 paths
        (AVX-512, VNNI, AMX). Without it convolutions use a generic im2col+GEMM path, often 2-5x
        slower for CNN training.

    Fix:
        Install an official build, or rebuild with ``USE_MKLDNN=1``.
    """
    return _math_lib_rule(report, field="mkldnn_available", version_field="mkldnn_version", name="oneDNN",
                          what="Convolutions and the bf16/int8 paths then use generic, much slower code.")


@rule("TORCH006", "zentorch-on-zen", category="torch", severity="info",
      title="AMD zentorch can speed up PyTorch on Zen CPUs")
def zentorch_on_zen(report: Report) -> list[Finding]:
    """What it checks:
        An AMD Zen CPU (zen to zen5) with PyTorch installed, and whether AMD's zentorch plug-in
        (ZenDNN for PyTorch) is installed. It never fires on Intel or ARM.

    Why it matters:
        zentorch adds ZenDNN kernels and graph fusions for ``torch.compile(backend="zentorch")``,
        tuned for EPYC Zen4/Zen5; AMD reports sizable inference speed-ups there. On AVX2-only Zen
        parts it works with smaller gains. It is a separate package with its own PyTorch version
        pin, so it is a suggestion, not a default.

    Fix:
        ``pip install zentorch`` matching your torch version (see AMD's ZenDNN release notes), then
        ``import zentorch`` and ``torch.compile(model, backend="zentorch")``.
    """
    f = Facts(report)
    vendor = f.get("cpu.vendor")
    uarch = (f.get("cpu.microarchitecture") or "").lower()
    k = machine.knowledge()["zen_uarchs"]
    if vendor != "AMD" or uarch not in k["uarchs"] or not machine.torch_installed(f):
        return []
    if machine.package(report, "zentorch") is not None:
        f.record("software.packages[zentorch]", "installed")
        return [f.finding("ok", "zentorch (ZenDNN) is installed")]
    f.record("software.packages[zentorch]", "not installed")
    best = uarch in k["best"]
    return [f.finding(
        "info", f"Try AMD's zentorch plug-in on this {uarch} CPU",
        why=(f"{f.get('cpu.brand') or 'This CPU'} is {uarch}. zentorch plugs ZenDNN kernels into torch.compile; "
             + ("it is tuned for Zen4/Zen5, so this CPU is its main target." if best
                else "it is tuned for Zen4/Zen5 and gives smaller gains on AVX2-only Zen parts like this one.")),
        fix="Install the zentorch release that matches your torch version, then compile with its backend.",
        snippet=('python -m pip install zentorch  # pick the release matching your torch version\n'
                 'python -c "import torch, zentorch; print(zentorch.__version__)"\n'
                 '# in your script: model = torch.compile(model, backend="zentorch")'),
        snippet_lang="bash")]
