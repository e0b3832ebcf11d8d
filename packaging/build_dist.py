"""Build the standalone app: ``make dist`` runs this (``python packaging/build_dist.py``).

Steps, each a function below:

1. a build environment of its own (``build/dist-venv``) with CPU Doctor's
   dependencies *without torch* plus the pinned ``dist`` extra (PyInstaller and
   its community hooks), all read from pyproject.toml so there is one list;
2. CPU Doctor installed into it from this checkout as a wheel would install it
   (not editable: the bundle must hold exactly what the package ships);
3. PyInstaller with ``packaging/cpudoctor.spec`` -> ``dist/cpudoctor/``;
4. the ``.desktop`` file, the icon and a short README.txt beside the executable;
5. checks: no ``libtorch*``/``libc10*`` and no ``torch`` package inside, every
   standalone child script present as a real ``.py`` file;
6. the archive ``dist/cpudoctor-VERSION-linux-x86_64.tar.gz`` (``.zip`` on
   Windows and macOS) and ``dist/build-info.json`` with the measured sizes.

gzip, not xz or zstd: for the ~200 MB folder on the 2-core build machine,
xz -6 took 5 min for a 58 MB archive where gzip took under a minute for about
80 MB (zstd -19: 2.5 min, 63 MB), and a .tar.gz opens with every tar and file
manager, where .tar.zst needs zstd installed. A third more download was
judged better than builds that would not fit CI's time budget.
"""

from __future__ import annotations

import argparse
import fnmatch
import hashlib
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tarfile
import time
import venv
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:             # Python 3.10: pip vendors the same parser
    from pip._vendor import tomli as tomllib  # type: ignore[no-redef]

ROOT = Path(__file__).resolve().parents[1]
APP = "cpudoctor"
# Never in the bundle: PyTorch's libraries (torch runs in the user's environment only).
TORCH_FILES = ("libtorch*", "libc10*", "torch_cpu*", "torch_python*", "c10.dll", "torch*.dll")
TORCH_PACKAGES = ("torch", "torchvision", "torchaudio", "triton", "functorch")
# Packages run *by path* by another interpreter, so they must be real .py files in the bundle.
SCRIPT_PACKAGES = {"cpudoctor.probes.child.scripts": "probes/child/scripts", "cpudoctor.lab.jobs": "lab/jobs"}
STAMP = ".cpudoctor-dist-requirements"


class BuildError(RuntimeError):
    """The build cannot go on; the message says what to do."""


def _name(requirement: str) -> str:
    match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
    return re.sub(r"[-_.]+", "-", match.group(1)).lower() if match else ""


def requirements(pyproject: Path) -> list[str]:
    """CPU Doctor's dependencies without torch, plus the ``dist`` extra (markers kept for pip)."""
    project = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]
    extra = project.get("optional-dependencies", {}).get("dist")
    if not extra:
        raise BuildError(f"{pyproject} has no [project.optional-dependencies] dist = [...] (PyInstaller pins)")
    base = [r for r in project["dependencies"] if _name(r) not in TORCH_PACKAGES]
    # setuptools/wheel: to install CPU Doctor without a build-isolation download each time.
    return base + list(extra) + ["setuptools>=68", "wheel"]


def venv_python(folder: Path) -> Path:
    return folder / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def ensure_venv(folder: Path, reqs: list[str]) -> Path:
    """The build environment, created or brought up to date (skipped when the requirements are unchanged)."""
    py = venv_python(folder)
    if not py.exists():
        print(f"creating the build environment {folder}", flush=True)
        venv.EnvBuilder(with_pip=True, clear=True).create(folder)
    stamp = folder / STAMP
    wanted = hashlib.sha256("\n".join(reqs).encode()).hexdigest()
    if stamp.exists() and stamp.read_text() == wanted:
        return py
    print("installing the build requirements (no torch):\n  " + "\n  ".join(reqs), flush=True)
    _run([py, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *reqs])
    stamp.write_text(wanted)
    return py


def install_app(py: Path, source: Path) -> None:
    """CPU Doctor from ``source`` into the build environment, as a wheel install (not editable)."""
    _run([py, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-deps",
          "--no-build-isolation", "--force-reinstall", str(source)])


def run_pyinstaller(py: Path, source: Path, dist: Path, work: Path) -> Path:
    # Not from the checkout's root: there `import cpudoctor` would find the bare cpudoctor/ folder
    # (python -m puts the working folder first on sys.path) instead of the installed package.
    work.mkdir(parents=True, exist_ok=True)
    _run([py, "-m", "PyInstaller", str(source / "packaging" / "cpudoctor.spec"), "--noconfirm",
          "--log-level", "WARN", "--distpath", str(dist), "--workpath", str(work)], cwd=work)
    app_dir = dist / APP
    if not app_dir.is_dir():
        raise BuildError(f"PyInstaller finished but {app_dir} is missing; see its output above")
    return app_dir


def desktop_entry(source: Path) -> str:
    """resources/cpudoctor.desktop, started as the app's one executable (it opens a report given as %f)."""
    text = (source / "resources" / "cpudoctor.desktop").read_text(encoding="utf-8")
    text = re.sub(r"(?m)^Exec=.*$", "Exec=cpudoctor %f", text)
    if "TryExec=" not in text:
        text = text.replace("Exec=cpudoctor %f", "TryExec=cpudoctor\nExec=cpudoctor %f")
    return text


README = """CPU Doctor {version} ({target})

Is your CPU set up well for deep learning? Start the window by double-clicking
`cpudoctor` (or run ./cpudoctor), or use the command line:

    ./cpudoctor report          ./cpudoctor doctor          ./cpudoctor envs

Add CPU Doctor to the application menu (writes one .desktop entry and the icon
under ~/.local/share; `--uninstall` removes them):

    ./cpudoctor install-desktop

Packagers: cpudoctor.desktop and cpudoctor.svg here are the menu entry and
icon for a system-wide install (the entry expects `cpudoctor` on PATH, e.g. a
link /usr/bin/cpudoctor -> this folder's executable).

PyTorch is not inside: training, benchmarks and the PyTorch facts run in a
Python environment of yours (`./cpudoctor envs` lists them). With none, the
Training page gives the install command for this CPU.
"""


def add_desktop_files(app_dir: Path, source: Path, version: str, target: str) -> None:
    if sys.platform.startswith("linux"):
        (app_dir / f"{APP}.desktop").write_text(desktop_entry(source), encoding="utf-8")
        shutil.copy2(source / "resources" / f"{APP}.svg", app_dir / f"{APP}.svg")
    (app_dir / "README.txt").write_text(README.format(version=version, target=target), encoding="utf-8")


def problems(app_dir: Path, source: Path) -> list[str]:
    """What is wrong with the built folder: torch inside, a child script missing."""
    found = []
    for path in app_dir.rglob("*"):
        if any(fnmatch.fnmatch(path.name, pat) for pat in TORCH_FILES):
            found.append(f"a PyTorch library is inside: {path.relative_to(app_dir)}")
        elif path.is_dir() and path.name in TORCH_PACKAGES and path.parent.name in ("_internal", app_dir.name):
            found.append(f"a {path.name} package is inside: {path.relative_to(app_dir)}")
    bundle = _bundle_dir(app_dir)
    for package, folder in SCRIPT_PACKAGES.items():
        for script in sorted((source / folder).glob("*.py")) if (source / folder).is_dir() else []:
            copy = bundle.joinpath(*package.split("."), script.name)
            if not copy.is_file():
                found.append(f"child script {folder}/{script.name} is not in the bundle as a file ({copy})")
            elif copy.read_bytes() != script.read_bytes():
                found.append(f"child script {copy} differs from {folder}/{script.name}")
    return found


def _bundle_dir(app_dir: Path) -> Path:
    """Where PyInstaller put the data files (``_internal`` since PyInstaller 6)."""
    internal = app_dir / "_internal"
    return internal if internal.is_dir() else app_dir


def folder_size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


def make_archive(app_dir: Path, out_stem: Path) -> Path:
    """``.tar.gz`` on Linux (permissions and links kept), ``.zip`` elsewhere."""
    if sys.platform.startswith("linux"):
        out = out_stem.with_name(out_stem.name + ".tar.gz")
        tmp = out.with_name(out.name + ".part")
        if shutil.which("tar") and shutil.which("gzip"):
            _run(["tar", "-C", str(app_dir.parent), "-czf", str(tmp), app_dir.name])
        else:
            with tarfile.open(tmp, "w:gz") as tar:
                tar.add(app_dir, arcname=app_dir.name)
        tmp.replace(out)
        return out
    return Path(shutil.make_archive(str(out_stem), "zip", root_dir=app_dir.parent, base_dir=app_dir.name))


def target_name() -> str:
    system = {"win32": "windows", "darwin": "macos"}.get(sys.platform, sys.platform)
    machine = platform.machine().lower().replace("amd64", "x86_64")
    return f"{system}-{machine}"


def _run(argv: list, cwd: Path | None = None) -> None:
    print("$ " + " ".join(str(a) for a in argv), flush=True)
    result = subprocess.run([str(a) for a in argv], cwd=cwd)
    if result.returncode != 0:
        raise BuildError(f"{Path(str(argv[0])).name} {argv[1] if len(argv) > 1 else ''} failed "
                         f"(exit code {result.returncode}); see its output above")


def build(source: Path, venv_dir: Path, dist: Path, work: Path, archive: bool = True) -> dict:
    started = time.monotonic()
    version = tomllib.loads((source / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]
    py = ensure_venv(venv_dir, requirements(source / "pyproject.toml"))
    install_app(py, source)
    app_dir = run_pyinstaller(py, source, dist, work)
    target = target_name()
    add_desktop_files(app_dir, source, version, target)
    bad = problems(app_dir, source)
    if bad:
        raise BuildError("the built app is not right:\n  " + "\n  ".join(bad))
    info = {"version": version, "target": target, "folder": str(app_dir), "folder_bytes": folder_size(app_dir),
            "python": platform.python_version()}
    if archive:
        out = make_archive(app_dir, dist / f"{APP}-{version}-{target}")
        info.update(archive=str(out), archive_bytes=out.stat().st_size)
    info["build_seconds"] = round(time.monotonic() - started, 1)
    (dist / "build-info.json").write_text(json.dumps(info, indent=2) + "\n", encoding="utf-8")
    return info


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="Build the standalone CPU Doctor app with PyInstaller.")
    p.add_argument("--source", type=Path, default=ROOT, help="the checkout to build (default: this one)")
    p.add_argument("--venv", type=Path, default=None, help="build environment (default: SOURCE/build/dist-venv)")
    p.add_argument("--dist", type=Path, default=None, help="output folder (default: SOURCE/dist)")
    p.add_argument("--no-archive", action="store_true", help="only the folder")
    args = p.parse_args(argv)
    source = args.source.resolve()
    try:
        info = build(source, (args.venv or source / "build" / "dist-venv").resolve(),
                     (args.dist or source / "dist").resolve(), source / "build" / "pyinstaller",
                     archive=not args.no_archive)
    except BuildError as exc:
        print(f"make dist: {exc}", file=sys.stderr)
        return 1
    mib = 1024 * 1024
    print(f"\nbuilt {info['folder']}: {info['folder_bytes'] / mib:.0f} MiB", end="")
    if "archive" in info:
        print(f"; archive {info['archive']}: {info['archive_bytes'] / mib:.0f} MiB", end="")
    print(f" ({info['build_seconds']:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
