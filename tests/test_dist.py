"""The standalone app (``make dist``): its build script, and one real build from a clean checkout.

The real build takes a few minutes, so it runs only when asked:
``make dist-check`` (which .ci/run calls after ``make test``) sets
CPUDOCTOR_DIST_CHECK=1. It clones the committed HEAD into a temporary folder,
builds it with packaging/build_dist.py, and then uses the built app the way a
person would: the window offscreen, a report, the environments of a fake home,
the menu entry, and the child processes the app starts of itself.
"""

from __future__ import annotations

import configparser
import importlib.util
import json
import os
import platform
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import schema_tools
from cpudoctor.resources import load_json
from test_envs import make_venv

REPO = Path(__file__).resolve().parents[1]
BUDGET_MIB = 300


def _build_dist():
    spec = importlib.util.spec_from_file_location("build_dist", REPO / "packaging" / "build_dist.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


build_dist = _build_dist()


# ---------------------------------------------------------------- the build script, without building


def test_build_requirements_are_pyprojects_without_torch_plus_the_pinned_extra():
    reqs = build_dist.requirements(REPO / "pyproject.toml")
    names = {build_dist._name(r) for r in reqs}
    assert "torch" not in names
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert {build_dist._name(r) for r in project["dependencies"]} - {"torch"} <= names
    pins = project["optional-dependencies"]["dist"]
    assert {build_dist._name(p) for p in pins} == {"pyinstaller", "pyinstaller-hooks-contrib"}
    assert all("==" in p for p in pins) and set(pins) <= set(reqs)


def _fake_app(tmp_path: Path) -> Path:
    app = tmp_path / "cpudoctor"
    for package, folder in build_dist.SCRIPT_PACKAGES.items():     # the child scripts and the lab's jobs
        copy = app / "_internal" / Path(*package.split("."))
        copy.mkdir(parents=True)
        for src in (REPO / folder).glob("*.py"):
            shutil.copy2(src, copy / src.name)
    (app / "cpudoctor").write_text("")
    return app


def test_a_complete_bundle_has_no_problems(tmp_path):
    assert build_dist.problems(_fake_app(tmp_path), REPO) == []


def test_torch_inside_the_bundle_is_caught(tmp_path):
    app = _fake_app(tmp_path)
    (app / "_internal" / "torch" / "lib").mkdir(parents=True)
    (app / "_internal" / "torch" / "lib" / "libtorch_cpu.so").write_bytes(b"")
    (app / "_internal" / "libc10.so").write_bytes(b"")
    found = build_dist.problems(app, REPO)
    assert any("libtorch_cpu.so" in p for p in found) and any("libc10.so" in p for p in found)
    assert any("a torch package is inside" in p for p in found)


def test_a_missing_or_stale_child_script_is_caught(tmp_path):
    app = _fake_app(tmp_path)
    scripts = app / "_internal" / "cpudoctor" / "probes" / "child" / "scripts"
    (scripts / "torch_facts.py").unlink()
    (scripts / "blas_facts.py").write_text("# old\n")
    found = build_dist.problems(app, REPO)
    assert any("torch_facts.py is not in the bundle" in p for p in found)
    assert any("blas_facts.py differs" in p for p in found)


def test_the_shipped_desktop_entry_starts_the_app(tmp_path):
    text = build_dist.desktop_entry(REPO)
    entry = configparser.ConfigParser(interpolation=None)
    entry.optionxform = str
    entry.read_string(text)
    assert entry["Desktop Entry"]["Exec"] == "cpudoctor %f"
    assert entry["Desktop Entry"]["TryExec"] == "cpudoctor"
    if shutil.which("desktop-file-validate"):
        (tmp_path / "cpudoctor.desktop").write_text(text)
        out = subprocess.run(["desktop-file-validate", str(tmp_path / "cpudoctor.desktop")],
                             capture_output=True, text=True)
        assert out.returncode == 0, out.stdout + out.stderr


# ---------------------------------------------------------------- a real build from a clean checkout


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    if os.environ.get("CPUDOCTOR_DIST_CHECK") != "1":
        pytest.skip("builds the standalone app (minutes): run `make dist-check`")
    if not sys.platform.startswith("linux"):
        pytest.skip("the standalone build is made and tested on Linux only")
    base = tmp_path_factory.mktemp("dist")
    head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True,
                          check=True).stdout.strip()
    source = base / "clean-checkout"
    subprocess.run(["git", "clone", "--quiet", "--no-checkout", str(REPO), str(source)], check=True, timeout=300)
    subprocess.run(["git", "-C", str(source), "checkout", "--quiet", head], check=True, timeout=300)
    # The build environment (PySide6, PyInstaller, ... no torch) is shared with this checkout's
    # `make dist`; what is built is the clean checkout (installed into it afresh, not editable).
    venv_dir = Path(os.environ.get("CPUDOCTOR_DIST_VENV", REPO / "build" / "dist-venv"))
    out = subprocess.run([sys.executable, str(source / "packaging" / "build_dist.py"), "--source", str(source),
                          "--venv", str(venv_dir), "--dist", str(base / "dist")], timeout=1500)
    assert out.returncode == 0, "make dist failed on a clean checkout; see the output above"
    info = json.loads((base / "dist" / "build-info.json").read_text())
    return {"base": base, "source": source, "app": Path(info["folder"]) / "cpudoctor", "info": info}


def _app(built, *args: str, env: dict | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    environ = {**os.environ, "QT_QPA_PLATFORM": "offscreen", **(env or {})}
    return subprocess.run([str(built["app"]), *args], capture_output=True, text=True, timeout=timeout,
                          env=environ, cwd=built["base"])


@pytest.mark.slow
def test_built_app_has_no_torch_and_fits_the_budget(built):
    folder = built["app"].parent
    torch_files = [p for pat in ("libtorch*", "libc10*") for p in folder.rglob(pat)]
    assert torch_files == []
    assert not (folder / "_internal" / "torch").exists()
    assert build_dist.problems(folder, built["source"]) == []
    info = built["info"]
    assert info["folder_bytes"] < BUDGET_MIB * 1024 * 1024
    assert info["target"] == f"linux-{platform.machine().lower()}"
    assert Path(info["archive"]).name == f"cpudoctor-{info['version']}-{info['target']}.tar.gz"
    assert 0 < info["archive_bytes"] < info["folder_bytes"]
    for name in ("cpudoctor.desktop", "cpudoctor.svg", "README.txt"):
        assert (folder / name).is_file()


@pytest.mark.slow
def test_built_app_knows_its_version(built):
    out = _app(built, "--version")
    version = tomllib.loads((built["source"] / "pyproject.toml").read_text())["project"]["version"]
    assert out.returncode == 0 and out.stdout.strip() == f"cpudoctor {version}"


@pytest.mark.slow
def test_built_app_opens_the_window_offscreen(built):
    shot = built["base"] / "window.png"
    out = _app(built, "--screenshot", str(shot), "--screenshot-delay", "1500", "--no-children",
               "--size", "1000x700", "--page", "Training")
    assert out.returncode == 0, out.stderr
    from PySide6.QtGui import QImage

    image = QImage(str(shot))
    assert not image.isNull() and (image.width(), image.height()) == (1000, 700)


@pytest.mark.slow
def test_built_app_writes_a_report_that_validates(built):
    target = built["base"] / "fast.json"
    out = _app(built, "report", "--fast", "-o", str(target))
    assert out.returncode == 0, out.stderr
    schema_tools.validate(json.loads(target.read_text()), load_json("report.schema.json"))


@pytest.mark.slow
def test_built_app_runs_its_own_children(built):
    """The full report runs the CPUID check (--run-module) and import checks (--run-script) of the app."""
    target = built["base"] / "full.json"
    out = _app(built, "report", "-o", str(target), env={"XDG_CACHE_HOME": str(built["base"] / "cache")})
    assert out.returncode == 0, out.stderr
    data = json.loads(target.read_text())
    schema_tools.validate(data, load_json("report.schema.json"))
    text = json.dumps(data)
    for broken in ("invalid choice", "no module", "unrecognized arguments", "--run-"):
        assert broken not in text
    assert not [n for n in data["cpu"].get("notes", []) if "CPUID cross-check skipped" in n and "exit" in n]


@pytest.mark.slow
def test_child_scripts_in_the_bundle_run_in_a_users_python_and_in_the_app(built, tmp_path):
    script = next(built["app"].parent.glob("_internal/cpudoctor/probes/child/scripts/import_check.py"))
    user = make_venv(tmp_path / "user-venv")
    by_user = subprocess.run([str(user / "bin" / "python"), "-I", str(script), "json"], capture_output=True,
                             text=True, timeout=60)
    by_app = _app(built, "--run-script", str(script), "json")
    for out in (by_user, by_app):
        assert out.returncode == 0, out.stderr
        assert json.loads(out.stdout.splitlines()[-1])


@pytest.mark.slow
def test_built_app_lists_the_environments_of_a_home(built, tmp_path):
    home = tmp_path / "home"
    make_venv(home / "miniconda3" / "envs" / "amd_dl", conda=True, torch="1.13.1+cpu", numpy="1.23.5")
    (home / ".conda").mkdir(parents=True)
    (home / ".conda" / "environments.txt").write_text(f"{home / 'miniconda3' / 'envs' / 'amd_dl'}\n")
    make_venv(home / ".virtualenvs" / "plain", numpy="2.1.0")
    env = {"HOME": str(home), "PATH": "/nonexistent", "XDG_CACHE_HOME": str(tmp_path / "cache")}
    out = _app(built, "envs", "--format", "json", env=env)
    assert out.returncode == 0, out.stderr
    found = {e["name"]: e for e in json.loads(out.stdout)["environments"]}
    assert found["amd_dl"]["torch"] == "1.13.1+cpu" and found["amd_dl"]["kind"] == "conda"
    assert found["plain"]["numpy"] == "2.1.0"
    assert not any(e["own"] for e in found.values())           # the app's bundle is no environment to pick
    assert "/amd_dl/bin/python" in json.loads(out.stdout)["default"]       # the one with torch comes first


@pytest.mark.slow
def test_built_app_installs_its_menu_entry(built, tmp_path):
    env = {"XDG_DATA_HOME": str(tmp_path / "share"), "HOME": str(tmp_path)}
    out = _app(built, "install-desktop", env=env)
    assert out.returncode == 0, out.stderr
    entry = tmp_path / "share" / "applications" / "cpudoctor.desktop"
    parsed = configparser.ConfigParser(interpolation=None)
    parsed.optionxform = str
    parsed.read(entry)
    assert parsed["Desktop Entry"]["Exec"] == f"{built['app'].resolve()} %f"     # a report opened from the file manager reaches it
    icon = Path(parsed["Desktop Entry"]["Icon"])
    assert icon.read_bytes().lstrip().startswith((b"<svg", b"<?xml"))
    out = _app(built, "install-desktop", "--uninstall", env=env)
    assert out.returncode == 0 and not entry.exists()


@pytest.mark.slow
def test_built_app_runs_captures_trace_and_gives_children_the_users_library_path(built, tmp_path):
    out = _app(built, "--run-module", "cpudoctor.capture", "--trace")
    assert out.returncode == 0, out.stderr
    assert "/proc/cpuinfo" in json.loads(out.stdout)["paths"]
    probe = tmp_path / "library_path.py"
    probe.write_text("import os\nprint(os.environ.get('LD_LIBRARY_PATH'), os.environ.get('LD_LIBRARY_PATH_ORIG'))\n")
    mine = _app(built, "--run-script", str(probe), env={"LD_LIBRARY_PATH": "/opt/user/lib"})
    assert mine.stdout.split() == ["/opt/user/lib", "None"]
    environ = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
    none = subprocess.run([str(built["app"]), "--run-script", str(probe)], capture_output=True, text=True,
                          timeout=60, env=environ)
    assert none.stdout.split() == ["None", "None"]


def _spec_unused() -> set[str]:
    """The modules packaging/cpudoctor.spec leaves out as unused (torch and friends are left out by design)."""
    import ast

    tree = ast.parse((REPO / "packaging" / "cpudoctor.spec").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "UNUSED" for t in node.targets):
            return {e.value for e in node.value.elts if isinstance(e, ast.Constant)}
    raise AssertionError("the spec's UNUSED list was not found")


def _imported_modules(folder: Path, skip: set[Path]) -> set[str]:
    import ast

    found: set[str] = set()
    for path in folder.rglob("*.py"):
        if any(path.is_relative_to(s) for s in skip):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                found.add(node.module)
            elif isinstance(node, ast.Import):
                found |= {alias.name for alias in node.names}
    return found


def test_the_bundle_leaves_out_nothing_the_app_imports():
    """A module the window imports but the spec calls unused breaks only the built app (QtSvgWidgets did).

    The child scripts are skipped: another interpreter (the user's) runs them, with its own packages.
    """
    unused = _spec_unused()
    scripts = {REPO / "probes" / "child" / "scripts", REPO / "lab" / "jobs"}
    imported: set[str] = set()
    for folder in ("gui", "cpudoctor", "probes", "advisor", "lab"):
        if (REPO / folder).is_dir():
            imported |= _imported_modules(REPO / folder, scripts)
    clash = {m for m in imported if any(m == e or m.startswith(e + ".") for e in unused)}
    assert not clash, f"packaging/cpudoctor.spec leaves out modules the app imports: {sorted(clash)}"
