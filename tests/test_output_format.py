"""`-o FILE` never writes one format under a name that promises another.

Issue 26: `cpudoctor report -o x.docx` silently wrote plain text.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import run_cli

SAVED = Path(__file__).parent / "fixtures" / "scenarios" / "zen3-healthy.json"


@pytest.mark.parametrize("argv", [
    ["report", "--from-report", str(SAVED), "-o", "{out}/x.docx"],
    ["doctor", "--from-report", str(SAVED), "-o", "{out}/y.pdf"],
    ["compare", str(SAVED), str(SAVED), "-o", "{out}/c.docx"],
    ["envs", "--no-conda", "-o", "{out}/e.csv"],
    ["inspect", "--list", "-o", "{out}/l.html"],
    ["bench", "quant", "-o", "{out}/q.xlsx"],
    ["run", "-o", "{out}/r.docx", "--", "true"],
])
def test_a_name_that_promises_another_format_is_refused(capsys, tmp_path, argv):
    argv = [a.format(out=tmp_path) for a in argv]
    code, out, err = run_cli(capsys, *argv)
    assert code == 2, (out, err)
    target = Path(argv[argv.index("-o") + 1])
    assert f"-o {target}: this command cannot write" in err and "name the file with one of those endings" in err
    assert not target.exists()                                      # nothing written under the wrong name


def test_the_ending_picks_the_format_and_no_ending_is_text(capsys, tmp_path):
    code, _, err = run_cli(capsys, "report", "--from-report", str(SAVED), "-o", str(tmp_path / "r.md"))
    assert code == 0, err
    assert (tmp_path / "r.md").read_text().startswith("# CPU Doctor report")
    code, _, err = run_cli(capsys, "doctor", "--from-report", str(SAVED), "-o", str(tmp_path / "d.json"))
    assert code == 0, err
    json.loads((tmp_path / "d.json").read_text())
    code, _, err = run_cli(capsys, "doctor", "--from-report", str(SAVED), "-o", str(tmp_path / "plain"))
    assert code == 0, err
    assert not (tmp_path / "plain").read_text().lstrip().startswith(("{", "#"))
    # an explicit --format wins over the ending
    code, _, err = run_cli(capsys, "report", "--from-report", str(SAVED), "--format", "text", "-o",
                           str(tmp_path / "notes.docx"))
    assert code == 0, err
    assert not (tmp_path / "notes.docx").read_text().lstrip().startswith(("{", "#", "<"))
