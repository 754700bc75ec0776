"""§1.3 shared transformations (kebab, axis and argument keys, dtype/language/hardware tokens,
set-like lists) and the manifest name and length rules they feed (§3.1, §5.1, §8.1, §11.5).

String lengths count UTF-16 code units and sorting compares them, as in JavaScript.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from typing import Any

from tracehouse.kernelindex.canonical import utf16_sort_key
from tracehouse.kernelindex.errors import IdentityError
from tracehouse.kernelindex.numbers import js_integer

MAX_TITLE = 200


MAX_DESCRIPTION = 2000


_IDENTIFIER = re.compile(r"[a-z][a-z0-9_]*\Z")


_METADATA_NAME = re.compile(r"[a-z0-9][a-z0-9._-]*\Z")


_KEBAB_RUN = re.compile(r"[^a-z0-9]+")


_NOT_TOKEN_CHAR = re.compile(r"[^a-z0-9_]")


_DIGITS = re.compile(r"[0-9]+\Z")


def js_length(text: str) -> int:
    """String length as JavaScript counts it (UTF-16 code units)."""
    if text.isascii():
        return len(text)
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def js_slice(text: str, units: int) -> str:
    """The first `units` UTF-16 code units of `text` (JavaScript `slice(0, units)`)."""
    if text.isascii():
        return text[:units]
    encoded = text.encode("utf-16-le", "surrogatepass")[: 2 * units]
    return encoded.decode("utf-16-le", "surrogatepass")


def check_title(title: str, what: str) -> None:
    if js_length(title) > MAX_TITLE:
        raise IdentityError("title_too_long", f"{what} title exceeds {MAX_TITLE} characters")


def check_metadata_name(name: str, what: str) -> None:
    if not _METADATA_NAME.match(name):
        raise IdentityError(
            "invalid_name", f"{what} name {name!r} does not match [a-z0-9][a-z0-9._-]*"
        )


def check_identifier(token: str, what: str) -> None:
    if not _IDENTIFIER.match(token):
        raise IdentityError("invalid_name", f"{what} {token!r} does not match [a-z][a-z0-9_]*")


def check_length(value: str, limit: int, what: str) -> None:
    if js_length(value) > limit:
        raise IdentityError("value_too_long", f"{what} exceeds {limit} characters")


def kebab(text: str) -> str:
    """Lower-case, runs outside [a-z0-9] → one '-', strip '-', first 100 characters (§1.3)."""
    return _KEBAB_RUN.sub("-", text.lower()).strip("-")[:100]


def _sanitize_token(text: str) -> str:
    """Lower-case; every character outside [a-z0-9_] becomes '_'.

    KernelIndex's regex replaces UTF-16 code units, so a character above U+FFFF (two units)
    becomes '__'.
    """
    lowered = text.lower()
    if lowered.isascii():
        return _NOT_TOKEN_CHAR.sub("_", lowered)
    return _NOT_TOKEN_CHAR.sub(lambda m: "__" if ord(m.group()) > 0xFFFF else "_", lowered)


def axis_key(name: str) -> str:
    """Axis names are only lower-cased (§1.3): `M` → `m`."""
    return name.lower()


def argument_key(name: str) -> str:
    """Lower-case, outside [a-z0-9_] → '_', prefix `x_` unless it starts with a letter (§1.3)."""
    token = _sanitize_token(name)
    if not ("a" <= token[:1] <= "z"):
        token = "x_" + token
    return token


def dimension(value: Any) -> int | str:
    """A definition shape entry (§1.3): number stays, all-digit string → int, else axis key."""
    if isinstance(value, str):
        if _DIGITS.match(value):
            return int(value)
        return axis_key(value)
    return js_integer(value, "shape dimension")


_DTYPE_TABLE = {
    "bfloat16": "bf16",
    "float16": "fp16",
    "half": "fp16",
    "float32": "fp32",
    "float": "fp32",
    "float64": "fp64",
    "double": "fp64",
    "float8_e4m3fn": "fp8_e4m3",
    "float8_e4m3": "fp8_e4m3",
    "float8_e5m2": "fp8_e5m2",
    "nvfp4": "nvfp4",
    "float4_e2m1": "fp4_e2m1",
    "int8": "int8",
    "int16": "int16",
    "int32": "int32",
    "int64": "int64",
    "uint8": "uint8",
    "bool": "bool",
}


_LANGUAGE_TABLE = {
    "cuda_cpp": "cuda",
    "cute_dsl": "cute_dsl",
    "cutile": "cutile",
    "cutlass": "cutlass",
    "cudnn": "cudnn",
    "triton": "triton",
    "pytorch": "pytorch",
}


# Quirk §1.3: keyed by exact short names only. FlashInfer writes torch's device name
# ("NVIDIA B200"), which is not a key, so real traces get architecture "unknown".
_HARDWARE_TABLE: dict[str, tuple[str, str, str]] = {
    "B200": ("nvidia", "NVIDIA B200", "sm_100"),
    "NVIDIA_B200": ("nvidia", "NVIDIA B200", "sm_100"),
    "GB200": ("nvidia", "NVIDIA GB200", "sm_100"),
    "H200": ("nvidia", "NVIDIA H200", "sm_90"),
    "H100": ("nvidia", "NVIDIA H100", "sm_90"),
    "NVIDIA_H100": ("nvidia", "NVIDIA H100", "sm_90"),
    "A100": ("nvidia", "NVIDIA A100", "sm_80"),
}


@functools.lru_cache(maxsize=4096)
def dtype_token(name: str) -> str:
    """FlashInfer dtype name → KernelIndex token (§1.3): `bfloat16` → `bf16`."""
    token = _DTYPE_TABLE.get(name)
    return token if token is not None else _sanitize_token(name)


@functools.lru_cache(maxsize=1024)
def language_token(name: str) -> str:
    """Language or library name → KernelIndex token (§1.3): `cuda_cpp` → `cuda`."""
    token = _LANGUAGE_TABLE.get(name)
    return token if token is not None else _sanitize_token(name)


def hardware_identity(name: str) -> tuple[str, str, str]:
    """(vendor, product, architecture) of a hardware name (§1.3).

    Quirk §1.3: unknown names get vendor `nvidia` (even non-NVIDIA devices), the name with `_`
    replaced by spaces as product, and architecture `unknown`.
    """
    known = _HARDWARE_TABLE.get(name)
    if known is not None:
        return known
    return ("nvidia", name.replace("_", " "), "unknown")


def set_like(values: Iterable[str]) -> list[str]:
    """Remove duplicates and sort by UTF-16 code units (§1.3)."""
    return sorted(set(values), key=utf16_sort_key)


def check_manifest_texts(kind: str, record: str, name: str, description: object) -> None:
    """The rules a definition's or solution's texts meet as manifest metadata (§2.4, §11.5):
    the kebab of `name` is a valid metadata name, `name` fits as a title, and a `description`
    string fits in 2,000 characters. `kind` and `record` name the manifest and the record."""
    check_metadata_name(kebab(name), kind)
    check_title(name, kind)
    if isinstance(description, str) and js_length(description) > MAX_DESCRIPTION:
        raise IdentityError(
            "description_too_long", f"the {record} description exceeds 2,000 characters"
        )
