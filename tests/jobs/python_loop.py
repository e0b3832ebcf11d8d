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
        o = out.detach()
        score = (o.clamp(min=0).square().sum() + o.abs().sum() + (o > 1).sum()).item()
    else:
        score = 0.0
        for v in values:                       # metrics computed element by element in Python
            if v > 0:
                score += v * v
            score += abs(v)
            if v > 1:
                score += 1
    out.mean().backward()
    return score


loop(step, a.seconds)
