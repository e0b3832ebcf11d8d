"""int8 quantisation: use and recommend the current API, say which, never repeat torch's stale warning (issue 26).

Seen before: PREC002 recommended ``torch.quantization.quantize_dynamic`` with no word that PyTorch deprecated it,
and ``bench quant`` printed torch's own "(said: torch.ao.quantization is deprecated and will be removed in 2.10)"
while running on torch 2.13. torchao's ``quantize_`` is the API PyTorch points to.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from fake_wheels import Venv, build_wheel
from real_situations import clean_environ, live_report, need_module

from cpudoctor.advisor import engine
from cpudoctor.lab import verdicts
from cpudoctor.probes.software.stack import probe_software
from cpudoctor.report_file import load_report

SCENARIOS = Path(__file__).resolve().parent / "fixtures" / "scenarios"


def _prec002(report):
    [f] = [f for f in engine.run_rules(report, only={"PREC002"}, strict=True) if f.code == "PREC002"]
    return f


def test_the_words_name_the_api_used_and_the_current_one():
    assert verdicts.quant_api("torchao", True).endswith("the current API")
    old = verdicts.quant_api("torch.ao", False, "2.13.0+cpu")
    assert old.startswith("torch.ao.quantization.quantize_dynamic, deprecated by PyTorch in favour of torchao's")
    assert "still working in torch 2.13.0+cpu" in old and "pip install torchao" in old
    assert "removed in 2.10" not in old
    assert "--api torch.ao" in verdicts.quant_api("torch.ao", True)


@pytest.mark.slow
@pytest.mark.alongside
def test_prec002_recommends_torchao_and_knows_whether_the_environment_has_it(tmp_path):
    """A throw-away venv without torchao, then with it (pip installs a wheel with its metadata)."""
    wheels = tmp_path / "wheels"
    build_wheel(wheels, "torchao", "0.18.0")
    env = Venv(tmp_path / "env", wheels)
    report = load_report(SCENARIOS / "sapphirerapids-amx.json")          # VNNI and AMX-INT8: int8 pays off

    def advice():
        report.software = probe_software(Path("/"), children=True, environ=clean_environ(), cache=False,
                                         python=str(env.bin / "python"))
        return _prec002(report)

    f = advice()
    assert "quantize_" in f.snippet and "Int8DynamicActivationInt8WeightConfig" in f.snippet
    assert "quantize_dynamic" not in f.snippet and "python -m pip install torchao" in f.snippet
    assert "torch.ao.quantization.quantize_dynamic is deprecated" in f.fix and "not installed" in f.fix
    assert env.shell("python -m pip install torchao").returncode == 0
    f = advice()
    assert "pip install torchao" not in f.snippet and "torchao is installed here" in f.fix


@pytest.mark.slow
@pytest.mark.alongside
def test_bench_quant_names_the_api_it_used_without_repeating_torchs_warning():
    need_module("torch")
    out = subprocess.run([sys.executable, "-m", "cpudoctor", "bench", "quant", "--batches", "1", "--quiet"],
                         capture_output=True, text=True, timeout=400, env=clean_environ())
    assert out.returncode == 0, out.stderr[-2000:]
    [line] = [line for line in out.stdout.splitlines() if line.startswith("quantisation API: ")]
    assert "removed in 2.10" not in out.stdout and "said:" not in line
    assert line.endswith("the current API") or "in favour of torchao's quantize_" in line
    report = live_report(clean_environ(), children=False)
    assert "quantize_dynamic" not in _prec002(report).snippet
