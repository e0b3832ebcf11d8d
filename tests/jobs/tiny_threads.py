"""Set up wrong: a tiny model on every CPU's thread (OpenMP fork/join dwarfs the kernels). Fix: OMP_NUM_THREADS=1."""
import torch
from _loop import args, loop

a = args()
model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 64))
x = torch.randn(16, 64)


def step():
    with torch.no_grad():
        for _ in range(20):
            model(x)


loop(step, a.seconds)
