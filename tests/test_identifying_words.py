"""The opt-in to identifying details promises only what a report can hold.

Issue 26: `--include-identifying` said it keeps the host name, which CPU Doctor never collects.
"""

from __future__ import annotations

import json
import socket

import pytest

from tests.conftest import run_cli


def _option_help(command: str, option: str) -> str:
    import argparse

    from cpudoctor.cli import build_parser

    sub = next(a for a in build_parser(command)._actions if isinstance(a, argparse._SubParsersAction))
    return next(a.help for a in sub.choices[command]._actions if option in a.option_strings)


@pytest.mark.hardware
def test_the_report_holds_no_host_name_so_no_opt_in_promises_one(capsys, tmp_path):
    """With --include-identifying, the JSON report has no host name (the independent check: the machine's own
    name from the socket module is nowhere in it); then no help text or check box may offer to keep one."""
    out = tmp_path / "r.json"
    code, _, err = run_cli(capsys, "report", "--fast", "--include-identifying", "-o", str(out))
    assert code == 0, err
    data = json.loads(out.read_text())
    assert data["meta"]["redacted"] is False and data["software"]["os"]["hostname"] is None
    host = socket.gethostname()
    if len(host) >= 4:
        assert f'"{host}"' not in out.read_text()
    for command in ("report", "compare"):
        said = _option_help(command, "--include-identifying")
        assert "host" not in said.replace("the host name is never collected", ""), said
    from gui.export import PRIVACY_TEXT

    assert "host" not in PRIVACY_TEXT
