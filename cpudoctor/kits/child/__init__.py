"""Running child processes safely: the app's one kit for them (probes, lab, capture, window, CLI).

:mod:`.runner` starts and supervises a child (its own session, a deadline,
bounded output, ask -> terminate -> kill); :mod:`.lines` is the JSON-lines
protocol children speak; :mod:`.tree` finds and stops a child's descendants;
:mod:`.exitstatus` explains how a child ended; :mod:`.own` says how to run
CPU Doctor itself as a child (also from the standalone app).
"""
