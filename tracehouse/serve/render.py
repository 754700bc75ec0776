"""Printing query results for people and for programs, without hiding anything.

Pure text functions over (column names, rows of Python values), so read commands need neither
Polars nor pyarrow (they start in a fraction of a second):

* ``table``: every column, every value in full; when the rows do not fit the width, a vertical
  layout (one ``column  value`` line per field) instead of cut columns.
* ``fitted_table``: for summaries such as the leaderboard — short headers, and text columns
  elided in the middle (``gpt-5_gemm…_r8_c0``) until the table fits the width, each name still
  told apart from every other (``unique_abbreviations``).
* ``write_csv`` / ``write_json``: every row; lists, maps and structs as JSON text in CSV and as
  JSON values in JSON; timestamps in ISO 8601; NaN and Infinity spelled out.

Values come from datasets anyone can write: a control character (a screen clear, a window
title, an OSC-8 link) or a bidirectional override never reaches the terminal raw (``safe``, the
one escaping every line a person reads goes through; ``message`` for an error or a note, which
quotes file names, typed values and SQL), and a CSV cell a spreadsheet would run as a formula
(``=HYPERLINK(…)``) is written as text.
"""

from __future__ import annotations

import csv
import datetime as dt
import json
import math
import os
import re
import shutil
import textwrap
from collections.abc import Iterable, Iterator, Sequence
from decimal import Decimal
from typing import IO, Any

DEFAULT_WIDTH = 80
GAP = "  "
ELLIPSIS = "…"
# Characters that act on a terminal instead of printing: C0 and C1 controls, DEL, and the
# bidirectional embeddings, overrides and isolates (they reorder what follows on the line).
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_JSON_UNSAFE = re.compile("[\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
# A spreadsheet runs a cell that starts with one of these as a formula (OWASP CSV injection).
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def terminal_width(stream: IO[str]) -> int:
    """``COLUMNS`` when set (as shells and ``COLUMNS=80 tracehouse …`` set it), else the
    terminal's width when ``stream`` is one, else ``DEFAULT_WIDTH`` (80)."""
    return known_width(stream) or DEFAULT_WIDTH


def known_width(stream: IO[str]) -> int | None:
    """The width someone reads ``stream`` at: ``COLUMNS``, else the terminal's; None for a pipe
    or a file without ``COLUMNS`` (prose is then not wrapped, so a grep finds a whole line)."""
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    try:
        if stream.isatty():
            return shutil.get_terminal_size((DEFAULT_WIDTH, 24)).columns
    except (AttributeError, ValueError, OSError):
        pass
    return None


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    if char in _NAMED:
        return _NAMED[char]
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def safe(value: str) -> str:
    """``value`` with every terminal control character and bidi override written as an escape
    (``\\x1b``, ``\\u202e``, ``\\n``): one printed line, shown as it is, acting on nothing."""
    return _UNSAFE.sub(_escape, value)


# The line breaks a message is laid out with (DuckDB's have several lines, the last one
# indented under a caret), with the blanks around them: one space when it is printed as one
# line. Every other control character is data, escaped.
_MESSAGE_BREAKS = re.compile(r"[ \t]*(?:\r?\n[ \t]*)+")


def message(text: str) -> str:
    """An error or note as one printed line: its line breaks one space each, every control
    character left written as an escape (``safe``), whatever file name, typed value or echoed
    SQL it quotes."""
    return safe(_MESSAGE_BREAKS.sub(" ", text).strip(" "))


def fit_lines(lines: Iterable[str], width: int, indent: str = "    ") -> list[str]:
    """Prose lines wrapped to ``width``, continuations indented. A line breaks first between
    its phrases (after `` · ``, ``, `` or ``; ``), so a figure and its label stay together,
    then between words; a word longer than the width is broken, so no line is longer."""
    fitted: list[str] = []
    for line in lines:
        if len(line) <= width:
            fitted.append(line)
            continue
        lead = " " * (len(line) - len(line.lstrip(" "))) + indent
        current = ""
        for phrase in re.split(r"(?<= · )|(?<=, )|(?<=; )", line):
            if len(current) + len(phrase.rstrip()) <= width:
                current += phrase
                continue
            if current.strip():
                fitted.append(current.rstrip())
                current = lead
            if len(current) + len(phrase.rstrip()) <= width:
                current += phrase
                continue
            pieces = textwrap.wrap(
                phrase,
                width=width,
                initial_indent=current,
                subsequent_indent=lead,
                break_long_words=True,
                break_on_hyphens=False,
            )
            fitted.extend(pieces[:-1])
            current = (pieces[-1] + " ") if pieces else current
        if current.strip():
            fitted.append(current.rstrip())
    return fitted


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


class _NotPlainJson(Exception):
    """A value ``indented_json`` leaves to ``json.dumps`` (a subclass, a type json refuses, a
    key json would refuse or a cycle), so that its text or its error stays json's own."""


def indented_json(value: Any) -> str:
    """Exactly ``json.dumps(value, indent=2, ensure_ascii=False)``, several times faster.

    With an indent, json encodes in pure Python, one generator per container; the record pages
    indent thousands of manifests. This writes the same text from one flat list of parts, with
    json's own string encoder and json's spellings of floats (``NaN``, ``Infinity``, ``repr``),
    of keys that are not strings and of empty containers. Anything but plain dicts, lists,
    tuples, strings, numbers, booleans and None goes to ``json.dumps`` whole.
    """
    parts: list[str] = []
    try:
        _append_json(value, parts, "\n")
    except (_NotPlainJson, RecursionError):
        return json.dumps(value, indent=2, ensure_ascii=False)
    return "".join(parts)


_encode_json_string = json.encoder.encode_basestring  # json's (C) encoder for ensure_ascii=False


def _json_float(value: float) -> str:
    if value != value:
        return "NaN"
    if value in (math.inf, -math.inf):
        return "Infinity" if value > 0 else "-Infinity"
    return float.__repr__(value)


def _json_scalar(value: Any) -> str:
    kind = type(value)
    if kind is str:
        return _encode_json_string(value)
    if kind is float:
        return _json_float(value)
    if kind is bool:
        return "true" if value else "false"
    if kind is int:
        return int.__repr__(value)
    if value is None:
        return "null"
    raise _NotPlainJson


def _json_key(key: Any) -> str:
    # json turns keys of these types into strings (True -> "true", 1.5 -> "1.5") and refuses
    # any other
    return _encode_json_string(key if type(key) is str else _json_scalar(key))


def _append_json(value: Any, parts: list[str], newline: str) -> None:
    """``value``'s text appended to ``parts``; ``newline`` is a line break and its indent."""
    kind = type(value)
    if kind is dict:
        if not value:
            parts.append("{}")
            return
        inner = newline + "  "
        opening = "{" + inner
        for key, item in value.items():
            parts.append(opening)
            parts.append(_json_key(key))
            parts.append(": ")
            _append_json(item, parts, inner)
            opening = "," + inner
        parts.append(newline + "}")
    elif kind is list or kind is tuple:
        if not value:
            parts.append("[]")
            return
        inner = newline + "  "
        opening = "[" + inner
        for item in value:
            parts.append(opening)
            _append_json(item, parts, inner)
            opening = "," + inner
        parts.append(newline + "]")
    else:
        parts.append(_json_scalar(value))


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
    return safe(cell)


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
    return [
        _grid_line(headers, widths, right),
        _grid_rule(widths),
        *(_grid_line(row, widths, right) for row in cells),
    ]


def _grid_line(values: Sequence[str], widths: Sequence[int], right: Sequence[bool]) -> str:
    parts = [v.rjust(widths[i]) if right[i] else v.ljust(widths[i]) for i, v in enumerate(values)]
    return GAP.join(parts).rstrip()


def _grid_rule(widths: Sequence[int]) -> str:
    return GAP.join("-" * w for w in widths)  # the widest line of a grid


def grouped(value: Any) -> Any:
    """An integer count with thousands separators (``1,490``), the one way summaries print
    counts; anything else as it is."""
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return value


def table(
    headers: Sequence[str], rows: Sequence[Sequence[Any]], width: int, *, counts: bool = False
) -> list[str]:
    """Every column and every value: a grid when it fits ``width``, else a vertical layout.
    With ``counts``, integers are written with thousands separators."""
    headers = [_one_line(h) for h in headers]
    right = [_is_number(row[i] for row in rows) for i in range(len(headers))]
    if counts:
        rows = [[grouped(v) for v in row] for row in rows]
    cells = [[_one_line(text(v)) for v in row] for row in rows]
    grid = _grid(headers, cells, right)
    if max(len(line) for line in grid) <= width or not headers:
        return grid
    return vertical(headers, rows, width)


def vertical(
    headers: Sequence[str], rows: Sequence[Sequence[Any]], width: int | None = None
) -> list[str]:
    """One block per row, one ``column  value`` line per field (psql's expanded display). A
    value too long for the line goes under its name, whole when it fits the width (a digest
    stays one piece), else cut into lines of the width, in full."""
    headers = [_one_line(h) for h in headers]
    lines: list[str] = []
    for number, row in enumerate(rows, start=1):
        cells = [_one_line(text(value)) for value in row]
        lines.extend(_vertical_block(number, headers, cells, width))
    return lines


def _vertical_block(
    number: int, headers: Sequence[str], cells: Sequence[str], width: int | None
) -> Iterator[str]:
    name_width = min(max(len(h) for h in headers), 30)
    yield f"-[ row {number} ]" + "-" * max(0, name_width - 6)
    for header, cell in zip(headers, cells, strict=True):
        line = f"{header.ljust(name_width)}{GAP}{cell}"
        if width is None or len(line) <= width:
            yield line
            continue
        yield header
        room = max(20, width - len(GAP))
        yield from (GAP + cell[i : i + room] for i in range(0, len(cell), room))


class SpooledTable:
    """``table`` for rows that arrive in batches, in memory bounded by one batch: the first
    pass (``add``) measures the columns and writes the cells to ``spool``, a text file; the
    second (``lines``) reads them back. The lines are those ``table`` prints for the same rows.
    Cells never hold a newline or NUL (``safe`` escapes them), so a row is one spooled line."""

    def __init__(self, headers: Sequence[str], spool: IO[str]) -> None:
        self.headers = [_one_line(h) for h in headers]
        self.spool = spool
        self.widths = [len(h) for h in self.headers]
        self.seen_number = [False] * len(self.headers)
        self.not_number = [False] * len(self.headers)
        self.rows = 0
        self.spooled_chars = 0

    def add(self, rows: Iterable[Sequence[Any]]) -> None:
        for row in rows:
            cells = []
            for i, value in enumerate(row):
                if value is not None:  # _is_number's rule, one value at a time
                    if isinstance(value, bool) or not isinstance(value, int | float | Decimal):
                        self.not_number[i] = True
                    else:
                        self.seen_number[i] = True
                cell = _one_line(text(value))
                self.widths[i] = max(self.widths[i], len(cell))
                cells.append(cell)
            line = "\0".join(cells) + "\n"
            self.spool.write(line)
            self.spooled_chars += len(line)
            self.rows += 1

    def lines(self, width: int) -> Iterator[str]:
        self.spool.flush()
        self.spool.seek(0)
        columns = len(self.headers)
        cell_rows = (line.rstrip("\n").split("\0") if columns else [] for line in self.spool)
        if not self.headers or len(_grid_rule(self.widths)) <= width:
            right = [s and not n for s, n in zip(self.seen_number, self.not_number, strict=True)]
            yield _grid_line(self.headers, self.widths, right)
            yield _grid_rule(self.widths)
            for cells in cell_rows:
                yield _grid_line(cells, self.widths, right)
            return
        for number, cells in enumerate(cell_rows, start=1):
            yield from _vertical_block(number, self.headers, cells, width)


def elide(value: str, width: int) -> str:
    """``value`` cut to ``width`` characters by removing its middle (both ends stay readable)."""
    if len(value) <= width:
        return value
    if width <= 1:
        return ELLIPSIS[:width]
    tail = (width - 1) // 2
    head = width - 1 - tail
    return value[:head] + ELLIPSIS + (value[-tail:] if tail else "")


def unique_abbreviations(names: Sequence[str], width: int) -> dict[str, str]:
    """Each distinct name shortened to at most ``width`` characters so that no two print the
    same: the middle elided, and where that collides (``gpt-5_gemm…_high`` twice) the part the
    colliding names do not share is kept instead, between ellipses."""
    distinct = list(dict.fromkeys(names))
    short = {name: elide(name, width) for name in distinct}
    for _ in range(3):  # each pass resolves the collisions the previous one left
        groups: dict[str, list[str]] = {}
        for name in distinct:
            groups.setdefault(short[name], []).append(name)
        colliding = [group for group in groups.values() if len(group) > 1]
        if not colliding:
            return short
        for group in colliding:
            prefix = len(os.path.commonprefix(group))
            suffix = len(os.path.commonprefix([name[::-1] for name in group]))
            for name in group:
                short[name] = _around(name, prefix, max(0, min(suffix, len(name) - prefix)), width)
    # Still the same (names differing only far apart): number them, in name order.
    groups = {}
    for name in sorted(distinct):
        groups.setdefault(short[name], []).append(name)
    for label, group in groups.items():
        if len(group) > 1:
            for number, name in enumerate(group, start=1):
                tag = f"~{number}"
                short[name] = elide(label, max(1, width - len(tag))) + tag
    return short


def _around(name: str, prefix: int, suffix: int, width: int) -> str:
    """``name`` at most ``width`` long, keeping what lies between its first ``prefix`` and last
    ``suffix`` characters (the part that tells it apart), and as much of the ends as fits."""
    if len(name) <= width:
        return name
    middle = name[prefix : len(name) - suffix]
    if len(middle) + 2 >= width:  # only the distinguishing part fits
        return (ELLIPSIS if prefix else "") + middle[: width - (1 if prefix else 0) - 1] + ELLIPSIS
    room = width - len(middle) - 2
    head = min(prefix, (room + 1) // 2)
    tail = min(suffix, room - head)
    head = min(prefix, room - tail)
    start = name[:head] + (ELLIPSIS if head < prefix else "")
    end = (ELLIPSIS if tail < suffix else "") + (name[len(name) - tail :] if tail else "")
    return start + middle + end


def fitted_table(
    headers: Sequence[str],
    cells: list[list[str]],
    *,
    width: int,
    right: Sequence[bool],
    elidable: Sequence[int],
    minimum: int = 10,
) -> list[str]:
    """A grid that fits ``width`` by eliding the ``elidable`` text columns, widest first, down
    to ``minimum`` characters each, every distinct value still printed differently."""
    cells = [[_one_line(cell) for cell in row] for row in cells]
    widths = [max([len(h), *(len(row[i]) for row in cells)]) for i, h in enumerate(headers)]
    total = sum(widths) + len(GAP) * (len(widths) - 1)
    while total > width:
        candidates = [i for i in elidable if widths[i] > max(minimum, len(headers[i]))]
        if not candidates:
            break
        widest = max(candidates, key=lambda i: widths[i])
        widths[widest] -= 1
        total -= 1
    shortened = {i: unique_abbreviations([row[i] for row in cells], widths[i]) for i in elidable}
    fitted = [
        [shortened[i][cell] if i in shortened else cell for i, cell in enumerate(row)]
        for row in cells
    ]
    return _grid(headers, fitted, right)


def percent_change(relative_change: float) -> str:
    """A relative change as people read it, signed, in percent: 1.048 -> ``+104.8%``."""
    return f"{relative_change:+.1%}"


def z_text(z_score: float) -> str:
    """A z-score, signed, one decimal; an infinite one (a history without spread) as ``+inf``."""
    if math.isinf(z_score):
        return "+inf" if z_score > 0 else "-inf"
    return f"{z_score:+.1f}"


def write_csv(stream: IO[str], headers: Sequence[str], batches: Iterable[Sequence[Any]]) -> None:
    """Every row as CSV; nested values as JSON text, null as an empty field."""
    writer = csv.writer(stream, lineterminator="\n")
    writer.writerow(headers)
    for rows in batches:
        writer.writerows([[_csv_cell(v) for v in row] for row in rows])


def _csv_cell(value: Any) -> str:
    cell = text(value, null="")
    # Line breaks and tabs are CSV's to quote; every other control character is escaped.
    cell = _UNSAFE.sub(lambda m: m.group() if m.group() in _NAMED else _escape(m), cell)
    if isinstance(value, str) and cell.startswith(_FORMULA_START):
        return "'" + cell  # shown as text by spreadsheets, never evaluated
    return cell


def json_safe(document: str) -> str:
    """JSON text made safe to print: json.dumps escapes C0 controls inside strings already (a
    raw line break or tab outside them is whitespace); DEL, C1 controls and bidi overrides are
    escaped too, as ``\\uXXXX``, which JSON reads back as the same characters."""
    return _JSON_UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", document)


def write_json(stream: IO[str], headers: Sequence[str], batches: Iterable[Sequence[Any]]) -> None:
    """Every row as one JSON array of objects, written as it comes."""
    stream.write("[")
    first = True
    for rows in batches:
        for row in rows:
            stream.write("\n" if first else ",\n")
            first = False
            stream.write(
                json_safe(
                    json.dumps(
                        {h: _jsonable(v) for h, v in zip(headers, row, strict=True)},
                        ensure_ascii=False,
                    )
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


# The stylesheet of every report page (overview, definition, change and record pages).
PAGE_STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 1.5rem 2rem;
       color: #1d2330; background: #fafbfc; }
h1 { font-size: 1.5rem; margin-bottom: .2rem; } h2 { font-size: 1.2rem; margin-top: 2rem; }
h3 { font-size: 1.05rem; margin-top: 1.5rem; }
p.note { color: #4b5563; max-width: 60rem; font-size: .9rem; }
div.scroll { max-width: 100%; overflow-x: auto; margin: .6rem 0 1rem; }
table { border-collapse: collapse; font-size: .82rem; background: white; }
th, td { border: 1px solid #d5d9e0; padding: .25rem .5rem; text-align: left; white-space: nowrap; }
th { background: #eef1f6; position: sticky; top: 0; } td.empty { color: #6b7280; font-style: italic; }
nav a { margin-right: 1rem; } .chart { max-width: 1100px; overflow-x: auto; }
code { background: #eef1f6; padding: 0 .2rem; }
p.chart-title { font-weight: 600; margin: 1.2rem 0 .2rem; }
.swatch { display: inline-block; width: .7rem; height: .7rem; margin-right: .35rem;
          border-radius: 2px; vertical-align: baseline; }
ul.legend { list-style: none; padding: 0; display: flex; flex-wrap: wrap; gap: .4rem 1.2rem;
            font-size: .85rem; }
ul.legend .swatch { border: 1px solid #9aa3af; }
@media (max-width: 900px) { body { margin: 1rem; } }
"""
