"""Set up wrong: a per-element Python loop in every step. Fix: the same arithmetic on whole tensors.

One thread, and a layer big enough that its kernels are the step's real work once the loop is gone: the
job is wrong in this one way only (a tiny model on all threads would be EVID001's job, and a fixed step
made of nothing but dispatcher calls would still be Python-bound)."""
import torch
from _loop import args, loop

a = args()
torch.set_num_threads(1)
model = torch.nn.Linear(384, 512)
x = torch.randn(128, 384)


def step():
    out = model(x)
    if a.fixed:
        o = out.detach()
        score = (o.clamp(min=0).square().sum() + o.abs().sum() + (o > 1).sum()).item()
    else:
        score = 0.0
        for v in out.detach().flatten().tolist():     # metrics computed element by element in Python
            if v > 0:
                score += v * v
            score += abs(v)
            if v > 1:
                score += 1
    out.mean().backward()
    return score


loop(step, a.seconds)
