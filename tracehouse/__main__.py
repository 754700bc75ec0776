"""``python -m tracehouse``: the same command as ``tracehouse``."""

from tracehouse.cli import main

raise SystemExit(main())
