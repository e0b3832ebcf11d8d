"""Set up wrong: a serving loop at batch 1 that gives PyTorch's pool every CPU itself; one sample's kernels are
too short to split, so the pool mostly forks, joins and waits. Fix (printed by CPU Doctor, naming the line marked
below): the count at that line; --threads N applies the printed count."""
import os

import torch
from _serve import args, build, serve

a = args({"--threads": {"type": int, "default": len(os.sched_getaffinity(0))}})
torch.set_num_threads(a.threads)                      # the mistake (with the default: every CPU)
model = build().eval()


def handle(x):
    with torch.inference_mode():
        return model(x)


serve(handle, a.seconds)
