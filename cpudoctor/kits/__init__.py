"""Shared kits at the bottom of the house: used by every layer, deciding nothing about CPUs or training.

=====================  =========================================================
:mod:`.cpulist`        the kernel's notations parsed with bounds: ``0-3,8-11``, masks, sizes
:mod:`.rooted`         reading files under a root (a captured tree), contained and bounded
:mod:`.child`          running child processes: supervised, bounded output, stopped in stages
:mod:`.plural`         counted nouns ("1 thread", "2 threads")
:mod:`.format`         numbers for people: sizes, clocks, durations, percentages
=====================  =========================================================
"""
