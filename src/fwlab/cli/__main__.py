"""``python -m fwlab.cli``: the same command line as ``python -m fwlab`` and the ``fwlab`` script."""

from fwlab.cli import main

raise SystemExit(main())
