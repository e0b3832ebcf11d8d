"""Set up wrong: a serving loop that calls its model with autograd on (no inference mode), so every request
builds a graph for a backward pass that never comes. Fix (printed by CPU Doctor): torch.inference_mode() around
the call, the model in eval mode."""
import torch
from _serve import args, build, serve

a = args()
torch.set_num_threads(1)
model = build()
if a.fixed:
    model.eval()


def handle(x):
    if a.fixed:
        with torch.inference_mode():
            return model(x)
    return model(x)                                   # the mistake: autograd records every request


serve(handle, a.seconds)
