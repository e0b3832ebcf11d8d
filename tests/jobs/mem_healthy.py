"""A healthy job for the memory rules: a tensor dataset, two DataLoader workers, losses kept as numbers.

Its memory levels off after the first steps; its workers share the dataset's one buffer with the trainer
(indexing a tensor touches no page of it), so each holds only its own interpreter's few dozen MiB.
"""
import torch
from torch.utils.data import DataLoader, TensorDataset
from _loop import args

a = args({"--workers": {"type": int, "default": 2}})
torch.manual_seed(0)
x, y = torch.randn(60_000, 256), torch.randint(0, 10, (60_000,))
model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10))
opt = torch.optim.Adam(model.parameters())
loader = DataLoader(TensorDataset(x, y), batch_size=64, shuffle=True, num_workers=a.workers,
                    persistent_workers=a.workers > 0)
losses = []
import time
t0, steps = time.perf_counter(), 0
while time.perf_counter() - t0 < a.seconds:
    for xb, yb in loader:
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(model(xb), yb)
        loss.backward()
        opt.step()
        losses.append(loss.item())
        steps += 1
        if time.perf_counter() - t0 >= a.seconds:
            break
print(f"steps_per_s={steps / (time.perf_counter() - t0):.2f}", flush=True)
