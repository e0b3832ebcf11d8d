"""The ISA-floor list counts each installed package once, the same in `report` and `doctor`; nothing checked
is not a pass.

Issue 26: the list showed opencv twice, 12 unknown in `report` against 11 in `doctor` (the advisor
appended to the report's own list), and opencv both "met" and "unknown"; on a captured tree ISA005 passed
"(0 checked)".
"""

from __future__ import annotations

import importlib.metadata as metadata
import re

import pytest

from cpudoctor.model import IsaRisk, Report, Software
from tests.conftest import machine_root, run_cli


def _installed(name: str) -> bool:
    try:
        metadata.distribution(name)
        return True
    except metadata.PackageNotFoundError:
        return False


def _unknown_list(text: str) -> list[str]:
    line = next(ln for ln in text.splitlines() if "no ISA floor on record (unknown) for" in ln)
    return [x.strip() for x in line.split("with compiled code:", 1)[1].split(",")]


def _isa005(text: str) -> re.Match:
    """ISA005's title, however the page wrapped it."""
    return re.search(r"ISA floor is met \((\d+) checked\); (\d+) other compiled packages? unknown", " ".join(text.split()))


@pytest.mark.hardware
def test_report_and_doctor_count_the_same_packages_once(capsys):
    """This environment, through the real commands: the report's list names each package once, its count is
    ISA005's, and a package without a floor on record (OpenCV, a test extra here) is unknown, not met."""
    code, report_text, err = run_cli(capsys, "report", "--fast")
    assert code == 0, err
    code, doctor_text, err = run_cli(capsys, "doctor", "--fast", "-v")
    assert code == 0, err
    unknown = _unknown_list(report_text)
    assert len(unknown) == len(set(unknown)), unknown
    title = _isa005(doctor_text)
    assert title is not None and int(title.group(2)) == len(unknown), (unknown, doctor_text)
    met_line = next((ln for ln in report_text.splitlines() if "meets the ISA floor" in ln), "")
    met = [x.strip() for x in met_line.split(":", 1)[1].rstrip(")").split(",")] if met_line else []
    assert not set(met) & set(unknown), (met, unknown)
    assert int(title.group(1)) == len(met)
    if _installed("opencv-python-headless") or _installed("opencv-python"):
        assert "opencv-python" in unknown and "opencv-python" not in met


def test_nothing_checked_is_not_a_pass():
    """A captured tree describes no installed package: ISA005 says nothing rather than '(0 checked)'."""
    from cpudoctor.pipeline import Source, build_report

    report = build_report(Source.tree(machine_root("archspec-ubuntu20.04-zen3")), children=False)
    isa005 = [f for f in report.findings if f.code == "ISA005"]
    assert not [f for f in isa005 if f.severity == "ok"], [f.title for f in isa005]
    assert not any("(0 checked)" in f.title for f in isa005)


@pytest.mark.parametrize("risks, unknown, expect", [
    ([IsaRisk("opencv-python", True, "5.0", status="unknown")], ["grimp"], ("info", "No installed package's ISA floor could be checked; 2 compiled packages unknown (opencv-python, grimp)")),
    ([IsaRisk("numpy", True, "2.3", status="no_floor"), IsaRisk("opencv-python", True, status="unknown")],
     ["opencv-python"], ("ok", "(1 checked); 1 other compiled package unknown (opencv-python)")),
])
def test_isa005_from_the_one_tally(risks, unknown, expect):
    from cpudoctor import advisor

    report = Report(software=Software(isa_risks=risks, compiled_unknown=unknown))
    before = list(report.software.compiled_unknown)
    found = [f for f in advisor.diagnose(report, only={"ISA005"})]
    assert [(f.severity, expect[1] in f.title) for f in found] == [(expect[0], True)], [f.title for f in found]
    assert report.software.compiled_unknown == before            # the advisor never changes the report
