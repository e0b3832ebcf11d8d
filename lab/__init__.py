"""Training lab: micro-training, thread sweep and compute benchmarks, measured honestly.

Two sides. The child jobs (:mod:`cpudoctor.lab.jobs`) are standalone scripts
that import torch and run in a child process, in any Python 3.8+ that has
torch, without CPU Doctor. Everything else here is the parent side and never
imports torch: starting and stopping jobs (``runner``), reading their lines
(``protocol``), checking settings (``settings``), reading an outcome into a
typed result (``results``), the sweep's orchestration (``sweep``,
``variants``, ``workers``) and what only the parent knows (``peak``,
``native``).
"""
