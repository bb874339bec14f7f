"""``python -m fwlab``: the same command line as the ``fwlab`` script."""

from fwlab.cli import main

raise SystemExit(main())
