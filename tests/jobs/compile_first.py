"""A model compiled with torch.compile's default backend (Inductor: C++ compiler processes), fed a new batch size at
every step: its first compile alone takes many seconds on a small machine, and each new size compiles again."""
import torch
from _loop import args, loop

a = args()
model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))
compiled = torch.compile(model, dynamic=False)
sizes = iter(range(1, 10_000))


def step():
    x = torch.randn(next(sizes), 32)
    if a.fixed:
        torch._dynamo.mark_dynamic(x, 0)
    compiled(x).sum().backward()


loop(step, a.seconds)
