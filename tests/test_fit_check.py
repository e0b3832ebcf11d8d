"""The lab's check of fit's estimates (fitrun.lab_check, ``fit --check``) and the rule that picks the blocks to
checkpoint, without a child: a recorded measurement and fake training runs, duck-typed modules."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cpudoctor.advisor.fit import need_at
from cpudoctor.fitrun import CheckRow, lab_check, lab_data_bytes
from cpudoctor.lab.fit import read_measurement
from cpudoctor.lab.jobs import _checkpointing
from cpudoctor.lab.runner import JobOutcome
from cpudoctor.render.fit import render_check

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "fit"
MiB = 1 << 20


def _measurement():
    res = json.loads((FIXTURES / "resnet18-adam.json").read_text())
    return read_measurement(JobOutcome(result=res), {"model": "resnet18"})


def test_need_at_measured_batches_and_from_small_ones_only():
    m = _measurement()
    assert need_at(m, 64) == m.base_bytes + 490278912               # measured at 64: its own rise
    assert need_at(m, 64, "checkpoint") == m.base_bytes + 403308544
    small = need_at(m, 64, up_to=16)                                # 2 and 8 only: the line through them
    assert small is not None and small != need_at(m, 64)
    assert need_at(m, 64, "checkpoint", up_to=16) is None           # no checkpointed batch that small


def test_lab_check_rows_and_verdict(monkeypatch):
    import cpudoctor.lab.fit as labfit

    m = _measurement()
    monkeypatch.setattr(labfit, "measure", lambda settings, **kw: (None, m))
    peaks = {(32, False): 700 * MiB, (64, False): 1000 * MiB, (32, True): 720 * MiB, (64, True): 900 * MiB}
    rows = lab_check("resnet18", [64, 32], train_peak=lambda b, ck: peaks[(b, ck)], data_bytes=lab_data_bytes)
    assert [(r.batch, r.checkpoint) for r in rows] == [(32, False), (64, False), (32, True), (64, True)]
    r64 = rows[1]
    assert r64.estimate_bytes == m.base_bytes + 490278912 + lab_data_bytes(64)
    assert r64.error_share == pytest.approx(r64.estimate_bytes / (1000 * MiB) - 1)
    text = render_check(rows)
    assert "largest error" in text and text.count("resnet18") == 4
    assert CheckRow("x", 1, False).error_share is None


class _Param:
    def __init__(self, n):
        self.n = n

    def numel(self):
        return self.n


class _Module:
    """The little of nn.Module the rule reads: named_modules, children, parameters, forward."""

    def __init__(self, params=0, **children):
        self._params, self._children = params, children

    def forward(self, x):
        return x

    def children(self):
        return iter(self._children.values())

    def parameters(self):
        yield from ([_Param(self._params)] if self._params else [])
        for c in self._children.values():
            yield from c.parameters()

    def named_modules(self, prefix=""):
        yield prefix, self
        for name, c in self._children.items():
            yield from c.named_modules(f"{prefix}.{name}" if prefix else name)


class Sequential(_Module):
    pass


class Conv(_Module):
    pass


class BasicBlock(_Module):
    pass


def _resnetish():
    blocks = {f"b{i}": BasicBlock(conv1=Conv(1000), conv2=Conv(1000),
                                  shortcut=Sequential(c=Conv(10)) if i == 2 else Conv(0)) for i in range(4)}
    return _Module(stem=Sequential(conv=Conv(100)), layers=Sequential(**blocks), fc=Conv(50))


def test_the_blocks_are_the_repeated_class_with_most_instances_not_the_top_containers():
    name, blocks = _checkpointing.find_blocks(_resnetish())
    assert name == "BasicBlock" and len(blocks) == 4


def test_no_repeated_blocks_and_blocks_without_parameters():
    assert _checkpointing.find_blocks(_Module(conv=Conv(10), fc=Conv(5))) == (None, [])
    assert _checkpointing.find_blocks(_Module()) == (None, [])
    lenet = _Module(features=Sequential(a=Conv(100), b=Conv(100)), classifier=Sequential(c=Conv(50), d=Conv(50)))
    name, blocks = _checkpointing.find_blocks(lenet)
    assert name == "Sequential" and len(blocks) == 2
