"""Environment discovery against what a machine may hold (issue 29, items 8, 9, 12, 13, 14, 17) and the app's
own environment (issue 26): real venvs, real scripts posing as interpreters, real FIFOs and sparse files, and
the real CLI in a child process.

Hangs are caught by a watchdog far above any honest run (``HANG_S``), never by timing a run; whether an
interpreter was run at all is read from a file each fake interpreter appends to when started.
"""

from __future__ import annotations

import json
import os
import resource
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from conftest import REPO
from test_envs import make_venv

from cpudoctor.probes.software import envs_describe, envs_find
from cpudoctor.probes.software.envs import EnvError, describe, discover, resolve, training_environment

HANG_S = 90            # a run that takes this long hung (the fixes bound each case to seconds)
HANGING = 12


def fake_python(path: Path, body: str, mark: Path | None = None) -> Path:
    """An executable script named like an interpreter; with ``mark``, it notes each start there first."""
    path.parent.mkdir(parents=True, exist_ok=True)
    note = f'echo started >> "{mark}"\n' if mark is not None else ""
    path.write_text("#!/bin/sh\n" + note + textwrap.dedent(body))
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def fake_env(prefix: Path, body: str, mark: Path | None = None, *, conda: bool = True) -> Path:
    """An environment folder (conda-meta or pyvenv.cfg) whose bin/python is a script."""
    if conda:
        (prefix / "conda-meta").mkdir(parents=True, exist_ok=True)
    else:
        prefix.mkdir(parents=True, exist_ok=True)
        (prefix / "pyvenv.cfg").write_text("home = /nowhere\n")
    return fake_python(prefix / "bin" / "python", body, mark)


def starts(mark: Path) -> int:
    return len(mark.read_text().splitlines()) if mark.exists() else 0


def cli(*args: str, home: Path, cwd: Path, cache: Path, extra: dict | None = None, memory: int | None = None,
        timeout: float = HANG_S) -> subprocess.CompletedProcess:
    """The real ``python -m cpudoctor`` in a child (``memory``: an address-space limit in bytes)."""
    env = {k: v for k, v in os.environ.items() if k not in ("CPUDOCTOR_PYTHON", "VIRTUAL_ENV", "CONDA_PREFIX",
                                                            "CONDA_EXE", "CONDA_DEFAULT_ENV")}
    env.update(HOME=str(home), CPUDOCTOR_CACHE_DIR=str(cache), PATH=os.path.dirname(sys.executable) + ":/usr/bin:/bin")
    env.update(extra or {})

    def limit() -> None:
        if memory is not None:
            resource.setrlimit(resource.RLIMIT_AS, (memory, memory))

    return subprocess.run([sys.executable, "-m", "cpudoctor", *args], capture_output=True, text=True, cwd=cwd,
                          env=env, timeout=timeout, preexec_fn=limit)


def one_line_error(out: subprocess.CompletedProcess, code: int = 2) -> None:
    assert out.returncode == code, (out.returncode, out.stderr[-2000:])
    assert "Traceback" not in out.stderr and len(out.stderr.strip().splitlines()) == 1, out.stderr[-2000:]


@pytest.fixture
def place(tmp_path):
    home, project, cache = tmp_path / "home", tmp_path / "project", tmp_path / "cache"
    home.mkdir()
    project.mkdir()
    return {"home": home, "project": project, "cache": cache, "base": tmp_path,
            "environ": {"HOME": str(home), "PATH": "/nonexistent"}}


def _ctx(place, **extra):
    return dict(environ={**place["environ"], **extra}, home=place["home"], cwd=place["project"])


# ------------------------------------------------------------------------- item 9: interpreters that never answer


@pytest.fixture
def hanging(place):
    """Twelve conda environments listed in environments.txt whose interpreter never answers."""
    mark = place["base"] / "started"
    prefixes = [str(fake_env(place["base"] / "hang" / f"env{i}", "exec sleep 600\n", mark).parent.parent)
                for i in range(HANGING)]
    (place["home"] / ".conda").mkdir()
    (place["home"] / ".conda" / "environments.txt").write_text("\n".join(prefixes) + "\n")
    return mark


@pytest.mark.slow
@pytest.mark.alongside
def test_hanging_interpreters_cost_doctor_fast_nothing_and_envs_one_deadline_once(place, hanging):
    out = cli("doctor", "--fast", home=place["home"], cwd=place["project"], cache=place["cache"])
    assert out.returncode in (0, 1) and "Traceback" not in out.stderr, out.stderr[-2000:]
    assert starts(hanging) == 0                                # --fast ran none of them
    listing = cli("envs", "--format", "json", "--no-conda", home=place["home"], cwd=place["project"],
                  cache=place["cache"])
    assert listing.returncode == 0, listing.stderr[-2000:]
    rows = {Path(e["prefix"]).name: e for e in json.loads(listing.stdout)["environments"]}
    assert all("did not answer within" in rows[f"env{i}"]["error"] for i in range(HANGING))
    assert starts(hanging) == HANGING                          # all asked, once, together
    again = cli("envs", "--no-conda", home=place["home"], cwd=place["project"], cache=place["cache"])
    assert again.returncode == 0 and starts(hanging) == HANGING      # the failures were remembered
    assert "did not answer within" in again.stdout


def test_the_default_runs_no_interpreter_when_a_cheap_fact_decides(place, hanging, monkeypatch):
    venv = make_venv(place["project"] / ".venv", torch="2.4.0+cpu")
    env, how = training_environment(**_ctx(place), cache=place["cache"])
    assert env.prefix == str(venv) and how == "working-folder"
    assert starts(hanging) == 0
    fast, how = training_environment(**_ctx(place), cache=False, fast=True)
    assert fast.prefix == str(venv) and how == "working-folder" and fast.torch == "2.4.0+cpu"


def test_a_timeout_is_remembered_and_look_again_asks_again(place, monkeypatch):
    mark = place["base"] / "started"
    fake_env(place["home"] / ".virtualenvs" / "slow", "exec sleep 600\n", mark, conda=False)
    monkeypatch.setattr(envs_describe, "MIN_TIMEOUT_TO_CACHE_S", 0.0)
    first = {e.name: e for e in discover(**_ctx(place), run_conda=False, cache=place["cache"], deadline=1.0)}
    assert "did not answer within 1 s" in first["slow"].error and starts(mark) == 1
    discover(**_ctx(place), run_conda=False, cache=place["cache"], deadline=1.0)
    assert starts(mark) == 1
    discover(**_ctx(place), run_conda=False, cache=False, deadline=1.0)           # Look again: no cache
    assert starts(mark) == 2


# ------------------------------------------------------------------------- item 12: answers of the wrong shape

WRONG_ANSWERS = ["null", "5", '"3.11.2"', "[1, 2]", "true", "{}", '{"version": 5}', '{"version": null}',
                 '{"version": "3.11.2", "prefix": ["/x"]}', '{"version": "3.11.2", "prefix": "/x", "site": 5}',
                 '{"version": "3.11.2", "prefix": "/x", "site": [1]}',
                 '{"version": "3.11.2", "prefix": "/x", "site": [], "usersite": {}}',
                 '{"version": "3.11.2", "prefix": "/x", "site": [], "implementation": 7}',
                 '{"version": "3.11.2", "prefix": 5, "site": []}', '{"version": "three", "prefix": "/x"}']


def _answering(place, text: str, name: str = "liar") -> Path:
    return fake_env(place["home"] / ".virtualenvs" / name, f"printf '%s' '{text}'\n", conda=False)


@pytest.mark.parametrize("answer", WRONG_ANSWERS)
def test_an_answer_of_the_wrong_shape_is_one_line_everywhere_and_stays_one(place, answer):
    python = _answering(place, answer)
    for _ in range(2):                                      # the second time from the cache
        with pytest.raises(EnvError, match="Python"):
            resolve(str(python), **_ctx(place), cache=place["cache"])
        found = {e.name: e for e in discover(**_ctx(place), run_conda=False, cache=place["cache"])}
        assert not found["liar"].usable and "\n" not in found["liar"].error
        env, _how = training_environment(**_ctx(place), cache=place["cache"])
        assert env is None or env.name != "liar"


@pytest.mark.slow
@pytest.mark.alongside
def test_wrong_answers_through_the_cli(place):
    python = _answering(place, '{"version": "3.11.2", "prefix": "/x", "site": 5}')
    one_line_error(cli("doctor", "--fast", "--python", str(python), home=place["home"], cwd=place["project"],
                       cache=place["cache"]))
    one_line_error(cli("doctor", "--fast", home=place["home"], cwd=place["project"], cache=place["cache"],
                       extra={"CPUDOCTOR_PYTHON": str(python)}))
    plain = cli("envs", "--no-conda", home=place["home"], cwd=place["project"], cache=place["cache"])
    assert plain.returncode == 0 and "'site' is not a list" in plain.stdout, plain.stderr[-2000:]


# ------------------------------------------------------------------------- item 13: floods and huge files


@pytest.mark.slow
@pytest.mark.alongside
@pytest.mark.parametrize("where", ["interpreter", "conda"])
def test_a_flood_is_cut_off_not_buffered(place, where):
    flood = fake_python(place["base"] / "bin" / "flood", "exec yes\n")
    extra = {}
    if where == "interpreter":
        fake_env(place["home"] / ".virtualenvs" / "flood", "exec yes\n", conda=False)
    else:
        extra["CONDA_EXE"] = str(flood)
    out = cli("envs", home=place["home"], cwd=place["project"], cache=place["cache"], extra=extra,
              memory=2 << 30)
    assert out.returncode == 0 and "Traceback" not in out.stderr, out.stderr[-2000:]
    if where == "interpreter":
        assert "printed more than" in out.stdout


@pytest.mark.slow
@pytest.mark.alongside
def test_an_8_gb_sparse_metadata_is_not_read(place):
    venv = make_venv(place["project"] / ".venv")
    site = next(venv.glob("lib/python3*/site-packages"))
    info = site / "torch-2.4.0.dist-info"
    info.mkdir()
    with open(info / "METADATA", "wb") as fh:
        fh.truncate(8 << 30)
    out = cli("report", "--fast", "--format", "json", home=place["home"], cwd=place["project"],
              cache=place["cache"], memory=2 << 30)
    assert out.returncode == 0 and "Traceback" not in out.stderr, out.stderr[-2000:]
    assert json.loads(out.stdout)["software"]["python"]["prefix"].endswith("project/.venv")


# ------------------------------------------------------------------------- item 8: a FIFO named METADATA


@pytest.mark.slow
@pytest.mark.alongside
def test_a_fifo_named_metadata_hangs_nothing(place):
    venv = make_venv(place["home"] / ".virtualenvs" / "fifo", numpy="1.26.4")
    site = next(venv.glob("lib/python3*/site-packages"))
    (site / "torch-2.4.0.dist-info").mkdir()
    os.mkfifo(site / "torch-2.4.0.dist-info" / "METADATA")
    os.mkfifo(site / "numpy-1.26.4.dist-info" / "RECORD")
    for args in (("doctor", "--fast"), ("envs", "--no-conda"), ("report", "--fast", "--python", str(venv))):
        out = cli(*args, home=place["home"], cwd=place["project"], cache=place["cache"])
        assert out.returncode in (0, 1) and "Traceback" not in out.stderr, (args, out.stderr[-2000:])


# ------------------------------------------------------------------------- item 14: what cannot be read


def test_an_over_long_or_binary_line_in_environments_txt_is_skipped_with_a_note(place):
    real = make_venv(place["base"] / "real", conda=True, numpy="1.26.4", torch="2.5.1+cpu")
    (place["home"] / ".conda").mkdir()
    (place["home"] / ".conda" / "environments.txt").write_bytes(
        b"/" + b"a" * 100_000 + b"\n\x00\xff\xfe binary\x1b[2J\n" + str(real).encode() + b"\n")
    found = discover(**_ctx(place), run_conda=False, cache=False)
    assert any(e.prefix == str(real) and e.usable for e in found)
    skipped = [e for e in found if e.error and "environments.txt is not a folder's name" in e.error]
    assert len(skipped) == 2 and all(len(e.name) < 200 for e in skipped)
    env, _how = training_environment(**_ctx(place), cache=False)
    assert env is not None and env.prefix == str(real)


@pytest.mark.slow
@pytest.mark.alongside
def test_bad_environments_txt_lines_through_the_cli(place):
    (place["home"] / ".conda").mkdir()
    (place["home"] / ".conda" / "environments.txt").write_bytes(b"/" + b"x" * 100_000 + b"\n\xff\x00\n")
    doctor = cli("doctor", "--fast", home=place["home"], cwd=place["project"], cache=place["cache"])
    assert doctor.returncode in (0, 1) and not doctor.stderr.strip(), doctor.stderr[-2000:]   # no abort, no error
    envs = cli("envs", "--no-conda", home=place["home"], cwd=place["project"], cache=place["cache"])
    assert envs.returncode == 0 and not envs.stderr.strip(), envs.stderr[-2000:]
    assert envs.stdout.count("is not a folder's name") == 2


def test_an_unreadable_home_is_skipped(place, monkeypatch):
    """``sudo -u other`` keeping HOME: every look inside it is EACCES (simulated: this suite may run as root)."""
    make_venv(place["home"] / ".virtualenvs" / "mine")
    home = str(place["home"])
    real_stat, real_scandir, real_listdir = os.stat, os.scandir, os.listdir

    def denied(real):
        def call(path, *args, **kwargs):
            text = os.fspath(path) if not isinstance(path, int) else ""
            if isinstance(text, str) and text.startswith(home + os.sep):
                raise PermissionError(13, "Permission denied", text)
            return real(path, *args, **kwargs)
        return call

    monkeypatch.setattr(os, "stat", denied(real_stat))
    monkeypatch.setattr(os, "scandir", denied(real_scandir))
    monkeypatch.setattr(os, "listdir", denied(real_listdir))
    found = discover(**_ctx(place), run_conda=False, cache=False)
    assert all(not e.prefix.startswith(home) for e in found)
    training_environment(**_ctx(place), cache=False)


@pytest.mark.parametrize("name", ["x" * 100_000, "/" + "x" * 100_000, "/tmp/nul\x00byte"])
def test_a_bad_python_name_is_an_env_error(place, name):
    with pytest.raises(EnvError) as info:
        resolve(name, **_ctx(place), cache=False)
    assert len(str(info.value)) < 1000


def test_an_interpreter_that_cannot_be_read_is_an_env_error(place, monkeypatch):
    """``--python /proc/1/exe`` as a user: stat says EACCES (simulated: root may read it)."""
    real_stat = os.stat

    def denied(path, *args, **kwargs):
        if os.fspath(path) == "/proc/1/exe":
            raise PermissionError(13, "Permission denied", "/proc/1/exe")
        return real_stat(path, *args, **kwargs)

    monkeypatch.setattr(os, "stat", denied)
    with pytest.raises(EnvError, match="permission denied"):
        resolve("/proc/1/exe", **_ctx(place), cache=False)


@pytest.mark.slow
@pytest.mark.alongside
def test_a_100000_character_python_is_exit_2(place):
    one_line_error(cli("doctor", "--fast", "--python", "y" * 100_000, home=place["home"], cwd=place["project"],
                       cache=place["cache"]))


# ------------------------------------------------------------------------- item 17: a newline in a folder's name


def test_a_newline_in_a_venv_name_adds_no_row(place):
    from cpudoctor.render.envs import render_text

    make_venv(place["home"] / ".virtualenvs" / "evil\nfake-row  venv  3.99  9.9")
    found = discover(**_ctx(place), run_conda=False, cache=False)
    text = render_text(found)
    table = text.split("\n\n")[1].splitlines()
    assert len(table) == len(found) + 1                               # the header, then one line per environment
    assert not any(line.startswith("fake-row") for line in text.splitlines())


# ------------------------------------------------------------------------- issue 26: the app's own environment


def _own_has_torch() -> bool:
    own = describe(Path(sys.executable), "CPU Doctor", cache=False)
    return own.own and bool(own.torch)


def test_own_environment_is_not_the_default_while_another_with_torch_is_usable(place):
    venv = make_venv(place["home"] / ".virtualenvs" / "train", torch="2.5.1+cpu")
    env, how = training_environment(**_ctx(place), cache=False)
    assert env is not None and env.prefix == str(venv) and not env.own and how == "likely"
    listed = discover(**_ctx(place), run_conda=False, cache=False)
    own = [e for e in listed if e.own]
    assert listed[0].prefix == str(venv) and own and listed.index(own[0]) > 0


def test_own_environment_with_torch_wins_over_one_without_and_says_so(place):
    """Issue 40 item 1: started from a venv with torch (``make run``'s), on a fresh home the picker chose the
    system python3 without torch; an environment with torch now wins, CPU Doctor's own included, and the
    report line says why."""
    if not _own_has_torch():
        pytest.skip("CPU Doctor's own environment has no torch here")
    plain = make_venv(place["home"] / ".virtualenvs" / "plain", numpy="2.1.0")          # no torch
    for fast in (False, True):
        env, how = training_environment(**_ctx(place), cache=False, fast=fast)
        assert env is not None and env.own and env.torch and how == "own-torch", (fast, env, how)
    listed = discover(**_ctx(place), run_conda=False, cache=False)
    assert listed[0].own and [e.prefix for e in listed].index(str(plain)) > 0
    from cpudoctor.render.env_choice import python_info
    from cpudoctor.render.software import environment_words

    assert environment_words(python_info(env, how)).endswith(
        ": CPU Doctor's own, the only environment found with PyTorch")


def test_an_activated_environment_without_torch_still_comes_first(place):
    plain = make_venv(place["home"] / ".virtualenvs" / "plain", numpy="2.1.0")
    make_venv(place["home"] / ".virtualenvs" / "train", torch="2.5.1+cpu")
    env, how = training_environment(**_ctx(place, VIRTUAL_ENV=str(plain)), cache=False)
    assert env is not None and env.prefix == str(plain) and how == "active"


def test_a_working_folder_venv_without_torch_loses_to_one_with_torch(place):
    make_venv(place["project"] / ".venv", numpy="2.1.0")
    train = make_venv(place["home"] / ".virtualenvs" / "train", torch="2.5.1+cpu")
    env, how = training_environment(**_ctx(place), cache=False)
    assert env is not None and env.prefix == str(train) and how == "likely"


def test_own_environment_without_torch_loses_to_another_without(place, monkeypatch):
    own = make_venv(place["base"] / "own")                                             # CPU Doctor's, no torch
    monkeypatch.setattr(envs_find, "own_prefix", lambda: str(own))
    plain = make_venv(place["home"] / ".virtualenvs" / "plain", numpy="2.1.0")
    env, how = training_environment(**_ctx(place), cache=False)
    assert env is not None and env.prefix == str(plain) and not env.own and how == "likely"


def test_only_own_is_said_when_nothing_else_is_there(place):
    env, how = training_environment(**_ctx(place), cache=False)
    assert how == "only-own" and (env is None or env.own)


def test_addsitedir_pth_files_are_followed_without_running_them(place):
    venv = make_venv(place["base"] / "shared-user")
    shared = place["base"] / "shared" / "pkgs"
    make_venv(place["base"] / "donor", torch="2.5.1+cpu", numpy="2.1.0")
    donor_site = next((place["base"] / "donor").glob("lib/python3*/site-packages"))
    shared.parent.mkdir()
    donor_site.rename(shared)
    site = next(venv.glob("lib/python3*/site-packages"))
    canary = place["base"] / "ran"
    (site / "shared.pth").write_text(f"import site; site.addsitedir({str(shared)!r})\n"
                                     f"import os; open({str(canary)!r}, 'w')\n")
    env = describe(venv, cache=False)
    assert env.torch == "2.5.1+cpu" and env.numpy == "2.1.0" and not canary.exists()


@pytest.mark.slow
@pytest.mark.alongside
def test_addsitedir_pth_through_the_cli(place):
    venv = make_venv(place["base"] / "shared-user")
    shared = place["base"] / "shared"
    make_venv(place["base"] / "donor", torch="2.5.1+cpu")
    next((place["base"] / "donor").glob("lib/python3*/site-packages")).rename(shared)
    site = next(venv.glob("lib/python3*/site-packages"))
    (site / "shared.pth").write_text(f"import site; site.addsitedir('{shared}')\n")
    out = cli("report", "--fast", "--format", "json", "--python", str(venv / "bin" / "python"), home=place["home"],
              cwd=place["project"], cache=place["cache"])
    assert out.returncode == 0, out.stderr[-2000:]
    packages = {p["name"]: p["version"] for p in json.loads(out.stdout)["software"]["packages"]}
    assert packages.get("torch") == "2.5.1+cpu"


def test_python_m_cpudoctor_beside_a_clone_named_cpudoctor(tmp_path):
    (tmp_path / "cpudoctor").symlink_to(REPO)
    out = subprocess.run([sys.executable, "-m", "cpudoctor", "--version"], capture_output=True, text=True,
                         cwd=tmp_path, timeout=HANG_S)
    assert out.returncode == 0 and out.stdout.startswith("cpudoctor "), out.stderr[-2000:]


def test_make_run_installs_only_what_the_app_needs(tmp_path):
    def planned(target: str) -> str:
        out = subprocess.run(["make", "-n", target, f"VENV={tmp_path / 'venv'}"], capture_output=True, text=True,
                             cwd=REPO, timeout=60)
        assert out.returncode == 0, out.stderr
        return out.stdout

    run = planned("run")
    assert "pip install" in run and "-e ." in run
    assert "[test]" not in run and "opencv" not in run and "hypothesis" not in run
    assert "[test]" in planned("test")


def test_a_broken_working_folder_venv_does_not_decide(place):
    """The working folder's .venv decides only when it answers; a broken one falls back to the others."""
    fake_env(place["project"] / ".venv", "echo 'not a python'\n", conda=False)
    (place["project"] / ".venv" / "pyvenv.cfg").write_text("version = 3.11.7\n")        # it looks fine from files
    torch = place["project"] / ".venv" / "lib" / "python3.11" / "site-packages" / "torch"
    torch.mkdir(parents=True)
    (torch / "version.py").write_text("__version__ = '2.5.1+cpu'\n")                  # ... torch included
    plain = make_venv(place["home"] / ".virtualenvs" / "plain", numpy="2.1.0", torch="2.5.1+cpu")
    env, how = training_environment(**_ctx(place), cache=place["cache"])
    assert env is not None and env.prefix == str(plain) and how == "likely"
    active, how = training_environment(**_ctx(place, VIRTUAL_ENV=str(plain)), cache=place["cache"])
    assert active.prefix == str(plain) and how == "active"
