"""Set up wrong: a serving loop that builds the model and loads its weights again for every request. Fix (printed
by CPU Doctor, naming the lines marked below): build and load once, before the loop."""
import os
import tempfile

import torch
from _serve import args, build, serve

a = args()
torch.set_num_threads(1)
path = os.path.join(tempfile.mkdtemp(), "model.pt")
torch.save(build().state_dict(), path)
served = None
if a.fixed:
    served = build()
    served.load_state_dict(torch.load(path))
    served.eval()


def handle(x):
    model = served
    if model is None:
        model = build()                                # the mistake: a new model per request ...
        model.load_state_dict(torch.load(path))        # the mistake: ... and its weights read again
        model.eval()
    with torch.inference_mode():
        return model(x)


serve(handle, a.seconds)
os.remove(path)
