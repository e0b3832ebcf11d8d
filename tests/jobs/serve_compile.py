"""Set up wrong: a serving loop that traces its model with TorchScript for every request, paying the first-call
compilation each time. Fix (printed by CPU Doctor, naming the line marked below): trace once, before the loop."""
import torch
from _serve import args, build, request, serve

a = args()
torch.set_num_threads(1)
model = build().eval()
traced = torch.jit.trace(model, request()) if a.fixed else None


def handle(x):
    compiled = traced
    if compiled is None:
        compiled = torch.jit.trace(model, x)           # the mistake: compiled again per request
    with torch.inference_mode():
        return compiled(x)


serve(handle, a.seconds)
