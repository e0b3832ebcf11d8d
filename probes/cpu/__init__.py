"""What the chip is: identity and micro-architecture, instruction sets, caches and topology.

Everything here reads files under ``root`` (``/proc/cpuinfo``, sysfs), so it
works unchanged on a captured tree; the CPUID cross-check is the one part that
runs a child, and only for the live machine.
"""
