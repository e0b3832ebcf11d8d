"""The bytes of one file in ``resources/``, read bounded: the one reader under the data files and their list.

A FIFO, a link to a device or a 3 GB file in ``resources/`` is a damaged installation, never a hang or a
whole read. Both :mod:`.datafile` (the data files and schemas) and :mod:`.validated` (the list of files
the suite checked) read through here, so neither imports the other for it.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from cpudoctor import resources

# The largest data file is ~60 kB; one of 16 MiB is not one CPU Doctor shipped (a 3 GB file was read whole).
MAX_BYTES = 16 << 20


def read_resource(name: str, limit: int = MAX_BYTES) -> bytes:
    """The bytes of ``resources/<name>``: a regular file of at most ``limit`` bytes (a FIFO, a link to a device
    or a 3 GB file there is a damaged installation, never a hang or a whole read); OSError otherwise."""
    ref = resources.path(name)
    if isinstance(ref, Path):              # an installed or editable package: a real file, checked first
        st = os.stat(ref)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.EINVAL, "not a regular file", name)
        if st.st_size > limit:
            raise OSError(errno.EFBIG, f"larger than {limit >> 10:,} kB", name)
    data = resources.read_bytes(name)      # inside a zip or a frozen app: no FIFOs there, and small
    if len(data) > limit:
        raise OSError(errno.EFBIG, f"larger than {limit >> 10:,} kB", name)
    return data
