"""A capture carries the software side: `--root` on it gives the software findings `doctor` gave on the machine.

Issue 26: `capture` packed /proc and /sys but not the Python environment, so `--root` on a capture could
only forecast "if installed".
"""

from __future__ import annotations

import json
import tarfile
import venv
from pathlib import Path

import pytest

from cpudoctor.capture import TOP, capture
from cpudoctor.pipeline import Source, build_report, chosen_source
from cpudoctor.probes.software.captured import ENVIRONMENT_FILE

# Facts that change between two looks at the same machine (memory available right now).
MOMENTARY = {"software.os.mem_available_bytes"}


def _extract(tarball: Path, dest: Path) -> Path:
    with tarfile.open(tarball) as tar:
        tar.extractall(dest, filter="data")
    return dest / TOP


def _said(report) -> dict[str, set[tuple[str, str]]]:
    """Each rule's findings as (severity, title); a finding about a momentary fact by severity only."""
    out: dict[str, set[tuple[str, str]]] = {}
    for f in report.findings:
        momentary = bool(MOMENTARY & set(f.fields_used))
        out.setdefault(f.code, set()).add((f.severity, "" if momentary else f.title))
    return out


def _capture_and_compare(tmp_path: Path, source: Source) -> tuple[dict, dict, object]:
    result = capture(tmp_path / "m.tar.gz", environment=source)
    assert result.environment and ENVIRONMENT_FILE in result.summary()
    root = _extract(result.path, tmp_path / "x")
    here = build_report(source)
    there = build_report(Source.tree(root))
    return _said(here), _said(there), there


@pytest.mark.hardware
def test_this_environment_captured_and_analysed_elsewhere_gives_the_same_findings(tmp_path):
    """The suite's own environment (torch, numpy, OpenCV installed): every finding the same, PyTorch included."""
    here, there, tree_report = _capture_and_compare(tmp_path, chosen_source())
    assert here == there, {k: (here.get(k), there.get(k)) for k in set(here) | set(there)
                           if here.get(k) != there.get(k)}
    sw = tree_report.software
    assert not sw.captured and sw.torch.status == "ok" and sw.import_checks
    assert any(f"capture's {ENVIRONMENT_FILE}" in n for n in sw.notes)
    assert "TORCH001" in here and all(sev == "ok" for sev, _ in here["TORCH001"])


@pytest.mark.hardware
def test_a_chosen_environment_travels_and_nothing_identifying_does(tmp_path, monkeypatch):
    """A bare venv (no packages) chosen with --python: the tree says what doctor said for it (no PyTorch), and
    environment.json holds nothing a shared report would not (host and user names, home folders)."""
    env_dir = tmp_path / "home" / "someone" / "bare-env"
    venv.create(env_dir, with_pip=False, symlinks=True)
    python = str(env_dir / "bin" / "python")
    monkeypatch.delenv("CPUDOCTOR_PYTHON", raising=False)
    here, there, tree_report = _capture_and_compare(tmp_path, chosen_source(python))
    assert here == there
    assert {sev for sev, _ in there["TORCH001"]} == {"warning"}            # "PyTorch is not installed"
    assert tree_report.software.python.env_name == "bare-env"
    text = (tmp_path / "x" / TOP / ENVIRONMENT_FILE).read_text()
    data = json.loads(text)
    assert data["meta"]["redacted"] is True and data["software"]["os"]["hostname"] in (None, "<hostname>")
    from cpudoctor.privacy import Identity, Redactor

    assert Redactor(Identity.current()).text(text) == text          # nothing left a shared report would replace


def test_a_damaged_environment_file_is_a_note_not_a_crash(tmp_path):
    result = capture(tmp_path / "m.tar.gz", environment=None)
    root = _extract(result.path, tmp_path / "x")
    assert not (root / ENVIRONMENT_FILE).exists()
    plain = build_report(Source.tree(root), children=False)
    assert plain.software.captured and any("no environment.json" in n for n in plain.software.notes)
    (root / ENVIRONMENT_FILE).write_text('{"schema_version": 1, "meta": 5}')
    damaged = build_report(Source.tree(root), children=False)
    assert damaged.software.captured
    assert any(n.startswith(f"the capture's {ENVIRONMENT_FILE} could not be used") for n in damaged.software.notes)


@pytest.mark.hardware
def test_a_windows_or_mac_capture_carries_the_environment_too(tmp_path, monkeypatch):
    """A Mac's capture (its recorded sysctl lines, packed as the Mac would pack them) with a bare venv's
    description: analysed elsewhere, the software side is that environment's, not 'captured, unknown'."""
    from cpudoctor.capture import environment_report, write_native

    env_dir = tmp_path / "bare-env"
    venv.create(env_dir, with_pip=False, symlinks=True)
    monkeypatch.delenv("CPUDOCTOR_PYTHON", raising=False)
    source = chosen_source(str(env_dir / "bin" / "python"))
    mac = Path(__file__).parent / "fixtures" / "macos" / "apple-m3-max"
    files = {"macos/sysctl.txt": (mac / "macos" / "sysctl.txt").read_bytes()}
    result = write_native(tmp_path / "mac.tar.gz", files, "darwin", environment=environment_report(source))
    assert ENVIRONMENT_FILE in result.summary()
    root = _extract(result.path, tmp_path / "x")
    assert json.loads((root / "capture.json").read_text())["environment"] == ENVIRONMENT_FILE
    here, there = build_report(source), build_report(Source.tree(root))
    assert there.cpu.brand == "Apple M3 Max" and not there.software.captured
    assert there.software.python.env_name == "bare-env" == here.software.python.env_name
    assert there.software.python.version == here.software.python.version
    assert _said(there)["TORCH001"] == _said(here)["TORCH001"]
    assert {sev for sev, _ in _said(there)["TORCH001"]} == {"warning"}          # "PyTorch is not installed"
