"""Probes: read what the machine is (CPU, topology, software, live load).

Probes never import Qt. Every probe that reads files takes ``root`` (default
``/``) so it runs unchanged on a captured tree (``cpudoctor report --root``).
They return plain dataclasses where ``None`` means "unknown" and a ``notes``
list says why; a missing or unreadable file never raises.
"""
