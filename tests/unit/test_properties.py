"""Issue 6, part 2: property tests. Whatever the input, parsing never raises, normalisation raises
only ``RecordError`` (a reject with a reason code), and the per-file ingester never raises at
all, including when it writes its staging parts.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.fixtures.hostile_corpus import (
    AUTHOR,
    DEFINITION,
    SOLUTION,
    definition_object,
    solution_object,
    trace_object,
)
from tracehouse.fetch.local import discover
from tracehouse.identify.context import load_context
from tracehouse.identify.dataset_context import DatasetContext
from tracehouse.ingest.worker import FileIngester, PartWriter, ingest_group
from tracehouse.read import normalize
from tracehouse.read.normalize import RecordError
from tracehouse.read.records import Record, parse_line
from tracehouse.rejects import REJECT_REASONS

# Modest by default (the whole file runs in well under a minute); raise it to hunt for bugs,
# e.g. PROPERTY_EXAMPLES=5000 PROPERTY_SEED=random pytest tests/unit/test_properties.py
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
EXAMPLES = {"records": 0}  # how many inputs the properties tried (reported in guarantees.md)

# -- strategies ---------------------------------------------------------------------------------

scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=20)
    | st.sampled_from(["NaN", "Infinity", "-Infinity", "", "PASSED", DEFINITION, SOLUTION, "1e400"])
)
json_values = st.recursive(
    scalars,
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(
            st.text(max_size=10) | st.sampled_from(["uuid", "axes", "type", "value"]),
            children,
            max_size=4,
        )
    ),
    max_leaves=25,
)


def maybe(valid: Any) -> st.SearchStrategy[Any]:
    """Mostly the valid value, sometimes anything at all."""
    return st.one_of(st.just(valid), st.just(valid), json_values)


numbers = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(min_value=-10, max_value=10**20),
    st.sampled_from(["NaN", "Infinity", "-Infinity", "0.5", True, False, None]),
)
workloads = st.one_of(
    st.fixed_dictionaries(
        {
            "axes": st.one_of(
                st.just({"M": 8}),
                st.dictionaries(st.text(max_size=4), numbers, max_size=3),
                json_values,
            )
        },
        optional={
            "inputs": st.one_of(
                st.just({"A": {"type": "random"}, "B": {"type": "random"}}),
                st.dictionaries(
                    st.text(max_size=4),
                    st.one_of(
                        st.fixed_dictionaries(
                            {},
                            optional={
                                "format": json_values,
                                "path": json_values,
                                "value": json_values,
                                "type": json_values,
                            },
                        ),
                        json_values,
                    ),
                    max_size=3,
                ),
            ),
            "uuid": maybe("u-1"),
            "tolerance": json_values,
        },
    ),
    json_values,
)
environments = st.fixed_dictionaries(
    {},
    optional={
        "hardware": maybe("NVIDIA B200"),
        "device": maybe("NVIDIA H100"),
        "libs": st.one_of(
            st.just({"torch": "2.9"}),
            st.dictionaries(st.text(max_size=5), json_values, max_size=3),
            json_values,
        ),
        "hardware_id": json_values,
    },
)
evaluations = st.fixed_dictionaries(
    {},
    optional={
        "status": st.one_of(
            st.sampled_from(sorted(normalize.STATUSES) + ["passed", "MAYBE", ""]), json_values
        ),
        "environment": st.one_of(environments, json_values),
        "timestamp": st.one_of(
            st.sampled_from(["2026-03-17T14:20:40.993273", "2026-03-17T14:20:40Z", "yesterday"]),
            json_values,
        ),
        "log": st.one_of(st.text(max_size=50), json_values),
        "error": json_values,
        "log_file": json_values,
        "correctness": st.one_of(
            st.none(),
            st.fixed_dictionaries(
                {},
                optional={
                    "max_relative_error": numbers,
                    "max_absolute_error": numbers,
                    "extra": st.one_of(
                        st.none(), st.fixed_dictionaries({"matched_ratio": numbers}), json_values
                    ),
                    "matched_ratio": numbers,
                },
            ),
            json_values,
        ),
        "performance": st.one_of(
            st.none(),
            st.fixed_dictionaries(
                {},
                optional={
                    "latency_ms": numbers,
                    "reference_latency_ms": numbers,
                    "speedup_factor": numbers,
                },
            ),
            json_values,
        ),
    },
)
traces = st.fixed_dictionaries(
    {},
    optional={
        "definition": st.one_of(
            st.sampled_from([DEFINITION, "no_such_definition", ""]), json_values
        ),
        "workload": workloads,
        "solution": st.one_of(st.sampled_from([SOLUTION, "ghost", "", None]), json_values),
        "evaluation": st.one_of(evaluations, st.none(), st.just({}), json_values),
        "extra_key": json_values,
    },
)


@st.composite
def mutated_valid_traces(draw: st.DrawFn) -> dict[str, Any]:
    """A valid trace with one field, anywhere in it, replaced by an arbitrary value."""
    value = trace_object(
        "u-mut", status=draw(st.sampled_from(["PASSED", "INCORRECT_NUMERICAL", "RUNTIME_ERROR"]))
    )
    paths: list[list[str]] = []

    def walk(node: Any, path: list[str]) -> None:
        if isinstance(node, dict):
            for key, child in node.items():
                paths.append([*path, key])
                walk(child, [*path, key])

    walk(value, [])
    path = draw(st.sampled_from(paths))
    target = value
    for key in path[:-1]:
        target = target[key]
    if draw(st.booleans()):
        target[path[-1]] = draw(json_values)
    else:
        del target[path[-1]]
    return value


dicts_like_records = st.one_of(
    traces, mutated_valid_traces(), st.dictionaries(st.text(max_size=12), json_values, max_size=6)
)
anything = st.one_of(json_values, dicts_like_records)


def _encode(value: Any) -> bytes:
    """JSON text as an older writer would produce it (bare NaN/Infinity allowed)."""
    return json.dumps(value).encode()


line_bytes = st.one_of(
    st.binary(max_size=200),
    anything.map(_encode),
    st.tuples(anything.map(_encode), st.binary(max_size=8), st.integers(0, 300)).map(
        lambda t: t[0][: t[2]] + t[1] + t[0][t[2] :]  # a valid line with bytes spliced in
    ),
    st.tuples(dicts_like_records.map(_encode), dicts_like_records.map(_encode)).map(
        lambda t: t[0] + t[1]
    ),
)

# -- a small dataset context --------------------------------------------------------------------


@pytest.fixture(scope="module")
def context() -> DatasetContext:
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        (root / "definitions/gemm").mkdir(parents=True)
        (root / "definitions/gemm" / f"{DEFINITION}.json").write_text(
            json.dumps(definition_object())
        )
        solution_dir = root / "solutions" / AUTHOR / "gemm" / DEFINITION
        solution_dir.mkdir(parents=True)
        (solution_dir / f"{SOLUTION}.json").write_text(json.dumps(solution_object()))
        files, rejects = discover(root)
        assert not rejects
        loaded = load_context(files, revision="0" * 40, baseline_map={})
        assert not loaded.rejects
        return loaded.context


def _normalize_all(value: Any) -> None:
    """Every normalisation entry point on one value: only RecordError may come out."""
    EXAMPLES["records"] += 1
    kind = normalize.classify(value)
    assert kind in (None, "trace", "workload", "solution", "definition")
    for function in (
        normalize.normalize_trace,
        normalize.normalize_workload,
        normalize.normalize_definition,
        normalize.normalize_solution,
    ):
        try:
            function(value)
        except RecordError as error:
            assert error.reason in REJECT_REASONS, error.reason
            assert isinstance(error.message, str) and error.message


def _ingest(context: DatasetContext, raws: list[bytes]) -> None:
    """Feed lines to one FileIngester and write its parts: nothing may raise."""
    rel = f"traces/{AUTHOR}/gemm/{DEFINITION}.jsonl"
    ingester = FileIngester(rel, context, source="test")
    expected_records = 0
    for number, raw in enumerate(raws, start=1):
        values, problem = parse_line(raw)
        if problem is not None:
            assert problem[0] in REJECT_REASONS
            continue
        for index, (value, strict) in enumerate(values):
            EXAMPLES["records"] += 1
            expected_records += 1
            ingester.record(Record(number, index, 0, raw, value, strict))
    result = ingester.result
    assert result.records == expected_records
    # every record is either a run, a workload record or a reject: nothing silently dropped
    assert result.runs + result.workload_records + result.rejected == expected_records
    with tempfile.TemporaryDirectory() as staging:
        writer = PartWriter(Path(staging), "part")
        writer.rows = ingester.parts
        writer.close()
        # The same lines as a file, through the one per-line path.
        path = Path(staging) / "lines.jsonl"
        path.write_bytes(b"\n".join(raws) + b"\n")
        group = ingest_group(
            [(path, rel)], context, Path(staging) / "group", "group", source="test"
        )
        counts = group.files[rel]
        refused_whole = (counts.records, counts.rejected) == (0, 1)
        nul_in_head = b"\x00" in path.read_bytes()[:8192]
        # A file is refused as a whole (binary_file) only with a NUL in its first 8 KiB and no
        # line holding a JSON object: a damaged region costs only its lines. A generated line
        # holding a CR, LF or NUL may read as several lines, so only the others are judged.
        plain = [raw for raw in raws if not any(end in raw for end in (b"\n", b"\r", b"\x00"))]
        holds_an_object = any(
            any(type(value) is dict for value, _ in values)
            for values, problem in map(parse_line, plain)
            if problem is None
        )
        if refused_whole:
            assert nul_in_head and not holds_an_object
        else:
            assert counts.runs + counts.workload_records + counts.rejected == counts.records
        if nul_in_head and not holds_an_object and len(plain) == len(raws):
            assert refused_whole


# -- properties ---------------------------------------------------------------------------------


@SETTINGS
@given(st.binary(max_size=300))
def test_parse_line_never_raises_on_bytes(raw: bytes) -> None:
    EXAMPLES["records"] += 1
    values, problem = parse_line(raw)
    assert (problem is None) == bool(values)
    if problem is not None:
        assert problem[0] in REJECT_REASONS


@SETTINGS
@given(line_bytes)
def test_parse_line_values_are_storable(raw: bytes) -> None:
    import orjson

    EXAMPLES["records"] += 1
    values, problem = parse_line(raw)
    if problem is None:
        assert values
        for value, _ in values:
            orjson.dumps(value)  # whatever parses can be written back as JSON


@SETTINGS
@given(anything)
def test_normalize_raises_only_record_error(value: Any) -> None:
    _normalize_all(value)


@SETTINGS
@given(line_bytes)
def test_normalize_raises_only_record_error_on_parsed_lines(raw: bytes) -> None:
    values, _ = parse_line(raw)
    for value, _strict in values:
        _normalize_all(value)


@SETTINGS
@given(st.lists(line_bytes, min_size=1, max_size=4))
def test_ingester_never_raises(context: DatasetContext, raws: list[bytes]) -> None:
    _ingest(context, raws)


@SETTINGS
@given(st.lists(st.one_of(traces, mutated_valid_traces()).map(_encode), min_size=1, max_size=4))
def test_ingester_never_raises_on_trace_shaped_lines(
    context: DatasetContext, raws: list[bytes]
) -> None:
    _ingest(context, raws)


def test_valid_trace_still_imports(context: DatasetContext) -> None:
    """The strategies' base record is valid, so the properties exercise the import path too."""
    rel = f"traces/{AUTHOR}/gemm/{DEFINITION}.jsonl"
    ingester = FileIngester(rel, context, source="test")
    raw = _encode(trace_object("u-valid"))
    values, problem = parse_line(raw)
    assert problem is None
    ingester.record(Record(1, 0, 0, raw, values[0][0], True))
    assert (ingester.result.runs, ingester.result.rejected) == (1, 0)
    trace = normalize.normalize_trace(values[0][0])
    assert trace.latency_ms == 0.5 and not math.isnan(trace.latency_ms)
    print(f"\nproperty inputs tried in this session: {EXAMPLES['records']}")
