"""A lab job's outcome read once, into a typed result that yields a BenchRun and a ThreadRecommendation.

The child jobs speak JSON dicts; the CLI, the Training page, ``bench --into``
and the exports used to read those dicts each in their own way. Here they are
read once (:func:`read_outcome`), with what only the parent knows added: the
theoretical peak of this machine (GEMM utilisation), whether bf16/int8 are
native here, whether the machine was quiet enough to trust the figures. Every
surface then shows the same numbers with the same words
(:mod:`cpudoctor.render.lab`). ThreadRecommendation is built in this module
only: from a conclusive sweep, or from a quiet, finished training run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from cpudoctor.lab import verdicts as words
from cpudoctor.lab.native import NativeSupport
from cpudoctor.lab.result_base import QUIET_LIMIT, Context, Interference, LabResult
from cpudoctor.lab.roofline import read_roofline
from cpudoctor.lab.stats import Figure, summarize
from cpudoctor.model import ThreadRecommendation

__all__ = ["KINDS", "QUIET_LIMIT", "READERS", "Context", "GemmResult", "Interference", "LabResult", "QuantResult",
           "SweepResult", "TrainResult", "against_roof", "read_kernels", "read_outcome", "separated"]

def _recommendation(threads: int, cpus: list[int] | None, variant: str, samples_per_s: float | None,
                    default_samples_per_s: float | None, model: str | None,
                    interop_threads: int | None = None) -> ThreadRecommendation:
    return ThreadRecommendation(threads=int(threads), interop_threads=interop_threads, cpus=cpus, variant=variant,
                                samples_per_s=samples_per_s, default_samples_per_s=default_samples_per_s, model=model)


# ----------------------------------------------------------------------------- training


@dataclass
class TrainResult(LabResult):
    kind: str = "train"
    steps: int | None = None
    samples_per_s: float | None = None
    spread: Figure | None = None            # of the half-second windows: min..max, around samples_per_s
    initial_loss: float | None = None
    final_loss: float | None = None         # mean of the last smoothing_steps steps, as the loss plot
    train_accuracy: float | None = None     # likewise
    eval_accuracy: float | None = None      # held-out samples after training
    smoothing_steps: int = 20
    threads: int | None = None
    interop_threads: int | None = None
    cpus: list[int] | None = None
    elapsed: float | None = None
    compile_s: float | None = None
    dtype: str = "fp32"
    reference_samples_per_s: float | None = None     # fp32 in the same job (bf16 runs)
    reference_spread: Figure | None = None
    reference_missing: str = ""             # why fp32 was not measured in a bf16 run ("" when it was)
    not_measured: str = ""                  # why this run's own dtype has no figure
    budget_s: float | None = None           # the whole job's budget, start-up included
    startup_s: float | None = None          # process start to the first step: interpreter, torch, data
    warmup_s: float | None = None
    job_s: float | None = None              # what the job took, start-up included
    ended_by: str | None = None             # budget | steps | cancelled
    cut_off: str | None = None              # what the budget's hard stop interrupted (a step, torch's import)
    eval_samples_done: int | None = None
    native: NativeSupport | None = None
    operators: list[dict[str, Any]] = field(default_factory=list)   # profiled: FLOP, bytes, GFLOP/s per operator

    @property
    def compared(self) -> bool:
        """A bf16 run that measured fp32 in the same job: only then is there a ratio to speak of."""
        return self.dtype != "fp32" and bool(self.reference_samples_per_s)

    @property
    def ratio(self) -> float | None:
        """This run's dtype against fp32 measured in the same job (1.6 = bf16 60 % faster)."""
        if self.samples_per_s and self.reference_samples_per_s:
            return self.samples_per_s / self.reference_samples_per_s
        return None

    @property
    def precision_why(self) -> str:
        if self.dtype == "fp32":
            return ""
        native = self.native.bf16 if self.native else None
        via = self.native.bf16_via if self.native else []
        if not self.compared:
            why = self.reference_missing
            if not why and self.settings.get("compare_fp32") is False:
                why = "the fp32 comparison was switched off for this run"
            return words.bf16_uncompared(native, via, why)
        return words.bf16_why(native, via, self.ratio)

    def metrics(self) -> dict[str, Any]:
        m: dict[str, Any] = {"samples_per_s": self.samples_per_s, "final_loss": self.final_loss,
                             "train_accuracy": self.train_accuracy, "initial_loss": self.initial_loss,
                             "eval_accuracy": self.eval_accuracy, "steps": self.steps, "threads": self.threads,
                             "interop_threads": self.interop_threads, "elapsed": self.elapsed,
                             "smoothing_steps": self.smoothing_steps, "compile_s": self.compile_s,
                             "budget_s": self.budget_s, "startup_s": self.startup_s, "job_s": self.job_s,
                             "ended_by": self.ended_by, "cut_off": self.cut_off,
                             "eval_samples": self.eval_samples_done,
                             "not_measured": self.not_measured or None}
        if self.spread is not None:
            m.update(samples_per_s_lo=round(self.spread.lo, 1), samples_per_s_hi=round(self.spread.hi, 1))
        if self.dtype != "fp32":
            m.update(fp32_samples_per_s=self.reference_samples_per_s,
                     **{f"{self.dtype}_vs_fp32": round(self.ratio, 3) if self.ratio else None},
                     fp32_not_measured=self.reference_missing or None,
                     precision_basis=words.native_word(self.native.bf16 if self.native else None),
                     precision_note=self.precision_why)
        if self.operators:
            m["operators"] = self.operators
        return m

    def recommendation(self) -> ThreadRecommendation | None:
        """A finished, quiet run's setting, for "Use these settings" after plain training runs."""
        if self.status != "ok" or not self.samples_per_s or self.quiet is False:
            return None
        cpus = self.settings.get("cpus")
        label = "measured run" + (f", CPUs {words.cpu_list(cpus)}" if cpus else "")
        return _recommendation(self.threads or 1, cpus, label, self.samples_per_s, None, self.settings.get("model"),
                               interop_threads=self.settings.get("interop_threads"))


def _read_train(r: dict[str, Any], progress: list[dict[str, Any]], base: dict[str, Any], ctx: Context) -> TrainResult:
    last = progress[-1] if progress else {}
    ref = r.get("reference") or {}
    settings = base["settings"]
    return TrainResult(
        **base,
        steps=r.get("steps", last.get("step")),
        samples_per_s=r.get("samples_per_s", last.get("samples_per_s")),
        spread=summarize(r.get("window_rates") or [], whole_range=True),
        initial_loss=r.get("initial_loss"),
        final_loss=r.get("final_loss", last.get("loss")),
        train_accuracy=r.get("train_accuracy", last.get("accuracy")),
        eval_accuracy=r.get("eval_accuracy"),
        smoothing_steps=int(r.get("smoothing_steps") or 20),
        threads=r.get("threads"),
        interop_threads=r.get("interop_threads"),
        cpus=r.get("cpus"),
        elapsed=r.get("elapsed", last.get("elapsed")),
        compile_s=r.get("compile_s"),
        dtype=str(r.get("dtype") or settings.get("dtype") or "fp32"),
        reference_samples_per_s=ref.get("samples_per_s", last.get("reference_samples_per_s")),
        reference_spread=summarize(ref.get("window_rates") or [], whole_range=True),
        reference_missing=str(ref.get("not_measured") or ""),
        not_measured=str(r.get("not_measured") or ""),
        budget_s=r.get("budget_s"), startup_s=r.get("startup_s"), warmup_s=r.get("warmup_s"), job_s=r.get("job_s"),
        ended_by=r.get("ended_by"), cut_off=r.get("cut_off"),
        eval_samples_done=r.get("eval_samples_done"),
        native=ctx.native,
        operators=[_plain_operator(o) for o in r.get("operators") or [] if isinstance(o, dict)],
    )


def _plain_operator(op: dict[str, Any]) -> dict[str, Any]:
    """A profiled operator as a report keeps it: what the roofline picture and the tables need."""
    keys = ("op", "dtype", "shapes", "calls", "flop", "bytes", "seconds", "gflops", "intensity", "model", "run_dtype")
    return {k: op[k] for k in keys if k in op}


# ----------------------------------------------------------------------------- sweep


@dataclass
class SweepResult(LabResult):
    kind: str = "sweep"
    points: list[dict[str, Any]] = field(default_factory=list)
    verdict: str = "inconclusive"           # recommended | inconclusive
    reason: str = ""
    chosen: dict[str, Any] | None = None    # the recommendation's fields, when conclusive
    best_measured: dict[str, Any] | None = None
    failures: list[str] = field(default_factory=list)
    rounds: int = 0
    variants: int = 0
    budget_s: float | None = None
    segment_s: float | None = None

    @property
    def conclusive(self) -> bool:
        return self.status == "ok" and self.verdict == "recommended" and self.chosen is not None

    @property
    def measurements(self) -> int:
        """Segments measured over every setting (a round measures each setting once)."""
        return sum(int(p.get("segments") or 0) for p in self.points if isinstance(p, dict))

    def caveats(self) -> list[str]:
        out = [] if self.status == "ok" else [self.message]
        if not self.conclusive and self.reason:
            out.append(self.reason)
        return [c for c in out if c]

    def metrics(self) -> dict[str, Any]:
        return {"points": [_plain_point(p) for p in self.points], "verdict": self.verdict, "reason": self.reason,
                "recommendation": self.chosen if self.conclusive else None, "best_measured": self.best_measured,
                "rounds": self.rounds, "budget_s": self.budget_s, "segment_s": self.segment_s,
                "failures": self.failures or None}

    def recommendation(self) -> ThreadRecommendation | None:
        """Only a conclusive sweep recommends: the advisor never adopts an inconclusive one."""
        if not self.conclusive:
            return None
        c = self.chosen or {}
        return _recommendation(c.get("threads") or 1, c.get("cpus"), str(c.get("variant") or ""),
                               c.get("samples_per_s"), c.get("default_samples_per_s"), c.get("model"))


def _read_sweep(r: dict[str, Any], progress: list[dict[str, Any]], base: dict[str, Any], ctx: Context) -> SweepResult:
    points = r.get("points")
    if points is None:       # the orchestrator died: the latest figure of each variant it reported
        latest: dict[str, dict[str, Any]] = {}
        for p in progress:
            if p.get("phase") == "segment" and p.get("variant"):
                latest[p["variant"]] = p
        points = list(latest.values())
    noise = r.get("interference")
    base = dict(base, interference=Interference.read(noise) if noise else base["interference"])
    return SweepResult(**base, points=points, verdict=str(r.get("verdict") or "inconclusive"),
                       reason=str(r.get("reason") or (words.inconclusive("cancelled", rounds=0) if not r else "")),
                       chosen=r.get("recommendation"), best_measured=r.get("best_measured"),
                       failures=list(r.get("failures") or []), rounds=int(r.get("rounds") or 0),
                       variants=int(r.get("variants") or len(points)), budget_s=r.get("budget_s"),
                       segment_s=r.get("segment_s"))


# ----------------------------------------------------------------------------- GEMM


@dataclass
class GemmResult(LabResult):
    kind: str = "gemm"
    points: list[dict[str, Any]] = field(default_factory=list)    # with the peak and utilisation
    machine: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    size: int | None = None
    emulated: list[str] = field(default_factory=list)
    native: NativeSupport | None = None
    roofs: list[dict[str, Any]] = field(default_factory=list)    # the in-cache roof per precision and threads

    @property
    def best(self) -> dict[str, Any] | None:
        return max((p for p in self.points if p.get("gflops")), key=lambda p: p["gflops"], default=None)

    def metrics(self) -> dict[str, Any]:
        return {"points": [_plain_point(p) for p in self.points], "machine": self.machine or None,
                "peak_notes": self.notes or None, "size": self.size, "emulated": self.emulated or None,
                "roofs": [_plain_point(p) for p in self.roofs] or None}


def _read_gemm(r: dict[str, Any], progress: list[dict[str, Any]], base: dict[str, Any], ctx: Context) -> GemmResult:
    raw = r.get("points") if r else [p for p in progress if p.get("backend")]
    peak = ctx.peak
    roofs = [p for p in r.get("roofs") or [] if isinstance(p, dict) and p.get("gflops")]
    points = [against_roof(peak.annotate(p) if peak else dict(p), roofs) for p in raw or []]
    emulated = list(r.get("emulated") or sorted({p["backend"] for p in points if p.get("emulated")}))
    notes = (peak.notes_for(points) if peak else []) + list(r.get("notes") or [])
    if emulated:
        native = ctx.native
        notes.append(words.emulated_gemm(emulated, r.get("sizes") or {}, native.bf16_via if native else []))
    base = dict(base, interference=Interference.worst([p.get("interference") for p in points]))
    return GemmResult(**base, points=points, machine=peak.facts() if peak else {}, notes=notes, size=r.get("size"),
                      emulated=emulated, native=ctx.native, roofs=roofs)


# A GEMM backend and the roof it is held against: the same precision through torch, operands in cache.
ROOF_OF = {"torch-fp32": "fp32", "torch-bf16": "bf16", "numpy-fp32": "fp32", "numpy-fp64": "fp64"}


def against_roof(point: dict[str, Any], roofs: list[dict[str, Any]]) -> dict[str, Any]:
    """A GEMM point with the measured roof of its precision and thread count, and its share of it."""
    dtype = ROOF_OF.get(str(point.get("backend")))
    roof = next((r for r in roofs if r.get("dtype") == dtype and r.get("threads") == point.get("threads")), None)
    if roof is None or not isinstance(point.get("gflops"), (int, float)):
        return point
    return dict(point, roof_gflops=roof["gflops"], of_roof=round(point["gflops"] / roof["gflops"], 4))


# ----------------------------------------------------------------------------- quantisation


def separated(p: dict[str, Any]) -> bool | None:
    """int8's and fp32's latencies at one batch size lie apart beyond both spreads (p10..p90); None: no spreads.

    A point read by :func:`read_outcome` carries the answer (``separated``); one built elsewhere is worked out.
    """
    if "separated" in p:
        return p["separated"]
    try:
        f_lo, f_hi, i_lo, i_hi = (float(p[k]) for k in ("fp32_p10_ms", "fp32_p90_ms", "int8_p10_ms", "int8_p90_ms"))
    except (KeyError, TypeError, ValueError):
        return None
    return i_hi < f_lo or f_hi < i_lo


@dataclass
class QuantResult(LabResult):
    """int8 against fp32 per batch size; like the sweep, a busy machine makes the whole result inconclusive.

    A point's speed-up counts only when the machine was quiet and the two latencies lie apart beyond
    their spreads (``separated``); noise is never explained as a cause.
    """

    kind: str = "quant"
    points: list[dict[str, Any]] = field(default_factory=list)
    api: str | None = None
    api_name: str | None = None
    api_warnings: list[str] = field(default_factory=list)
    torchao_installed: bool | None = None
    torch_version: str | None = None
    hidden: int | None = None
    emulated: bool = False
    top1_agreement: float | None = None
    engine: str | None = None
    native: NativeSupport | None = None

    @property
    def verdict(self) -> str:
        """"measured" when the figures may be read as int8's speed here, else "inconclusive"."""
        return "inconclusive" if self.quiet is False or not self.points else "measured"

    @property
    def reason(self) -> str:
        """Why the result is inconclusive ("" when it is not), starting with "inconclusive:" like the sweep's."""
        if self.verdict != "inconclusive":
            return ""
        if self.interference is not None and self.quiet is False:
            return words.inconclusive("busy", share=self.interference.share)
        return words.inconclusive("no points")

    def decided(self) -> dict[int, float]:
        """Speed-ups per batch that the figures support: a quiet machine and latencies apart beyond both spreads."""
        if self.quiet is False:
            return {}
        return {p["batch"]: p["speedup"] for p in self.points if p.get("speedup") and separated(p) is not False}

    def tied(self) -> list[int]:
        """Batch sizes where int8 and fp32 measured within each other's spread (no difference can be told)."""
        return sorted(p["batch"] for p in self.points if separated(p) is False)

    @property
    def api_words(self) -> str:
        """The API used and the current one, in words (lab.verdicts.quant_api)."""
        return words.quant_api(self.api, self.torchao_installed, self.torch_version)

    @property
    def precision_why(self) -> str:
        if self.verdict == "inconclusive":
            return words.quant_inconclusive(self.reason)
        native = self.native.int8 if self.native else None
        via = self.native.int8_via if self.native else []
        return words.int8_why(native, via, self.decided(), self.hidden, self.emulated, self.api, tied=self.tied())

    def caveats(self) -> list[str]:
        out = [] if self.status == "ok" else [self.message]
        if self.reason:
            out.append(self.reason)
        return [c for c in out if c]

    def metrics(self) -> dict[str, Any]:
        return {"points": [_plain_point(p) for p in self.points], "vnni": self.native.int8 if self.native else None,
                "vnni_note": self.precision_why, "api": self.api_name or self.api, "api_note": self.api_words,
                "api_warnings": self.api_warnings or None, "hidden": self.hidden, "emulated": self.emulated,
                "top1_agreement": self.top1_agreement, "engine": self.engine, "verdict": self.verdict,
                "reason": self.reason or None}


def _read_quant(r: dict[str, Any], progress: list[dict[str, Any]], base: dict[str, Any], ctx: Context) -> QuantResult:
    points = [dict(p) for p in (r.get("points") or [p for p in progress if p.get("batch")])]
    for p in points:
        p["separated"] = separated(p)
    base = dict(base, interference=Interference.worst([p.get("interference") for p in points]))
    settings = base["settings"]
    return QuantResult(**base, points=points, api=r.get("api"), api_name=r.get("api_name"),
                       api_warnings=list(r.get("api_warnings") or []), torchao_installed=r.get("torchao_installed"),
                       torch_version=r.get("torch"), hidden=r.get("hidden"),
                       emulated=bool(r.get("emulated", settings.get("native_int8") is False)),
                       top1_agreement=r.get("top1_agreement"), engine=r.get("engine"), native=ctx.native)


# ----------------------------------------------------------------------------- inference


@dataclass
class InferResult(LabResult):
    """``bench infer``: every variant with its latency per batch size (spread, distribution, accuracy against
    fp32), the variants that do not apply with why, and the verdict per batch size (recommended or
    inconclusive, as the sweep's)."""

    kind: str = "infer"
    variants: list[dict[str, Any]] = field(default_factory=list)
    decisions: list[dict[str, Any]] = field(default_factory=list)
    rounds: int = 0
    segment_s: float | None = None
    budget_s: float | None = None
    max_error: float | None = None
    model: str | None = None
    parameters: int | None = None
    torch_version: str | None = None
    openmp: str | None = None
    threads: int | None = None
    onnxruntime_installed: bool | None = None
    torchao_installed: bool | None = None
    main_worker: str | None = None          # why the main worker never got ready (None when it did)
    elapsed: float | None = None

    @property
    def recommended(self) -> list[dict[str, Any]]:
        return [d for d in self.decisions if d.get("verdict") == "recommended" and d.get("variant")]

    @property
    def verdict(self) -> str:
        return "recommended" if self.recommended and self.status == "ok" else "inconclusive"

    @property
    def reason(self) -> str:
        """The first batch size's reason (each decision carries its own)."""
        return str(self.decisions[0].get("reason") or "") if self.decisions else words.inconclusive("nothing")

    def measured(self) -> list[dict[str, Any]]:
        return [v for v in self.variants if v.get("points")]

    def caveats(self) -> list[str]:
        out = [] if self.status == "ok" else [self.message]
        if self.main_worker:
            out.append(f"the model could not be prepared: {self.main_worker}")
        if self.verdict != "recommended" and self.reason:
            out.append(self.reason)
        return [c for c in out if c]

    def metrics(self) -> dict[str, Any]:
        first = self.recommended[0] if self.recommended else None
        return {"variants": [_plain_variant(v) for v in self.variants], "decisions": self.decisions,
                "recommendation": first, "verdict": self.verdict, "reason": self.reason or None,
                "rounds": self.rounds, "segment_s": self.segment_s, "budget_s": self.budget_s,
                "max_error": self.max_error, "model": self.model, "parameters": self.parameters,
                "torch": self.torch_version, "openmp": self.openmp, "threads": self.threads,
                "onnxruntime_installed": self.onnxruntime_installed, "torchao_installed": self.torchao_installed,
                "main_worker": self.main_worker, "elapsed": self.elapsed}


def _plain_variant(v: dict[str, Any]) -> dict[str, Any]:
    """A variant as a report keeps it: its change, how it ended, its accuracy, its code and its figures."""
    keys = ("name", "group", "effort", "status", "reason", "accurate", "accuracy", "compile_s", "export_s",
            "int8_api", "int8_warnings", "mha_fastpath_off", "onnxruntime", "env", "cpus", "preload", "preload_path",
            "worker_threads", "code", "spec")
    out = {k: v[k] for k in keys if v.get(k) not in (None, "", [], {})}
    out["points"] = [dict(p) for p in v.get("points") or [] if isinstance(p, dict)]
    return out


def _read_infer(r: dict[str, Any], progress: list[dict[str, Any]], base: dict[str, Any], ctx: Context) -> InferResult:
    noise = r.get("interference")
    base = dict(base, interference=Interference.read(noise) if noise else base["interference"])
    variants = [v for v in r.get("variants") or [] if isinstance(v, dict)]
    if not variants:           # the orchestrator died: the segments it reported, as figures without a verdict
        latest: dict[tuple[str, int], dict[str, Any]] = {}
        for p in progress:
            if p.get("phase") == "segment" and p.get("variant") and p.get("median_ms"):
                latest[(p["variant"], p.get("batch") or 1)] = p
        named: dict[str, dict[str, Any]] = {}
        for (name, batch), p in latest.items():
            named.setdefault(name, {"name": name, "status": "ok", "points": []})["points"].append(
                {"batch": batch, "latency_ms": p["median_ms"]})
        variants = list(named.values())
    if base["status"] in ("error", "crashed") and not any(v.get("points") for v in variants):
        base = dict(base, has_result=False)         # nothing measured: `--into` adds nothing
    decisions = [d for d in r.get("decisions") or [] if isinstance(d, dict)]
    if not decisions and r:
        decisions = [{"batch": None, "verdict": "inconclusive", "reason": words.inconclusive("nothing")}]
    return InferResult(**base, variants=variants, decisions=decisions, rounds=int(r.get("rounds") or 0),
                       segment_s=r.get("segment_s"), budget_s=r.get("budget_s"), max_error=r.get("max_error"),
                       model=r.get("model"), parameters=r.get("parameters"), torch_version=r.get("torch"),
                       openmp=r.get("openmp"), threads=r.get("threads"),
                       onnxruntime_installed=r.get("onnxruntime_installed"),
                       torchao_installed=r.get("torchao_installed"), main_worker=r.get("main_worker"),
                       elapsed=r.get("elapsed"))


# ----------------------------------------------------------------------------- reading an outcome


def _plain_point(p: dict[str, Any]) -> dict[str, Any]:
    """A point for a report: the interference record shrinks to one share (tables stay flat)."""
    out = {k: v for k, v in p.items() if k not in ("interference", "rates", "phase", "step", "total", "elapsed")}
    inter = Interference.read(p.get("interference"))
    if inter is not None:
        out["other_share"] = round(inter.share, 4)
    return out


def read_kernels(reports: Any, flags: list[str] | None) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """The kernels a job's census saw (:mod:`cpudoctor.probes.kernels` parses), judged against the CPU's flags."""
    from cpudoctor.probes import kernels

    if not isinstance(reports, dict):
        return [], None
    found = kernels.from_reports(reports)
    if not found:
        return [], None
    caps = reports.get("caps") if isinstance(reports.get("caps"), dict) else {}
    detected = kernels.onednn_detected_isa(reports.get("onednn") or [])
    check = kernels.summary(kernels.check_kernels(found, flags or [], caps, detected)) if flags else None
    if check is not None:
        check.update(onednn_isa=detected, caps_set=caps or None, notes=list(reports.get("notes") or []) or None)
    return [k.to_dict() for k in found], check


READERS = {"train": _read_train, "sweep": _read_sweep, "gemm": _read_gemm, "quant": _read_quant,
           "roofline": read_roofline, "infer": _read_infer}
KINDS = tuple(READERS)


def read_outcome(job: str, outcome: Any, settings: dict[str, Any] | None = None,
                 context: Context | None = None) -> LabResult:
    """The typed result of a finished (or cancelled, or crashed) job; partial progress counts."""
    if job not in READERS:
        raise ValueError(f"unknown lab job {job!r}; one of {', '.join(READERS)}")
    ctx = context or Context()
    r = outcome.result or {}
    progress = list(outcome.progress or [])
    settings = dict(settings if settings is not None else (r.get("settings") or {}))
    settings.pop("topology", None)          # the sweep's topology is in the report already
    settings.pop("started", None)           # when the sweep's budget began: this process's clock, no setting
    base = {"kind": job, "status": outcome.status, "message": "" if outcome.status == "ok" else outcome.message,
            "settings": settings, "started_at": ctx.started_at, "quiet_limit": ctx.quiet_limit,
            "interference": Interference.read(r.get("interference")), "has_result": outcome.result is not None}
    result = READERS[job](r, progress, base, ctx)
    result.kernels, result.kernel_check = read_kernels(r.get("library_reports"), ctx.flags)
    return result
