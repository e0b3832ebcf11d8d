"""Set up wrong: autograd's anomaly detection, switched on while debugging, is left on for training.

Fix (printed by CPU Doctor, naming the line marked below): delete it (--fixed leaves the line out).
"""
import torch
from _loop import args, loop

a = args()
if not a.fixed:
    torch.autograd.set_detect_anomaly(True)     # the mistake
model = torch.nn.Sequential(torch.nn.Linear(128, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(64, 128), torch.randint(0, 10, (64,))


def step():
    opt.zero_grad(set_to_none=True)
    torch.nn.functional.cross_entropy(model(x), y).backward()
    opt.step()


loop(step, a.seconds)
