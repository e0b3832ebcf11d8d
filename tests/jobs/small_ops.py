"""Many small primitives: a bf16-autocast MLP with GELU at batch 8, the shape of a job whose every step is dozens of
tiny oneDNN matmul and eltwise calls (each one verbose line when the lines are on: what watching costs)."""
import torch
import torch.nn as nn
from _loop import args, loop

a = args()
torch.manual_seed(0)
model = nn.Sequential(*[m for _ in range(6) for m in (nn.Linear(128, 128), nn.GELU())], nn.Linear(128, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x = torch.randn(8, 128)
y = torch.randint(0, 10, (8,))


def step():
    opt.zero_grad(set_to_none=True)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = nn.functional.cross_entropy(model(x).float(), y)
    loss.backward()
    opt.step()


loop(step, a.seconds)
