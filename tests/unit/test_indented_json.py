"""``render.indented_json`` writes exactly what ``json.dumps(indent=2, ensure_ascii=False)``
writes (the record pages' manifests), for every value json takes, and fails as json fails."""

from __future__ import annotations

import json
import math
import random
from typing import Any

import pytest

from tracehouse.serve.render import indented_json


def _json(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False)


class _Text(str):
    pass


EDGE_VALUES = [
    {},
    [],
    (),
    {"a": [], "b": {}, "c": ()},
    "x",
    0,
    10**30,
    -1.5,
    None,
    True,
    {"nan": math.nan, "inf": math.inf, "-inf": -math.inf, "zero": -0.0, "tiny": 5e-324},
    {"big": 1e16, "exact": 0.1 + 0.2, "int-like": 3.0},
    {"é": 'ünï\u2028\x00"\\\n\t', "emoji": "🙂"},
    {2: "int", 1.5: "float", True: "true", False: "false", None: "null", math.nan: "nan"},
    {"nested": (1, [2, (3, {"deep": [None]})])},
    {"subclass": _Text("kept by json's own path")},
]


@pytest.mark.parametrize("value", EDGE_VALUES, ids=range(len(EDGE_VALUES)))
def test_same_text_as_json(value: Any) -> None:
    assert indented_json(value) == _json(value)


def _random_value(rng: random.Random, depth: int) -> Any:
    roll = rng.random()
    if depth > 4 or roll < 0.5:
        return rng.choice(
            [
                rng.random() * 10 ** rng.randint(-20, 20),
                rng.randint(-(10**20), 10**20),
                "s" * rng.randint(0, 3),
                None,
                rng.random() < 0.5,
                math.nan,
            ]
        )
    if roll < 0.75:
        return [_random_value(rng, depth + 1) for _ in range(rng.randint(0, 4))]
    return {f"k{rng.random()}": _random_value(rng, depth + 1) for _ in range(rng.randint(0, 4))}


def test_same_text_as_json_for_random_documents() -> None:
    rng = random.Random(26)
    for _ in range(500):
        value = _random_value(rng, 0)
        assert indented_json(value) == _json(value)


@pytest.mark.parametrize("value", [{"set": {1}}, {(1, 2): "tuple key"}, [object()]])
def test_refuses_what_json_refuses_with_its_message(value: Any) -> None:
    with pytest.raises(TypeError) as expected:
        _json(value)
    with pytest.raises(TypeError) as got:
        indented_json(value)
    assert str(got.value) == str(expected.value)


def test_a_cycle_is_refused_as_json_refuses_it() -> None:
    cycle: list[Any] = []
    cycle.append(cycle)
    with pytest.raises(ValueError, match="Circular reference"):
        indented_json(cycle)
