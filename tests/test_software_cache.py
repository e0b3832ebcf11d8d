"""The children's cache: reused only while nothing they depend on changed."""

from __future__ import annotations

import json
import os
import signal
import sys

from cpudoctor.probes.child import cache as childcache
from cpudoctor.kits.child.runner import ChildResult, ChildSpec, run_children
from cpudoctor.kits.child.exitstatus import diagnose_exit
from cpudoctor.probes import probe_software

SPECS = [ChildSpec([sys.executable, "-c", "print('{\"x\": 1}')"], what="child one")]
PKGS = {"numpy": ("2.4.6", "numpy")}
ENV = {"PATH": "/usr/bin", "OMP_NUM_THREADS": "4", "PWD": "/somewhere"}


def test_fingerprint_tracks_what_matters_and_ignores_shell_noise():
    base = childcache.fingerprint(SPECS, PKGS, ["avx", "avx2"], ENV)
    assert base == childcache.fingerprint(SPECS, PKGS, ["avx2", "avx"], dict(ENV, PWD="/elsewhere", SHLVL="3"))
    assert base != childcache.fingerprint(SPECS, PKGS, ["avx", "avx2"], dict(ENV, OMP_NUM_THREADS="8"))
    assert base != childcache.fingerprint(SPECS, PKGS, ["avx"], ENV)
    assert base != childcache.fingerprint(SPECS, {"numpy": ("2.4.7", "numpy")}, ["avx", "avx2"], ENV)
    other = [ChildSpec([sys.executable, "-c", "pass"], what="x")]
    assert base != childcache.fingerprint(other, PKGS, ["avx", "avx2"], ENV)


def test_save_load_round_trip_and_sigill_rediagnosed(tmp_path):
    results = run_children(SPECS)
    assert childcache.save(tmp_path, "k", results)
    again = childcache.load(tmp_path, "k", SPECS)
    assert again[0].data == {"x": 1} and again[0].ok
    assert childcache.load(tmp_path, "other-key", SPECS) is None
    # The environment itself is never written, only its hash.
    assert "OMP_NUM_THREADS" not in (tmp_path / childcache.FILE_NAME).read_text()

    crashed = ChildResult("import tensorflow", returncode=-signal.SIGILL, diagnosis=diagnose_exit(-signal.SIGILL))
    spec = ChildSpec(["x"], what="import tensorflow", isa_hint=lambda: "needs avx; this CPU lacks avx")
    childcache.save(tmp_path, "k2", [crashed])
    loaded = childcache.load(tmp_path, "k2", [spec])[0]
    assert loaded.diagnosis.kind == "illegal_instruction" and "lacks avx" in loaded.diagnosis.message


def test_timeouts_and_damaged_files_are_not_reused(tmp_path):
    assert not childcache.save(tmp_path, "k", [ChildResult("c", timed_out=True)])
    assert not (tmp_path / childcache.FILE_NAME).exists()
    (tmp_path / childcache.FILE_NAME).write_text("{not json")
    assert childcache.load(tmp_path, "k", SPECS) is None
    (tmp_path / childcache.FILE_NAME).write_text(json.dumps({"format": 1, "key": "k", "results": []}))
    assert childcache.load(tmp_path, "k", SPECS) is None
    assert childcache.load(None, "k", SPECS) is None


def test_default_dir_honours_overrides():
    assert childcache.default_dir({"CPUDOCTOR_CACHE_DIR": "/tmp/cd"}).as_posix() == "/tmp/cd"
    assert childcache.default_dir({"XDG_CACHE_HOME": "/tmp/x"}).as_posix() == "/tmp/x/cpudoctor"


def test_probe_reuses_children_until_the_environment_changes(tmp_path):
    # A fake torch that dies at once keeps this fast; the real one is covered in test_software_probe.
    fake = tmp_path / "site" / "torch"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("import os, signal\nos.kill(os.getpid(), signal.SIGILL)\n")
    env = dict(os.environ, PYTHONPATH=str(tmp_path / "site"))
    cache = tmp_path / "cache"
    first = probe_software(environ=env, cache=cache)
    if not any(p.name == "torch" for p in first.packages):
        import pytest

        pytest.skip("torch is not installed in this environment")
    second = probe_software(environ=env, cache=cache)
    assert not first.children_cached and second.children_cached
    assert second.torch.status == first.torch.status == "crashed"
    assert second.torch.error == first.torch.error
    assert [c.status for c in second.import_checks] == [c.status for c in first.import_checks]
    assert any("reused" in n for n in second.notes)
    third = probe_software(environ=dict(env, OMP_NUM_THREADS="1"), cache=cache)
    assert not third.children_cached
    assert not probe_software(environ=env, cache=False).children_cached
