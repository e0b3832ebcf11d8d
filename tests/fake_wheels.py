"""Real wheels of fake packages, and a throw-away venv that pip installs them into.

A wheel is a zip with a ``NAME-VERSION.dist-info`` folder (METADATA, WHEEL,
RECORD) and the package files; pip installs it like any other and writes the
same metadata CPU Doctor reads from a real install. The packages carry no code
that could run (an ``.so`` here is a few bytes of text), so nothing is imported.
"""

from __future__ import annotations

import base64
import hashlib
import os
import subprocess
import sys
import zipfile
from importlib import metadata
from pathlib import Path


def build_wheel(folder: Path, name: str, version: str, files: dict[str, bytes] | None = None) -> Path:
    """Write ``name-version-py3-none-any.whl`` into ``folder`` and return its path."""
    folder.mkdir(parents=True, exist_ok=True)
    stem = name.replace("-", "_")
    info = f"{stem}-{version}.dist-info"
    content = {f"{stem}/__init__.py": b"", **(files or {})}
    content[f"{info}/METADATA"] = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode()
    content[f"{info}/WHEEL"] = b"Wheel-Version: 1.0\nGenerator: cpudoctor-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    record = []
    for path, data in content.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(data)}")
    record.append(f"{info}/RECORD,,")
    content[f"{info}/RECORD"] = ("\n".join(record) + "\n").encode()
    wheel = folder / f"{stem}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        for path, data in content.items():
            zf.writestr(path, data)
    return wheel


class Venv:
    """``python -m venv`` in ``path``; pip inside it installs only from ``wheels`` (no network)."""

    def __init__(self, path: Path, wheels: Path):
        self.path, self.wheels = path, wheels
        subprocess.run([sys.executable, "-m", "venv", str(path)], check=True, capture_output=True, timeout=300)

    @property
    def bin(self) -> Path:
        return self.path / ("Scripts" if os.name == "nt" else "bin")

    def env(self) -> dict[str, str]:
        """The environment of a shell with this venv activated and pip offline, on the wheel folder."""
        env = dict(os.environ)
        env.update(PATH=f"{self.bin}{os.pathsep}{env.get('PATH', '')}", VIRTUAL_ENV=str(self.path),
                   PIP_NO_INDEX="1", PIP_FIND_LINKS=str(self.wheels), PIP_DISABLE_PIP_VERSION_CHECK="1")
        env.pop("PYTHONHOME", None)
        return env

    def shell(self, command: str) -> subprocess.CompletedProcess:
        """Run a printed command as a user would, in this venv (``python`` is the venv's)."""
        return subprocess.run(["bash", "-c", command], env=self.env(), capture_output=True, text=True, timeout=300)

    def distributions(self) -> list[metadata.Distribution]:
        site = next(self.path.glob("lib/python*/site-packages"), None) or self.path / "Lib" / "site-packages"
        return list(metadata.distributions(path=[str(site)]))
