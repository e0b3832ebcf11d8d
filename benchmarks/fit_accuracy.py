"""fit's estimate of a training step's peak memory against the measured peak of real training runs.

Run: python benchmarks/fit_accuracy.py [--quick]

The lab's models (SimpleCNN, LeNet-5, ResNet-18) are trained by the lab's own training job
(lab/jobs/train.py: its data, its loop, no census, no evaluation), each at three batch sizes, with and without
checkpointing of their repeated blocks where they have some; a transformer-sized MLP (benchmarks/fit_models.py:
eight BERT-base feed-forward blocks, 38 M parameters) by a plain training loop. Each run's peak resident memory
(VmHWM) is held against fit's estimate for it: fit measures the model once in its own child, at a doubling
series of batches up to the largest one checked. "estimate" uses every batch measured up to the one checked
(it is then measured there, in another process); "from <= batch/4" only those up to a quarter of it: how well
a small measurement extrapolates. Done when every estimate is within 15 % of the measured peak.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent

from cpudoctor.fitrun import lab_check  # noqa: E402
from cpudoctor.render.fit import render_check  # noqa: E402

LAB = {"simplecnn": [64, 256, 1024], "lenet5": [64, 256, 1024], "resnet18": [32, 128, 256]}
MLP = [4, 16, 32]


def mlp_peak(batch: int, checkpoint: bool) -> int:
    argv = [sys.executable, str(HERE / "fit_models.py"), "--batch", str(batch), "--steps", "3"]
    out = subprocess.run(argv + (["--checkpoint"] if checkpoint else []), capture_output=True, text=True, timeout=1800,
                         check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])["peak_bytes"]


def main() -> int:
    quick = "--quick" in sys.argv
    rows = []
    started = time.perf_counter()
    show = lambda r: print(render_check([r]).splitlines()[1], flush=True)  # noqa: E731
    print(render_check([]).splitlines()[0], flush=True)
    for model, batches in LAB.items():
        rows += lab_check(model, batches[:2] if quick else batches, seconds=900, on_row=show)
    rows += lab_check("fit_models:transformer_mlp", MLP[:2] if quick else MLP, path=str(HERE), seconds=1800,
                      train_peak=mlp_peak, on_row=show)
    print()
    print(render_check(rows), end="")
    print(f"({time.perf_counter() - started:.0f} s)")
    return 0 if all(r.error_share is not None and abs(r.error_share) <= 0.15 for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
