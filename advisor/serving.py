"""What a loop that serves a model pays per request, decided from the job's own state (no words here).

The job's probe (``cpudoctor run``) times the model's calls and counts, with their lines, the calls that load,
build or compile a model (:class:`~cpudoctor.model.jobstate.Serving`). This module decides which of them run
per request, and whether the loop runs at batch 1 on every thread; the serving rules
(:mod:`cpudoctor.advisor.serving_rules`, EVID025-EVID027) word it, and the older rules that would name the same
cause from the symptom (EVID001's OpenMP waiting, EVID003's recompilations) ask here first and stay silent.
"""

from __future__ import annotations

from dataclasses import dataclass

from cpudoctor.model.jobstate import JobState, RepeatedCall

INFERENCE_FORWARDS = 20       # model calls with no backward pass and no optimizer step: an inference loop
REPEATS = 3                   # a load, build or compile made this many times after the model first ran ...
PER_REQUEST = 0.2             # ... at least once per five of its calls since: per request, not per checkpoint
RECOMPILES_PER_REQUEST = 0.2  # Dynamo recompiled at least once per five model calls of an inference loop


@dataclass(frozen=True)
class PerRequest:
    """One place that does per request what belongs before the loop."""

    site: RepeatedCall
    requests: int                 # the model's calls since the first of these inside the loop
    ratio: float                  # the site's calls inside the loop per such request (1.0: every request)


def requests(state: JobState) -> int:
    """The model's calls: the outermost calls the probe timed, or its forward count when larger."""
    timed = state.serving.calls if state.serving is not None else 0
    return max(state.forwards, timed)


def per_request(state: JobState | None, kind: str) -> list[PerRequest]:
    """The sites of ``kind`` (load, build, compile) that ran at least :data:`REPEATS` times inside the loop and at
    least once per five of the model's calls since, most calls first."""
    if state is None or not state.loaded or state.serving is None:
        return []
    total = requests(state)
    found = []
    for site in state.serving.repeated(kind):
        since = max(1, total - (site.forwards_first or 1) + 1)
        ratio = min(1.0, site.after / since)
        if site.after >= REPEATS and ratio >= PER_REQUEST:
            found.append(PerRequest(site, since, ratio))
    return found


def recompiles_per_request(state: JobState | None, recompiles) -> bool:
    """Dynamo compiled the model again for requests of the same shapes (not a size that changed: EVID003's case),
    at least once per five calls of an inference loop."""
    if state is None or recompiles is None or not state.inference_loop(INFERENCE_FORWARDS):
        return False
    count = len(recompiles.recompiles)
    if count < REPEATS or recompiles.size_changes():
        return False
    return count / max(1, requests(state)) >= RECOMPILES_PER_REQUEST


def compiles_per_request(state: JobState | None, recompiles) -> bool:
    """EVID027's question: a compile call per request, or Dynamo recompiling per request."""
    return bool(per_request(state, "compile")) or recompiles_per_request(state, recompiles)


def batch_one_threads(state: JobState | None, usable: int | None) -> int | None:
    """The thread count of an inference loop that calls its model at batch 1 on every usable CPU (2 or more), or
    None. A count above the usable CPUs set in the script is EVID013's (it names that line)."""
    if state is None or usable is None or usable < 2 or not state.inference_loop(INFERENCE_FORWARDS):
        return None
    if state.request_batch() != 1:
        return None
    sample = state.latest()
    threads = sample.threads if sample is not None else None
    if threads is None or threads < usable:
        return None
    if threads > usable and state.last_call("torch.set_num_threads") is not None:
        return None
    return threads
