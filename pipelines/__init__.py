"""Dagster's code location for tracehouse: ``definitions.py`` and the ``defs`` folder it loads.

Thin wrappers over the library (``tracehouse``); nothing in the library imports this package,
so a project's own ``pipelines/`` folder never hides what the CLI or ``import tracehouse``
needs."""
