"""RFC 8785 canonical JSON: unit cases from the identity doc §1.2 and a property test against
the reference implementation `rfc8785.dumps`."""

from __future__ import annotations

import hashlib
import math

import pytest
import rfc8785
from hypothesis import example, given, settings
from hypothesis import strategies as st

from tracehouse.kernelindex import (
    CanonicalizationError,
    canonical_json,
    digest,
    manifest_digest,
    text_digest,
)

MAX_SAFE = 2**53 - 1


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (1.0, b"1"),
        (0.0, b"0"),
        (-0.0, b"0"),
        (2048, b"2048"),
        (1e20, b"100000000000000000000"),
        (1e21, b"1e+21"),
        (1e-7, b"1e-7"),
        (0.000001, b"0.000001"),
        (0.00001, b"0.00001"),
        (5e-324, b"5e-324"),
        (-5e-324, b"-5e-324"),
        (1.7976931348623157e308, b"1.7976931348623157e+308"),
        (3.2229050361820555e-07, b"3.2229050361820555e-7"),
        (24207.900390625, b"24207.900390625"),
        (0.1352337747812271, b"0.1352337747812271"),
        (1.5e16, b"15000000000000000"),
        (float(2**60), b"1152921504606847000"),  # shortest digits, then zeros, like ECMAScript
        (123456789012345680000.0, b"123456789012345680000"),
        (-1.25e-5, b"-0.0000125"),
        (MAX_SAFE, b"9007199254740991"),
        (-MAX_SAFE, b"-9007199254740991"),
    ],
)
def test_numbers(value, expected):
    assert canonical_json(value) == expected
    assert rfc8785.dumps(value) == expected


@pytest.mark.parametrize("value", [2**53, -(2**53), 10**30, [1, {"a": 2**64}]])
def test_integers_beyond_the_safe_range_raise(value):
    with pytest.raises(CanonicalizationError):
        canonical_json(value)


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, {"a": [math.nan]}])
def test_nan_and_infinity_raise(value):
    with pytest.raises(CanonicalizationError):
        canonical_json(value)


def test_booleans_are_not_numbers():
    assert canonical_json([True, False, None, 1, 0]) == b"[true,false,null,1,0]"
    assert canonical_json({"a": True}) == b'{"a":true}'


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("é", '"é"'.encode()),
        ("·", '"·"'.encode()),
        ("😀", '"😀"'.encode()),
        ("\u2028\u2029", '"\u2028\u2029"'.encode()),  # raw, unlike JavaScript-safe encoders
        ("\x7f", b'"\x7f"'),
        ('"\\/', b'"\\"\\\\/"'),
        ("\b\t\n\f\r", b'"\\b\\t\\n\\f\\r"'),
        ("\x00\x01\x1f", b'"\\u0000\\u0001\\u001f"'),
    ],
)
def test_strings(text, expected):
    assert canonical_json(text) == expected
    assert rfc8785.dumps(text) == expected


def test_lone_surrogates_raise():
    with pytest.raises(CanonicalizationError):
        canonical_json("\ud800")


def test_keys_sort_by_utf16_code_units():
    assert (
        canonical_json({"b": 1, "a": 2, "_": 3, "B": 4, "A_": 5})
        == b'{"A_":5,"B":4,"_":3,"a":2,"b":1}'
    )
    # U+1F600 is D83D DE00 in UTF-16, below U+FB01, although its code point is higher.
    value = {"\ufb01": 1, "\U0001f600": 2, "z": 3}
    assert canonical_json(value) == '{"z":3,"😀":2,"ﬁ":1}'.encode()
    assert rfc8785.dumps(value) == canonical_json(value)


def test_structure():
    value = {"z": [], "y": {}, "x": [1, [2, {"b": None, "a": "s"}]], "w": (1, 2)}
    assert canonical_json(value) == b'{"w":[1,2],"x":[1,[2,{"a":"s","b":null}]],"y":{},"z":[]}'


def test_non_string_keys_raise():
    with pytest.raises(CanonicalizationError):
        canonical_json({1: "a"})


def test_digests():
    assert digest({"a": 1}) == "sha256:" + hashlib.sha256(b'{"a":1}').hexdigest()
    protocol = {
        "harness": {
            "name": "flashinfer-bench",
            "repository": "https://github.com/flashinfer-ai/flashinfer-bench",
        },
        "measurement": {"timer": "harness_reported", "primaryStatistic": "mean"},
        "correctness": {
            "reference": "definition reference implementation",
            "comparator": "flashinfer_bench_eval",
        },
        "comparability": {"family": "flashinfer_bench_trace"},
    }
    assert (
        manifest_digest("BenchmarkProtocol", protocol)
        == "sha256:7d44d206ad086b4bece35ce31f6531ebb11f07e0d9dcfb74c75be86d3ec02095"
    )
    assert (
        text_digest("import torch\n")
        == "sha256:b91a3bc5e2064d025a8ae122555c96948ec5b4895d53d809c4b66b71a4915133"
    )
    # Lone surrogates are written as U+FFFD; a split pair is joined as in UTF-16.
    assert text_digest("a\ud800b") == text_digest("a\ufffdb")
    assert text_digest("\ud83d\ude00") == text_digest("😀")


# -- property test against the reference implementation ------------------------------------

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-MAX_SAFE, max_value=MAX_SAFE)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text()
)
json_keys = st.text() | st.sampled_from(
    ["a", "A", "_", "b_1", "B", "\ufb01", "\U0001f600", "é", "\x00"]
)


def json_trees(scalars, keys, max_leaves):
    """JSON values: ``scalars`` nested in lists and objects keyed by ``keys``."""
    return st.recursive(
        scalars,
        lambda children: (
            st.lists(children, max_size=5) | st.dictionaries(keys, children, max_size=6)
        ),
        max_leaves=max_leaves,
    )


json_values = json_trees(json_scalars, json_keys, max_leaves=40)


@pytest.mark.slow
@settings(max_examples=1500, deadline=None)
@given(json_values)
@example(-0.0)
@example(5e-324)
@example(1e21)
@example(9.999999999999999e20)
@example(1e-6)
@example(9.99999999999999e-7)
@example({"\U0001f600": 1, "\ufb01": 2, "\uffff": 3, "\ue000": 4})
def test_matches_rfc8785(value):
    assert canonical_json(value) == rfc8785.dumps(value)


@settings(max_examples=300, deadline=None)
@given(
    st.integers(min_value=MAX_SAFE + 1)
    | st.integers(max_value=-MAX_SAFE - 1)
    | st.sampled_from([math.nan, math.inf, -math.inf])
)
def test_rejects_what_rfc8785_rejects(value):
    with pytest.raises(rfc8785.CanonicalizationError):
        rfc8785.dumps(value)
    with pytest.raises(CanonicalizationError):
        canonical_json(value)


@settings(max_examples=300, deadline=None)
@given(st.floats(allow_nan=False, allow_infinity=False))
def test_floats_round_trip(value):
    assert float(canonical_json(value)) == (0.0 if value == 0 else value)


# -- the orjson path (canonical._orjson_canonical) ------------------------------------------
# canonical_json takes orjson's text when it is the canonical text. These hold that text equal
# to the reference wherever it is taken, over the values it is meant for (ASCII text) and the
# doubles whose layout differs between orjson and ECMAScript, and check it is taken at all.

ascii_text = st.text(alphabet=st.characters(max_codepoint=127), max_size=12)
# Every double, and the ranges around the layouts orjson writes otherwise (1e-7..1e-5,
# 1e15..1e22, integral values).
doubles = (
    st.floats(allow_nan=False, allow_infinity=False)
    | st.integers(min_value=-(2**60), max_value=2**60).map(float)
    | st.builds(
        lambda mantissa, exponent: mantissa * 10.0**exponent,
        st.floats(min_value=-10, max_value=10, allow_nan=False),
        st.integers(min_value=-8, max_value=23),
    )
)
ascii_values = json_trees(
    st.booleans()
    | st.integers(min_value=-MAX_SAFE, max_value=MAX_SAFE)
    | doubles
    | ascii_text
    | st.sampled_from(["v1.0", "e-6", "1e+16", "x.0", "0.0"]),
    ascii_text,
    max_leaves=30,
)


@pytest.mark.slow
@settings(max_examples=1500, deadline=None)
@given(ascii_values)
@example([1.0, -0.0, 0.0, 1e-6, 1.5e-6, 1e16, 1e20, 1.5e20, 1e21, 9007199254740991])
@example({"a": "v1.0", "b": 0.5})
def test_the_orjson_path_writes_the_reference_text_or_nothing(value):
    from tracehouse.kernelindex.canonical import _orjson_canonical

    fast = _orjson_canonical(value)
    assert fast is None or fast == rfc8785.dumps(value)
    assert canonical_json(value) == rfc8785.dumps(value)


def test_the_orjson_path_is_taken_for_identity_bodies_and_left_where_it_would_differ():
    from tracehouse.kernelindex.canonical import _orjson_canonical

    body = {
        "apiVersion": "kernelindex.dev/v1alpha1",
        "kind": "WorkloadCase",
        "spec": {
            "axes": {"batch_size": 64, "num_pages": 989669},
            "correctness": {"comparator": "allclose", "maxAbsoluteError": 0.01},
            "tensors": {"q": {"dtype": "bfloat16", "shape": [64, 128]}},
        },
    }
    assert _orjson_canonical(body) == rfc8785.dumps(body)
    for differs in (1.0, -0.0, 1e-6, 1e16, None, "é", {"\U0001f600": 1}, 2**53, math.nan):
        assert _orjson_canonical([differs]) is None, differs
