"""Which of a job's findings can be verified on the job itself, and how: ``run --verify``'s plans.

A finding's fix is its snippet: the exact text the user is told to type. A bash
snippet with a plain launch line (``OMP_NUM_THREADS=1 python train.py``,
``env -u ONEDNN_MAX_CPU_ISA python train.py``, ``taskset -c 0-7 python train.py``,
``numactl --cpunodebind=1 --membind=1 python train.py``) is a change made from
outside the script: its variables, the variables it clears and the CPUs it
binds to are taken apart by :func:`cpudoctor.advisor.snippets.parse_launch` (the
same reader that translates snippets for Windows) and applied to the job's own
command line, not to the line's (redacted, shortened) copy of it. A Python
snippet is a change to the script: it is listed with the exact change, never run.
Nothing here reads words of a fix.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from cpudoctor.advisor.snippets import Launch, parse_launch
from cpudoctor.model import Finding
from cpudoctor.model.jobstate import THREAD_VARS

OUTSIDE, CODE, NONE = "outside", "code", "none"


@dataclass(frozen=True)
class FixPlan:
    """How one finding's fix can be checked on the job."""

    code: str
    title: str
    kind: str                                   # outside | code | none
    line: str = ""                              # the launch line as the finding prints it (outside)
    env: dict[str, str] = field(default_factory=dict)   # variables it sets
    unset: tuple[str, ...] = ()                 # variables it clears
    cpus: tuple[int, ...] | None = None         # CPUs it binds the job to (taskset -c, numactl --physcpubind)
    nodes: tuple[int, ...] | None = None        # NUMA nodes whose CPUs it binds to (numactl --cpunodebind)
    memory: str = ""                            # numactl's memory policy ("bind 1"): not applied by a measurement
    change: str = ""                            # code: the exact change (the finding's Python snippet); outside:
    #                                             the change to the script the variables stand in for, if any
    reason: str = ""                            # none: why it cannot be checked

    @property
    def threads(self) -> int | None:
        """The thread count the fix gives the job (its OMP_NUM_THREADS, else another pool's variable)."""
        for name in THREAD_VARS:
            value = self.env.get(name, "")
            if value.isdigit() and int(value) > 0:
                return int(value)
        return None

    def launch_words(self) -> str:
        """What the fix changes, in shell words: ``OMP_NUM_THREADS=1 MKL_NUM_THREADS=1``, ``env -u X``,
        ``CPUs 0-7``."""
        from cpudoctor.kits.cpulist import format_cpulist

        parts = [f"-u {n}" for n in self.unset] + [f"{k}={v}" for k, v in self.env.items()]
        if self.cpus is not None:
            parts.append(f"CPUs {format_cpulist(list(self.cpus))}")
        if self.nodes is not None:
            parts.append(f"NUMA node{'s' if len(self.nodes) != 1 else ''} {format_cpulist(list(self.nodes))}")
        return " ".join(parts)


def _inner_env(launch: Launch) -> Launch:
    """``taskset -c 0-3 env OMP_NUM_THREADS=1 python x.py``: the variables after the binding command belong to the
    launch too (``parse_launch`` leaves them in its command)."""
    import shlex

    words = launch.command
    if words and (words[0] == "env" or "=" in words[0] and not words[0].startswith(("-", "/", "."))):
        inner = parse_launch(shlex.join(words))
        if inner is not None and inner.cpus is None and inner.node is None and not inner.nodes:
            launch.env = {**launch.env, **inner.env}
            launch.unset = [*launch.unset, *inner.unset]
            launch.command = inner.command
    return launch


def _launch(snippet: str) -> tuple[str, Launch] | None:
    """The first plain launch line of a bash snippet that changes something (comments and ``unset`` lines skipped)."""
    for line in snippet.splitlines():
        launch = parse_launch(line)
        if launch is None:
            continue
        launch = _inner_env(launch)
        if launch.env or launch.unset or launch.cpus is not None or launch.node is not None or launch.nodes:
            return line.strip(), launch
    return None


def plan_fix(finding: Finding) -> FixPlan | None:
    """The plan for ``finding``'s fix; None when it prints nothing to apply (no snippet, no fix: a note)."""
    if not finding.snippet.strip():
        if not finding.fix or finding.severity not in ("warning", "error"):
            return None
        return FixPlan(finding.code, finding.title, NONE, reason="it prints no command or code to apply")
    if finding.snippet_lang == "python":
        threads = finding.evidence.get("suggested_threads")
        if isinstance(threads, int) and not isinstance(threads, bool) and threads >= 1:
            # a thread count written as a change to the script: the same count set from outside is measured (and
            # when the script sets its own count, the measurement shows the variables do not take effect)
            env = {name: str(threads) for name in THREAD_VARS}
            return FixPlan(finding.code, finding.title, OUTSIDE, env=env, change=finding.snippet.strip(),
                           line=" ".join(f"{k}={v}" for k, v in env.items()) + " <the job's command>")
        return FixPlan(finding.code, finding.title, CODE, change=finding.snippet.strip())
    found = _launch(finding.snippet) if finding.snippet_lang in ("bash", "sh", "") else None
    if found is None:
        return FixPlan(finding.code, finding.title, NONE, change=finding.snippet.strip(),
                       reason="its fix is not a relaunch of the job (a change to the system or the environment)")
    line, launch = found
    nodes = (launch.node,) if launch.node is not None else tuple(launch.nodes) if launch.nodes else None
    return FixPlan(finding.code, finding.title, OUTSIDE, line=line, env=dict(launch.env), unset=tuple(launch.unset),
                   cpus=tuple(launch.cpus) if launch.cpus is not None else None, nodes=nodes, memory=launch.memory)


def plan_fixes(findings: list[Finding]) -> list[FixPlan]:
    """Every finding's plan, in the findings' order; two findings printing the same change are measured once
    (the second names the first in its reason)."""
    plans: list[FixPlan] = []
    seen: dict[tuple, str] = {}
    for f in findings:
        plan = plan_fix(f)
        if plan is None:
            continue
        if plan.kind == OUTSIDE:
            key = (tuple(sorted(plan.env.items())), tuple(sorted(plan.unset)), plan.cpus, plan.nodes)
            if key in seen:
                plan = FixPlan(plan.code, plan.title, NONE, line=plan.line,
                               reason=f"the same change as {seen[key]}'s fix, measured there")
            else:
                seen[key] = plan.code
        plans.append(plan)
    return plans
