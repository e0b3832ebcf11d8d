"""Every snippet written for PowerShell or cmd is a Windows command, and ``--shell`` chooses (issue 26).

Seen before: the NUMA/CCX launches ``env -u … numactl --cpunodebind=0,2 …``, ``pip list 2>/dev/null | grep``,
``. fresh-env/bin/activate`` and ``sudo cpupower …`` reached PowerShell and cmd unchanged; cmd got bash's
single quotes (``pip install 'numpy<2.4'`` redirects from a file named 2.4) and end-of-line ``#`` notes
(passed to pip as arguments). Every finding of every recorded scenario is written for both Windows shells
and read back line by line; ``doctor`` and ``report`` take ``--shell`` and default to the user's shell.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from cpudoctor import advisor
from cpudoctor.advisor import snippets
from cpudoctor.report_file import load_report

SCENARIOS = sorted((Path(__file__).parent / "fixtures" / "scenarios").glob("*.json"))
WINDOWS_REPORT = Path(__file__).parent / "fixtures" / "scenarios" / "threadripper-3990x-windows10-groups.json"
LINUX_REPORT = Path(__file__).parent / "fixtures" / "scenarios" / "cascadelake-2s-two-openmp.json"

# What a Windows shell cannot run: Linux commands and paths, bash syntax. Written here, apart from the
# translator's own list, so the test does not take the translator's word for it.
BASH_ONLY = re.compile(
    r"(?:^|[\s|;(])(?:taskset|numactl|sudo|apt|dnf|cpupower|ldconfig|swapoff|grep|xargs|cat|export|unset|virsh|qm|"
    r"env\s+-u)\b|/proc/|/sys/|/dev/null|\$\(|bin/activate|^[A-Za-z_][A-Za-z0-9_]*=\S*\s")


def _commands(text: str, shell: str) -> list[str]:
    comment = ("rem ", "rem\t") if shell == "cmd" else ("#",)
    return [line.strip() for line in text.splitlines()
            if line.strip() and not line.strip().lower().startswith(comment)]


def _not_windows(text: str, shell: str) -> list[str]:
    bad = []
    for line in _commands(text, shell):
        code = line.split("  #", 1)[0] if shell == "powershell" else line
        if BASH_ONLY.search(code):
            bad.append(line)
        if shell == "cmd" and (re.search(r"(?<![\w\"])'[^'\"]*'", line.replace("cmd /c", "")) or " # " in line):
            bad.append(line)                   # single quotes or a '#' note: cmd passes them on as arguments
    return bad


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.stem)
def test_every_snippet_for_powershell_and_cmd_is_a_windows_command(path):
    report = load_report(path)
    findings = advisor.diagnose(report)
    problems = []
    for shell in ("powershell", "cmd"):
        for f in snippets.for_shell(findings, report, shell):
            if f.snippet_lang in ("powershell", "cmd"):
                problems += [f"{f.code} {shell}: {line}" for line in _not_windows(f.snippet, f.snippet_lang)]
    assert problems == []


def test_a_numa_launch_over_two_nodes_pins_to_their_cpus_on_windows():
    """``numactl --cpunodebind=0,2`` (one L3 domain spanning two nodes) was left as numactl."""
    report = load_report(LINUX_REPORT)
    line = "env -u OMP_PLACES OMP_NUM_THREADS=20 numactl --cpunodebind=0,2 --membind=0,2 python train.py"
    node_cpus = {n.id: n.cpus for n in report.topology.numa_nodes}
    cmd = snippets.translate(line, "cmd", report.topology)
    assert "numactl --" not in cmd and "set OMP_NUM_THREADS=20" in cmd and "OMP_PLACES" in cmd
    assert 'start "" /b /wait' in cmd
    ps = snippets.translate(line, "powershell", report.topology)
    assert "numactl --" not in ps and "$env:OMP_NUM_THREADS = '20'" in ps
    # without a topology the CPUs of the nodes are unknown: say so, never print numactl
    bare = snippets.translate(line, "cmd", None)
    assert "numactl --" not in bare and "one process per node" in bare
    assert set(node_cpus[0]) and set(node_cpus[2])


def test_shell_option_writes_the_doctor_for_that_shell(capsys):
    from conftest import run_cli

    code, out, err = run_cli(capsys, "doctor", "--from-report", str(LINUX_REPORT), "--only", "topology",
                             "--shell", "cmd", "--format", "md")
    assert code in (0, 1), err
    assert "```bat" in out and "start \"\" /b /wait /node 0 python train.py" in out
    assert "numactl" not in out.replace("with numactl", "").replace("numactl's", "")
    code, out, _ = run_cli(capsys, "doctor", "--from-report", str(LINUX_REPORT), "--only", "topology",
                           "--shell", "bash")
    assert "OMP_NUM_THREADS=10 numactl --cpunodebind=0 --membind=0 python train.py" in out
    code, _, err = run_cli(capsys, "doctor", "--from-report", str(LINUX_REPORT), "--shell", "tcsh")
    assert code == 2 and "invalid choice: 'tcsh'" in err


def test_shell_option_on_report_and_the_json_keeps_the_bash_form(capsys, tmp_path):
    from conftest import run_cli

    code, out, err = run_cli(capsys, "report", "--from-report", str(LINUX_REPORT), "--shell", "powershell",
                             "--format", "json")
    assert code == 0, err
    topo = [f for f in json.loads(out)["findings"] if f["code"] == "TOPO001"][0]
    assert topo["snippet_lang"] == "powershell" and "cmd /c 'start \"\" /b /wait /node 1" in topo["snippet"]
    assert "numactl --cpunodebind=1" in topo["snippet_bash"]
    code, out, _ = run_cli(capsys, "report", "--from-report", str(LINUX_REPORT), "--shell", "fish", "--format", "text")
    assert "set -gx" in out or "OMP_NUM_THREADS=10 numactl" in out


@pytest.mark.parametrize(("login", "report", "system", "expected"), [
    ("/bin/bash", LINUX_REPORT, "Linux", "bash"),
    ("/usr/bin/zsh", LINUX_REPORT, "Linux", "zsh"),
    ("/usr/local/bin/fish", LINUX_REPORT, "Darwin", "fish"),
    ("/bin/tcsh", LINUX_REPORT, "Linux", "bash"),           # a shell CPU Doctor does not write for: the OS's
    ("", LINUX_REPORT, "Linux", "bash"),
    ("/bin/bash", WINDOWS_REPORT, "Linux", "powershell"),   # the commands run on the Windows machine
    ("", WINDOWS_REPORT, "Windows", "powershell"),
    ("", LINUX_REPORT, "Windows", "bash"),                  # a Linux machine's report read on Windows
])
def test_the_default_shell_is_the_users(login, report, system, expected):
    assert snippets.user_shell(load_report(report), {"SHELL": login} if login else {}, system) == expected


def test_doctor_defaults_to_the_login_shell(capsys, monkeypatch):
    from conftest import run_cli

    monkeypatch.setenv("SHELL", "/usr/bin/fish")
    _, out, _ = run_cli(capsys, "doctor", "--from-report", str(LINUX_REPORT), "--only", "topology",
                        "--format", "json")
    langs = {f["snippet_lang"] for f in json.loads(out)["findings"] if f["snippet"] and f["snippet_lang"] != "python"}
    assert langs == {"fish"}
    monkeypatch.setenv("SHELL", "/bin/bash")
    _, out, _ = run_cli(capsys, "doctor", "--from-report", str(WINDOWS_REPORT), "--format", "json")
    langs = {f["snippet_lang"] for f in json.loads(out)["findings"] if f.get("snippet_bash")}
    assert langs == {"powershell"}


def test_the_finding_view_shows_the_shell_a_finding_is_written_in():
    from cpudoctor.render.finding_view import finding_view

    report = load_report(WINDOWS_REPORT)
    written = [f for f in advisor.diagnose(report) if f.snippet_bash]
    assert written
    view = finding_view(written[0])
    assert view.snippet.shell == "powershell" and view.snippet.lang == "powershell"
    assert finding_view(written[0], "bash").snippet.text == written[0].snippet_bash
    cmd = finding_view(written[0], "cmd").snippet
    assert cmd.shell == "cmd" and cmd.lang == "bat" and not _not_windows(cmd.text, "cmd")
