"""The command line builds only the parser of the command given: `cpudoctor compare` imports compare, not bench."""

from __future__ import annotations

import subprocess
import sys

from cpudoctor.cli import build_parser, command_of
from cpudoctor.commands import COMMANDS


def _subcommands(parser) -> set[str]:
    action = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    return set(action.choices)


def test_the_command_given_is_the_only_one_built():
    assert command_of(["compare", "a.json", "b.json"]) == "compare"
    assert command_of(["install-desktop"]) == "install_desktop"
    assert command_of(["--help"]) is None and command_of(["bogus"]) is None and command_of([]) is None
    assert _subcommands(build_parser("compare")) == {"compare"}
    assert len(_subcommands(build_parser())) == len(COMMANDS)


def test_help_and_typos_still_list_every_command():
    out = subprocess.run([sys.executable, "-m", "cpudoctor", "bogus"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and all(name.replace("_", "-") in out.stderr for name in COMMANDS)
    out = subprocess.run([sys.executable, "-m", "cpudoctor", "--help"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and all(name.replace("_", "-") in out.stdout for name in COMMANDS)
