"""Numbers and links the README and the exports state, checked against the code that makes them true."""

from __future__ import annotations

import re
import sys
from pathlib import Path

from cpudoctor.report_file import load_report
import cpudoctor
from cpudoctor.advisor.engine import REPORT_RULES
from cpudoctor.advisor.process_rules import PROCESS_RULES

REPO = Path(__file__).resolve().parents[1]


def test_readme_rule_counts_match_the_registries():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    report = re.search(r"checks the machine against (\d+) rules", readme)
    process = re.search(r"(\d+) process rules more check a running job", readme)
    assert report and process, "README must say how many rules `doctor` and `inspect` run"
    n_report, n_process = len(REPORT_RULES.all()), len(PROCESS_RULES.all())
    assert int(report.group(1)) == n_report, f"README says {report.group(1)} rules; the registry has {n_report}"
    assert int(process.group(1)) == n_process, f"README says {process.group(1)} process rules; there are {n_process}"


def test_project_url_is_one_fact():
    """cpudoctor.PROJECT_URL, pyproject's [project.urls] and the schema's $id name the same project."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10
        import tomli as tomllib
    urls = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["urls"]
    assert urls["Homepage"] == cpudoctor.PROJECT_URL
    assert urls["Documentation"] == cpudoctor.docs_url("docs/rules.md")
    schema = (REPO / "resources" / "report.schema.json").read_text()
    assert f'"$id": "{cpudoctor.PROJECT_URL}/' in schema


def test_markdown_exports_link_rule_docs_absolutely():
    """A Markdown report pasted into an issue must not link `docs/rules.md#...` relatively."""
    from cpudoctor.advisor import diagnose
    from cpudoctor.render.doctor import render_md
    from cpudoctor.export import render_export
    from cpudoctor.model import Report

    report = load_report(REPO / "tests" / "fixtures" / "scenarios" / "zen5-smt-threads.json")
    report.findings = diagnose(report)
    for text in (render_export(report, "md").decode(), render_md(report, report.findings, "test"),
                 render_export(report, "html").decode()):
        assert "](docs/" not in text and 'href="docs/' not in text
        assert f"{cpudoctor.PROJECT_URL}/blob/main/docs/rules.md#thr003" in text
    assert cpudoctor.docs_url("https://example.org/x") == "https://example.org/x"
