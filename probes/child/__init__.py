"""The probes' children: standalone scripts run in the environment under test, and their cache.

:mod:`.scripts` holds the scripts (run by path with ``python -I -B``, so they
never import CPU Doctor) and :func:`~.scripts.script_argv`, the command line
that runs one; :mod:`.cache` keeps their answers while nothing they depend on
changed. Running and supervising a child is the shared kit's job
(:mod:`cpudoctor.kits.child`).
"""
