"""Set up wrong: the dataset is a list of Python objects, so every DataLoader worker ends up with its own copy.

A forked worker shares the trainer's pages until it writes to one. Reading a Python object writes its
reference count, so each sample a worker reads copies the page it sits on (copy-on-access, PyTorch issue
13246): over an epoch each worker's own memory grows toward the dataset's size. Fix (``--fixed``): keep the
samples in one tensor; indexing it writes nothing to the data's pages, and the workers keep sharing them.
"""
import time

import torch
from torch.utils.data import DataLoader, Dataset
from _loop import args

a = args({"--workers": {"type": int, "default": 2}, "--samples": {"type": int, "default": 40_000}})
BATCH = 256
WIDTH = 200          # values per sample: 40,000 samples of 200 Python floats are about 270 MB of objects


class Objects(Dataset):
    """Each sample a Python list of values and a label: the way a dataset read from CSV or JSON often ends up.

    A batch is read at once (``__getitems__``), as a fast loader does, so the workers go through the
    dataset in seconds."""

    def __init__(self, n):
        self.items = [([float(i + j) for j in range(WIDTH)], i % 10) for i in range(n)]

    def __len__(self):
        return len(self.items)

    def __getitems__(self, indices):
        rows = [self.items[i] for i in indices]
        x = torch.tensor([[sum(values) / WIDTH] * 24 for values, _ in rows])
        return x, torch.tensor([label for _, label in rows])


class Tensors(Dataset):
    """The fix: the same samples in one tensor each for values and labels."""

    def __init__(self, n):
        self.values = torch.arange(n, dtype=torch.float32).unsqueeze(1) + torch.arange(WIDTH, dtype=torch.float32)
        self.x = self.values.mean(1, keepdim=True).repeat(1, 24)
        self.y = torch.arange(n) % 10

    def __len__(self):
        return len(self.y)

    def __getitems__(self, indices):
        index = torch.as_tensor(indices)
        return self.x[index], self.y[index]


data = Tensors(a.samples) if a.fixed else Objects(a.samples)
model = torch.nn.Linear(24, 10)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
loader = DataLoader(data, batch_size=BATCH, shuffle=True, num_workers=a.workers, persistent_workers=True,
                    collate_fn=lambda batch: batch)
t0, steps = time.perf_counter(), 0
while time.perf_counter() - t0 < a.seconds:
    for xb, yb in loader:
        opt.zero_grad(set_to_none=True)
        torch.nn.functional.cross_entropy(model(xb), yb).backward()
        opt.step()
        steps += 1
        if time.perf_counter() - t0 >= a.seconds:
            break
print(f"steps_per_s={steps / (time.perf_counter() - t0):.2f}", flush=True)
