"""Set up wrong: a per-element Python loop in every step. Fix: the same arithmetic on whole tensors."""
import torch
from _loop import args, loop

a = args()
model = torch.nn.Linear(128, 128)
x = torch.randn(64, 128)


def step():
    out = model(x)
    values = out.detach().flatten().tolist()
    if a.fixed:
        score = out.detach().clamp(min=0).square().sum().item()
    else:
        score = 0.0
        for v in values:                       # the metric computed element by element in Python
            if v > 0:
                score += v * v
    out.mean().backward()
    return score


loop(step, a.seconds)
