"""Activation checkpointing of a model's repeated blocks, the way people apply it: one rule for the lab and ``fit``.

Checkpointing a block keeps only its input for the backward pass and runs its
forward again when the gradients reach it: the activations inside the block are
not held, at the cost of one more forward pass of it. It pays off on a model made
of repeated blocks (ResNet's BasicBlocks, a transformer's layers), which is where
people apply it (Hugging Face's ``gradient_checkpointing_enable`` wraps each
layer). :func:`find_blocks` picks those blocks: the module class with at least
two instances, each holding parameters and sub-modules, that together hold at
least half of the model's parameters; among several, the one with most instances
(ResNet-18's eight BasicBlocks, not its two top-level Sequentials). The training
job's ``checkpoint`` setting and ``fit``'s measurement use this rule, so the lab's
check compares like with like.

Standard library and torch only, Python 3.8+ (runs in the user's environment).
"""

from __future__ import annotations

from typing import Any, List, Optional, Tuple

MIN_SHARE = 0.5          # the blocks hold at least this share of the model's parameters


def _params(module) -> int:
    return sum(p.numel() for p in module.parameters())


def find_blocks(model) -> Tuple[Optional[str], List[Any]]:
    """(class name, instances) of the model's repeated blocks, or (None, []) when it has none."""
    total = _params(model)
    if total == 0:
        return None, []
    groups = {}
    for name, module in model.named_modules():
        if not name or not any(True for _ in module.children()) or not callable(getattr(module, "forward", None)):
            continue
        if type(module).__name__ in ("ModuleList", "ModuleDict", "ParameterList", "ParameterDict"):
            continue
        groups.setdefault(type(module), []).append((name, module))
    best = None
    for cls, members in groups.items():
        outer = [(n, m) for n, m in members
                 if not any(o != n and n.startswith(o + ".") for o, _ in members)]   # not inside another of its kind
        if len(outer) < 2 or any(_params(m) == 0 for _, m in outer):
            continue
        share = sum(_params(m) for _, m in outer) / total
        if share < MIN_SHARE:
            continue
        key = (len(outer), share)
        if best is None or key > best[0]:
            best = (key, cls, [m for _, m in outer])
    if best is None:
        return None, []
    return best[1].__name__, best[2]


def checkpoint_blocks(model, torch) -> Tuple[Optional[str], int]:
    """Checkpoint each of the model's repeated blocks (in place); (their class name, how many)."""
    from torch.utils.checkpoint import checkpoint

    name, blocks = find_blocks(model)
    for block in blocks:
        original = block.forward

        def forward(*args, _original=original, **kwargs):
            if not torch.is_grad_enabled():
                return _original(*args, **kwargs)
            return checkpoint(_original, *args, use_reentrant=False, **kwargs)

        block.forward = forward
    return name, len(blocks)
