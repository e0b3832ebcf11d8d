"""A job that needs more memory than its cgroup allows at its batch size, and its model for ``cpudoctor fit``.

``build()`` returns the model and a batch maker (``cpudoctor fit --model mem_limited:build --path tests/jobs``);
run as a script it trains ``--steps`` optimizer steps at ``--batch``, each as ``--accum`` steps of
``batch / accum`` with gradient accumulation (the same update). A stack of narrow MLP blocks over 32 tokens:
little compute, much activation memory (about 0.6 MiB per sample), as a transformer's feed-forward layers.
"""
import argparse
import time

import torch
from torch import nn

TOKENS, WIDTH, HIDDEN, BLOCKS = 32, 64, 256, 6


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(WIDTH)
        self.up = nn.Linear(WIDTH, HIDDEN)
        self.down = nn.Linear(HIDDEN, WIDTH)

    def forward(self, x):
        return x + self.down(nn.functional.gelu(self.up(self.norm(x))))


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.Sequential(*[Block() for _ in range(BLOCKS)])
        self.head = nn.Linear(WIDTH, 10)

    def forward(self, x):
        return self.head(self.blocks(x).mean(1))


def make_batch(n):
    return torch.randn(n, TOKENS, WIDTH)


def build():
    torch.manual_seed(0)
    return Net(), make_batch


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--batch", type=int, default=1024)
    p.add_argument("--accum", type=int, default=1)
    p.add_argument("--steps", type=int, default=1)
    a = p.parse_args()
    model, batch = build()
    opt = torch.optim.Adam(model.parameters())
    micro = a.batch // a.accum
    t0 = time.perf_counter()
    for _ in range(a.steps):
        opt.zero_grad(set_to_none=True)
        for _ in range(a.accum):
            x = batch(micro)
            y = torch.arange(micro) % 10
            (nn.functional.cross_entropy(model(x), y) / a.accum).backward()
        opt.step()
    print(f"trained {a.steps} steps of batch {a.batch} in {time.perf_counter() - t0:.1f} s", flush=True)


if __name__ == "__main__":
    main()
