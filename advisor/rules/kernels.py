"""Evidence from the kernels that ran: narrower vectors than the CPU has, or a dtype computed by emulation.

The lab's jobs record which kernels the libraries ran, in the libraries' own
words (oneDNN's and oneMKL's verbose reports, ATen's capability, OpenBLAS's
core); :mod:`cpudoctor.probes.kernels` judges them against this report's CPU
flags. These rules turn that into findings that quote the run. They judge
again from the recorded kernels, so a report opened on another machine is
judged against its own CPU, not the one it is opened on.
"""

from __future__ import annotations

from typing import Any

from cpudoctor.advisor import snippets
from cpudoctor.advisor.engine import Facts, rule
from cpudoctor.probes import kernels as kern
from cpudoctor.model import Finding, Report
from cpudoctor.kits.format import percent

MIN_SHARE = 0.10          # a kernel below the CPU counts when it took at least this share of its primitive's time
JOB_WORDS = {"train": "training run", "sweep": "thread sweep", "gemm": "GEMM run", "quant": "int8 run",
             "roofline": "roofline run"}


def evidence(report: Report) -> list[tuple[Any, list[kern.KernelCheck]]]:
    """(run, checks) of the latest lab run of each kind that recorded kernels, judged against the report's flags."""
    flags = set(report.cpu.flags or [])
    if not flags:
        return []
    latest: dict[str, Any] = {}
    for run in report.benchmarks:
        if run.metrics.get("kernels"):
            latest[run.kind] = run
    out = []
    for run in latest.values():
        found = [kern.Kernel.from_dict(k) for k in run.metrics["kernels"] if isinstance(k, dict)]
        recorded = run.metrics.get("kernel_check") or {}
        checks = kern.check_kernels(found, flags, recorded.get("caps_set") or {}, recorded.get("onednn_isa"))
        out.append((run, checks))
    return out


def _counts(check: kern.KernelCheck) -> bool:
    share = check.kernel.share
    return share is None or share >= MIN_SHARE


def _ran(check: kern.KernelCheck) -> str:
    k = check.kernel
    share = f", {percent(k.share, fraction=True)} of its time" if k.share is not None else ""
    dtype = f" {k.dtype}" if k.dtype else ""
    return f"{k.library} {k.primitive}{dtype}: {k.impl or k.isa}{share}"


def _cause_words(check: kern.KernelCheck, detected: str | None) -> tuple[str, str, str]:
    """(why, fix, snippet) for the cause the comparison found."""
    lib = check.kernel.library
    if check.cause == "cap" and check.cap:
        name = check.cap.split("=", 1)[0]
        return (f"{check.cap} is set in the environment the job ran in and caps {lib}.",
                f"Unset {name} where it is set (shell profile, launch script, container image).",
                snippets.unset_lines([name]) + "\n# or for one run:\n" + snippets.clean_launch([name]))
    if check.cause == "hidden":
        return (f"{lib} itself saw a CPU with only {detected or 'fewer instruction sets'} (its own report), less than "
                "/proc/cpuinfo lists: the process runs on an emulated CPU (qemu) or a hypervisor or the OS hides the "
                "wider registers' state from it.",
                "Run the job natively, or give the VM the host's CPU model (see ISA009 and ISA007).", "")
    return (f"No variable caps {lib} and it saw the whole CPU: an old build that does not know this CPU's "
            "instructions, or one without a faster kernel for this shape.",
            "Update PyTorch (its oneDNN and oneMKL come with it) and measure again.", "")


@rule("ISA010", "kernels-below-cpu", category="isa", severity="warning",
      title="The lab's jobs ran kernels narrower than the CPU supports")
def kernels_below_cpu(report: Report) -> list[Finding]:
    """What it checks:
        The kernels the lab's latest jobs ran, as the libraries reported them (oneDNN's verbose lines
        with each primitive's implementation and time, oneMKL's code path, ATen's CPU capability,
        OpenBLAS's core), against the widest vectors this CPU's flags allow each library (the table of
        resources/isa_forcing.json): AVX2 kernels on an AVX-512 CPU, SSE on an AVX2 one. A kernel counts
        when it took at least 10 % of its primitive's time. The cause is named: a cap variable set in the
        job's environment (``ONEDNN_MAX_CPU_ISA``, ``ATEN_CPU_CAPABILITY``, ``MKL_ENABLE_INSTRUCTIONS``,
        ...), a CPU the library saw smaller than /proc/cpuinfo lists (an emulator, a hypervisor), or the
        library's own choice (an old build).

    Why it matters:
        The configuration can look right while the work runs on half-width vectors: AVX2 instead of
        AVX-512 is about half the FLOP/s of a convolution or matrix multiply. Only the kernels that ran
        show it.

    Fix:
        Remove the cap variable, run on the real CPU, or update PyTorch, as the finding says; then
        run the lab job again and check the kernels it names.
    """
    f = Facts(report)
    out: list[Finding] = []
    for run, checks in evidence(report):
        below = [c for c in checks if c.below and _counts(c)]
        if not below:
            continue
        first = below[0]
        detected = (run.metrics.get("kernel_check") or {}).get("onednn_isa")
        why, fix, snippet = _cause_words(first, detected)
        f.record(f"benchmarks[{run.kind}].kernels", [_ran(c) for c in below][:6])
        job = JOB_WORDS.get(run.kind, run.kind)
        out.append(f.finding(
            "warning", f"{first.kernel.library} ran {first.ran} kernels in the {job}; this CPU runs {first.expected}",
            why=(f"The libraries' own reports from the lab's {job} show {'; '.join(_ran(c) for c in below[:4])}, "
                 f"while this CPU's flags allow {first.expected} kernels. " + why),
            fix=fix, snippet=snippet))
    return out


@rule("PREC003", "dtype-ran-emulated", category="precision", severity="warning",
      title="A bf16 or int8 computation ran without its dot-product instructions")
def dtype_ran_emulated(report: Report) -> list[Finding]:
    """What it checks:
        The bf16 and int8 primitives oneDNN reported in the lab's latest jobs: whether their kernels
        used the dot-product instructions for that dtype (AVX512_BF16, AMX, VNNI) or converted to
        wider types and back, and whether this CPU has those instructions.

    Why it matters:
        An emulated bf16 or int8 path is slower than fp32, not faster. On a CPU without the
        instructions that is the hardware (PREC001, PREC002 say what to use instead); on a CPU that
        has them, something (a cap variable, an emulator, an old build) keeps the library from them.

    Fix:
        On a CPU with the instructions: remove what caps the library (named in the finding). Without
        them: train in fp32 (bf16) or keep fp32 inference (int8).
    """
    f = Facts(report)
    out: list[Finding] = []
    for run, checks in evidence(report):
        emulated = [c for c in checks if c.dtype_emulated and _counts(c)]
        if not emulated:
            continue
        first = emulated[0]
        dtype = first.kernel.dtype or "bf16"
        f.record(f"benchmarks[{run.kind}].kernels", [_ran(c) for c in emulated][:6])
        job = JOB_WORDS.get(run.kind, run.kind)
        seen = "; ".join(_ran(c) for c in emulated[:4])
        if first.dtype_native_on_cpu:
            detected = (run.metrics.get("kernel_check") or {}).get("onednn_isa")
            why, fix, snippet = _cause_words(first, detected)
            out.append(f.finding(
                "warning", f"{dtype} ran emulated in the {job} although this CPU computes it natively",
                why=f"oneDNN's own report from the lab's {job} shows {seen}: kernels without {dtype} dot-product "
                    f"instructions, which this CPU has. " + why,
                fix=fix, snippet=snippet))
        else:
            out.append(f.finding(
                "info", f"{dtype} ran emulated in the {job}: this CPU has no {dtype} dot-product instructions",
                why=f"oneDNN's own report from the lab's {job} shows {seen}. This CPU lacks the instructions, so "
                    f"every {dtype} operation converts to a wider type and back.",
                fix="Use fp32 on this CPU" + (" for training." if dtype == "bf16" else " for inference.")))
    return out
