"""Training lab: micro-training, thread sweep and compute benchmarks.

Everything that imports torch runs here, in child processes started by the
GUI or CLI; the parent only reads JSON lines.
"""
