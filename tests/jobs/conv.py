"""Convolutions through oneDNN (fp32, or --dtype bf16/f16): the ISA and data-type jobs.

``--model few-channels``: convolutions with 8 input channels a group, whose weight gradients oneDNN 3.12 computes
with AVX2 kernels on an AVX-512 CPU, by its own choice (its AVX-512 kernels for the other passes).
"""
import torch
from _loop import args, loop

a = args({"--dtype": {"default": "f32"}, "--model": {"default": "wide", "choices": ("wide", "few-channels")}})
dtype = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}[a.dtype]
if a.fixed:
    dtype = torch.float32                       # the printed fix: train in fp32 on this CPU
if a.model == "few-channels":
    model = torch.nn.Sequential(torch.nn.Conv2d(16, 32, 3, padding=1), torch.nn.ReLU(),
                                torch.nn.Conv2d(32, 32, 3, padding=1, groups=4), torch.nn.Flatten(),
                                torch.nn.Linear(32 * 32 * 32, 10)).to(dtype)
else:
    model = torch.nn.Sequential(torch.nn.Conv2d(16, 32, 3, padding=1), torch.nn.ReLU(),
                                torch.nn.Conv2d(32, 32, 3, padding=1), torch.nn.Flatten(),
                                torch.nn.Linear(32 * 32 * 32, 10)).to(dtype)
x = torch.randn(16, 16, 32, 32, dtype=dtype)


def step():
    model.zero_grad(set_to_none=True)
    model(x).float().sum().backward()


loop(step, a.seconds)
