"""A GEMM of known size, timed two ways in the same job: directly, and by the libraries' verbose lines.

Calls alternate one by one between the verbose lines off (timed here with perf_counter) and on (timed by oneMKL
for fp32, oneDNN for bf16, printed as their verbose lines), so both halves see the same load. At the end the job
prints ``direct dtype=D n=N calls=C median_gflops=G best_gflops=B``: what `cpudoctor run` must agree with.
"""
import statistics
import time

import torch
from _loop import args

a = args({"--n": {"type": int, "default": 512}, "--dtype": {"default": "fp32"}})
dtype = {"fp32": torch.float32, "bf16": torch.bfloat16}[a.dtype]
verbose = torch._C._verbose
switch = verbose.mkl_set_verbose if a.dtype == "fp32" else verbose.mkldnn_set_verbose
x = torch.randn(a.n, a.n).to(dtype)
w = torch.randn(a.n, a.n).to(dtype)
out = torch.empty(a.n, a.n, dtype=dtype)
flop = 2.0 * a.n ** 3
switch(0)
for _ in range(3):
    torch.mm(x, w, out=out)                 # warm-up: kernel choice, first touch
rates, i, t_end = [], 0, time.perf_counter() + a.seconds
while time.perf_counter() < t_end:
    if i % 2:
        switch(1)
        torch.mm(x, w, out=out)
        switch(0)
    else:
        t0 = time.perf_counter()
        torch.mm(x, w, out=out)
        rates.append(flop / (time.perf_counter() - t0) / 1e9)
    i += 1
print(f"direct dtype={a.dtype} n={a.n} calls={len(rates)} median_gflops={statistics.median(rates):.3f} "
      f"best_gflops={max(rates):.3f}", flush=True)
