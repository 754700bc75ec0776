"""Turning bytes into JSON records, one line at a time, without ever raising.

A JSONL file is streamed line by line (memory does not grow with the file). Each non-blank
line becomes either a parsed object or a ``Reject`` naming the line and the reason; one bad
line never costs the rest of its file. Parsing is strict first (orjson, fast) and falls back
to Python's json module for what older writers produced: bare ``NaN``/``Infinity`` tokens,
integers beyond 64 bits. Lines that needed the fallback, or held two concatenated objects, are
flagged ``strict=False``: KernelIndex's strict parser would refuse the whole file (§2.2).

A damaged region costs only its lines (``_lines``). A line ends at LF, CRLF or a CR that no LF
follows, as most editors count them, so a CR-only stretch is read as the lines it holds. A line
holding a NUL byte is not text: it is one ``binary_line`` reject, and a stretch of UTF-16 text
(a NUL every other byte) is counted in its own line ends, so the lines after it keep their
numbers. A file is refused as a whole (``binary_file``) only when its first 8 KiB hold a NUL and
none of its lines holds a JSON object (``looks_binary``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from tracehouse.rejects import Reject

BOM = b"\xef\xbb\xbf"
RAW_PREFIX_CHARS = 200
# A file with a NUL byte this early may be binary as a whole (``looks_binary``).
BINARY_HEAD_BYTES = 8192
# The read buffer of a JSONL file read line by line. Python's default (8 KiB) refilled every
# two or three lines of real traces (~2.6 KB each, logs included): 3.3 us a line against 1.1.
LINE_READ_BUFFER_BYTES = 1 << 20
# A CR that ends a line by itself (classic Mac OS line ends, or a stray one mid-line).
_LONE_CR = re.compile(rb"\r(?!\n)")
# UTF-16 is told from a zero-filled region by its NULs: at least this share of the bytes of one
# parity and at most the rest of the other (ASCII text in UTF-16 has exactly one parity zero).
_UTF16_NUL_SHARE = 0.75
_UTF16_MIN_BYTES = 8


@dataclass(slots=True)  # not frozen: a frozen one's __init__ costs twice as much, one a line
class Record:
    """One parsed JSON value with where it came from."""

    line: int  # 1-based line of the source file
    index: int  # position inside the line (>0 only for `}{`-concatenated objects)
    offset: int  # byte offset of the line in the file
    raw: bytes  # the bytes of this JSON value
    value: Any
    strict: bool  # parsed by a strict JSON parser without repair


def raw_prefix(raw: bytes) -> str:
    return raw[: RAW_PREFIX_CHARS * 4].decode("utf-8", "replace")[:RAW_PREFIX_CHARS]


def _parse_int(text: str) -> int | float:
    # Integers beyond 64 bits become floats, exactly as the strict parser (orjson) reads them;
    # Python ints of any size would otherwise reach code that cannot store them.
    number = int(text)
    return number if -(2**63) <= number < 2**64 else float(text)


def _lenient_loads(text: str) -> Any:
    # Python's json accepts NaN/Infinity tokens and big integers, as the harness's own pydantic
    # models do; a number beyond float range becomes inf and is refused later by field checks.
    return json.loads(text, parse_int=_parse_int)


# orjson serialises at most this many levels of nesting; the warehouse stores parts of every
# record as JSON text, so a value nested deeper than this cannot be stored.
MAX_STORABLE_DEPTH = 254


def _unstorable(raw: bytes, values: list[tuple[Any, bool]]) -> tuple[str, str] | None:
    """Why a parsed line cannot be stored as JSON again, or None (the usual case).

    The strict parser accepts nesting up to 1024 levels; the lenient one also lets through
    ``\\ud800``-style escapes of lone surrogates, which are not Unicode text. Both would make
    serialising the record fail later, so they are refused here, with the line.
    """
    all_strict = values[0][1] if len(values) == 1 else all(one for _, one in values)
    if all_strict and raw.count(b"[") + raw.count(b"{") <= MAX_STORABLE_DEPTH:
        return None
    for value, _ in values:
        try:
            orjson.dumps(value)
        except orjson.JSONEncodeError as error:
            if "recursion" in str(error).lower():
                return ("too_deeply_nested", "JSON nesting is too deep to store")
            return ("invalid_json", f"not storable as JSON text: {error}")
    return None


def _split_concatenated(text: str) -> list[Any] | None:
    """Objects written back to back on one line by an append without a newline (`}{`)."""
    decoder = json.JSONDecoder(parse_int=_parse_int)
    values: list[Any] = []
    position = 0
    while position < len(text):
        while position < len(text) and text[position] in " \t\r\n":
            position += 1
        if position >= len(text):
            break
        try:
            value, position = decoder.raw_decode(text, position)
        except (ValueError, RecursionError):
            return None
        values.append(value)
    return values if len(values) > 1 else None


def parse_line(raw: bytes) -> tuple[list[tuple[Any, bool]], tuple[str, str] | None]:
    """Parse one line into [(value, strict)], or return (reason, message)."""
    values, problem = _parse_line(raw)
    if problem is None:
        problem = _unstorable(raw, values)
        if problem is not None:
            return [], problem
    return values, problem


def _parse_line(raw: bytes) -> tuple[list[tuple[Any, bool]], tuple[str, str] | None]:
    try:
        return [(orjson.loads(raw), True)], None
    except orjson.JSONDecodeError as strict_error:
        strict_message = str(strict_error)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        return [], ("invalid_utf8", f"invalid UTF-8 at byte {error.start}")
    try:
        return [(_lenient_loads(text), False)], None
    except RecursionError:
        return [], ("too_deeply_nested", "JSON nesting is too deep to parse")
    except ValueError as error:
        if "}{" in text.replace(" ", ""):
            values = _split_concatenated(text)
            if values is not None:
                return [(value, False) for value in values], None
        if "recursion" in strict_message.lower():
            return [], ("too_deeply_nested", "JSON nesting is too deep to parse")
        return [], ("invalid_json", f"not valid JSON: {error}")


def _utf16_order(chunk: bytes, *, continuing: bool) -> str | None:
    """The byte order, LE or BE, when ``chunk`` (one LF-ended read) is UTF-16 text, else None;
    a stretch already begun also continues with its short lines (a blank one is CR NUL LF)."""
    if len(chunk) < (2 if continuing else _UTF16_MIN_BYTES):
        return None
    even, odd = chunk[0::2], chunk[1::2]
    even_nul, odd_nul = even.count(0) / len(even), odd.count(0) / len(odd)
    if odd_nul >= _UTF16_NUL_SHARE and even_nul <= 1 - _UTF16_NUL_SHARE:
        return "LE"
    if even_nul >= _UTF16_NUL_SHARE and odd_nul <= 1 - _UTF16_NUL_SHARE:
        return "BE"
    return None


# (line number, byte offset, bytes, damage, whole): damage is None for a line to parse, else
# the message and the text to show of a line that is not UTF-8 text; whole is False when the
# line is only part of what KernelIndex reads as a line, which splits on LF alone (§2.2).
_Line = tuple[int, int, bytes, tuple[str, str] | None, bool]


def _crlf_only(chunk: bytes) -> bool:
    """Whether a read (one LF-ended line) with a CR has it only in a final CRLF. A read with no
    NUL and no other CR, outside a UTF-16 stretch, is one line as it is. The callers test
    ``0 not in chunk`` and ``13 not in chunk`` first: a memchr each, where ``find`` is not."""
    return chunk.find(b"\r") == len(chunk) - 2 and chunk.endswith(b"\n")


class _Lines:
    """Numbers the lines of one file, read by read, as an editor shows them.

    Lines end at LF, CRLF or a lone CR. A line holding NUL bytes comes with its damage. In a
    UTF-16 stretch only UTF-16 line ends count: its CR NUL LF NUL is one line end, and the NUL
    that a little-endian LF leaves at the start of the next read belongs to the line before.
    KernelIndex, which splits on LF only, cannot parse a read holding several lines or the NUL of
    a UTF-16 LF, so their lines are not ``whole``: their records are not strict JSON for it.
    A common read (no NUL, no CR but a final CRLF: ``_crlf_only``) outside a UTF-16 stretch
    never comes here.
    """

    __slots__ = ("number", "stretch")

    def __init__(self) -> None:
        self.number = 0  # the number of the last line
        self.stretch: str | None = None  # the byte order of the UTF-16 stretch it was in

    def split(self, chunk: bytes, start: int) -> list[_Line]:
        whole = True
        if self.stretch == "LE" and chunk.startswith(b"\x00"):
            chunk = chunk[1:]
            start += 1
            whole = False
        has_nul = b"\x00" in chunk
        if has_nul:
            self.stretch = _utf16_order(chunk, continuing=self.stretch is not None)
        elif self.stretch is not None and chunk.strip():
            self.stretch = None
        if self.stretch is not None:
            self.number += 1
            if not chunk.replace(b"\x00", b"").strip():
                return []
            text = (chunk + b"\x00" * (len(chunk) % 2)).decode(f"utf-16-{self.stretch}", "replace")
            message = f"UTF-16{self.stretch} text (a NUL every other byte), not UTF-8"
            return [(self.number, start, chunk, (message, text.strip().lstrip("\ufeff")), False)]
        pieces, position = [], 0
        for match in _LONE_CR.finditer(chunk):
            pieces.append((position, chunk[position : match.end()]))
            position = match.end()
        if position < len(chunk):
            pieces.append((position, chunk[position:]))
        whole = whole and sum(1 for _, piece in pieces if piece.strip()) < 2
        lines: list[_Line] = []
        for position, piece in pieces:
            self.number += 1
            nuls = piece.count(0) if has_nul else 0
            if nuls:
                message = f"{nuls} NUL byte{'s' * (nuls > 1)}: a zero-filled region or binary data"
                damage = (message, raw_prefix(piece.strip()))
                lines.append((self.number, start + position, piece, damage, False))
            else:
                lines.append((self.number, start + position, piece, None, whole))
        return lines


@dataclass
class FileEnd:
    """Where a read of a JSONL file stopped: the last line's number and the bytes read, and
    whether the read may go on from there as if it had never stopped (the last line ended at a
    line end, outside a UTF-16 stretch): a file that only grew is then read from its old end.
    ``iter_jsonl`` starts at ``offset``, numbering lines on from ``line``, and updates both."""

    line: int = 0
    offset: int = 0
    resumable: bool = True


def _file_lines(handle: Any, content: Any = None, end: FileEnd | None = None) -> Iterator[_Line]:
    """Every line of a file (from ``end``, where the handle stands), as ``_Lines`` numbers
    them; ``content``, a hashlib object, is fed every byte read on the way."""
    lines = _Lines()
    end = end if end is not None else FileEnd()
    lines.number = end.line
    offset = end.offset
    read = b""
    for read in handle:
        if content is not None:
            content.update(read)
        start = offset
        offset += len(read)
        chunk = read
        if start == 0 and chunk.startswith(BOM):
            chunk = chunk[len(BOM) :]
            start += len(BOM)
        if 0 not in chunk and lines.stretch is None and (13 not in chunk or _crlf_only(chunk)):
            lines.number += 1
            yield lines.number, start, chunk, None, True
        else:
            yield from lines.split(chunk, start)
    end.line, end.offset = lines.number, offset
    if read:
        end.resumable = read.endswith(b"\n") and lines.stretch is None


def iter_jsonl(
    path: Path, rel: str, content: Any = None, end: FileEnd | None = None
) -> Iterator[Record | Reject]:
    """Stream the records of a JSONL file; blank lines are skipped, never rejected.

    ``content``, a hashlib object, is fed every byte read, so the file's digest costs no
    second read. Lines are numbered as ``_Lines`` says (``_file_lines``). With ``end``, the
    read starts at its offset, numbering on from its line, and ``end`` says where it stopped.
    """
    with path.open("rb", buffering=LINE_READ_BUFFER_BYTES) as handle:
        if end is not None and end.offset:
            handle.seek(end.offset)
        for line_number, start, line, damage, whole in _file_lines(handle, content, end):
            raw = line.strip()
            if not raw:
                continue
            if damage is not None:
                yield Reject(
                    rel, line_number, "binary_line", damage[0], damage[1][:RAW_PREFIX_CHARS]
                )
                continue
            values, problem = parse_line(raw)
            if problem is not None:
                yield Reject(rel, line_number, problem[0], problem[1], raw_prefix(raw))
                continue
            for index, (value, strict) in enumerate(values):
                record_raw = raw if len(values) == 1 else orjson.dumps(value, default=str)
                yield Record(line_number, index, start, record_raw, value, strict and whole)


def unreadable_file(rel: str, error: OSError) -> Reject:
    """The reject of a file that could not be read (the OS's reason, else the error's text)."""
    return Reject(rel, None, "unreadable_file", f"cannot read: {error.strerror or error}", None)


def read_json_file(path: Path, rel: str) -> Record | Reject:
    """A whole-file JSON document (definitions, solutions)."""
    try:
        data = path.read_bytes()
    except OSError as error:
        return unreadable_file(rel, error)
    if data.startswith(BOM):
        data = data[len(BOM) :]
    if not data.strip():
        return Reject(rel, None, "empty_file", "the file is empty", None)
    if b"\x00" in data[:8192]:
        return Reject(rel, None, "binary_file", "the file holds binary data", raw_prefix(data))
    values, problem = parse_line(data.strip())
    if problem is not None:
        return Reject(rel, 1, problem[0], problem[1], raw_prefix(data))
    if len(values) != 1:
        return Reject(
            rel, 1, "invalid_json", "several JSON values in one .json file", raw_prefix(data)
        )
    value, strict = values[0]
    return Record(1, 0, 0, data.strip(), value, strict)


def looks_binary(path: Path) -> bool:
    """Whether a JSONL file is refused as a whole (``binary_file``): a NUL byte in its first
    8 KiB and no line holding a JSON object. A file with good lines among damaged ones is read
    line by line instead; only files starting with a NUL are read here a second time."""
    with path.open("rb") as handle:
        if b"\x00" not in handle.read(BINARY_HEAD_BYTES):
            return False
        handle.seek(0)
        for _, _, line, damage, _ in _file_lines(handle):
            raw = line.strip()
            if damage is None and raw.startswith(b"{"):
                values, problem = parse_line(raw)
                if problem is None and any(type(value) is dict for value, _ in values):
                    return False
    return True
