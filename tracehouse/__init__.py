"""tracehouse: a warehouse for FlashInfer-Bench kernel benchmark results."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # what type checkers see of the lazy attributes below
    from tracehouse.api import connect as connect
    from tracehouse.api import sql as sql
    from tracehouse.api import table as table

    __version__: str

DISTRIBUTION = "tracehouse"
# The Python API (tracehouse/api.py), imported on first use so `import tracehouse` stays light.
API = ("connect", "table", "sql")


def __getattr__(name: str) -> Any:
    if name in API:
        from tracehouse import api

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
