"""A JSONL file that only grew is read on from where its last read ended (records.FileEnd):
what that read and the read on give together is what one read of the whole file gives, line
numbers, offsets and rejects included, wherever the file was cut; and a read that ended where
it cannot go on (no line end, a lone CR, inside a UTF-16 stretch) says so."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from tracehouse.read.records import BOM, FileEnd, Record, iter_jsonl


def _line(n: int) -> bytes:
    return json.dumps({"definition": "d", "n": n}).encode()


# Every kind of line the reader tells apart: CRLF ends, a lone-CR region, a NUL region, a
# UTF-16LE stretch with CRLF ends, blank lines, a cut line and lenient JSON.
CONTENT = b"".join(
    [
        BOM + _line(1) + b"\n",
        _line(2) + b"\r\n",
        b"\n",
        _line(3) + b"\r" + _line(4) + b"\r" + _line(5) + b"\n",
        _line(6) + b"\n",
        b"\x00" * 12 + b"\n",
        _line(7) + b"\n",
        ('{"definition": "d", "n": 8}\r\n' * 2).encode("utf-16-le"),
        _line(9) + b"\n",
        b'{"definition": "d", "cut\n',
        b'{"definition": "d", "n": NaN}\n',
        _line(10) + b"\n",
    ]
)


def _read(path: Path, end: FileEnd | None = None, content: Any = None) -> list[tuple[Any, ...]]:
    found: list[tuple[Any, ...]] = []
    for item in iter_jsonl(path, "f.jsonl", content, end):
        if isinstance(item, Record):
            found.append((item.line, item.index, item.offset, item.raw, item.strict))
        else:
            found.append((item.line, item.reason, item.message, item.raw_prefix))
    return found


def test_a_read_on_from_any_resumable_end_gives_what_one_whole_read_gives(
    tmp_path: Path,
) -> None:
    path = tmp_path / "f.jsonl"
    path.write_bytes(CONTENT)
    whole_end = FileEnd()
    whole = _read(path, whole_end)
    assert whole_end.resumable and whole_end.offset == len(CONTENT)
    resumed = 0
    for cut in range(len(CONTENT) + 1):
        path.write_bytes(CONTENT[:cut])
        content = hashlib.sha256()
        end = FileEnd()
        before = _read(path, end, content)
        assert end.offset == cut
        if not end.resumable:
            # Only a read that stopped without a line end, or inside the UTF-16 stretch.
            assert not CONTENT[:cut].endswith(b"\n") or b"\x00" in CONTENT[cut - 2 : cut + 1]
            continue
        resumed += 1
        path.write_bytes(CONTENT)
        after = _read(path, end, content)
        assert before + after == whole, cut
        assert (end.line, end.offset) == (whole_end.line, whole_end.offset)
        assert content.hexdigest() == hashlib.sha256(CONTENT).hexdigest()
    # Every line end outside the UTF-16 stretch is a place to read on from.
    assert resumed >= CONTENT.count(b"\n") - 4


def test_a_read_that_cannot_go_on_says_so(tmp_path: Path) -> None:
    path = tmp_path / "f.jsonl"
    for tail in (b"", b"\r", b'{"definition": "d"', "x\r\n".encode("utf-16-le")):
        path.write_bytes(_line(1) + b"\n" + tail)
        end = FileEnd()
        _read(path, end)
        assert end.resumable == (tail == b""), tail
