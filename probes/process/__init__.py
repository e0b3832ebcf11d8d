"""A running process seen from outside: its threads, CPUs, libraries, workers and memory.

Read from ``/proc`` under ``root`` only (never by attaching to the process), for
``cpudoctor inspect`` and the Inspector page.
"""
