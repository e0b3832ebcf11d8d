"""Observe a job and diagnose it from the evidence: the one pipeline behind ``cpudoctor run`` and the
Inspector's "Run a script…".

:func:`observe_and_diagnose` starts the command (:mod:`cpudoctor.probes.process.observe`),
then runs the evidence rules (:mod:`cpudoctor.advisor.evidence_rules`) over what
it saw, with this machine's CPU flags for the instruction-set and data-type rules.
"""

from __future__ import annotations

from pathlib import Path

from cpudoctor.advisor.evidence_rules import Evidence, run_evidence_rules
from cpudoctor.probes.process.observe import RunObservation, run_observed
from cpudoctor.model import Finding, SEVERITY_RANK


def cpu_flags(root: Path = Path("/")) -> set[str]:
    """This machine's CPU flags (as the report reads them), empty when unknown."""
    from cpudoctor.probes import probe_cpu

    return set(probe_cpu(root).flags)


def diagnose(obs: RunObservation, flags: set[str] | None = None) -> list[Finding]:
    """The evidence rules over one observed run, worst first."""
    ev = Evidence(breakdown=obs.breakdown, onednn=obs.onednn, recompiles=obs.recompiles,
                  cpu_flags=cpu_flags() if flags is None else flags, launch_affinity=obs.launch_affinity,
                  env=obs.env, command=obs.command)
    findings = run_evidence_rules(ev)
    return sorted(findings, key=lambda f: -SEVERITY_RANK.get(f.severity, 0))


def observe_and_diagnose(argv: list[str], **kwargs) -> tuple[RunObservation, list[Finding]]:
    obs = run_observed(argv, **kwargs)
    return obs, diagnose(obs)


def diagnose_lab_run(run, flags: set[str] | list[str]) -> list[Finding]:
    """A lab job's findings (``cpudoctor bench``): the job rules that read kernels (EVID007, EVID008) over the census
    the run recorded, against the CPU the lab compared its kernels with; a report's saved runs are judged by the
    same entry (:func:`cpudoctor.advisor.kernel_rules.report_lab_findings`)."""
    from cpudoctor.advisor.kernel_rules import lab_findings

    return sorted(lab_findings(run, flags), key=lambda f: -SEVERITY_RANK.get(f.severity, 0))
