"""CPU Doctor starting its own children, as a Python package and as the frozen app (sys.frozen faked).

The frozen app has no ``-m``: every child of CPU Doctor's own code goes through
``own_command`` / ``own_script_command`` and the app's hidden ``--run-module`` /
``--run-script``, which the CLI also understands, so the code path the built app
takes runs here without building it (tests/test_dist.py builds it).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from cpudoctor import cli, desktop
from cpudoctor.lab import runner as lab_runner
from cpudoctor.kits.child import own
from cpudoctor.probes.child import scripts as child_scripts
from cpudoctor.probes.software import envs as envs_mod

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def frozen_app(monkeypatch, tmp_path):
    """As inside the built app: sys.frozen, sys._MEIPASS and sys.executable the app itself."""
    bundle = tmp_path / "cpudoctor" / "_internal"
    bundle.mkdir(parents=True)
    app = tmp_path / "cpudoctor" / "cpudoctor"
    app.write_text("")
    monkeypatch.setattr(sys, "frozen", True, raising=False)
    monkeypatch.setattr(sys, "_MEIPASS", str(bundle), raising=False)
    monkeypatch.setattr(sys, "executable", str(app))
    return {"bundle": bundle, "app": app}


def test_own_command_is_python_dash_m_when_installed():
    assert own.own_command("cpudoctor.capture", "--trace") == [sys.executable, "-m", "cpudoctor.capture", "--trace"]
    assert own.own_script_command("/x/y.py", "--a") == [sys.executable, "/x/y.py", "--a"]
    assert own.bundle_dir() is None and not own.frozen()


def test_frozen_app_runs_itself_with_the_hidden_entries(frozen_app):
    app = str(frozen_app["app"])
    assert own.own_command("cpudoctor.probes.cpu.cpuid_check") == [app, "--run-module", "cpudoctor.probes.cpu.cpuid_check"]
    assert own.own_script_command("/s/t.py", "--numpy") == [app, "--run-script", "/s/t.py", "--numpy"]
    from cpudoctor.lab.jobs import script_path as job_script
    from cpudoctor.probes.child.scripts import script_path as probe_script

    launch, gemm, train = str(probe_script("_launch")), str(job_script("gemm")), str(job_script("train"))
    # A lab job is a standalone script: the app runs it through the launcher with --run-script ...
    assert lab_runner.job_command("gemm", {"size": 64})[:4] == [app, "--run-script", launch, gemm]
    from cpudoctor.gui.job_runner import JobRunner

    assert job_command_of(JobRunner())[:4] == [app, "--run-script", launch, train]
    # ... and the sweep's orchestrator, CPU Doctor's own module, with --run-module.
    assert lab_runner.job_command("sweep", {})[:3] == [app, "--run-module", "cpudoctor.lab.sweep"]
    # An environment chosen by the user is a real Python: its argv never goes through the app.
    assert lab_runner.job_command("gemm", {}, python="/env/bin/python")[:5] == ["/env/bin/python", "-I", "-B", launch,
                                                                              gemm]


def job_command_of(runner) -> list[str]:
    """The argv the Training page's runner would start for a training job (not started)."""
    started = []
    runner.start_argv = lambda argv, job="job", **kw: started.append(argv)
    runner.start("train", {})
    return started[0]


def test_the_windowed_exe_starts_children_with_the_console_one(frozen_app, monkeypatch):
    gui = frozen_app["app"].with_name("cpudoctor-gui.exe")
    console = frozen_app["app"].with_name("cpudoctor.exe")
    gui.write_text("")
    console.write_text("")
    monkeypatch.setattr(sys, "executable", str(gui))
    assert own.own_command("cpudoctor.capture", "--trace")[0] == str(console)
    assert own.own_script_command("/s/t.py")[0] == str(console)


def test_child_scripts_are_found_in_the_bundle_when_frozen(frozen_app, monkeypatch):
    folder = frozen_app["bundle"] / "cpudoctor" / "probes" / "child" / "scripts"
    folder.mkdir(parents=True)
    (folder / "torch_facts.py").write_text("print('{}')\n")
    assert child_scripts._folder() == folder
    monkeypatch.setattr(child_scripts, "FOLDER", child_scripts._folder())
    assert child_scripts.script_path("torch_facts") == folder / "torch_facts.py"
    app = str(frozen_app["app"])
    assert child_scripts.script_argv("torch_facts", "--numpy") == [app, "--run-script", str(folder / "torch_facts.py"),
                                                                   "--numpy"]
    assert child_scripts.script_argv("torch_facts", python="/env/bin/python") == ["/env/bin/python", "-I", "-B",
                                                                                str(folder / "torch_facts.py")]
    with pytest.raises(FileNotFoundError, match="torch_facts"):
        child_scripts.script_path("blas_facts")


def test_desktop_entry_starts_the_app_itself_when_frozen(frozen_app):
    assert desktop.gui_command() == [str(frozen_app["app"].resolve())]


def test_frozen_app_is_not_listed_as_an_environment(frozen_app, tmp_path):
    ctx = envs_mod.Context.current({"HOME": str(tmp_path), "PATH": ""}, home=tmp_path, cwd=tmp_path)
    assert ctx.own_prefix is None
    found = envs_mod.discover({"HOME": str(tmp_path), "PATH": ""}, home=tmp_path, cwd=tmp_path,
                              run_conda=False, cache=False)
    assert all(not e.prefix.startswith(str(frozen_app["bundle"])) for e in found)
    assert not any(e.own for e in found)


def test_library_path_is_given_back_to_children(frozen_app):
    env = {"LD_LIBRARY_PATH": f"{frozen_app['bundle']}:/opt/user/lib", "LD_LIBRARY_PATH_ORIG": "/opt/user/lib"}
    own.restore_library_path(env)
    assert env == {"LD_LIBRARY_PATH": "/opt/user/lib"}
    env = {"LD_LIBRARY_PATH": str(frozen_app["bundle"])}           # the user had none
    own.restore_library_path(env)
    assert env == {}


def test_library_path_is_left_alone_when_not_frozen():
    env = {"LD_LIBRARY_PATH": "/a", "LD_LIBRARY_PATH_ORIG": "/b"}
    own.restore_library_path(env)
    assert env == {"LD_LIBRARY_PATH": "/a", "LD_LIBRARY_PATH_ORIG": "/b"}


def _cpudoctor(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cpudoctor", *args], capture_output=True, text=True, timeout=120)


def test_run_module_runs_a_module_as_main():
    out = _cpudoctor("--run-module", "cpudoctor.probes.cpu.cpuid_check")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert "error" in data or data.get("vendor_id")


def test_run_script_runs_a_child_script_with_its_arguments(tmp_path):
    (tmp_path / "sibling.py").write_text("VALUE = 41\n")
    script = tmp_path / "child.py"
    script.write_text("import sys, sibling\nprint(sibling.VALUE + 1, sys.argv[1:], __name__)\nsys.exit(3)\n")
    out = _cpudoctor("--run-script", str(script), "--flag", "x")
    assert out.returncode == 3
    assert out.stdout.strip() == "42 ['--flag', 'x'] __main__"


def test_hidden_entries_say_what_is_wrong_in_one_line(tmp_path):
    for args, words in ((["--run-module", "cpudoctor.no_such_module"], "no module 'cpudoctor.no_such_module'"),
                        (["--run-script", str(tmp_path / "gone.py")], "no such file"),
                        (["--run-module"], "needs a module")):
        out = _cpudoctor(*args)
        assert out.returncode == 2
        assert words in out.stderr and len(out.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("argv, window", [
    ([], True),
    (["--page", "Flags"], True),
    (["--screenshot=x.png"], True),
    (["report", "--fast"], False),
    (["install-desktop"], False),
    (["--version"], False),
    (["-h"], False),
    (["--bogus"], False),
    (["no-such-file.json"], False),
])
def test_one_program_for_window_and_commands(argv, window):
    assert cli.opens_window(argv) is window


def test_a_saved_report_opens_in_the_window(tmp_path):
    saved = tmp_path / "report.json"
    saved.write_text("{}")
    assert cli.opens_window([str(saved)])
