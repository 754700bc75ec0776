"""§4 WorkloadCase: the workload key (§4.1), shape bindings (§4.2) and the identity body and digest
of a trace's embedded workload (§4.3, §4.4).
"""

from __future__ import annotations

import functools
import hashlib
import re
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tracehouse.kernelindex.cache import WORKLOAD_CACHE_ENTRIES, BoundedCache
from tracehouse.kernelindex.canonical import encode_string, manifest_digest, text_utf8
from tracehouse.kernelindex.errors import IdentityError
from tracehouse.kernelindex.numbers import MAX_SAFE_INTEGER, js_integer, js_number
from tracehouse.kernelindex.protocol import WORKLOAD_COMPARATOR, correctness_key
from tracehouse.kernelindex.transformations import (
    argument_key,
    axis_key,
    check_identifier,
    check_metadata_name,
    dimension,
    dtype_token,
    kebab,
)
from tracehouse.kernelindex.validation import _validated_workload_bytes, validate_workload
from tracehouse.kernelindex.workload_identity import WorkloadIdentity

_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


# ICU root collation (JavaScript localeCompare) for the uuid-less workload key, §4.1.
# Primary order of ASCII in CLDR root with punctuation non-ignorable: whitespace, punctuation,
# symbols, currency, digits, then letters case-insensitively. Other controls are ignorable.
_ICU_ASCII_ORDER = (
    "\t\n\v\f\r _-,;:!?.'\"()[]{}@*/\\&#%`^+<=>|~$0123456789abcdefghijklmnopqrstuvwxyz"
)


_ICU_PRIMARY = {ch: index + 1 for index, ch in enumerate(_ICU_ASCII_ORDER)}


for _index, _letter in enumerate("abcdefghijklmnopqrstuvwxyz"):
    _ICU_PRIMARY[_letter.upper()] = _ICU_PRIMARY[_letter]


def _icu_sort_key(name: str) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """Collation key: primary (base characters), secondary (accents), tertiary (case).

    Exact for ASCII names - the only names that can yield an accepted workload, since axis keys
    must match [a-z][a-z0-9_]* after lower-casing. Other characters are decomposed (NFD), their
    accents compared at the secondary level, and placed after ASCII by code point (approximation).
    """
    primary: list[int] = []
    secondary: list[int] = []
    tertiary: list[int] = []
    text = name if name.isascii() else unicodedata.normalize("NFD", name)
    for ch in text:
        weight = _ICU_PRIMARY.get(ch)
        if weight is None:
            if ch.isascii() and (ch < " " or ch == "\x7f"):
                continue  # completely ignorable control character
            if unicodedata.combining(ch):
                secondary.append(ord(ch))
                continue
            weight = 1000 + ord(ch.lower()[0])
        primary.append(weight)
        secondary.append(0)
        # Lowercase first: only when names are equal ignoring case does case decide.
        tertiary.append(1 if ch != ch.lower() else 0)
    return tuple(primary), tuple(secondary), tuple(tertiary)


def _js_json_string(text: str) -> str:
    """JSON.stringify of a string: JCS escaping, raw non-ASCII, lone surrogates as \\udxxx."""
    escaped = encode_string(text)
    if text.isascii():
        return escaped
    return _LONE_SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", escaped)


def workload_key(workload: Mapping[str, Any]) -> str:
    """The workload key (§4.1): the uuid verbatim, else 12 hex of the collated axes' SHA-256."""
    uuid = workload.get("uuid")
    if isinstance(uuid, str) and uuid:
        return uuid
    axes = workload.get("axes")
    if not isinstance(axes, dict):
        raise IdentityError("invalid_field_type", "workload.axes must be an object")
    for name, value in axes.items():
        if isinstance(value, bool):  # True == 1 would otherwise share a cache entry with 1
            raise IdentityError("invalid_field_type", f"workload.axes.{name} must be an integer")
    return _axes_workload_key(tuple(axes.items()))


@functools.lru_cache(maxsize=8192)
def _axes_workload_key(items: tuple[tuple[str, Any], ...]) -> str:
    # Quirk §4.1: members sorted by ICU root collation (JavaScript localeCompare), not code
    # points; original (not lower-cased) names; compact JSON; first 12 hex characters.
    ordered = sorted(items, key=lambda item: _icu_sort_key(item[0]))
    parts = [
        f"{_js_json_string(name)}:{js_integer(value, f'workload.axes.{name}')}"
        for name, value in ordered
    ]
    text = "{" + ",".join(parts) + "}"
    return hashlib.sha256(text_utf8(text)).hexdigest()[:12]


class _ExpressionParser:
    """Integers, bound names, `+ -` (lowest), `* // %` (left associative), parentheses (§4.2)."""

    _TOKEN = re.compile(r"\s*(?:([0-9]+)|([a-z_][a-z0-9_]*)|(//|[-+*%()]))")

    def __init__(self, expression: str, bindings: Mapping[str, int], axis: str):
        self.tokens: list[tuple[str, Any]] = []
        self.axis = axis
        self.bindings = bindings
        position = 0
        expression = expression.rstrip()
        while position < len(expression):
            match = self._TOKEN.match(expression, position)
            if match is None:
                raise IdentityError(
                    "invalid_expression", f"axis {axis!r}: bad token at {expression[position:]!r}"
                )
            number, name, operator = match.groups()
            if number is not None:
                self.tokens.append(("int", int(number)))
            elif name is not None:
                self.tokens.append(("name", name))
            else:
                self.tokens.append(("op", operator))
            position = match.end()
        self.index = 0

    def evaluate(self) -> int:
        value = self._sum()
        if self.index != len(self.tokens):
            raise IdentityError(
                "invalid_expression", f"axis {self.axis!r}: trailing tokens in expression"
            )
        return value

    def _peek(self) -> tuple[str, Any] | None:
        return self.tokens[self.index] if self.index < len(self.tokens) else None

    def _sum(self) -> int:
        value = self._product()
        while (token := self._peek()) is not None and token in (("op", "+"), ("op", "-")):
            self.index += 1
            right = self._product()
            value = value + right if token[1] == "+" else value - right
        return value

    def _product(self) -> int:
        value = self._atom()
        while (
            (token := self._peek()) is not None
            and token[0] == "op"
            and token[1] in ("*", "//", "%")
        ):
            self.index += 1
            right = self._atom()
            if token[1] == "*":
                value *= right
            elif right == 0:
                raise IdentityError("invalid_expression", f"axis {self.axis!r}: division by zero")
            elif token[1] == "//":
                value //= right  # floor division
            else:
                # JavaScript %: the remainder takes the sign of the dividend.
                remainder = abs(value) % abs(right)
                value = -remainder if value < 0 else remainder
        return value

    def _atom(self) -> int:
        token = self._peek()
        if token is None:
            raise IdentityError(
                "invalid_expression", f"axis {self.axis!r}: unexpected end of expression"
            )
        self.index += 1
        kind, text = token
        if kind == "int":
            return text
        if kind == "name":
            if text not in self.bindings:
                raise IdentityError("unbound_axis", f"axis {self.axis!r}: {text!r} is not bound")
            return self.bindings[text]
        if text == "(":
            value = self._sum()
            if self._peek() != ("op", ")"):
                raise IdentityError("invalid_expression", f"axis {self.axis!r}: missing ')'")
            self.index += 1
            return value
        raise IdentityError("invalid_expression", f"axis {self.axis!r}: unexpected {text!r}")


# Compared and hashed by identity: it keys the per-workload cache beside each workload's bytes,
# and ``_prepared`` hands out one object per definition, so hashing its every field on each
# lookup bought nothing (a second object for the same definition only misses the cache).
@dataclass(frozen=True, slots=True, eq=False)
class _PreparedDefinition:
    """What a WorkloadCase needs from a definition, computed once per definition."""

    name: str
    name_kebab: str  # the start of each workload's metadata name (§4.2)
    operation_digest: str
    consts: tuple[tuple[str, int], ...]
    exprs: tuple[tuple[str, str], ...]
    # (original input name, argument key, dtype token, shape entries or None when scalar-shaped)
    inputs: tuple[tuple[str, str, str, tuple[int | str, ...] | None], ...]


def _prepare_definition(
    definition: Mapping[str, Any], operation_digest: str
) -> _PreparedDefinition:
    consts: list[tuple[str, int]] = []
    exprs: list[tuple[str, str]] = []
    for axis_name, axis in definition.get("axes", {}).items():
        kind = axis.get("type")
        if kind == "const" and axis.get("value") is not None:
            consts.append((axis_key(axis_name), js_integer(axis["value"], axis_name)))
        elif kind == "expr":
            expression = axis.get("expression")
            if not isinstance(expression, str):
                raise IdentityError(
                    "invalid_expression", f"derived axis {axis_name!r} has no expression"
                )
            exprs.append((axis_key(axis_name), expression.lower()))
    inputs = []
    for input_name, argument in definition.get("inputs", {}).items():
        shape = argument.get("shape")
        entries = tuple(dimension(entry) for entry in shape) if shape else None
        check_identifier(argument_key(input_name), "input name")
        check_identifier(dtype_token(argument["dtype"]), "dtype")
        inputs.append(
            (input_name, argument_key(input_name), dtype_token(argument["dtype"]), entries)
        )
    return _PreparedDefinition(
        definition["name"],
        kebab(definition["name"]),
        operation_digest,
        tuple(consts),
        tuple(exprs),
        tuple(inputs),
    )


_PREPARED_DEFINITIONS = BoundedCache(1024)


_WORKLOAD_CACHE = BoundedCache(WORKLOAD_CACHE_ENTRIES)


def _prepared(definition: Mapping[str, Any], operation_digest: str) -> _PreparedDefinition:
    # Everything the workload needs from the definition is in its operation digest except the
    # original (case-sensitive) input and axis names, so those complete the key.
    key = (
        definition.get("name"),
        operation_digest,
        tuple(definition.get("inputs", ())),
        tuple(definition.get("axes", ())),
    )
    prepared = _PREPARED_DEFINITIONS.get(key)
    if prepared is None:
        prepared = _prepare_definition(definition, operation_digest)
        _PREPARED_DEFINITIONS.put(key, prepared)
    return prepared


def workload_correctness(workload: Mapping[str, Any]) -> dict[str, Any]:
    correctness: dict[str, Any] = {"comparator": WORKLOAD_COMPARATOR}
    tolerance = workload.get("tolerance")
    if tolerance:
        if "max_atol" in tolerance:
            correctness["maxAbsoluteError"] = js_number(tolerance["max_atol"], "max_atol")
        if "max_rtol" in tolerance:
            correctness["maxRelativeError"] = js_number(tolerance["max_rtol"], "max_rtol")
    return correctness


def _build_workload_case(
    workload: Mapping[str, Any], prepared: _PreparedDefinition
) -> dict[str, Any]:
    """§4.2-4.4 on an already field-checked workload."""
    key = workload_key(workload)
    check_metadata_name(f"{prepared.name_kebab}-{key[:8]}", "workload")

    raw_axes: dict[str, Any] = workload["axes"]
    axes: dict[str, int] = {}
    for name, value in raw_axes.items():
        lowered = axis_key(name)
        check_identifier(lowered, "workload axis key")
        axes[lowered] = js_integer(value, f"workload.axes.{name}")
    # Quirk §4.2: the definition's const axes override a workload axis of the same name.
    bindings = dict(axes)
    bindings.update(prepared.consts)
    for name, expression in prepared.exprs:
        if name not in bindings:
            bindings[name] = _ExpressionParser(expression, bindings, name).evaluate()

    descriptors: Mapping[str, Any] = workload.get("inputs") or {}
    tensors: dict[str, Any] = {}
    scalars: dict[str, Any] = {}
    for original, key_name, dtype, entries in prepared.inputs:
        descriptor = descriptors.get(original)
        if descriptor is not None and descriptor.get("type") == "scalar":
            value = descriptor.get("value")
            # Quirk §4.4: a numeric scalar descriptor wins even over a tensor shape; `true` is
            # a boolean, not a number, so it does not make a scalar.
            if value is not None and not isinstance(value, bool):
                scalars[key_name] = {
                    "dtype": dtype,
                    "value": js_number(value, f"{original}.value"),
                }
                continue
        if entries is None:
            continue  # scalar-shaped input without a numeric value: dropped (§4.4)
        shape: list[int] = []
        for entry in entries:
            if isinstance(entry, str):
                bound = bindings.get(entry)
                if bound is None:
                    raise IdentityError(
                        "unbound_axis", f"input {original!r}: axis {entry!r} is not bound"
                    )
                entry = bound
            if entry < 0:
                raise IdentityError(
                    "invalid_shape", f"input {original!r}: negative dimension {entry}"
                )
            if entry > MAX_SAFE_INTEGER:
                raise IdentityError(
                    "integer_out_of_range", f"input {original!r}: dimension {entry}"
                )
            shape.append(entry)
        tensor: dict[str, Any] = {"shape": shape, "dtype": dtype}
        if descriptor is not None:
            generator = "safetensors" if descriptor.get("type") == "safetensors" else "random"
            tensor["data"] = {"generator": generator}
        tensors[key_name] = tensor

    spec: dict[str, Any] = {
        "operationSpecDigest": prepared.operation_digest,
        "axes": axes,
        "tensors": tensors,
        "correctness": workload_correctness(workload),
    }
    if scalars:
        spec["scalars"] = scalars
    return spec


def workload_case_spec(
    workload: dict[str, Any], definition: dict[str, Any], operation_digest: str
) -> dict[str, Any]:
    """The WorkloadCase identity body of a trace's embedded workload (§4.3).

    `operation_digest` is the digest of `definition` (the definition the line names).
    """
    validate_workload(workload)
    return _build_workload_case(workload, _prepare_definition(definition, operation_digest))


def workload_digest(
    workload: dict[str, Any], definition: dict[str, Any], operation_digest: str
) -> str:
    """The workload digest of the line's own workload (no first-line-wins cache, §2.4 step 4)."""
    return manifest_digest(
        "WorkloadCase", workload_case_spec(workload, definition, operation_digest)
    )


def workload_identity(
    workload: Mapping[str, Any],
    definition: Mapping[str, Any],
    operation_digest: str,
    workload_bytes: bytes | None,
) -> WorkloadIdentity:
    prepared = _prepared(definition, operation_digest)
    # Without cacheable bytes (see _validated_workload_bytes) compute without caching.
    cache_key = (prepared, workload_bytes) if workload_bytes is not None else None
    if cache_key is not None:
        cached = _WORKLOAD_CACHE.get(cache_key)
        if cached is not None:
            return cached
    spec = _build_workload_case(workload, prepared)
    identity = WorkloadIdentity(
        manifest_digest("WorkloadCase", spec), operation_digest, correctness_key(spec)
    )
    if cache_key is not None:
        _WORKLOAD_CACHE.put(cache_key, identity)
    return identity


def workload_case_identity(
    workload: dict[str, Any], definition: dict[str, Any], operation_digest: str
) -> WorkloadIdentity:
    """The digest and correctness key of ``workload_case_spec(workload, ...)``, through the
    per-workload cache ``identify_trace_line`` uses: a warehouse's workload row and the first
    trace line of that workload derive it once between them."""
    return workload_identity(
        workload, definition, operation_digest, _validated_workload_bytes(workload)
    )
