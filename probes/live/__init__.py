"""Live samples (load, clocks, temperatures, memory) and the ring buffers that keep them.

Non-blocking by design: one sample costs well under a millisecond, so the
monitor can sample at 2 Hz on the UI's timer without hurting the job it watches.
"""
