"""The rules, one module per category. Importing this package registers them all."""

from cpudoctor.advisor.rules import (  # noqa: F401  (import = registration)
    affinity,
    allocators,
    blas,
    crashes,
    environment,
    inference,
    isa,
    isa_forecast,
    known_problems,
    myths,
    os_memory,
    precision,
    threads,
    topology,
    torch,
    vm_cpu_model,
    windows,
)
