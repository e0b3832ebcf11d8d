"""The operating system's frequency policy, memory and swap."""

from __future__ import annotations

from cpudoctor.advisor import machine
from cpudoctor.advisor.engine import Facts, rule
from cpudoctor.kits.format import size
from cpudoctor.model import Finding, Report

# Drivers whose "powersave" governor is the dynamic, EPP-driven policy, not "lowest clock".
_EPP_DRIVERS = ("intel_pstate", "amd-pstate-epp")


@rule("OS001", "governor-powersave", category="os", severity="warning",
      title="CPU frequency governor is powersave")
def governor_powersave(report: Report) -> list[Finding]:
    """What it checks:
        The cpufreq governor and driver. With ``acpi-cpufreq`` or passive ``amd-pstate``, the
        ``powersave`` governor holds every core at its lowest clock. With ``intel_pstate`` or
        ``amd-pstate-epp`` (active mode), ``powersave`` is the normal dynamic policy and the energy
        preference (EPP) decides instead.

    Why it matters:
        A core held at its minimum (often 1.2-1.8 GHz against a 4-5 GHz boost) trains 2-3x slower.
        In active EPP mode the clock still ramps, but a "power" energy preference delays it.

    Fix:
        ``sudo cpupower frequency-set -g performance`` (or ``schedutil``); in EPP mode set the
        preference to ``performance`` or ``balance_performance`` for the training run.
    """
    f = Facts(report)
    governor = f.get("software.os.governor")
    if not governor:
        return []
    driver = f.get("software.os.cpufreq_driver")
    if governor != "powersave":
        return [f.finding("ok", f"CPU governor is {governor}" + (f" ({driver})" if driver else ""))]
    if driver in _EPP_DRIVERS:
        return [f.finding(
            "info", f"Governor powersave under {driver}: clocks follow the energy preference",
            why=(f"With the {driver} driver in active mode, 'powersave' is the dynamic policy, not the lowest clock; "
                 "the energy-performance preference (EPP) decides how fast cores ramp up."),
            fix="For training runs, set the EPP to performance (or balance_performance).",
            snippet=("cat /sys/devices/system/cpu/cpu0/cpufreq/energy_performance_preference\n"
                     "echo performance | sudo tee /sys/devices/system/cpu/cpu*/cpufreq/energy_performance_preference"))]
    max_mhz = f.get("cpu.max_mhz")
    base = f.get("cpu.base_mhz")
    clocks = f" instead of up to {max_mhz:.0f} MHz" if max_mhz else ""
    return [f.finding(
        "warning", "CPU governor powersave holds cores at their lowest clock",
        why=(f"The {driver or 'cpufreq'} driver with the powersave governor runs every core at its minimum frequency"
             f"{clocks}{f' (base {base:.0f} MHz)' if base else ''}; compute-bound training slows down by the same ratio."),
        fix="Switch to the performance (or schedutil) governor for training.",
        snippet="sudo cpupower frequency-set -g performance\n# or, without cpupower:\necho performance | sudo tee /sys/devices/system/cpu/cpu*/cpufreq/scaling_governor")]


@rule("MEM001", "swap-in-use", category="memory", severity="warning",
      title="Swap is in use")
def swap_in_use(report: Report) -> list[Finding]:
    """What it checks:
        Used swap (``SwapTotal - SwapFree`` from ``/proc/meminfo``) above 256 MiB when the report
        was made.

    Why it matters:
        Pages in swap come back at disk speed. A training step that touches a swapped-out tensor or
        dataset page stalls for milliseconds per page, and the job's throughput collapses long
        before an out-of-memory kill.

    Fix:
        Free memory (close other programs, fewer DataLoader workers, smaller batch), then
        ``sudo swapoff -a && sudo swapon -a`` to pull pages back; add RAM for the job's size.
    """
    f = Facts(report)
    used = f.get("software.os.swap_used_bytes")
    total = f.get("software.os.swap_total_bytes")
    if used is None:
        return []
    limit = machine.knowledge()["memory"]["swap_used_warn_mb"] * 2**20
    if used <= limit:
        return [f.finding("ok", f"Swap barely used ({size(used)} of {size(total)})" if total else "No swap in use")]
    avail = f.get("software.os.mem_available_bytes")
    return [f.finding(
        "warning", f"{size(used)} of swap in use",
        why=(f"{size(used)} of {size(total)} swap is used"
             + (f" while {size(avail)} of RAM is available" if avail is not None else "")
             + ". Pages touched during training come back at disk speed, stalling steps."),
        fix="Free memory, then pull swapped pages back into RAM.",
        snippet="free -h\nsudo swapoff -a && sudo swapon -a  # only when free RAM exceeds used swap")]


@rule("MEM002", "low-memory", category="memory", severity="warning",
      title="Little memory for training")
def low_memory(report: Report) -> list[Finding]:
    """What it checks:
        Total RAM (or the cgroup memory limit, whichever is lower) below 16 GiB, or available
        memory below 4 GiB.

    Why it matters:
        Training holds the model, its gradients and the optimizer state (Adam: two more copies),
        activations for the batch, and in every DataLoader worker a copy of the dataset object.
        Below these figures ordinary jobs page to swap or are killed by the OOM killer (SIGKILL,
        no Python traceback).

    Fix:
        Use smaller batches and fewer DataLoader workers, ``torch.utils.checkpoint`` for
        activations, or more memory (raise the container/WSL limit if there is one).
    """
    f = Facts(report)
    total = f.get("software.os.mem_total_bytes")
    if total is None:
        return []
    limit = f.get("software.os.cgroup_memory_limit_bytes")
    avail = f.get("software.os.mem_available_bytes")
    k = machine.knowledge()["memory"]
    effective = min(total, limit) if limit else total
    problems = []
    if effective < k["min_total_gb_training"] * 2**30:
        src = f"the cgroup limit is {size(limit)}" if limit and limit < total else f"the machine has {size(total)}"
        problems.append(f"{src}, under the ~{k['min_total_gb_training']} GiB a typical training job wants")
    if avail is not None and avail < k["min_available_gb_training"] * 2**30:
        problems.append(f"only {size(avail)} is available now")
    if not problems:
        return [f.finding("ok", f"Memory: {size(effective)}" + (f", {size(avail)} available" if avail is not None else ""))]
    return [f.finding(
        "warning", f"Little memory for training ({size(effective)})",
        why=("; ".join(problems).capitalize() + ". Model, gradients, optimizer state and each DataLoader worker's copy "
             "of the dataset must fit, or the job swaps or is OOM-killed."),
        fix="Smaller batches, fewer workers (each copies the dataset), activation checkpointing, or more memory.",
        snippet="free -h\ncat /sys/fs/cgroup/memory.max 2>/dev/null")]
