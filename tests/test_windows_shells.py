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
from cpudoctor.render.finding_view import ShellChoice, finding_view
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
        choice = ShellChoice.for_report(report, shell)
        for f in findings:
            shown = finding_view(f, choice).snippet
            if shown.shell in ("powershell", "cmd"):
                problems += [f"{f.code} {shell}: {line}" for line in _not_windows(shown.text, shown.shell)]
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


def test_the_advisor_writes_bash_and_the_view_chooses_the_shell():
    """The advisor decides no shell: a Windows machine's findings are bash (or a Windows rule's own PowerShell),
    and the view writes them for the shell the surface asks for, PowerShell by default for that machine."""
    report = load_report(WINDOWS_REPORT)
    found = advisor.diagnose(report)
    written = [f for f in found if f.snippet and f.snippet_lang == "bash" and "taskset" in f.snippet]
    assert written and not [f for f in found if f.snippet_bash]
    assert {f.snippet_lang for f in found if f.snippet} <= {"bash", "powershell", "python"}
    view = finding_view(written[0], ShellChoice.for_report(report))
    assert view.snippet.shell == "powershell" and view.snippet.lang == "powershell" and "taskset" not in view.snippet.text
    assert finding_view(written[0], ShellChoice.for_report(report, "bash")).snippet.text == written[0].snippet
    cmd = finding_view(written[0], ShellChoice.for_report(report, "cmd")).snippet
    assert cmd.shell == "cmd" and cmd.lang == "bat" and not _not_windows(cmd.text, "cmd")
    # a Linux machine's report: as written unless a shell is asked for
    linux = load_report(LINUX_REPORT)
    assert ShellChoice.for_report(linux).shell is None


def test_a_report_saved_with_powershell_snippets_still_reads_in_every_shell():
    """Reports saved before the view chose the shell hold a Windows machine's snippets in PowerShell with the
    bash form in snippet_bash: the view translates that bash for the asked shell and shows the PowerShell as
    saved otherwise."""
    from cpudoctor.model import Finding

    old = Finding(code="THR001", symbol="threads-unset", category="threads", severity="info", title="t",
                  snippet="$env:OMP_NUM_THREADS = '8'", snippet_lang="powershell",
                  snippet_bash="export OMP_NUM_THREADS=8")
    assert finding_view(old).snippet.text == "$env:OMP_NUM_THREADS = '8'"
    assert finding_view(old, "bash").snippet.text == "export OMP_NUM_THREADS=8"
    assert finding_view(old, "fish").snippet.text == "set -gx OMP_NUM_THREADS 8"


# -- issue 40 item 10: what doctor --shell powershell|cmd printed ---------------------------------------------

@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.stem)
def test_no_windows_snippet_repeats_a_line(path):
    """"unset X / # or for one run: env -u X CMD" printed the variable's removal twice in PowerShell and cmd (a
    Windows shell forgets a variable for the session, so the one-run form is the command alone)."""
    report = load_report(path)
    for shell in ("powershell", "cmd"):
        choice = ShellChoice.for_report(report, shell)
        for f in advisor.diagnose(report):
            lines = [ln.strip() for ln in finding_view(f, choice).snippet.text.splitlines()
                     if ln.strip() and not ln.strip().lower().startswith(("#", "rem "))]
            removals = [ln for ln in lines if ln.startswith(("Remove-Item Env:", "set ")) and ln.endswith(
                ("-ErrorAction SilentlyContinue", "="))]
            assert len(removals) == len(set(removals)), (f.code, shell, lines)


def test_the_one_run_form_is_the_command_alone_in_a_windows_shell():
    text = snippets.unset_lines(["GOMP_CPU_AFFINITY"]) + "\n# or for one run:\n" + \
        snippets.clean_launch(["GOMP_CPU_AFFINITY"])
    assert snippets.translate(text, "powershell").splitlines() == [
        "Remove-Item Env:GOMP_CPU_AFFINITY -ErrorAction SilentlyContinue", "& python train.py"]
    assert snippets.translate(text, "cmd").splitlines() == ["set GOMP_CPU_AFFINITY=", "python train.py"]
    assert "# or for one run:" in snippets.translate(text, "fish")        # fish has env -u: both ways stay


def test_a_linux_only_line_keeps_its_note_in_cmd():
    """ALLOC001's "# Debian/Ubuntu; Fedora: sudo dnf install jemalloc" went above the apt line as a rem of its
    own, reading as the comment of the line before; a line that becomes a comment keeps its note."""
    report = load_report(SCENARIOS[0].parent / "no-allocator-preload.json")
    (alloc,) = [f for f in advisor.diagnose(report) if f.code == "ALLOC001"]
    lines = finding_view(alloc, ShellChoice.for_report(report, "cmd")).snippet.text.splitlines()
    apt = next(i for i, ln in enumerate(lines) if "apt install libjemalloc2" in ln)
    assert "Fedora: sudo dnf install jemalloc" in lines[apt] and lines[apt].startswith("rem in a Linux shell only:")
    assert not any(ln.startswith("rem Debian/Ubuntu") for ln in lines)


@pytest.mark.parametrize("shell", ["bash", "powershell", "cmd"])
def test_every_suggestion_with_a_snippet_shows_it_in_every_shell(shell):
    """doctor's Markdown page (and its text page with -v) shows a suggestion's snippet in every shell."""
    from cpudoctor.render import doctor

    for path in SCENARIOS:
        report = load_report(path)
        report.findings = advisor.diagnose(report)
        choice = ShellChoice.for_report(report, shell)
        md = doctor.render_md(report, report.findings, "x", shell=shell)
        verbose = doctor.render_text(report, report.findings, "x", verbose=True, shell=shell)
        for f in report.findings:
            if f.severity == "info" and f.snippet:
                first = finding_view(f, choice).snippet.text.splitlines()[0].strip()
                assert first in md and first in verbose, (path.stem, f.code, shell, first)
