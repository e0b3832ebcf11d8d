"""The code that applies an inference variant in a serving script: what the recommendation hands the user.

Each variant the inference lab measures is a change to a plain ``y = model(x)`` loop: a context manager,
a thread count, a memory format, a dtype, a quantised or compiled copy of the model, an ONNX Runtime session,
or the way the process is started (an environment variable, a preloaded allocator, a CPU set). Here that
change is written out once, as ``setup`` (run once, at start-up), ``call`` (per request: it reads ``x`` and
sets ``y``) and ``command`` (how to start the script, when that matters), so the advisor's snippet, every
surface and the reproduction benchmark (``benchmarks/infer_reproduce.py``) use the very code that was
measured. Like :mod:`cpudoctor.lab.verdicts`, its text is written into the result and saved in the report.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cpudoctor.kits.cpulist import format_cpulist

INFERENCE_CALL = "with torch.inference_mode():\n    y = model(x)"


@dataclass(frozen=True)
class VariantCode:
    setup: str          # once, after the model is built (``model`` in eval mode)
    call: str           # per request: reads ``x``, sets ``y``
    command: str = ""   # how to start the serving script, when the variant is about the process

    @property
    def snippet(self) -> str:
        """The setup and the call as one block (a comment when there is nothing to set up)."""
        parts = [p for p in (self.setup, self.call) if p]
        return "\n".join(parts)

    def to_dict(self) -> dict[str, str]:
        return {"setup": self.setup, "call": self.call, "command": self.command, "snippet": self.snippet}


def _threads(n: int | None) -> str:
    return f"torch.set_num_threads({n})  # once, at start-up" if n else ""


def _join(*lines: str) -> str:
    return "\n".join(x for x in lines if x)


def _int8_setup(api: str | None, torch_version: str | None) -> str:
    if api == "torchao":
        return ("from torchao.quantization import Int8DynamicActivationInt8WeightConfig, quantize_\n"
                "quantize_(model, Int8DynamicActivationInt8WeightConfig())  # Linear layers to int8, in place")
    version = f" (still in torch {torch_version})" if torch_version else ""
    return ("from torch.ao.quantization import quantize_dynamic  # deprecated in favour of torchao's quantize_"
            f"{version}\nmodel = quantize_dynamic(model, {{torch.nn.Linear}}, dtype=torch.qint8)")


ORT_LEVELS = {"disable": "ORT_DISABLE_ALL", "basic": "ORT_ENABLE_BASIC", "extended": "ORT_ENABLE_EXTENDED",
              "all": "ORT_ENABLE_ALL"}


def _ort(spec: dict[str, Any], onnx_file: str | None) -> tuple[str, str]:
    level = ORT_LEVELS.get(str(spec.get("ort_level") or "all"), "ORT_ENABLE_ALL")
    threads = spec.get("ort_threads")
    export = ("" if onnx_file else
              'torch.onnx.export(model, (x,), "model.onnx", input_names=["input0"], '
              'dynamic_axes={"input0": {0: "batch"}})\n')
    path = onnx_file or "model.onnx"
    setup = (f"import onnxruntime as ort\n{export}opts = ort.SessionOptions()\n"
             + (f"opts.intra_op_num_threads = {int(threads)}\n" if threads else "")
             + f"opts.graph_optimization_level = ort.GraphOptimizationLevel.{level}\n"
             f'session = ort.InferenceSession({path!r}, opts, providers=["CPUExecutionProvider"])\n'
             "feed_name = session.get_inputs()[0].name")
    call = "y = session.run(None, {feed_name: x.numpy() if hasattr(x, 'numpy') else x})"
    return setup, call


def variant_code(variant: dict[str, Any], *, torch_version: str | None = None, onnx_file: str | None = None,
                 script: str = "serve.py") -> VariantCode:
    """The code of one planned variant (its ``spec``, the worker's ``env``/``cpus``/``preload`` and facts)."""
    spec = variant.get("spec") or {}
    threads = spec.get("threads") or variant.get("worker_threads")
    if spec.get("kind") == "onnxruntime":
        setup, call = _ort(spec, onnx_file)
        return VariantCode(setup, call, _command(variant, script))
    if spec.get("kind") == "eager":
        return VariantCode("", "y = model(x)  # autograd on: what a plain call does", _command(variant, script))
    setup = _join(_threads(threads))
    call = INFERENCE_CALL
    if spec.get("channels_last"):
        setup = _join(setup, "model = model.to(memory_format=torch.channels_last)")
        call = "with torch.inference_mode():\n    y = model(x.contiguous(memory_format=torch.channels_last))"
    if spec.get("int8"):
        setup = _join(setup, _int8_setup(variant.get("int8_api"), torch_version))
        if variant.get("mha_fastpath_off"):
            setup = _join(setup, "torch.backends.mha.set_fastpath_enabled(False)  # nn.Transformer's fused path "
                                 "cannot take a quantised Linear")
    if spec.get("compile"):
        took = variant.get("compile_s")
        note = f" (took {took:.1f} s here)" if isinstance(took, (int, float)) else ""
        setup = _join(setup, f"model = torch.compile(model)  # the first call compiles{note}")
    if spec.get("autocast") == "bf16":
        call = ("with torch.inference_mode(), torch.autocast(\"cpu\", dtype=torch.bfloat16):\n"
                "    y = model(x)")
    return VariantCode(setup, call, _command(variant, script))


def _command(variant: dict[str, Any], script: str) -> str:
    """``OMP_WAIT_POLICY=PASSIVE LD_PRELOAD=... taskset -c 0-7 python serve.py``, or "" for a plain start."""
    parts = [f"{k}={v}" for k, v in sorted((variant.get("env") or {}).items())]
    if variant.get("preload_path"):
        parts.append(f"LD_PRELOAD={variant['preload_path']}")
    cpus = variant.get("cpus")
    if cpus:
        parts.append(f"taskset -c {format_cpulist(list(cpus))}")
    return " ".join(parts + ["python", script]) if parts else ""
