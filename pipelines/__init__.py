"""tracehouse: a warehouse for FlashInfer-Bench kernel benchmark results."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # what type checkers see of the lazy attributes below
    from pipelines.api import connect as connect
    from pipelines.api import sql as sql
    from pipelines.api import table as table

    __version__: str

DISTRIBUTION = "tracehouse"
# The Python API (pipelines/api.py), imported on first use so `import pipelines` stays light.
API = ("connect", "table", "sql")


def __getattr__(name: str) -> Any:
    if name in API:
        from pipelines import api

        return getattr(api, name)
    # __version__ is looked up in the installed distribution's metadata (pyproject.toml's
    # version) on first use only: reading it costs every `tracehouse` command ~10 ms otherwise.
    if name == "__version__":
        from importlib.metadata import PackageNotFoundError, version

        try:
            return version(DISTRIBUTION)
        except PackageNotFoundError:  # a source tree that was never installed
            return "0+unknown"
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# Bumped whenever parsing or normalisation changes, so cached staging parts are rebuilt.
IMPORTER_VERSION = "tracehouse-importer/4"
