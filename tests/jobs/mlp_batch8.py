"""An MLP (784-512-512-10, fp32) trained at batch 8: its Linear layers are GEMMs with one side 8 wide.

At batch 8 a Linear layer reads its whole weight matrix for 8 rows of work: about 4 FLOP per byte, under this
CPU's ridge point, so the GEMMs are memory-bound far below the compute roof, and splitting such small calls over
threads costs more than it gains. ``--fixed`` trains at batch 128 (the printed fix: a larger batch), with the same
number of samples per step counted in the rate.
"""
import torch
import torch.nn as nn
from _loop import args, loop

a = args({"--batch": {"type": int, "default": 8}})
torch.manual_seed(0)
batch = 128 if a.fixed else a.batch
model = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x = torch.randn(batch, 784)
y = torch.randint(0, 10, (batch,))


def step():
    opt.zero_grad(set_to_none=True)
    nn.functional.cross_entropy(model(x), y).backward()
    opt.step()


loop(step, a.seconds)
print(f"samples_per_step={batch}", flush=True)
