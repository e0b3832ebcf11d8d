"""Set up wrong: the script sets PyTorch's thread count itself, four times the CPUs it may use (8 on 2 CPUs).

A variable set outside cannot change it (the call wins). Fix (printed by CPU Doctor, naming the line marked
below): the count at that line; --threads N applies the printed count.
"""
import os

import torch
from _loop import args, loop

a = args({"--threads": {"type": int, "default": 4 * len(os.sched_getaffinity(0))}})
torch.set_num_threads(a.threads)                # the mistake (with the default count)
model = torch.nn.Sequential(torch.nn.Linear(512, 512), torch.nn.ReLU(), torch.nn.Linear(512, 512))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x = torch.randn(256, 512)


def step():
    opt.zero_grad(set_to_none=True)
    model(x).square().mean().backward()
    opt.step()


loop(step, a.seconds)
