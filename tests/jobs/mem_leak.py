"""Set up wrong: the loop keeps every step's loss tensor, and with it the step's graph: memory grows each step.

``history.append(loss)`` holds the autograd graph of each step alive, the classic training-loop leak (the
PyTorch FAQ: "don't accumulate history across your training loop"); ``backward(retain_graph=True)``, often
added to silence "Trying to backward through the graph a second time", keeps each graph's saved activations
with it. Fix (``--fixed``): keep the number (``loss.item()``) and let backward free the graph.
"""
import time

import torch
from _loop import args

a = args()
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(512, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
history = []
t0, steps = time.perf_counter(), 0
while time.perf_counter() - t0 < a.seconds:
    began = time.perf_counter()
    x, y = torch.randn(512, 512), torch.randint(0, 10, (512,))
    opt.zero_grad(set_to_none=True)
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward(retain_graph=not a.fixed)     # the kept graph keeps its buffers
    opt.step()
    history.append(loss.item() if a.fixed else loss)
    steps += 1
    # 20 steps a second at most (a data loader's pace): about 60 MB a second kept on a quiet machine
    time.sleep(max(0.0, 0.05 - (time.perf_counter() - began)))
print(f"steps_per_s={steps / (time.perf_counter() - t0):.2f}", flush=True)
