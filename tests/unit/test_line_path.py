"""Issue 26: every trace line takes one per-line path (``ingest.worker.FileIngester``).

The first line of each (definition, workload, environment, scope) combination takes the full
derivation (``normalize_trace``, ``kernelindex.identify_trace_line``); a later line of the same
combination whose shape ``ingest.combinations.repeatable_shape`` takes reuses its entities and
derives only its own run (``FileIngester._repeat``, the envelope written in
``ingest.combinations``).
The property below writes every generated line twice into one file, so the second copy takes
the repeat branch whenever its shape allows, and holds both copies' rows equal column by
column: the repeat branch (the run envelope included) against the full derivation, over lines
of every format era and hostile values. tests/contract/test_export_oracle.py holds whole builds
of every corpus to main's digests.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any

import orjson
import polars as pl
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.fixtures.hostile_corpus import (
    AUTHOR,
    DEFINITION,
    SOLUTION,
    definition_object,
    solution_object,
)
from tracehouse.fetch.local import discover
from tracehouse.identify.context import load_context
from tracehouse.ingest import worker
from tracehouse.ingest.combinations import combination_cache, repeatable_shape
from tracehouse.ingest.group import CarriedFile
from tracehouse.ingest.worker import (
    PART_TABLES,
    FileIngester,
    PartWriter,
    ingest_group,
)
from tracehouse.read.records import Record

FIXED_SEED = os.environ.get("PROPERTY_SEED") != "random"
SETTINGS = settings(
    max_examples=int(os.environ.get("PROPERTY_EXAMPLES", "150")),
    deadline=None,
    derandomize=FIXED_SEED,
    # A fixed run replays no saved examples either: examples a random run saved in .hypothesis/
    # would change what it tries (and the repeat-branch share it checks) from one checkout to
    # the next.
    **({"database": None} if FIXED_SEED else {}),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

# --- generated lines of every era ----------------------------------------------------------------

plain_numbers = st.one_of(
    st.floats(min_value=1e-3, max_value=1e3),
    st.floats(min_value=1e-12, max_value=1e-4),  # exact formatter territory
    st.floats(min_value=1e16, max_value=1e22),
    st.integers(min_value=1, max_value=5000),
    st.integers(min_value=2**53 - 3, max_value=2**60),
)
bounds = st.one_of(
    plain_numbers, st.just(0), st.just(0.0), st.sampled_from(["NaN", "Infinity", "nan", "inf", -1])
)
timestamps = st.one_of(
    st.just("2026-03-17T14:20:40.993273"),
    st.just("2026-03-18T01:02:03"),
    st.sampled_from(
        [
            "2026-03-17T14:20:40.993273",
            "2026-03-17T14:20:40",
            "2026-03-17T14:20:40.9Z",
            "2026-03-17T14:20:40.123456789",
            "2026-03-17 14:20:40",
            "2026-03-17T14:20:40+02:00",
            "2026-02-30T14:20:40",
            "2026-03-17",
            "1710684040",
        ]
    ),
    st.datetimes().map(lambda moment: moment.isoformat()),
)
logs = st.one_of(
    st.just(""),
    st.text(max_size=60),
    st.sampled_from(
        [
            "ok\nall good",
            "build\nRuntimeError: CUDA failed\nmore",
            "ÉRROR İstanbul error ſ\nTraceback",
            "x" * 70 + "[log truncated]\x1f",
            "partial [log truncated]  ",
        ]
    ),
)


@st.composite
def trace_lines(draw: st.DrawFn) -> dict[str, Any]:
    """A trace line of any era: current, v0 (`device`, `log_file`), legacy spellings, hostile."""
    status = draw(
        st.sampled_from(
            [
                "PASSED",
                "PASSED",
                "INCORRECT_NUMERICAL",
                "RUNTIME_ERROR",
                "COMPILE_ERROR",
                "INCORRECT_SHAPE",
                "TIMEOUT",
                "INCORRECT",
                "passed",
                "REWARD_HACK",
                "INVALID_REFERENCE",
            ]
        )
    )
    upper = status.upper()
    environment: dict[str, Any] = {
        draw(st.sampled_from(["hardware", "hardware", "device"])): draw(
            st.sampled_from(["NVIDIA B200", "NVIDIA H100 80GB HBM3", "Intel(R) Arc(TM) B580"])
        ),
        "libs": draw(
            st.sampled_from(
                [{"torch": "2.9.1+cu130", "cuda": "13.0"}, {"torch": "2.8"}, {"torch": 2.8}, {}]
            )
        ),
    }
    if draw(st.booleans()) and draw(st.booleans()):
        environment["hardware_id"] = draw(st.sampled_from(["gpu-0", "xpu-1"]))
    workload: dict[str, Any] = {
        "axes": {"M": draw(st.sampled_from([8, 16]))},
        "inputs": draw(
            st.sampled_from(
                [
                    {"A": {"type": "random"}, "B": {"type": "random"}},
                    {"A": {"format": "random"}, "B": {"type": "random"}},
                    {"A": {"type": "scalar", "value": 0.5}, "B": {"type": "random"}},
                ]
            )
        ),
    }
    uuid = draw(st.sampled_from(["u-1", "u-2", "", None]))
    if uuid is not None:
        workload["uuid"] = uuid
    evaluation: dict[str, Any] = {
        "status": status,
        "environment": environment,
        "timestamp": draw(timestamps),
    }
    log_member = draw(st.sampled_from(["log", "log", "log", "log_file", "error", None]))
    if log_member == "log_file":
        evaluation["log_file"] = "logs/run.log"
    elif log_member is not None:
        evaluation[log_member] = draw(logs)
    if upper in ("PASSED", "INCORRECT_NUMERICAL", "INCORRECT", "REWARD_HACK") or draw(
        st.booleans()
    ):
        correctness: dict[str, Any] = {
            "max_absolute_error": draw(bounds),
            "max_relative_error": draw(bounds),
        }
        extra = draw(st.sampled_from([None, "absent", {"matched_ratio": 0.99}, {"note": "x"}]))
        if extra != "absent":
            correctness["extra"] = extra
        if draw(st.booleans()) and draw(st.booleans()):
            correctness["matched_ratio"] = 0.5
        evaluation["correctness"] = correctness
    else:
        evaluation["correctness"] = None
    if upper == "PASSED" or (draw(st.booleans()) and draw(st.booleans())):
        performance: dict[str, Any] = {"latency_ms": draw(plain_numbers)}
        for member in ("reference_latency_ms", "speedup_factor"):
            choice = draw(st.sampled_from(["number", "number", "null", "absent", "zero"]))
            if choice == "number":
                performance[member] = draw(plain_numbers)
            elif choice == "null":
                performance[member] = None
            elif choice == "zero":
                performance[member] = 0
        evaluation["performance"] = performance
    else:
        evaluation["performance"] = None
    line: dict[str, Any] = {
        "definition": draw(st.sampled_from([DEFINITION] * 4 + ["no_such_definition"])),
        "workload": workload,
        "solution": draw(st.sampled_from([SOLUTION] * 4 + ["unknown_solution", "", None])),
        "evaluation": evaluation,
    }
    if draw(st.booleans()) and draw(st.booleans()):
        line["note"] = "an unknown member"
    return line


@pytest.fixture(scope="module")
def context_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("line-path-context")
    (root / "definitions").mkdir()
    (root / "definitions" / f"{DEFINITION}.json").write_text(json.dumps(definition_object()))
    solutions = root / "solutions" / AUTHOR
    solutions.mkdir(parents=True)
    (solutions / f"{SOLUTION}.json").write_text(json.dumps(solution_object()))
    return root


def staged_tables(files: list[tuple[Path, str]], context: Any) -> dict[str, pl.DataFrame]:
    """The staging parts of one parse, as frames in line order; derived combinations are
    forgotten first, so each file's first line of a combination takes the full derivation."""
    combination_cache(context.fingerprint).clear()
    with tempfile.TemporaryDirectory() as staging:
        result = ingest_group(files, context, Path(staging), "k", source="test")
        tables = {}
        for name, table in PART_TABLES.items():
            parts = [pq.read_table(Path(staging) / part) for part in result.parts.get(name, [])]
            frame = (
                pl.concat([pl.from_arrow(p) for p in parts])  # type: ignore[misc]
                if parts
                else pl.from_arrow(table.arrow_schema.empty_table())
            )
            assert isinstance(frame, pl.DataFrame)
            tables[name] = frame
    return tables


# Columns that name where a row came from (or derive from it): the copies differ there only.
PLACE_COLUMNS = frozenset({"run_id", "source_line", "record_index"})


def copies_agree(
    first: pl.DataFrame, second: pl.DataFrame, name: str, also: frozenset[str] = frozenset()
) -> None:
    """Equal but in PLACE_COLUMNS and ``also``."""
    assert first.height == second.height, name
    for column in first.columns:
        if column not in PLACE_COLUMNS | also:
            assert first[column].to_list() == second[column].to_list(), f"{name}.{column}"


SEEN = {"lines": 0, "repeats": 0}


@pytest.mark.slow
@SETTINGS
@given(st.lists(trace_lines(), min_size=1, max_size=6), st.booleans())
def test_a_repeat_line_gives_the_rows_of_its_full_derivation(
    context_dir: Path, lines: list[dict[str, Any]], in_scope: bool
) -> None:
    files, _ = discover(context_dir)
    context = load_context(files, revision=None, baseline_map={}).context
    rel = f"traces/{AUTHOR}/gemm/{DEFINITION}.jsonl" if in_scope else "legacy/traces.jsonl"
    texts = [json.dumps(line).encode() for line in lines]
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "traces.jsonl"
        # every line twice in a row: the first copy derives, the second may repeat
        path.write_bytes(b"".join(text + b"\n" + text + b"\n" for text in texts))
        tables = staged_tables([(path, rel)], context)
    runs = tables["runs"]
    first_lines = runs.filter(pl.col("source_line") % 2 == 1)
    second_lines = runs.filter(pl.col("source_line") % 2 == 0)
    copies_agree(first_lines, second_lines, "runs")
    correctness = tables["correctness"].join(
        runs.select("run_id", "source_line"), on="run_id", how="left", maintain_order="left"
    )
    copies_agree(
        correctness.filter(pl.col("source_line") % 2 == 1),
        correctness.filter(pl.col("source_line") % 2 == 0),
        "correctness",
    )
    trace_lines_table = tables["trace_lines"]
    copies_agree(
        trace_lines_table.filter(pl.col("source_line") % 2 == 1),
        trace_lines_table.filter(pl.col("source_line") % 2 == 0),
        "trace_lines",
    )
    # workload and environment rows: once per file, from the first copy
    for name in ("workloads", "environments"):
        if "source_line" in tables[name].columns:
            assert (tables[name]["source_line"] % 2 == 1).all(), name
    SEEN["lines"] += len(lines)
    SEEN["repeats"] += sum(repeatable_shape(line, context.definitions) for line in lines)


@pytest.mark.slow  # with the property it checks: the fast tier leaves both out, not one
def test_the_property_exercised_the_repeat_branch() -> None:
    """The property above must not pass by deriving every line in full. About one generated
    line in ten has the repeatable shape; the bound is a quarter of that, since Hypothesis
    draws differently each run (a tenth failed at 43 of 474)."""
    if SEEN["lines"] == 0:
        pytest.skip("run together with test_a_repeat_line_gives_the_rows_of_its_full_derivation")
    assert SEEN["repeats"] >= max(1, SEEN["lines"] // 40), SEEN


def _passed_record(
    uuid: str, *, absolute_error: float = 0.0, relative_error: float = 0.0
) -> dict[str, Any]:
    return {
        "definition": DEFINITION,
        "workload": {"axes": {"M": 8}, "inputs": {}, "uuid": uuid},
        "solution": SOLUTION,
        "evaluation": {
            "status": "PASSED",
            "environment": {"hardware": "NVIDIA B200", "libs": {}},
            "timestamp": "2026-03-17T14:20:40",
            "log": "",
            "correctness": {
                "max_absolute_error": absolute_error,
                "max_relative_error": relative_error,
            },
            "performance": {"latency_ms": 0.5},
        },
    }


def _passed_line(uuid: str) -> str:
    return json.dumps(_passed_record(uuid))


def test_lenient_and_joined_lines_take_the_full_derivation(context_dir: Path) -> None:
    """Bare NaN tokens and `}{`-joined records never reuse a combination: all four lines are
    imported, and the strict line after the lenient ones gives the strict line's row."""
    files, _ = discover(context_dir)
    context = load_context(files, revision=None, baseline_map={}).context
    line = _passed_record("u-1", absolute_error=math.nan, relative_error=0.1)
    text = json.dumps(line)  # writes a bare NaN token
    strict = text.replace("NaN", "0.25")
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "t.jsonl"
        path.write_text(strict + "\n" + text + "\n" + text + text + "\n" + strict + "\n")
        rel = f"traces/{AUTHOR}/gemm/{DEFINITION}.jsonl"
        tables = staged_tables([(path, rel)], context)
    runs = tables["runs"]
    assert runs.height == 5
    # The worker learns at line 2 that KernelIndex cannot read the file, and completes line 1
    # again (it was not written yet).
    first, last = runs.filter(pl.col("source_line") == 1), runs.filter(pl.col("source_line") == 4)
    assert last["identity_error"].to_list() == ["file_not_strict_json"]
    copies_agree(first, last, "runs")
    assert tables["run_keys"]["file_unreadable"].to_list() == [True] * 5


def test_bounded_entity_caches_forget_and_derive_the_same_rows(
    context_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The per-workload caches of a parser keep at most WORKLOAD_CACHE_ENTRIES workloads (a
    source of 200,000 workloads held whole took each worker past 3 GB). With a bound of 3 and
    twelve workloads seen in turn, twice, every cache stays at its bound and the rows are the
    ones the unbounded parse gives."""
    from tracehouse.ingest import combinations, worker
    from tracehouse.kernelindex import validation
    from tracehouse.kernelindex import workload as kernelindex_workload
    from tracehouse.kernelindex.cache import BoundedCache

    files, _ = discover(context_dir)
    context = load_context(files, revision=None, baseline_map={}).context
    lines = []
    for turn in range(2):
        for index in range(12):
            lines.append(
                {
                    "definition": DEFINITION,
                    "workload": {"axes": {"M": 8 + index}, "inputs": {}, "uuid": f"u-{index}"},
                    "solution": SOLUTION,
                    "evaluation": {
                        "status": "PASSED",
                        "environment": {"hardware": "NVIDIA B200", "libs": {}},
                        "timestamp": f"2026-03-17T14:{20 + turn}:{index:02d}",
                        "log": "",
                        "correctness": {"max_absolute_error": 0.0, "max_relative_error": 0.1},
                        "performance": {"latency_ms": 0.5 + index + turn},
                    },
                }
            )
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "t.jsonl"
        path.write_text("".join(json.dumps(line) + "\n" for line in lines))
        rel = f"traces/{AUTHOR}/gemm/{DEFINITION}.jsonl"
        unbounded = staged_tables([(path, rel)], context)
        bounded_caches = {
            "combinations": None,
            "workload rows": BoundedCache(3),
            "workload identities": BoundedCache(3),
            "valid workloads": BoundedCache(3),
        }
        monkeypatch.setattr(combinations, "WORKLOAD_CACHE_ENTRIES", 3)
        monkeypatch.setattr(combinations, "_COMBINATIONS", {})
        monkeypatch.setattr(worker, "_WORKLOADS", bounded_caches["workload rows"])
        monkeypatch.setattr(
            kernelindex_workload, "_WORKLOAD_CACHE", bounded_caches["workload identities"]
        )
        monkeypatch.setattr(validation, "_VALID_WORKLOADS", bounded_caches["valid workloads"])
        bounded = staged_tables([(path, rel)], context)
        bounded_caches["combinations"] = combination_cache(context.fingerprint)
    for name, cache in bounded_caches.items():
        assert cache is not None and len(cache.data) == 3, name
    assert unbounded["runs"].height == bounded["runs"].height == 24
    for name in PART_TABLES:
        assert unbounded[name].equals(bounded[name]), name


def test_a_group_streams_its_chunks_into_one_part_per_table(
    context_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each chunk of rows is written as it fills (here, with row groups of a byte, each is a
    row group of the group's one part per table): a worker holds at most a chunk and a row
    group, and the group's parts hold the same rows whatever the chunk size."""
    monkeypatch.setattr(worker, "PART_ROW_GROUP_BYTES", 1)
    files, _ = discover(context_dir)
    context = load_context(files, revision=None, baseline_map={}).context
    path = tmp_path / "t.jsonl"
    path.write_text("".join(_passed_line(f"u-{i}") + "\n" for i in range(7)) + "{broken\n")
    rel = f"traces/{AUTHOR}/gemm/{DEFINITION}.jsonl"
    # (hold_rows=0: no rows held past a chunk while the file may turn out unreadable)
    chunked = ingest_group(
        [(path, rel)], context, tmp_path / "chunked", "k", chunk_rows=2, hold_rows=0, source="test"
    )
    whole = ingest_group([(path, rel)], context, tmp_path / "whole", "k", source="test")
    assert chunked.parts == whole.parts
    assert chunked.parts["runs"] == ["k.runs.0.parquet"] and "rejects" in chunked.parts
    runs = pq.ParquetFile(tmp_path / "chunked" / chunked.parts["runs"][0])
    assert runs.metadata.num_rows == 7 and runs.metadata.num_row_groups >= 3
    for name, [part] in chunked.parts.items():
        assert pq.read_table(tmp_path / "chunked" / part).equals(
            pq.read_table(tmp_path / "whole" / part)
        ), name
    # nothing but the parts: no temporary left beside them
    assert sorted(p.name for p in (tmp_path / "chunked").iterdir()) == sorted(
        part for [part] in chunked.parts.values()
    )


def test_rejected_lines_stream_like_runs_and_entity_rows_wait_for_a_chunk(
    context_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file of broken lines is held a chunk at a time too (its rejects, each with the line's
    first characters, were all held until the file ended); the entity tables, a row per file
    and workload, are written when they fill a chunk or the part closes, not beside every
    chunk of runs. (Row groups of a byte: each chunk written is a row group.)"""
    monkeypatch.setattr(worker, "PART_ROW_GROUP_BYTES", 1)
    files, _ = discover(context_dir)
    context = load_context(files, revision=None, baseline_map={}).context
    path = tmp_path / "t.jsonl"
    path.write_text(
        "".join(f'{{"broken": {i}\n' for i in range(9))
        + "".join(_passed_line(f"u-{i % 2}") + "\n" for i in range(9))
    )
    rel = f"traces/{AUTHOR}/gemm/{DEFINITION}.jsonl"
    # (hold_rows=0: no rows held past a chunk while the file may turn out unreadable)
    chunked = ingest_group(
        [(path, rel)], context, tmp_path / "chunked", "k", chunk_rows=2, hold_rows=0, source="test"
    )
    ingest_group([(path, rel)], context, tmp_path / "whole", "k", source="test")
    groups = {
        name: pq.ParquetFile(tmp_path / "chunked" / part).metadata.num_row_groups
        for name, [part] in chunked.parts.items()
    }
    assert groups["rejects"] >= 4 and groups["runs"] >= 4
    assert groups["workloads"] == 1 and groups["environments"] == 1
    for name, [part] in chunked.parts.items():
        assert pq.read_table(tmp_path / "chunked" / part).equals(
            pq.read_table(tmp_path / "whole" / part)
        ), name


def test_a_group_that_fails_leaves_no_part(context_dir: Path, tmp_path: Path) -> None:
    """A part appears under its name only when the group is complete: an abort (a failed or
    interrupted group) removes the rows appended so far."""
    files, _ = discover(context_dir)
    context = load_context(files, revision=None, baseline_map={}).context
    writer = PartWriter(tmp_path / "staging", "k")
    ingester = FileIngester(
        f"traces/{AUTHOR}/gemm/{DEFINITION}.jsonl", context, writer.rows, source="test"
    )
    for number in range(1, 4):
        raw = _passed_line(f"u-{number}").encode()
        ingester.record(Record(number, 0, 0, raw, json.loads(raw), True))
    writer.flush()
    assert list((tmp_path / "staging").iterdir())  # the temporaries being written
    writer.abort()
    assert list((tmp_path / "staging").iterdir()) == []
    assert writer.written == {}


def test_a_full_cache_forgets_its_oldest_key_and_a_key_put_again_keeps_its_place() -> None:
    from tracehouse.kernelindex.cache import BoundedCache

    cache = BoundedCache(3)
    for key in (b"a", b"b", b"c"):
        cache.put(key, key.upper())
    cache.put(b"a", b"A2")  # already held: replaced, nothing forgotten
    assert [cache.get(k) for k in (b"a", b"b", b"c")] == [b"A2", b"B", b"C"]
    for key in (b"d", b"e"):
        cache.put(key, key.upper())
    # the oldest two (a, b, in the order first put) went; the bound holds
    assert [cache.get(k) for k in (b"a", b"b", b"c", b"d", b"e")] == [None, None, b"C", b"D", b"E"]
    for number in range(10_000):  # a long run of puts through a full cache stays bounded
        cache.put(("k", str(number).encode()), number)
    assert len(cache.data) == 3 and cache.get(("k", b"9999")) == 9999
    cache.clear()
    cache.put(b"x", 1)
    assert cache.data == {b"x": 1}


def test_a_cache_keyed_by_orjson_bytes_keeps_each_key_at_its_own_size() -> None:
    # orjson returns its output in a 4 KiB buffer; kept as a cache key as it is, 16,384
    # workloads in four caches took a parser worker ~250 MiB more than the keys' text.
    import tracemalloc

    from tracehouse.kernelindex.cache import BoundedCache

    cache = BoundedCache(2_000)
    tracemalloc.start()
    try:
        before, _ = tracemalloc.get_traced_memory()
        for index in range(1_000):
            workload = {"axes": {"M": index}, "uuid": f"{index:036d}"}
            key = orjson.dumps(workload)
            cache.put(key, True)
            cache.put(("gemm", key, orjson.dumps({"hardware": "H100"})), True)
        after, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert cache.get(orjson.dumps({"axes": {"M": 7}, "uuid": f"{7:036d}"})) is True
    assert (after - before) / 1_000 < 1_000  # bytes a workload's two entries hold, all told


def test_carried_rows_are_the_rows_a_parse_gives_and_an_unreadable_part_is_parsed_instead(
    context_dir: Path, tmp_path: Path
) -> None:
    """A group's unchanged file keeps its rows from the group's previous parts (every table,
    its correctness and environment rows included, and only its own); when those parts cannot
    be read as staging parts, the file is parsed after all, with the same rows."""
    files, _ = discover(context_dir)
    context = load_context(files, revision=None, baseline_map={}).context
    kept, other = tmp_path / "kept.jsonl", tmp_path / "other.jsonl"
    kept.write_text("".join(_passed_line(f"k-{i}") + "\n" for i in range(5)) + "{broken\n")
    other.write_text("".join(_passed_line(f"o-{i}") + "\n" for i in range(3)))
    kept_rel = f"traces/{AUTHOR}/gemm/{DEFINITION}.jsonl"
    other_rel = f"traces/other/gemm/{DEFINITION}.jsonl"
    both = ingest_group(
        [(kept, kept_rel), (other, other_rel)], context, tmp_path / "s", "old", source="test"
    )
    alone = ingest_group([(kept, kept_rel)], context, tmp_path / "s", "alone", source="test")
    counts = both.files[kept_rel]
    carried = CarriedFile(
        str(kept),
        kept_rel,
        counts.content_sha256,
        counts.records,
        counts.runs,
        counts.rejected,
        counts.kernelindex_unreadable,
        counts.end_line,
        counts.end_offset,
    )
    old_parts = [
        (table, tmp_path / "s" / name) for table, names in both.parts.items() for name in names
    ]

    def rows(result: Any, staging: Path) -> dict[str, Any]:
        return {name: pq.read_table(staging / part) for name, [part] in result.parts.items()}

    expected = rows(alone, tmp_path / "s")
    assert expected["runs"].num_rows == 5 and expected["rejects"].num_rows == 1
    result = ingest_group(
        [],
        context,
        tmp_path / "s",
        "new",
        carried=[carried],
        carried_parts=old_parts,
        source="test",
    )
    assert result.files == {kept_rel: alone.files[kept_rel]}
    assert result.parts.keys() == alone.parts.keys()
    assert rows(result, tmp_path / "s") == expected

    # The file grows (a re-run of a workload it has, a new one): its old rows are carried and
    # its new lines parsed, into the rows of a parse of the whole grown file.
    def read_on_and_whole(name: str) -> tuple[Any, Any]:
        carried_grown = dataclasses.replace(carried, grown=True)
        staging = tmp_path / "s"
        grown = ingest_group(
            [],
            context,
            staging,
            name,
            carried=[carried_grown],
            carried_parts=old_parts,
            source="test",
        )
        whole = ingest_group([(kept, kept_rel)], context, staging, f"{name}-whole", source="test")
        assert rows(grown, staging) == rows(whole, staging)
        return grown.files[kept_rel], whole.files[kept_rel]

    with kept.open("a") as handle:
        handle.write(_passed_line("k-1") + "\n" + _passed_line("k-9") + "\n")
    grown, whole = read_on_and_whole("grown")
    assert grown.read_on and dataclasses.replace(grown, read_on=False) == whole
    kept.write_text(kept.read_text().replace("k-0", "k-8"))  # its old bytes changed: parsed whole
    rewritten, whole = read_on_and_whole("rewritten")
    assert not rewritten.read_on and rewritten == whole
    kept.write_text("".join(_passed_line(f"k-{i}") + "\n" for i in range(5)) + "{broken\n")
    # A part that is not a staging part of this importer: the file is parsed instead.
    (tmp_path / "s" / both.parts["runs"][0]).write_bytes(b"not parquet")
    parsed = ingest_group(
        [],
        context,
        tmp_path / "s",
        "parsed",
        carried=[carried],
        carried_parts=old_parts,
        source="test",
    )
    assert parsed.files[kept_rel] == alone.files[kept_rel]
    assert rows(parsed, tmp_path / "s") == expected
