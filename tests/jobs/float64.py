"""Set up wrong: the script makes float64 PyTorch's default dtype, so the model and every batch are double precision.

Fix (printed by CPU Doctor, naming the line marked below): compute in float32 (--fixed leaves the line out).
"""
import torch
from _loop import args, loop

a = args()
if not a.fixed:
    torch.set_default_dtype(torch.float64)      # the mistake
model = torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(128, 256), torch.randint(0, 10, (128,))


def step():
    opt.zero_grad(set_to_none=True)
    torch.nn.functional.cross_entropy(model(x), y).backward()
    opt.step()


loop(step, a.seconds)
