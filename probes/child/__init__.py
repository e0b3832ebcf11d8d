"""Child-process machinery: run a script in a separate process, bound it, explain its death.

A child may hang, print noise or die of SIGILL (a build made for a newer CPU);
:mod:`.runner` bounds and reads it, :mod:`.exitstatus` turns its end into words,
:mod:`.cache` keeps answers while nothing they depend on changed, and
:mod:`.scripts` holds the standalone scripts that run in the environment under test.
"""
