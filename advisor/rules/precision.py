"""Lower precision: bf16 training and int8 inference, advised only where the silicon helps."""

from __future__ import annotations

from cpudoctor.advisor import machine, torch_install
from cpudoctor.advisor.engine import Facts, rule
from cpudoctor.model import Finding, Report


def _bf16_native(f: Facts) -> tuple[bool | None, str]:
    """(native bf16 compute?, which instructions)."""
    if not f.get("cpu.flags"):
        return None, ""
    x86 = machine.is_x86(f)
    if x86:
        found = []
        if f.get("cpu.isa.avx512_bf16"):
            found.append("AVX512_BF16")
        if "bf16" in (f.get("cpu.isa.amx") or []):
            found.append("AMX-BF16")
        return bool(found), " and ".join(found)
    flags = machine.flags(f)
    return ("bf16" in flags), ("BF16 (Armv8.6)" if "bf16" in flags else "")


def _trusted(run) -> bool:
    """A finished lab run measured on a quiet enough machine (older reports without the figure count)."""
    return run.status == "ok" and run.metrics.get("quiet") is not False


def _bench_ratio(report: Report, f: Facts) -> tuple[float | None, str]:
    """fp32 samples/s over bf16 samples/s from the lab's training runs, when both exist.

    A bf16 run measures fp32 in the same job, in alternating windows: that
    ratio wins over two separate runs, which may have met different loads.
    """
    for run in reversed(report.benchmarks):
        # fp32 and bf16 took turns in the same job: a busy machine slowed both alike, so the ratio stands.
        if run.kind != "train" or run.status != "ok":
            continue
        bf16, fp32 = run.metrics.get("samples_per_s"), run.metrics.get("fp32_samples_per_s")
        if "bf16" in str(run.settings.get("dtype", "")).lower() and _positive(bf16) and _positive(fp32):
            f.record("benchmarks[train]", {"fp32": round(float(fp32), 1), "bf16": round(float(bf16), 1)})
            busy = run.metrics.get("quiet") is False
            return float(fp32) / float(bf16), (f"fp32 {fp32:.0f} vs bf16 {bf16:.0f} samples/s, alternating in the "
                                               "same job" + (" on a busy machine" if busy else ""))
    best: dict[str, float] = {}
    for run in report.benchmarks:
        if run.kind != "train" or not _trusted(run):
            continue
        dtype = str(run.settings.get("dtype", "fp32")).lower()
        sps = run.metrics.get("samples_per_s")
        if _positive(sps):
            key = "bf16" if "bf16" in dtype or "bfloat16" in dtype else "fp32"
            best[key] = max(best.get(key, 0.0), float(sps))
    if "bf16" in best:
        f.record("benchmarks[train]", {k: round(v, 1) for k, v in best.items()})
    if "bf16" in best and "fp32" in best:
        return best["fp32"] / best["bf16"], f"fp32 {best['fp32']:.0f} vs bf16 {best['bf16']:.0f} samples/s, separate runs"
    return None, ""


# bf16 must measure at least this much faster than fp32 to be worth its accuracy risk and casts.
BF16_GAIN = 1.10


def _positive(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0


def _quant_speedups(report: Report, f: Facts) -> dict[int, float]:
    """int8 over fp32 speed-up per batch size from the latest trusted ``bench quant`` run (same job, interleaved)."""
    for run in reversed(report.benchmarks):
        if run.kind != "quant" or not _trusted(run):
            continue
        # a point whose int8 and fp32 latencies overlap within their spreads measured no difference
        speedups = {int(p["batch"]): float(p["speedup"]) for p in run.metrics.get("points") or []
                    if isinstance(p, dict) and _positive(p.get("speedup")) and isinstance(p.get("batch"), int)
                    and p.get("separated") is not False}
        if speedups:
            f.record("benchmarks[quant].speedup", speedups)
            return speedups
    return {}


# What PyTorch says in torch.ao.quantization's own DEPRECATION_WARNING (torch/ao/quantization/utils.py): eager mode
# quantize_dynamic users migrate to torchao's quantize_ (pytorch/ao#2259). The old API still runs in torch 2.13.
TORCHAO_SNIPPET = ("from torchao.quantization import Int8DynamicActivationInt8WeightConfig, quantize_\n\n"
                   "quantize_(model.eval(), Int8DynamicActivationInt8WeightConfig())  # Linear layers to int8, in place")


def _int8_api(f: Facts) -> tuple[str, str]:
    """(snippet, sentence naming the API) for dynamic int8 quantisation: torchao's, installed or not."""
    installed = None
    if machine.env_known(f):
        installed = any(p.name.lower() == "torchao" for p in f.get("software.packages", record=False) or [])
        f.record("software.packages[torchao]", installed)
    sentence = ("torchao's quantize_ with Int8DynamicActivationInt8WeightConfig, the API torch.ao.quantization's own "
                "deprecation warning points to: torch.ao.quantization.quantize_dynamic is deprecated (pytorch/ao#2259)")
    if installed:
        return TORCHAO_SNIPPET, sentence + "; torchao is installed here."
    where = "is not installed in this environment" if installed is False else "may not be installed"
    return (f"# {torch_install.pip_install(['torchao'])}\n{TORCHAO_SNIPPET}",
            sentence + f"; torchao {where} (pip install torchao). cpudoctor bench quant --api torch.ao measures the "
            "deprecated API, which still runs.")


def _speedup_words(speedups: dict[int, float]) -> str:
    return ", ".join(f"{s:.1f}x at batch {b}" for b, s in sorted(speedups.items()))


@rule("PREC001", "bf16-autocast", category="precision", severity="warning",
      title="bf16 autocast: worth it only with AVX512_BF16 or AMX")
def bf16_autocast(report: Report) -> list[Finding]:
    """What it checks:
        Whether the CPU computes bf16 natively (x86: ``avx512_bf16`` on Cooper Lake, Zen4, Zen5, or
        AMX-BF16 on Sapphire Rapids and later; Arm: the BF16 extension), and the lab's measured
        figures when the report has them: a bf16 run's fp32 comparison from the same job first, else
        separate fp32 and bf16 runs. Runs measured while other programs took the CPU are not evidence.
        A measurement wins over the datasheet in both directions.

    Why it matters:
        With native bf16, ``torch.autocast("cpu", dtype=torch.bfloat16)`` doubles the math
        throughput and halves activation memory, and needs no ``GradScaler`` (bf16 has fp32's
        exponent range, so gradients do not underflow). Without it oneDNN converts to fp32 and
        back around every operation: training was measured ~3x *slower* than fp32 on a Zen3 Ryzen.

    Fix:
        With native bf16: wrap the forward pass in ``torch.autocast("cpu", dtype=torch.bfloat16)``,
        no GradScaler. Without: train in fp32.
    """
    f = Facts(report)
    native, which = _bf16_native(f)
    if native is None:
        return []
    ratio, numbers = _bench_ratio(report, f)
    if native:
        if ratio is not None and 1 / ratio < BF16_GAIN:
            slower = ratio > 1.0
            return [f.finding(
                "info", (f"bf16 autocast was slower than fp32 in your measured run ({1 / ratio:.2f}x)" if slower else
                         f"bf16 autocast gained nothing in your measured run ({1 / ratio:.2f}x fp32)"),
                why=(f"This CPU has {which}, but the lab measured bf16 at {1 / ratio:.2f}x the speed of fp32 "
                     f"({numbers}): a measurement of this model beats the rule of thumb. Small models spend their time "
                     "outside the big matrix multiplies, where the bf16 casts cost about what they save (measured on "
                     "a Zen5 EPYC: SimpleCNN 0.98x, ResNet-18 1.6x with bf16)."),
                fix="Keep this model in fp32; try bf16 autocast again for larger, matmul/conv-heavy models.")]
        measured = f" In the lab, bf16 ran {1 / ratio:.2f}x as fast as fp32 ({numbers})." if ratio else ""
        return [f.finding(
            "info", (f"bf16 autocast paid off here: {1 / ratio:.2f}x fp32 measured ({which})" if ratio else
                     f"bf16 autocast can pay off on this CPU ({which})"),
            why=(f"This CPU has {which}, so bf16 matrix math runs natively: autocast roughly doubles GEMM throughput and "
                 "halves activation memory for matmul/conv-heavy models (measured on a Zen5 EPYC: ResNet-18 1.6x, "
                 "but a tiny SimpleCNN 0.98x). bf16 keeps fp32's exponent range, so no GradScaler is needed." + measured),
            fix="Wrap the forward pass and loss in CPU autocast; keep the optimizer step outside, no GradScaler.",
            snippet=("with torch.autocast(device_type=\"cpu\", dtype=torch.bfloat16):\n"
                     "    loss = loss_fn(model(x), y)\n"
                     "loss.backward()  # no GradScaler: bf16 does not underflow like fp16\n"
                     "optimizer.step()"),
            snippet_lang="python")]
    slow = machine.knowledge()["bf16"]["slowdown_without_native"]
    uarch = f.get("cpu.microarchitecture") or "this CPU"
    lacks = "lacks AVX512_BF16 and AMX" if machine.is_x86(f) else "lacks the Arm BF16 extension"
    if ratio is not None and ratio <= 1.0:
        # Measured beats the datasheet: emulated bf16 held its own here (memory-bound layers, say).
        return [f.finding(
            "info", f"bf16 autocast measured {1 / ratio:.2f}x as fast as fp32 here, though emulated",
            why=(f"{uarch} {lacks}, so bf16 is emulated with conversions; still the lab measured {numbers}. "
                 "The measurement is for this model and batch: check others before switching."),
            fix="Keep whichever the lab measured faster for your model; recheck with cpudoctor bench train --dtype bf16.")]
    if ratio is not None and ratio > 1.0:
        return [f.finding(
            "warning", f"bf16 training measured {ratio:.1f}x slower than fp32 here",
            why=(f"{uarch} {lacks}, so bf16 is emulated with conversions. The lab measured {numbers}."),
            fix="Train in fp32: remove torch.autocast(dtype=torch.bfloat16) on this machine.",
            snippet="# drop the autocast context on this CPU; fp32 is faster here\nloss = loss_fn(model(x), y)",
            snippet_lang="python")]
    return [f.finding(
        "info", "Train in fp32: bf16 autocast would be slower on this CPU",
        why=(f"{uarch} {lacks}, so bf16 is emulated with conversions around every operation; "
             f"guides that advise bf16 autocast assume newer CPUs. Training was measured ~{slow:.0f}x slower than fp32 "
             "on a Zen3 Ryzen."),
        fix="Keep fp32 training; use the lab's bf16 run to see the figure for this machine.",
        snippet="# no torch.autocast(dtype=torch.bfloat16) on this CPU\nloss = loss_fn(model(x), y)",
        snippet_lang="python")]


@rule("PREC002", "int8-needs-vnni", category="precision", severity="info",
      title="int8 quantisation speeds up inference only with VNNI (or Arm dot-product)")
def int8_needs_vnni(report: Report) -> list[Finding]:
    """What it checks:
        Whether the CPU has int8 dot-product instructions: AVX512_VNNI (Cascade Lake, Ice Lake,
        Zen4, Zen5), AVX-VNNI (Alder Lake and later, Zen5), AMX-INT8, or Arm's ``asimddp``/``i8mm``,
        and the int8/fp32 speed-ups of the latest quiet ``bench quant`` run, which win over the rule
        of thumb when they exist.

    Why it matters:
        VNNI does an int8 multiply-accumulate in one instruction (``vpdpbusd``), so dynamic int8
        quantisation of Linear layers gives large inference speed-ups. Without it the same work
        takes three instructions (``vpmaddubsw``, ``vpmaddwd``, ``vpaddd``) and the gain over fp32
        shrinks to little, while accuracy still drops.

    Fix:
        With VNNI: quantise the Linear layers for inference with torchao's ``quantize_(model,
        Int8DynamicActivationInt8WeightConfig())``, the API PyTorch's deprecation of
        ``torch.ao.quantization`` points to (``pip install torchao`` when the environment lacks
        it); ``cpudoctor bench quant`` measures it (``--api torch.ao`` the deprecated
        ``quantize_dynamic``, still in PyTorch 2.13). Without VNNI: measure first before accepting
        the accuracy cost.
    """
    f = Facts(report)
    if not f.get("cpu.flags"):
        return []
    found = []
    if machine.is_x86(f):
        if f.get("cpu.isa.avx512_vnni"):
            found.append("AVX512_VNNI")
        if f.get("cpu.isa.avx_vnni"):
            found.append("AVX-VNNI")
        if "int8" in (f.get("cpu.isa.amx") or []):
            found.append("AMX-INT8")
    else:
        flags = machine.flags(f)
        found += [name for flag, name in (("asimddp", "Arm SDOT dot product"), ("i8mm", "I8MM")) if flag in flags]
    snippet, api = _int8_api(f)
    speedups = _quant_speedups(report, f)
    measured = f" The lab measured int8 at {_speedup_words(speedups)} of fp32's speed." if speedups else ""
    best = max(speedups.values()) if speedups else None
    if found:
        if best is not None and best < 1.0:
            return [f.finding(
                "info", f"int8 inference was slower than fp32 in your measured run ({_speedup_words(speedups)})",
                why=(f"This CPU has {', '.join(found)}, but the lab's int8 MLP ran slower than fp32.{measured} "
                     "Small layers and batch 1 spend their time quantising activations, not multiplying."),
                fix="Keep fp32 for this model; try int8 with larger batches or layers, and measure again.",
                snippet="cpudoctor bench quant --batches 1,64")]
        return [f.finding(
            "info", f"int8 inference can pay off ({', '.join(found)})",
            why=(f"This CPU has {', '.join(found)}: int8 multiply-accumulates run in one instruction, so dynamic "
                 "quantisation of Linear layers speeds up inference (check the accuracy)." + measured),
            fix=f"Quantise Linear layers dynamically for inference and compare latency and accuracy: {api}",
            snippet=snippet, snippet_lang="python")]
    uarch = f.get("cpu.microarchitecture") or "This CPU"
    if best is not None and best >= 1.5:
        # The measurement wins over the rule of thumb: without VNNI int8 still paid off here.
        return [f.finding(
            "info", f"int8 measured {best:.1f}x fp32 here, even without VNNI",
            why=(f"{uarch} has no VNNI/AMX int8 instructions, so each int8 multiply-accumulate takes three "
                 f"instructions; still the lab measured int8 at {_speedup_words(speedups)} of fp32's speed. Fewer "
                 "bytes per weight help memory-bound layers even without the fast dot product."),
            fix=f"Quantise where the lab measured a gain, and check the accuracy on your own data: {api}",
            snippet=snippet, snippet_lang="python")]
    return [f.finding(
        "info", "int8 quantisation gains little here (no VNNI)",
        why=(f"{uarch} has no VNNI/AMX int8 instructions: each int8 "
             "multiply-accumulate takes three instructions, so int8 inference is barely faster than fp32 while "
             "accuracy still drops." + measured),
        fix="Measure before quantising (cpudoctor bench quant); fp32 may be the better trade here.",
        snippet="cpudoctor bench quant")]
