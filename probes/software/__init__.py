"""The software stack: OS, Python environment, DL packages, PyTorch build, BLAS, thread variables.

:mod:`.model` holds the dataclasses (part of the report schema), :mod:`.stack`
assembles them; every child process it needs runs through :mod:`cpudoctor.probes.child`.
"""
