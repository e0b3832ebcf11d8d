"""Child script: import one module and say how long it took; nothing else.

``python import_check.py MODULE`` prints ``{"seconds": ...}``. A crash (SIGILL
from a build made for a newer CPU), an exception or a hang is read by the
parent from the exit status and stderr. ``os._exit`` skips interpreter
teardown, which for torch-sized packages costs more than the import itself and
says nothing about whether it works.
"""

import importlib
import json
import os
import sys
import time


def main(module: str) -> None:
    start = time.perf_counter()
    importlib.import_module(module)
    print(json.dumps({"seconds": time.perf_counter() - start}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
    sys.stderr.flush()
    os._exit(0)
