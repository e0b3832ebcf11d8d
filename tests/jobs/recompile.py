"""Set up wrong: a compiled model fed batches of changing size with static shapes. Fix: mark the dim dynamic."""
import torch
from _loop import args, loop

a = args()
torch._dynamo.config.recompile_limit = 64
model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))
compiled = torch.compile(model, backend="aot_eager", dynamic=False)
sizes = iter(range(1, 10_000))


def step():
    x = torch.randn(next(sizes), 32)
    if a.fixed:
        torch._dynamo.mark_dynamic(x, 0)
    compiled(x).sum().backward()


loop(step, a.seconds, min_steps=6)        # six new sizes at least: the recompiles the test looks for
