"""A small ResNet-style CNN (basic blocks: conv, batch norm, ReLU, a shortcut) on 32x32 images at batch 32, fp32.

Its convolutions run in oneDNN; in the default (NCHW) layout oneDNN reorders every activation into its blocked
layout and back around each convolution, every step. ``--fixed`` trains in channels_last, the fix CPU Doctor prints.
"""
import torch
import torch.nn as nn
from _loop import args, loop

a = args({"--batch": {"type": int, "default": 32}})
torch.manual_seed(0)


class Block(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.c1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.b1 = nn.BatchNorm2d(cout)
        self.c2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.b2 = nn.BatchNorm2d(cout)
        self.short = (nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))
                      if stride != 1 or cin != cout else nn.Identity())

    def forward(self, x):
        y = torch.relu(self.b1(self.c1(x)))
        return torch.relu(self.b2(self.c2(y)) + self.short(x))


model = nn.Sequential(nn.Conv2d(3, 32, 3, 1, 1, bias=False), nn.BatchNorm2d(32), nn.ReLU(),
                      Block(32, 32, 1), Block(32, 64, 2), Block(64, 128, 2),
                      nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(128, 10))
x = torch.randn(a.batch, 3, 32, 32)
y = torch.randint(0, 10, (a.batch,))
if a.fixed:                                   # the printed fix: channels_last for the model and its input
    model = model.to(memory_format=torch.channels_last)
    x = x.contiguous(memory_format=torch.channels_last)
opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)


def step():
    opt.zero_grad(set_to_none=True)
    nn.functional.cross_entropy(model(x), y).backward()
    opt.step()


loop(step, a.seconds)
