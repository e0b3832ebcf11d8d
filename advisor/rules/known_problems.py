"""Known problems by version: one generic rule over resources/known_problems.json, so knowledge grows as data."""

from __future__ import annotations

from cpudoctor.advisor import known
from cpudoctor.advisor.engine import Facts, rule
from cpudoctor.model import Finding, Report


@rule("KNOWN001", "known-version-problem", category="known", severity="warning",
      title="A known problem of this package version on this CPU")
def known_version_problem(report: Report) -> list[Finding]:
    """What it checks:
        Every entry of resources/known_problems.json: a package or native library version range
        (PyTorch, NumPy, OpenVINO; OpenBLAS, oneDNN as loaded) together with CPU, OS and
        environment conditions (vendor, micro-architecture, flags, usable CPUs, thread variables),
        against this report. Each entry links the upstream report and names the fixed version.

    Why it matters:
        Some problems are neither the CPU's nor the configuration's fault but a bug of one release
        on one kind of CPU: OpenBLAS running SSE3 kernels on a CPU it does not recognise, wrong int8
        results on CPUs without VNNI, a crash on Zen 4. They are fixed upstream; knowing the version
        saves days of profiling.

    Fix:
        Update to the fixed version the finding names (or apply the workaround it gives), and see
        the linked upstream report for details.
    """
    f = Facts(report)
    found: list[Finding] = []
    unknown = 0
    for problem in known.problems():
        applies, match = known.evaluate(problem, f)
        if applies is None:
            unknown += 1
            continue
        if not applies:
            continue
        why = problem["why"]
        why += f" Fixed in {problem['fixed_in']}." if problem["fixed_in"] else " No fixed release is known yet."
        why += f" Upstream: {problem['links'][0]}"
        title = problem["title"].format_map(_Blank(match.values))
        found.append(f.finding(problem["severity"], title, why=why, fix=problem["fix"], snippet=problem["snippet"]))
    if found:
        return found
    checked = len(known.problems()) - unknown
    if checked and unknown < len(known.problems()):
        return [f.finding("ok", f"No known version-specific problem applies ({checked} of "
                                f"{len(known.problems())} checked; the rest need facts this report lacks)"
                          if unknown else f"No known version-specific problem applies ({checked} checked)")]
    return []


class _Blank(dict):
    """format_map() helper: a placeholder without a value becomes "this" instead of raising KeyError."""

    def __missing__(self, key: str) -> str:
        return "this"
