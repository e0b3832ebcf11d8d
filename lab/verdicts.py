"""The lab's own sentences: why a measurement decides or does not, written into its result.

A sweep's verdict, a busy machine's caveat and why bf16 or int8 measured what
they did are part of the result a job hands back (they are saved in the
report, like a finding's why), so the lab writes them when it reads a job's
figures. How results are laid out on each surface is :mod:`cpudoctor.render.lab`.
"""

from __future__ import annotations

from typing import Any

from cpudoctor.kits.cpulist import format_cpulist
from cpudoctor.kits.plural import plural


def percent(share: float | None, unknown: str = "unknown") -> str:
    """A share of 0..1 as "48 %" (the lab's figures are too noisy for decimals)."""
    return unknown if share is None else f"{share * 100:.0f} %"


def busy(share: float) -> str:
    return f"{percent(share)} of the CPU went to other programs"


def inconclusive(kind: str, *, share: float | None = None, rounds: int = 0, why: str = "",
                 budget_s: float | None = None) -> str:
    """Why a sweep recommends nothing, starting with "inconclusive:" so every surface can show it as is."""
    if kind == "busy" and share is not None:
        return f"inconclusive: {busy(share)}"
    if kind == "cancelled":
        return f"inconclusive: the sweep was cancelled after {plural(rounds, 'round')}"
    if kind == "nothing":
        return "inconclusive: no variant could be measured"
    budget = f" in the {budget_s:g} s budget" if budget_s else ""
    return (f"inconclusive: {why or 'the settings could not be told apart'} after {plural(rounds, 'round')}"
            f"{budget}; rerun with a longer budget on an idle machine")


def within_spread(a: str, b: str) -> str:
    return f"{a} and {b} measured within each other's spread"


def only_setting(name: str) -> str:
    return f"'{name}' was the only setting measured"


def decided(pick: str, runner_up: str, beyond_spread: bool, tolerance: float) -> str:
    how = "faster beyond both spreads" if beyond_spread else f"as fast within {percent(tolerance)}, with fewer threads"
    return f"{pick} vs {runner_up}: {how}"


def threads_words(threads: int | None) -> str:
    """"1 thread", "8 threads", "default threads"."""
    return plural(threads, "thread") if threads else "default threads"


def quiet_caveat(interference: dict[str, Any] | None, limit: float) -> str:
    """"" when the machine was quiet enough, else the share of the CPU others took, as a caveat."""
    if not interference:
        return ""
    share = float(interference.get("other_share") or 0) + float(interference.get("steal_share") or 0)
    return f"measured while {busy(share)}" if share > limit else ""


def busy_caveat(share: float) -> str:
    return f"measured while {busy(share)}: rerun on an idle machine before trusting it"


def cpu_list(cpus: list[int] | None) -> str:
    """CPUs the way taskset and the kernel write them: 0-7,16-23."""
    return format_cpulist(list(cpus)) if cpus else ""


def native_word(native: bool | None) -> str | None:
    return None if native is None else ("native" if native else "emulated")


def ratio_words(ratio: float) -> str:
    """1.63 -> "1.63× as fast as fp32"; 0.35 -> "0.35× fp32 (2.9× slower)"."""
    if ratio >= 1:
        return f"{ratio:.2f}× as fast as fp32"
    return f"{ratio:.2f}× fp32 ({1 / ratio:.1f}× slower)"


def bf16_why(native: bool | None, via: list[str], ratio: float | None) -> str:
    """Why bf16 measured what it did against fp32 in the same job."""
    measured = f"bf16 ran {ratio_words(ratio)} in this job" if ratio else "bf16 was measured against fp32 in this job"
    if native is None:
        return f"{measured}; whether this CPU computes bf16 natively is unknown (its flags could not be read)"
    if native:
        why = f"{measured}: bf16 is native on this CPU ({', '.join(via)})"
        if ratio is not None and ratio < 1.05:
            why += (", but this model spends its time outside the large matrix multiplies, where the conversions "
                    "cost more than bf16 saves; larger conv/matmul-heavy models gain")
        return why
    return (f"{measured}: bf16 is emulated on this CPU (no AVX512_BF16 or AMX-BF16), so every operation converts "
            "to fp32 and back")


def int8_why(native: bool | None, via: list[str], speedups: dict[int, float], hidden: int | None,
             emulated: bool, api: str | None = None) -> str:
    """Why int8 measured what it did against fp32 in the same job."""
    ratios = ", ".join(f"{s:.2f}× at batch {b}" for b, s in sorted(speedups.items()))
    measured = f"int8 ran {ratios} fp32's speed" if ratios else "int8 was measured against fp32 in this job"
    if native is None:
        return f"{measured}; whether this CPU has int8 dot-product instructions is unknown (its flags could not be read)"
    if native:
        why = (f"{measured}: this CPU has {', '.join(via)}, so an int8 multiply-accumulate is one instruction")
        if speedups and max(speedups.values()) < 1 and api == "torchao":
            why += ("; yet int8 was slower than fp32 with torchao's quantize_ here (its eager int8 path does not "
                    "reach those kernels): compare with --api torch.ao")
    else:
        why = (f"{measured}: this CPU has no VNNI or AMX-INT8, so each int8 multiply-accumulate takes three "
               "instructions and int8 is emulated")
        if emulated and hidden:
            why += f" (measured small, hidden width {hidden})"
    if 1 in speedups and len(speedups) > 1:
        why += "; at batch 1 the time goes to quantising activations and calling layers, not to the multiplies"
    return why


def emulated_gemm(backends: list[str], sizes: dict[str, int], via: list[str]) -> str:
    shown = ", ".join(f"{b} at n = {sizes.get(b, '?')}" for b in backends)
    return (f"{shown}: emulated on this CPU (no AVX512_BF16 or AMX-BF16), so measured small; at the full size "
            "one multiply would take minutes")
