"""How the assets are named and described in Dagster's UI."""

from __future__ import annotations

import re
from pathlib import Path

import dagster as dg

from tracehouse.warehouse import DUCKDB_FILE

KEY_PREFIX = "tracehouse"
# Who answers for the assets, shown on each in the UI and searchable (owner:team:tracehouse):
# one team owns every stage. The observable source asset cannot carry owners (Dagster's
# SourceAsset has no such field); it is the dataset's, not ours, in any case.
OWNERS = ["team:tracehouse"]
# The database the DuckDB file attaches as (its file name), for dagster/table_name.
DUCKDB_DATABASE = DUCKDB_FILE.removesuffix(".duckdb")

_PLACEHOLDER = re.compile(r"(?<!`)<([\w./ -]+)>(?!`)")


def asset_key(name: str) -> dg.AssetKey:
    """The key of a tracehouse asset: every key under one prefix, so a shared deployment's
    other code locations never collide with ``runs`` or ``report``."""
    return dg.AssetKey([KEY_PREFIX, name])


def table_name(name: str) -> str:
    """A table's or view's name as a DuckDB session on tracehouse.duckdb qualifies it."""
    return f"{DUCKDB_DATABASE}.main.{name}"


def file_uri(path: Path) -> str:
    """A file's ``dagster/uri``: the warehouse may be a relative path
    (``TRACEHOUSE_WAREHOUSE=warehouse``), which has no file URI, so it is made absolute (against
    the run's working directory, where the relative path was meant)."""
    return path.absolute().as_uri()


def markdown_safe(text: str) -> str:
    """A description as Dagster renders it (Markdown): a placeholder such as ``<warehouse>``
    would be taken for an HTML tag and vanish, so it is shown as code."""
    return _PLACEHOLDER.sub(r"`<\1>`", text)
