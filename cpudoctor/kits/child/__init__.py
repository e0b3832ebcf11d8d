"""Running child processes safely: the app's one kit for them (probes, lab, capture, window, CLI, ``run``'s job).

:mod:`.runner` starts and supervises a child (its own session or group, a
deadline, bounded output, ask -> terminate -> kill); :mod:`.streams` is what
its stdout and stderr become (the line protocol, a capture, a pass-through);
:mod:`.captured` runs short programs whose output is the answer; :mod:`.lines`
is the JSON-lines protocol children speak; :mod:`.tree` finds and stops a
child's descendants; :mod:`.guard` ends a job's group should CPU Doctor die;
:mod:`.exitstatus` explains how a child ended; :mod:`.own` says how to run
CPU Doctor itself as a child (also from the standalone app).
"""
