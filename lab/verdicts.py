"""The lab's own sentences: why a measurement decides or does not, written into its result.

A sweep's verdict, a busy machine's caveat and why bf16 or int8 measured what
they did are part of the result a job hands back (they are saved in the
report, like a finding's why), so the lab writes them when it reads a job's
figures. How results are laid out on each surface is :mod:`cpudoctor.render.lab`.
"""

from __future__ import annotations

from typing import Any

from cpudoctor.kits.cpulist import format_cpulist
from cpudoctor.kits.format import percent
from cpudoctor.kits.plural import plural


def busy(share: float) -> str:
    return f"{percent(share, fraction=True)} of the CPU went to other programs"


def rounds_text(rounds: int, measurements: int = 0) -> str:
    """"3 rounds", or before the first full round "2 measurements, no full round yet" (never "0 rounds" beside a
    plotted point: a round is every setting measured once, a measurement one setting's segment)."""
    if rounds or not measurements:
        return plural(rounds, "round") if rounds else "no measurement"
    return f"{plural(measurements, 'measurement')}, not one full round"


def inconclusive(kind: str, *, share: float | None = None, rounds: int = 0, why: str = "",
                 budget_s: float | None = None, measurements: int = 0) -> str:
    """Why a sweep recommends nothing, starting with "inconclusive:" so every surface can show it as is."""
    if kind == "busy" and share is not None:
        return f"inconclusive: {busy(share)}"
    if kind == "cancelled":
        return f"inconclusive: the sweep was cancelled after {rounds_text(rounds, measurements)}"
    if kind == "nothing":
        return "inconclusive: no variant could be measured"
    if kind == "no points":
        return "inconclusive: no batch size was measured"
    budget = f" in the {budget_s:g} s budget" if budget_s else ""
    return (f"inconclusive: {why or 'the settings could not be told apart'} after {rounds_text(rounds, measurements)}"
            f"{budget}; rerun with a longer budget on an idle machine")


def budget_cut(budget_s: float, variant: str) -> str:
    """Why a sweep ended mid-segment: one step took longer than what was left of its budget."""
    return (f"the {budget_s:g} s budget (start-up included) ended during a segment of '{variant}' (one training "
            "step took longer than the time left), which is not counted")


def within_spread(a: str, b: str) -> str:
    return f"{a} and {b} measured within each other's spread"


def only_setting(name: str) -> str:
    return f"'{name}' was the only setting measured"


def decided(pick: str, runner_up: str, beyond_spread: bool, tolerance: float) -> str:
    how = "faster beyond both spreads" if beyond_spread else f"as fast within {percent(tolerance, fraction=True)}, with fewer threads"
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


def bf16_uncompared(native: bool | None, via: list[str], why: str) -> str:
    """A bf16 run without an fp32 figure: say that no comparison was made, and the CPU's bf16 only as a fact."""
    text = "fp32 was not measured in this job" + (f" ({why})" if why else "") + ", so there is no bf16/fp32 ratio"
    if native is None:
        return text
    fact = f"native on this CPU ({', '.join(via)})" if native else "emulated on this CPU (no AVX512_BF16 or AMX-BF16)"
    return f"{text}; bf16 is {fact}"


def bf16_why(native: bool | None, via: list[str], ratio: float | None) -> str:
    """Why bf16 measured what it did against fp32 in the same job (callers without a ratio: bf16_uncompared)."""
    if not ratio:
        return bf16_uncompared(native, via, "")
    measured = f"bf16 ran {ratio_words(ratio)} in this job"
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


def factor(x: float) -> str:
    """A ratio for people: 1.63 -> "1.63", 0.0023 -> "0.0023" (never "0.00", which reads as nothing)."""
    return f"{x:.2f}" if x >= 0.095 else f"{x:.2g}"


def quant_inconclusive(reason: str) -> str:
    """Why a busy int8 run's ratios explain nothing: the noise is the cause, not quantisation."""
    return (f"{reason}, so the ratios measure the other programs, not int8 against fp32; rerun on an idle "
            "machine before reading anything into them")


def int8_why(native: bool | None, via: list[str], speedups: dict[int, float], hidden: int | None,
             emulated: bool, api: str | None = None, tied: list[int] | None = None) -> str:
    """Why int8 measured what it did against fp32 in the same job.

    ``speedups``: only the batch sizes where int8 and fp32 lie apart beyond both spreads; ``tied``: those
    where they did not (said as such, never explained by a cause).
    """
    ratios = ", ".join(f"{factor(s)}× at batch {b}" for b, s in sorted(speedups.items()))
    same = f"{within_spread('int8', 'fp32')} at batch {', '.join(map(str, tied))}" if tied else ""
    if ratios:
        measured = f"int8 ran {ratios} fp32's speed" + (f" ({same})" if same else "")
    elif same:
        measured = same
    else:
        measured = "int8 was measured against fp32 in this job"
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
    larger = [s for b, s in speedups.items() if b > 1]
    if 1 in speedups and larger and speedups[1] < min(larger):
        why += "; at batch 1 the time goes to quantising activations and calling layers, not to the multiplies"
    return why


def quant_api(api: str | None, torchao_installed: bool | None, torch_version: str | None = None) -> str:
    """Which quantisation API a quant job used, and which one is current (never torch's own warning, which says
    "removed in 2.10" while 2.13 still runs it)."""
    current = "torchao's quantize_ (Int8DynamicActivationInt8WeightConfig)"
    if api == "torchao":
        return f"{current}, the current API"
    old = {"torch.ao": "torch.ao.quantization.quantize_dynamic",
           "torch.quantization": "torch.quantization.quantize_dynamic"}.get(api or "", api or "unknown")
    text = (f"{old}, deprecated by PyTorch in favour of {current} but still working"
            + (f" in torch {torch_version}" if torch_version else ""))
    if torchao_installed is False:
        text += "; torchao is not installed in this Python (pip install torchao, then measure again)"
    elif torchao_installed:
        text += "; asked for with --api torch.ao (torchao is installed: the default measures it)"
    return text


def emulated_gemm(backends: list[str], sizes: dict[str, int], via: list[str]) -> str:
    shown = ", ".join(f"{b} at n = {sizes.get(b, '?')}" for b in backends)
    return (f"{shown}: emulated on this CPU (no AVX512_BF16 or AMX-BF16), so measured small; at the full size "
            "one multiply would take minutes")
