"""Checks for file names that come from somewhere we do not control (a Hub listing, an archive).

A remote name is only ever used as a *relative* POSIX path below a folder we own. Anything that
could make it point elsewhere, or that a filesystem would interpret differently than a string
comparison does, is refused before a single byte is written. The refusal carries a short reason
code (a key of ``tracehouse.rejects.UNSAFE_NAME_REASONS``) so callers can record it next to the name.
"""

from __future__ import annotations

import os
import re
import unicodedata
from pathlib import Path

from tracehouse.rejects import UNSAFE_NAME_REASONS, ReasonedError

MAX_COMPONENT_BYTES = 255
MAX_NAME_BYTES = 4096
_DRIVE = re.compile(r"^[A-Za-z]:")


class UnsafePathError(ReasonedError):
    """A remote file name that must not be turned into a local path."""

    REASONS = UNSAFE_NAME_REASONS


def _is_control(ch: str) -> bool:
    return unicodedata.category(ch) in ("Cc", "Zl", "Zp")


def check_remote_path(name: object) -> str:
    """Return ``name`` unchanged if it is a safe relative POSIX path, else raise.

    Safe means: a non-empty ``str`` of ``/``-separated components, none empty, none ``.`` or
    ``..``, no backslash, no control character, no drive prefix, valid UTF-8, and lengths within
    common filesystem limits. The name is *not* normalised: a name that would need normalising is
    refused instead, so the local path always equals the remote name.

    Raises:
        UnsafePathError: with ``reason`` set to a key of ``tracehouse.rejects.UNSAFE_NAME_REASONS``.
    """
    if not isinstance(name, str):
        raise UnsafePathError("not_a_string", f"remote name is not a string: {name!r}")
    if name == "":
        raise UnsafePathError("empty", "remote name is empty")
    try:
        encoded = name.encode("utf-8")
    except UnicodeEncodeError:
        raise UnsafePathError(
            "invalid_unicode", f"remote name is not valid UTF-8: {name!r}"
        ) from None
    if any(_is_control(ch) for ch in name):
        raise UnsafePathError("control_char", f"remote name contains a control character: {name!r}")
    if "\\" in name:
        raise UnsafePathError("backslash", f"remote name contains a backslash: {name!r}")
    if name.startswith("/"):
        raise UnsafePathError("absolute", f"remote name is an absolute path: {name!r}")
    if _DRIVE.match(name):
        raise UnsafePathError("drive", f"remote name starts with a drive letter: {name!r}")
    if len(encoded) > MAX_NAME_BYTES:
        raise UnsafePathError("too_long", f"remote name is longer than {MAX_NAME_BYTES} bytes")
    for part in name.split("/"):
        if part == "":
            raise UnsafePathError(
                "empty_component", f"remote name has an empty component: {name!r}"
            )
        if part == "..":
            raise UnsafePathError("dot_dot", f"remote name has a '..' component: {name!r}")
        if part == ".":
            raise UnsafePathError("dot_component", f"remote name has a '.' component: {name!r}")
        if len(part.encode("utf-8")) > MAX_COMPONENT_BYTES:
            raise UnsafePathError(
                "too_long", f"remote name has a component longer than {MAX_COMPONENT_BYTES} bytes"
            )
    return name


def is_within(root: Path, candidate: Path) -> bool:
    """True if ``candidate`` is ``root`` or below it, comparing absolute, normalised paths.

    Symlinks are not resolved: pair this with folders the caller created itself.
    """
    root_abs = os.path.normpath(os.path.abspath(root))
    cand_abs = os.path.normpath(os.path.abspath(candidate))
    return os.path.commonpath([root_abs, cand_abs]) == root_abs


def safe_join(root: Path, name: str) -> Path:
    """``root / name`` after :func:`check_remote_path`, verified to stay below ``root``."""
    check_remote_path(name)
    target = root.joinpath(*name.split("/"))
    if not is_within(root, target):  # belt and braces: check_remote_path already forbids this
        raise UnsafePathError("dot_dot", f"remote name escapes the destination folder: {name!r}")
    return target
