"""The SQL files under ``sql/``: one SELECT each, named after the view or table it returns."""

from __future__ import annotations

from functools import cache
from pathlib import Path

# Views created in tracehouse.duckdb, in dependency order (run_rankings is materialized).
VIEW_ORDER = ("baseline_solutions", "run_summary", "leaderboard", "solution_latency")


def sql_dir() -> Path:
    here = Path(__file__).resolve().parent
    for candidate in (here.parent / "sql", here / "_sql"):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError("the sql/ folder is missing from this installation")


@cache
def sql_text(name: str) -> str:
    """The SELECT in ``sql/<name>.sql``, without a trailing semicolon."""
    text = (sql_dir() / f"{name}.sql").read_text()
    return text.strip().rstrip(";")
