"""A transformer-sized MLP for ``cpudoctor fit``'s accuracy check, and a plain training loop that reports its peak.

``transformer_mlp`` (``cpudoctor fit --model fit_models:transformer_mlp --path benchmarks``) is a stack of
BERT-base-sized feed-forward blocks (LayerNorm, 768 -> 3072, GELU, 3072 -> 768, residual) over 64 tokens:
8 blocks, 38 M parameters. Run as a script it trains it the way a user's loop does (Adam, zero_grad with
set_to_none, optionally each block checkpointed as fit's strategy prints it) and prints the process's peak
resident memory (VmHWM) as JSON: the measured side of benchmarks/fit_accuracy.py.
"""
import argparse
import json

import torch
from torch import nn

TOKENS, WIDTH, HIDDEN, BLOCKS = 64, 768, 3072, 8


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(WIDTH)
        self.up = nn.Linear(WIDTH, HIDDEN)
        self.down = nn.Linear(HIDDEN, WIDTH)

    def forward(self, x):
        return x + self.down(nn.functional.gelu(self.up(self.norm(x))))


class TransformerMLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.Sequential(*[Block() for _ in range(BLOCKS)])
        self.head = nn.Linear(WIDTH, 10)

    def forward(self, x):
        return self.head(self.blocks(x).mean(1))


def make_batch(n):
    return torch.randn(n, TOKENS, WIDTH)


def transformer_mlp():
    torch.manual_seed(0)
    return TransformerMLP(), make_batch


def _hwm() -> int:
    with open("/proc/self/status") as fh:
        return next(int(line.split()[1]) * 1024 for line in fh if line.startswith("VmHWM:"))


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--checkpoint", action="store_true")
    a = p.parse_args()
    model, batch = transformer_mlp()
    if a.checkpoint:                       # as fit prints it
        from torch.utils.checkpoint import checkpoint

        for block in [m for m in model.modules() if type(m).__name__ == "Block"]:
            block._plain_forward = block.forward
            block.forward = lambda *x, _b=block, **k: checkpoint(_b._plain_forward, *x, use_reentrant=False, **k)
    opt = torch.optim.Adam(model.parameters())
    for _ in range(a.steps):
        opt.zero_grad(set_to_none=True)
        loss = nn.functional.cross_entropy(model(batch(a.batch)), torch.arange(a.batch) % 10)
        loss.backward()
        opt.step()
    print(json.dumps({"peak_bytes": _hwm(), "batch": a.batch, "checkpoint": a.checkpoint}), flush=True)


if __name__ == "__main__":
    main()
