"""A healthy job: a mid-sized MLP whose step is dominated by GEMM kernels."""
import torch
from _loop import args, loop

a = args()
model = torch.nn.Sequential(torch.nn.Linear(1024, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 1024))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x = torch.randn(512, 1024)


def step():
    opt.zero_grad(set_to_none=True)
    model(x).square().mean().backward()
    opt.step()


loop(step, a.seconds)
