"""Printing query results for people and for programs, without hiding anything.

Pure text functions over (column names, rows of Python values), so read commands need neither
Polars nor pyarrow (they start in a fraction of a second):

* ``table``: every column, every value in full; when the rows do not fit the width, a vertical
  layout (one ``column  value`` line per field) instead of cut columns.
* ``fitted_table``: for summaries such as the leaderboard — short headers, and text columns
  elided in the middle (``gpt-5_gemm…_r8_c0``) until the table fits the width.
* ``write_csv`` / ``write_json``: every row; lists, maps and structs as JSON text in CSV and as
  JSON values in JSON; timestamps in ISO 8601; NaN and Infinity spelled out.
"""

from __future__ import annotations

import csv
import datetime as dt
import json
import math
import shutil
from collections.abc import Iterable, Sequence
from decimal import Decimal
from typing import IO, Any

DEFAULT_WIDTH = 120
GAP = "  "
ELLIPSIS = "…"


def terminal_width(stream: IO[str]) -> int:
    """The terminal's width when ``stream`` is one, else ``DEFAULT_WIDTH``."""
    try:
        if stream.isatty():
            return shutil.get_terminal_size((DEFAULT_WIDTH, 24)).columns
    except (AttributeError, ValueError, OSError):
        pass
    return DEFAULT_WIDTH


def _jsonable(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, Decimal | dt.timedelta) or not isinstance(
        value, str | int | float | bool | type(None)
    ):
        return str(value)
    return value


def json_text(value: Any) -> str:
    return json.dumps(_jsonable(value), ensure_ascii=False, separators=(",", ":"))


def text(value: Any, *, null: str = "null") -> str:
    """One value as text, in full."""
    if value is None:
        return null
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        if not math.isfinite(value):
            return _jsonable(value)
        return repr(value)
    if isinstance(value, str):
        return value
    if isinstance(value, dict | list | tuple):
        return json_text(value)
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, bytes):
        return value.hex()
    return str(value)


def _one_line(cell: str) -> str:
    return cell.replace("\r", "\\r").replace("\n", "\\n").replace("\t", "\\t")


def _is_number(values: Iterable[Any]) -> bool:
    seen = False
    for value in values:
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int | float | Decimal):
            return False
        seen = True
    return seen


def _grid(headers: Sequence[str], cells: list[list[str]], right: Sequence[bool]) -> list[str]:
    widths = [len(h) for h in headers]
    for row in cells:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], len(cell))

    def line(values: Sequence[str]) -> str:
        parts = [
            v.rjust(widths[i]) if right[i] else v.ljust(widths[i]) for i, v in enumerate(values)
        ]
        return GAP.join(parts).rstrip()

    return [line(headers), GAP.join("-" * w for w in widths), *(line(row) for row in cells)]


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]], width: int) -> list[str]:
    """Every column and every value: a grid when it fits ``width``, else a vertical layout."""
    cells = [[_one_line(text(v)) for v in row] for row in rows]
    right = [_is_number(row[i] for row in rows) for i in range(len(headers))]
    grid = _grid(headers, cells, right)
    if max(len(line) for line in grid) <= width or not headers:
        return grid
    return vertical(headers, rows)


def vertical(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
    """One block per row, one ``column  value`` line per field (psql's expanded display)."""
    name_width = max(len(h) for h in headers)
    lines: list[str] = []
    for number, row in enumerate(rows, start=1):
        lines.append(f"-[ row {number} ]" + "-" * max(0, name_width - 6))
        for header, value in zip(headers, row, strict=True):
            lines.append(f"{header.ljust(name_width)}  {_one_line(text(value))}")
    return lines


def elide(value: str, width: int) -> str:
    """``value`` cut to ``width`` characters by removing its middle (both ends stay readable)."""
    if len(value) <= width:
        return value
    if width <= 1:
        return ELLIPSIS[:width]
    tail = (width - 1) // 2
    head = width - 1 - tail
    return value[:head] + ELLIPSIS + (value[-tail:] if tail else "")


def fitted_table(
    headers: Sequence[str],
    cells: list[list[str]],
    *,
    width: int,
    right: Sequence[bool],
    elidable: Sequence[int],
    minimum: int = 10,
) -> list[str]:
    """A grid that fits ``width`` by eliding the ``elidable`` text columns in the middle, widest
    first, down to ``minimum`` characters each."""
    widths = [max([len(h), *(len(row[i]) for row in cells)]) for i, h in enumerate(headers)]
    total = sum(widths) + len(GAP) * (len(widths) - 1)
    while total > width:
        candidates = [i for i in elidable if widths[i] > max(minimum, len(headers[i]))]
        if not candidates:
            break
        widest = max(candidates, key=lambda i: widths[i])
        widths[widest] -= 1
        total -= 1
    fitted = [[elide(cell, widths[i]) for i, cell in enumerate(row)] for row in cells]
    return _grid(headers, fitted, right)


def write_csv(stream: IO[str], headers: Sequence[str], batches: Iterable[Sequence[Any]]) -> None:
    """Every row as CSV; nested values as JSON text, null as an empty field."""
    writer = csv.writer(stream, lineterminator="\n")
    writer.writerow(headers)
    for rows in batches:
        writer.writerows([[_csv_cell(v) for v in row] for row in rows])


def _csv_cell(value: Any) -> str:
    return text(value, null="")


def write_json(stream: IO[str], headers: Sequence[str], batches: Iterable[Sequence[Any]]) -> None:
    """Every row as one JSON array of objects, written as it comes."""
    stream.write("[")
    first = True
    for rows in batches:
        for row in rows:
            stream.write("\n" if first else ",\n")
            first = False
            stream.write(
                json.dumps(
                    {h: _jsonable(v) for h, v in zip(headers, row, strict=True)},
                    ensure_ascii=False,
                )
            )
    stream.write("\n]\n" if not first else "]\n")


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A GitHub-flavoured Markdown table (Dagster renders it in the asset's metadata)."""

    def cell(value: Any) -> str:
        return _one_line(text(value, null="")).replace("|", "\\|")

    lines = [
        "| " + " | ".join(headers) + " |",
        "|" + "|".join("---" for _ in headers) + "|",
        *("| " + " | ".join(cell(v) for v in row) + " |" for row in rows),
    ]
    return "\n".join(lines)
