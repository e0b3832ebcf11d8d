"""``python -m cpudoctor`` is the same as the ``cpudoctor`` command."""

from cpudoctor.cli import main

raise SystemExit(main())
