"""The kernels a job ran, judged against the CPU: two questions, one rule family each.

- EVID007 ``lower-isa-kernels``: kernels on narrower vectors than the CPU runs (AVX2 on an
  AVX-512 CPU, reference C++ code anywhere), and what capped them;
- EVID008 ``emulated-dtype``: a reduced-precision dtype (bf16, fp16, int8) computed without
  instructions of its own.

Both read one set of facts, a :class:`~cpudoctor.model.kernels.KernelCensus` (the libraries' own
reports of what ran, the cap variables the job's environment set, oneDNN's own ISA line), whichever
way the job was watched: ``cpudoctor run`` (its oneDNN verbose lines), a lab job (its census, in
``bench`` and in a saved report's runs: :func:`lab_findings`). Each kernel is compared with the CPU
by :func:`cpudoctor.probes.kernels.check_kernels` on the one width table of
:mod:`cpudoctor.knowledge.isa`. The report rules ISA010 and PREC003 asked the same questions of the
lab's runs; their codes redirect here.

EVID008 also reads the sampled stacks: compute time in ATen's generic bf16/fp16 kernels, which no
library reports.
"""

from __future__ import annotations

from typing import Any

from cpudoctor.advisor import snippets
from cpudoctor.advisor.evidence_rules import EVIDENCE_RULES, Evidence, evidence_rule
from cpudoctor.knowledge import ISA_FORCING
from cpudoctor.kits.format import percent
from cpudoctor.model import Finding
from cpudoctor.model.kernels import KernelCensus
from cpudoctor.probes import kernels as kern

# Codes this family answers to in a report's diagnosis (its lab runs) and in `bench`.
KERNEL_RULES = ("EVID007", "EVID008")
PRIMITIVE_SHARE = 0.10   # a kernel counts when it took this share of its primitive's time (or was not timed) ...
SHARE = 0.10             # ... and the counted ones this share of all the timed kernel time, unless a cause is named
JOB_WORDS = {"train": "training run", "sweep": "thread sweep", "gemm": "GEMM run", "quant": "int8 run",
             "roofline": "roofline run"}
DEFAULT_COMMAND = "python train.py"
STACK_DTYPES = {"bf16": "bf16", "f16": "fp16"}    # the breakdown's dtype names -> the knowledge table's


def _finding(severity: str, title: str, why: str, fix: str, snippet: str = "", evidence: dict[str, Any] | None = None,
             lang: str = "bash") -> Finding:
    ev = {k: v for k, v in (evidence or {}).items() if v is not None}
    return Finding(code="", symbol="", category="", severity=severity, title=title, why=why, fix=fix,
                   snippet=snippet, snippet_lang=lang, evidence=ev, fields_used=sorted(ev))


def _where(census: KernelCensus) -> str:
    """"in the lab's training run" / "in this job": where the kernels ran, for a title."""
    return f"in the lab's {JOB_WORDS.get(census.lab_job, census.lab_job)}" if census.lab_job else "in this job"


def _ran(check: kern.KernelCheck) -> str:
    k = check.kernel
    share = f", {percent(k.share, fraction=True)} of its time" if k.share is not None else ""
    dtype = f" {k.dtype}" if k.dtype else ""
    return f"{k.library} {k.primitive}{dtype}: {k.impl or k.isa}{share}"


def _counted(checks: list[kern.KernelCheck], which: str) -> tuple[list[kern.KernelCheck], float | None]:
    """(the kernels below the CPU or emulating a dtype that count, longest first; their share of all the timed
    kernel time, layout copies left out).

    A kernel counts when it took :data:`PRIMITIVE_SHARE` of its primitive's time, or was not timed (ATen's
    capability, OpenBLAS's core: they govern all of their library's work). Together they must take :data:`SHARE`
    of the timed kernel time, unless a cause is named (a cap variable, a CPU the library saw smaller): then the
    fix is certain and free, and a small share today is all of that library's work on another job. oneDNN picks
    narrower kernels for some shapes on purpose, so a small share with no named cause says nothing.
    """
    # a reduced dtype's reference code is the dtype's question (EVID008), not also the vector width's
    hit = [c for c in checks if (c.below and not c.dtype_emulated if which == "below" else c.dtype_emulated)
           and (c.kernel.share is None or c.kernel.share >= PRIMITIVE_SHARE)]
    if not hit:
        return [], None
    timed = [c for c in checks if c.kernel.ms and c.kernel.primitive != "reorder"]
    total = sum(c.kernel.ms or 0.0 for c in timed)
    hit_ms = sum(c.kernel.ms or 0.0 for c in hit if c in timed)
    share = round(hit_ms / total, 4) if total > 0 and hit_ms > 0 else None
    named = any(c.cause in ("cap", "hidden") for c in hit)
    untimed = any(not c.kernel.ms for c in hit)
    if not (named or untimed or (share is not None and share >= SHARE)):
        return [], share
    return sorted(hit, key=lambda c: -(c.kernel.ms or 0.0)), share


def _cause_words(check: kern.KernelCheck, detected: str | None, command: str) -> tuple[str, str, str]:
    """(why, fix, snippet) for what kept ``check``'s library from the CPU's best kernels."""
    lib = check.kernel.library
    if check.cause == "cap" and check.cap:
        name = check.cap.split("=", 1)[0]
        return (f"{check.cap} is set in the environment the job ran in and caps {lib}.",
                f"Unset {name} where it is set (shell profile, launch script, container image): {lib} then picks "
                "the best kernels for this CPU.",
                snippets.unset_lines([name]) + "\n# or for one run:\n" + snippets.clean_launch([name], command))
    if check.cause == "hidden":
        return (f"{lib} itself saw a CPU with only {detected or 'fewer instruction sets'} (its own report), less than "
                "/proc/cpuinfo lists: the process runs on an emulated CPU (qemu) or a hypervisor or the OS hides the "
                "wider registers' state from it.",
                "Run the job natively, or give the VM the host's CPU model (see ISA009 and ISA007).", "")
    return (f"No variable caps {lib} and it saw the whole CPU: an old build that does not know this CPU's "
            "instructions, or one without a faster kernel for this shape.",
            "Update PyTorch (its oneDNN and oneMKL come with it) and measure again.", "")


def _command(ev: Evidence) -> str:
    return ev.cmd() if ev.command.strip() else DEFAULT_COMMAND


@evidence_rule("EVID007", "lower-isa-kernels", category="isa", severity="warning",
               title="Kernels ran a lower instruction set than the CPU supports")
def lower_isa_kernels(ev: Evidence) -> list[Finding]:
    """
    What it checks:
        The kernels the job ran, as the libraries reported them (oneDNN's verbose lines with each
        primitive's implementation and time, switched on by `cpudoctor run` and the lab's jobs; for
        the lab also oneMKL's code path, ATen's CPU capability and OpenBLAS's core), against the
        widest vectors this CPU's flags allow each library (one table, resources/isa_forcing.json):
        AVX2 kernels on an AVX-512 CPU, SSE on an AVX2 one, reference C++ code anywhere. A kernel
        counts from 10 % of its primitive's time; together they must take 10 % of the timed kernel
        time (layout copies left out) unless a cause is named: a cap variable in the job's
        environment (ONEDNN_MAX_CPU_ISA, ATEN_CPU_CAPABILITY, MKL_ENABLE_INSTRUCTIONS, ...) or a CPU
        the library saw smaller than /proc/cpuinfo lists (an emulator, a hypervisor). Otherwise it is
        the library's own choice (an old build, or no faster kernel for that shape).

    Why it matters:
        The configuration can look right while the work runs on half-width vectors: an AVX2 kernel on
        an AVX-512 CPU does half the work per instruction, SSE a quarter, reference code far less. A
        cap variable left over from a debugging session or a guide silently halves the speed; only the
        kernels that ran show it.

    Fix:
        Unset the cap variable; run on the real CPU (host-passthrough in a VM); update PyTorch when
        its oneDNN predates the CPU. Then run the job again and check the kernels it names.
    """
    census = ev.kernel_census()
    if census is None or not ev.cpu_flags:
        return []
    checks = kern.check_kernels(census.kernels, ev.cpu_flags, census.caps, census.onednn_isa)
    below, share = _counted(checks, "below")
    if not below:
        return []
    first = below[0]
    why, fix, snippet = _cause_words(first, census.onednn_isa, _command(ev))
    timed = (f"{percent(share, fraction=True)} of the timed kernel time ({sum(c.kernel.calls for c in below)} executions, "
             f"{sum(c.kernel.ms or 0.0 for c in below):.0f} ms) ran below it: " if share is not None else "")
    seen = "; ".join(_ran(c) for c in below[:4])
    return [_finding(
        "warning", f"{first.kernel.library} ran {first.ran} kernels {_where(census)}; this CPU runs {first.expected}",
        f"This CPU's flags allow {first.expected} kernels; {timed}{seen}. " + why, fix, snippet,
        {"below_share": round(share, 3) if share is not None else None, "kernels": [_ran(c) for c in below][:6],
         "cpu_runs": first.expected, "cause": first.cause, "cap": first.cap, "lab_job": census.lab_job})]


@evidence_rule("EVID008", "emulated-dtype", category="precision", severity="warning",
               title="A data type ran without instructions of its own")
def emulated_dtype(ev: Evidence) -> list[Finding]:
    """
    What it checks:
        The bf16, fp16 and int8 kernels the job ran (oneDNN's verbose lines, from `cpudoctor run` and
        the lab's jobs): whether their kernels used the instructions made for that dtype
        (AVX512_BF16, AVX512_FP16, AMX, VNNI, AVX-NE-CONVERT) or converted to wider types and back,
        and whether this CPU has those instructions; and, from the sampled stacks, compute time in
        PyTorch's generic bf16/fp16 kernels on a CPU without them. It counts as EVID007 does: from
        10 % of the kernel time, or any share when a cap variable or an emulated CPU is the cause.

    Why it matters:
        Without instructions of its own a bf16 or fp16 kernel converts every value to fp32 and back,
        and int8 goes through 16-bit products: slower than plain fp32, often several times. On a CPU
        without them that is the hardware (PREC001, PREC002 say what to use instead); on a CPU that
        has them, something (a cap variable, an emulator, an old build) keeps the library from them.

    Fix:
        On a CPU with the instructions: remove what caps the library (named in the finding). Without
        them: train in fp32 (drop the autocast dtype or .to(dtype)), keep fp32 inference for int8.
    """
    if not ev.cpu_flags:
        return []
    census = ev.kernel_census()
    if census is not None:
        found = _emulated_kernels(ev, census)
        if found:
            return found
    return _emulated_in_stacks(ev)


def _emulated_kernels(ev: Evidence, census: KernelCensus) -> list[Finding]:
    checks = kern.check_kernels(census.kernels, ev.cpu_flags, census.caps, census.onednn_isa)
    emulated, share = _counted(checks, "emulated")
    if not emulated:
        return []
    first = emulated[0]
    dtype = first.kernel.dtype or "bf16"
    seen = "; ".join(_ran(c) for c in emulated[:4])
    timed = f" ({percent(share, fraction=True)} of the timed kernel time)" if share is not None else ""
    evidence = {"emulated_share": round(share, 3) if share is not None else None,
                "kernels": [_ran(c) for c in emulated][:6], "dtype": dtype, "lab_job": census.lab_job}
    if first.dtype_native_on_cpu and first.kernel.isa == "ref" and first.cause == "library":
        # nothing kept oneDNN from the instructions: it has no vector kernel for this dtype and operation
        return [_finding(
            "warning", f"{dtype} ran in oneDNN's reference code {_where(census)}",
            f"The libraries' own report: {seen}{timed}: oneDNN's portable C++ code, no vector kernel at all, "
            f"although this CPU has {dtype} instructions: it has no {dtype} kernel for this operation here "
            "(often the backward pass of a convolution).",
            f"Run this model in fp32{' or bf16' if dtype != 'bf16' and _native_bf16(ev) else ''}: remove the "
            f"autocast dtype (or the .to({_torch_dtype(dtype)})) and compare steps per second; a newer PyTorch may "
            "bring the kernel.",
            f"# remove: with torch.autocast('cpu', dtype={_torch_dtype(dtype)}):\nout = model(x)   # fp32",
            evidence, lang="python")]
    if first.dtype_native_on_cpu:
        why, fix, snippet = _cause_words(first, census.onednn_isa, _command(ev))
        return [_finding(
            "warning", f"{dtype} ran without its instructions {_where(census)}, although this CPU has them",
            f"The libraries' own report: {seen}{timed}: kernels without the {dtype} instructions this CPU has. " + why,
            fix, snippet, evidence)]
    flags = " / ".join(ISA_FORCING.dtype_flags(dtype)[:2])
    slower = f"every {dtype} operation converts to a wider type and back: slower than fp32"
    if census.lab_job:      # the lab measured it on purpose: what it found is information, not a mistake
        return [_finding("info", f"{dtype} ran emulated {_where(census)}: this CPU has no {dtype} instructions",
                         f"The libraries' own report: {seen}{timed}. This CPU lacks {flags}, so {slower}.",
                         "Use fp32 on this CPU" + (" for inference." if dtype == "int8" else " for training."),
                         "", evidence)]
    return [_finding(
        "warning", f"{dtype} kernels ran emulated{timed}", f"The libraries' own report: {seen}{timed}, on a CPU "
        f"without {flags}: {slower}.",
        f"Train in fp32 on this CPU: remove the autocast dtype (or the .to({_torch_dtype(dtype)})); {dtype} pays "
        "off only where the CPU computes it natively.",
        f"# remove: with torch.autocast('cpu', dtype={_torch_dtype(dtype)}):\nout = model(x)   # fp32", evidence,
        lang="python")]


def _native_bf16(ev: Evidence) -> bool:
    """Whether the job's CPU computes bf16 natively (the other reduced dtype worth trying)."""
    return bool(ISA_FORCING.dtype_native("bf16", ev.cpu_flags))


def _torch_dtype(dtype: str) -> str:
    return {"bf16": "torch.bfloat16", "fp16": "torch.float16", "int8": "torch.qint8"}.get(dtype, dtype)


def _emulated_in_stacks(ev: Evidence) -> list[Finding]:
    """From the stacks: compute time in ATen kernels instantiated for a dtype the CPU cannot compute natively."""
    from cpudoctor.model.breakdown import COMPUTE

    bd = ev.breakdown
    if bd is None or not bd.reduced_precision or bd.seconds <= 0:
        return []
    compute = sum(s.seconds for s in bd.shares if s.category == COMPUTE) or 0.0
    slow = {t: sec for t, sec in bd.reduced_precision.items()
            if ISA_FORCING.dtype_native(STACK_DTYPES.get(t), ev.cpu_flags) is False}
    sec = sum(slow.values())
    if not slow or compute <= 0 or sec / compute < SHARE:
        return []
    types = sorted(slow)
    flags = " / ".join(f for t in types for f in ISA_FORCING.dtype_flags(STACK_DTYPES[t])[:2])
    why = (f"{percent(sec / compute, fraction=True)} of the compute kernels' sampled time ({sec:.1f} s) ran PyTorch's generic "
           f"{', '.join(types)} kernels (oneDNN has no native {', '.join(types)} kernel on a CPU without {flags}): "
           "every value is converted to fp32 and back, element by element.")
    fix = ("Train in fp32 on this CPU: remove the autocast dtype (or the .half()/.to(torch.float16)); "
           "reduced precision pays off only where the CPU computes it natively.")
    return [_finding("warning", f"{' and '.join(types)} ran emulated ({percent(sec / compute, fraction=True)} of kernel time)", why,
                     fix, "model = model.float()   # and inputs: x = x.float()",
                     {"emulated_share": round(sec / compute, 3), "types": types}, lang="python")]


def lab_findings(run: Any, cpu_flags: set[str] | list[str], *, strict: bool = False) -> list[Finding]:
    """The kernel rules over one lab run's census (``bench`` after a run, a report's latest run of each kind),
    judged against ``cpu_flags``: the CPU of the report the run belongs to, or of the machine it ran on."""
    census = KernelCensus.of_lab_run(run)
    if census is None:
        return []
    return EVIDENCE_RULES.run(Evidence(kernels=census, cpu_flags=set(cpu_flags)), set(KERNEL_RULES), strict=strict)


def report_lab_findings(report: Any, only: set[str] | None = None, *, strict: bool = False) -> list[Finding]:
    """The kernel rules over the latest lab run of each kind in ``report`` that recorded kernels, against the
    report's own CPU (a report opened elsewhere is judged against the machine it describes)."""
    wanted = set(KERNEL_RULES) if only is None else set(KERNEL_RULES) & set(only)
    flags = set(report.cpu.flags or [])
    if not wanted or not flags:
        return []
    latest: dict[str, Any] = {}
    for run in report.benchmarks:
        if (run.metrics or {}).get("kernels"):
            latest[run.kind] = run
    out: list[Finding] = []
    for run in latest.values():
        out += [f for f in lab_findings(run, flags, strict=strict) if f.code in wanted]
    return out

