"""The bench corpus with one trace line in ten written in an odd shape (issue 26's last target).

Every odd shape is one the real dataset's eras or hand-edited files hold (docs of the format,
``tracehouse/read/normalize.py``): a lower-case status, ``device`` for ``hardware``, an unknown
member in the evaluation, a bare ``NaN`` (lenient JSON) for an error bound, a timestamp with a UTC
offset, and a latency too small to store (rejected with its file and line). None of them may take
the repeat branch of ``tracehouse/ingest/combinations.py``; they measure what the full
derivation costs when a tenth of the lines need it. Definitions, solutions and workloads are
hard links to the clean corpus; only the trace files are written.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

ODD_SHARE = 10  # one line in this many


def _status_case(record: dict[str, Any]) -> bytes:
    record["evaluation"]["status"] = record["evaluation"]["status"].lower()
    return orjson.dumps(record)


def _device_key(record: dict[str, Any]) -> bytes:
    environment = record["evaluation"]["environment"]
    environment["device"] = environment.pop("hardware")
    return orjson.dumps(record)


def _unknown_member(record: dict[str, Any]) -> bytes:
    record["evaluation"]["rerun_of"] = "an earlier run"
    return orjson.dumps(record)


def _bare_nan(record: dict[str, Any]) -> bytes:
    correctness = record["evaluation"].get("correctness")
    if not isinstance(correctness, dict):
        return _unknown_member(record)
    correctness["max_relative_error"] = "@NAN@"
    return orjson.dumps(record).replace(b'"@NAN@"', b"NaN")


def _offset_timestamp(record: dict[str, Any]) -> bytes:
    evaluation = record["evaluation"]
    evaluation["timestamp"] = evaluation["timestamp"][:19] + "+00:00"
    return orjson.dumps(record)


def _unstorable_latency(record: dict[str, Any]) -> bytes:
    performance = record["evaluation"].get("performance")
    if not isinstance(performance, dict):
        return _status_case(record)
    performance["latency_ms"] = 1e-7  # 0.1 ns: no positive integer of nanoseconds
    return orjson.dumps(record)


SHAPES: tuple[Callable[[dict[str, Any]], bytes], ...] = (
    _status_case,
    _device_key,
    _unknown_member,
    _bare_nan,
    _offset_timestamp,
    _unstorable_latency,
)


def _odd_file(source: Path, target: Path, counter: list[int]) -> None:
    out = []
    with source.open("rb") as handle:
        for number, raw in enumerate(handle):
            line = raw.rstrip(b"\n")
            if number % ODD_SHARE == ODD_SHARE // 2 and line.strip():
                record = orjson.loads(line)
                line = SHAPES[counter[0] % len(SHAPES)](record)
                counter[0] += 1
            out.append(line)
    target.write_bytes(b"\n".join(out) + b"\n")


def ensure_odd_corpus(clean: Path, dataset_stamp: dict[str, Any]) -> tuple[Path, int]:
    """``<clean>-odd`` beside the clean corpus, made unless it is there for the same clean one;
    returns it and how many lines were made odd."""
    odd = clean.with_name(clean.name + "-odd")
    stamp_path = odd.with_name(odd.name + ".json")
    # The clean corpus and this file's shapes: a change to either makes the corpus again.
    shapes = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()
    stamp = {"clean": dataset_stamp, "shapes": shapes}
    if stamp_path.is_file() and (odd / "traces").is_dir():
        recorded = json.loads(stamp_path.read_text())
        if recorded.get("stamp") == stamp:
            return odd, int(recorded["odd_lines"])
    stamp_path.unlink(missing_ok=True)
    shutil.rmtree(odd, ignore_errors=True)
    counter = [0]
    for path in sorted(clean.rglob("*")):
        if not path.is_file():
            continue
        target = odd / path.relative_to(clean)
        target.parent.mkdir(parents=True, exist_ok=True)
        if path.relative_to(clean).parts[0] == "traces" and path.suffix == ".jsonl":
            _odd_file(path, target, counter)
        else:
            os.link(path, target)
    stamp_path.write_text(json.dumps({"stamp": stamp, "odd_lines": counter[0]}) + "\n")
    return odd, counter[0]
