"""RFC 8785 (JSON Canonicalization Scheme) text and the digests KernelIndex builds on it (§1.1, §1.2).

`canonical_json` is a hand-written serializer because it runs once per trace line (150k+ lines
per build) and the reference package `rfc8785` is several times slower; most values take a
faster path still, orjson's output checked to be the canonical text (`_orjson_canonical`). Both
are property-tested against `rfc8785.dumps` (tests/unit/test_canonical.py) and must stay
byte-identical to it:

- object members sorted by key, comparing UTF-16 code units;
- no insignificant whitespace;
- strings: only `"`, `\\` and U+0000-U+001F escaped (`\\b \\t \\n \\f \\r`, else `\\u00xx`),
  everything else raw UTF-8; lone surrogates are not representable and raise;
- numbers as ECMAScript writes a double (`numbers.format_float`); NaN/Infinity raise;
  integers must lie within +-(2**53 - 1); `bool` is a JSON boolean, never a number.
"""

from __future__ import annotations

import hashlib
import json.encoder
import re
from collections.abc import Callable
from typing import Any

import orjson

from tracehouse.kernelindex.errors import CanonicalizationError
from tracehouse.kernelindex.numbers import MAX_SAFE_INTEGER, format_float

API_VERSION = "kernelindex.dev/v1alpha1"


# The stdlib's C string encoder escapes exactly the JCS set (`"`, `\`, U+0000-U+001F with the
# short forms \b \t \n \f \r and lowercase \u00xx otherwise) and keeps everything else raw.
encode_string: Callable[[str], str] = json.encoder.encode_basestring  # type: ignore[assignment]


def canonical_number(value: int | float) -> str:
    """The canonical text of one JSON number (int within +-(2**53 - 1), or finite float)."""
    if type(value) is float:
        return format_float(value)
    if type(value) is int and -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
        return str(value)
    return _serialize(value)


def utf16_sort_key(key: str) -> bytes:
    return key.encode("utf-16-be", "surrogatepass")


def _sorted_keys(obj: dict[Any, Any]) -> list[str]:
    try:
        keys = sorted(obj)
        joined = "".join(keys)
    except TypeError as error:
        raise CanonicalizationError("object keys must be strings") from error
    # Code-point order equals UTF-16 code-unit order unless a key holds a character above
    # U+FFFF (its surrogates sort below U+E000-U+FFFF); only then pay for the UTF-16 encode.
    if not joined.isascii() and _ASTRAL.search(joined):
        keys.sort(key=utf16_sort_key)
    return keys


_ASTRAL = re.compile("[\U00010000-\U0010ffff]")


def _serialize(value: Any) -> str:
    kind = type(value)
    if kind is str:
        return encode_string(value)
    if kind is dict:
        if not value:
            return "{}"
        members = [encode_string(key) + ":" + _serialize(value[key]) for key in _sorted_keys(value)]
        return "{" + ",".join(members) + "}"
    if kind is int:
        if -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
            return str(value)
        raise CanonicalizationError(f"{value} exceeds the safe integer range of JSON numbers")
    if kind is float:
        return format_float(value)
    if kind is list or kind is tuple:
        return "[" + ",".join([_serialize(item) for item in value]) + "]"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if value is None:
        return "null"
    return _serialize_subclass(value)


def _serialize_subclass(value: Any) -> str:
    """Slow path for subclasses of the JSON types (e.g. str/int enums, OrderedDict)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return encode_string(str.__str__(value))
    if isinstance(value, int):
        return _serialize(int(value))
    if isinstance(value, float):
        return format_float(float(value))
    if isinstance(value, dict):
        return _serialize(dict(value))
    if isinstance(value, list | tuple):
        return _serialize(list(value))
    raise CanonicalizationError(f"unsupported type: {type(value)!r}")


def canonical_string(text: str) -> str:
    """The canonical text of one JSON string, quotes included (lone surrogates not checked)."""
    return encode_string(text)


# orjson writes what RFC 8785 writes for ASCII text (the same escapes), integers within the
# safe range (OPT_STRICT_INTEGER refuses the rest) and keys sorted by code point (UTF-16 order
# for ASCII), and the same shortest digits for every double; its layout of a double differs from
# ECMAScript's in three cases only, each of which the text then shows: an integral value keeps
# `.0` (`1.0`, `-0.0`), `e-6` where ECMAScript writes `0.00000d`, and `e+16` to `e+20` where it
# writes every digit. NaN and the infinities become `null`. Subclasses of the JSON types,
# dataclasses and dates are refused by the options (they take the exact path, which refuses what
# JSON cannot say). Values come from parsed JSON or are built from it: enums and UUIDs, which
# orjson would write, never reach here.
_ORJSON_OPTIONS = (
    orjson.OPT_SORT_KEYS
    | orjson.OPT_STRICT_INTEGER
    | orjson.OPT_PASSTHROUGH_SUBCLASS
    | orjson.OPT_PASSTHROUGH_DATACLASS
    | orjson.OPT_PASSTHROUGH_DATETIME
)
_NOT_ECMASCRIPT_EXPONENT = re.compile(rb"e-6(?![0-9])|e\+(?:1[6-9]|20)(?![0-9])")


def _orjson_canonical(value: Any) -> bytes | None:
    """orjson's text of ``value`` when it is the canonical text, else None (then the exact
    path decides). ~8x faster than ``_serialize`` on a workload's identity body."""
    try:
        text = orjson.dumps(value, option=_ORJSON_OPTIONS)
    except (TypeError, orjson.JSONEncodeError):
        return None
    # Non-ASCII text (astral keys sort otherwise, lone surrogates) and null (NaN is written as
    # null) go the exact way, as does any text that only looks like a case above (`"v1.0"`).
    if not text.isascii() or b"null" in text:
        return None
    if (b"e-6" in text or b"e+1" in text or b"e+20" in text) and _NOT_ECMASCRIPT_EXPONENT.search(
        text
    ) is not None:
        return None
    start = text.find(b".0")
    while start >= 0:
        if not text[start + 2 : start + 3].isdigit():
            return None
        start = text.find(b".0", start + 2)
    return text


def canonical_json(value: Any) -> bytes:
    """The RFC 8785 canonical UTF-8 bytes of a JSON value (dict/list/tuple/str/int/float/bool/None)."""
    fast = _orjson_canonical(value)
    if fast is not None:
        return fast
    try:
        return _serialize(value).encode("utf-8")
    except UnicodeEncodeError as error:
        raise CanonicalizationError("input contains a lone surrogate") from error


def digest(obj: Any) -> str:
    """`sha256:` + hex SHA-256 of the canonical bytes of `obj` (no envelope)."""
    return "sha256:" + hashlib.sha256(canonical_json(obj)).hexdigest()


def manifest_digest(kind: str, spec: Any) -> str:
    """Digest of the `{apiVersion, kind, spec}` envelope; metadata never enters it (§1.1)."""
    return digest({"apiVersion": API_VERSION, "kind": kind, "spec": spec})


def text_utf8(text: str) -> bytes:
    """UTF-8 bytes of a string as JavaScript's TextEncoder writes them.

    Lone surrogates (possible after a `\\ud800` JSON escape) become U+FFFD; a surrogate pair
    left uncombined in the Python string is joined into its character, as in UTF-16.
    """
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        units = text.encode("utf-16-le", "surrogatepass")
        return units.decode("utf-16-le", "replace").encode("utf-8")


def text_digest(text: str) -> str:
    """`sha256:` + hex SHA-256 of the UTF-8 bytes of `text` (§1.3 "sha256 of text")."""
    return "sha256:" + hashlib.sha256(text_utf8(text)).hexdigest()
