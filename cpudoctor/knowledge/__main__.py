"""``python -m cpudoctor.knowledge``: check every data file against its schema and write the list of checked files.

Run it after editing a file in ``resources/`` (tests/test_knowledge.py says so when the list is stale);
see :mod:`cpudoctor.knowledge.validated`.
"""

from __future__ import annotations

import sys
from pathlib import Path

from cpudoctor import knowledge, resources
from cpudoctor.knowledge.validated import MANIFEST, manifest_text


def main() -> int:
    text = manifest_text(knowledge.ALL, lambda loader: loader.read(trust_list=False))
    target = Path(resources.__file__).parent / MANIFEST
    target.write_text(text, encoding="ascii")
    print(f"wrote {target}: {len(knowledge.ALL)} data files and their schemas, all valid")
    return 0


if __name__ == "__main__":
    sys.exit(main())
