"""Why something was refused, and the status vocabulary: each declared once, here.

- `REJECT_REASONS`: the `reason` of a row of the rejects table (a record or file not imported).
- `UNSAFE_NAME_REASONS`: why `sources.safety.check_remote_path` refuses a remote file name; such
  a file is recorded in the rejects table as `unsafe_path`.
- `HUB_LISTING_REASONS`: why the Hub client leaves a listed file out of a snapshot without
  downloading it (besides the unsafe names above); `HUB_FAILURE_REASONS`: why a selected file is
  missing from a snapshot after a fetch. Both are `RejectedRemoteFile.reason` codes, kept in the
  snapshot manifest; the build records unsafe names as `unsafe_path` rejects and refuses to
  build from a snapshot that misses a selected file (`build.require_complete`).
- `IDENTITY_REASONS`: why a record has no identity (the `identity_error` columns): the codes of
  the KernelIndex spec, whose package imports nothing of the project, so they are declared there
  (`kernelindex.IDENTITY_REASON_CODES`) and only named here, and `WAREHOUSE_IDENTITY_REASONS`,
  the warehouse's own.
- `STATUSES`, `NEEDS_CORRECTNESS`, `FORBIDS_CORRECTNESS`: FlashInfer-Bench evaluation statuses
  and which blocks each must carry; the KernelIndex status map (`kernelindex.STATUS_MAP`, §9.2)
  is the list of current statuses.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

from tracehouse import kernelindex


class ReasonedError(ValueError):
    """A refusal that carries a code of one registry (`REASONS`, set by each subclass) and a
    message. A code the registry does not hold is a bug, refused when the error is made."""

    REASONS: ClassVar[Mapping[str, str]] = {}

    def __init__(self, reason: str, message: str) -> None:
        if reason not in self.REASONS:
            raise ValueError(f"unregistered reason {reason!r} for {type(self).__name__}: {message}")
        super().__init__(message)
        self.reason = reason
        self.message = message


# The reason column of the rejects table; the README's glossary explains each (a test checks it).
REJECT_REASONS: dict[str, str] = {
    "invalid_json": "The text is not JSON (syntax error, truncated line).",
    "invalid_utf8": "The bytes are not valid UTF-8.",
    "too_deeply_nested": "JSON nesting deeper than the parser allows.",
    "not_an_object": "The JSON value is not an object (array, string, number, ...).",
    "unrecognized_record": "An object that is neither a definition, solution, workload nor trace.",
    "missing_field": "A required field is missing or empty.",
    "invalid_field": "A field has the wrong type or an impossible value.",
    "unknown_status": "evaluation.status is not a FlashInfer-Bench status.",
    "status_field_mismatch": "correctness/performance presence contradicts the status (e.g. PASSED without performance).",
    "invalid_latency": "A latency is not a finite positive number (bool, string, zero, negative, NaN, overflow).",
    "invalid_error_bound": "A correctness error bound is negative, boolean or not a number.",
    "unknown_definition": "The record names a definition that is not in the dataset.",
    "duplicate_definition": "A second definition file with an already-seen name (first in path order wins).",
    "duplicate_solution": "A second solution file with an already-seen name (first in path order wins).",
    "unreadable_file": "The file could not be read (permissions, I/O error, not a regular file).",
    "binary_line": "The line holds NUL bytes (a zero-filled region, binary data, UTF-16 text), not UTF-8 JSON.",
    "binary_file": "The file holds binary data, not JSON text (a .jsonl file: a NUL in its first 8 KiB and no line holding a JSON object).",
    "empty_file": "A .json file with no content.",
    "symlink_outside_source": "A symbolic link that leads outside the source folder (not followed).",
    "invalid_file_name": "A file or folder name that is not valid UTF-8 (shown with the bytes escaped; not read).",
    "unsafe_path": "A remote file name with `..`, an absolute path, a backslash or a control character.",
}

UNSAFE_NAME_REASONS: dict[str, str] = {
    "not_a_string": "the name is not a string",
    "empty": "the name is empty",
    "absolute": "the name starts with '/' (an absolute path)",
    "drive": "the name starts with a Windows drive letter such as 'C:'",
    "backslash": "the name contains a backslash, a path separator on Windows",
    "control_char": "the name contains a control character (C0/C1, DEL, line or paragraph separator)",
    "invalid_unicode": "the name cannot be encoded as UTF-8 (lone surrogate)",
    "empty_component": "the name has an empty component ('a//b' or a trailing '/')",
    "dot_component": "the name has a '.' component",
    "dot_dot": "the name has a '..' component",
    "too_long": "a component is longer than 255 bytes or the name longer than 4096 bytes",
}

HUB_LISTING_REASONS: dict[str, str] = {
    "bad_entry": "the listing entry has a missing or malformed size, oid or lfs field",
    "duplicate": "the same path is listed twice",
    "path_conflict": "the path is listed as a file and is also the parent folder of other files",
    "unexpected_location": "a folder listing returned a path outside that folder",
}

HUB_FAILURE_REASONS: dict[str, str] = {
    "hash_mismatch": "the body's hash differs from the oid in the listing (after retrying)",
    "size_mismatch": "the body, or its announced length, differs from the size in the listing",
    "etag_mismatch": "the ETag / X-Linked-Etag differs from the oid in the listing (after retrying)",
    "commit_mismatch": "X-Repo-Commit names another commit than the one resolved",
    "http_error": "the Hub answered with a status that is not worth retrying (403, 404, ...)",
    "bad_redirect": "a redirect to something other than http(s), to an invalid URL, or in a loop",
    "retries_exhausted": "timeouts, resets, 429 or 5xx persisted beyond the retry budget",
    "timeout": "the body stalled or trickled on every attempt, or was still arriving when the "
    "whole fetch's time ran out",
    "io_error": "the local cache could not be written",
}

# What the warehouse adds to KernelIndex's codes: facts only the whole build knows.
WAREHOUSE_IDENTITY_REASONS: dict[str, str] = {
    "invalid_definition": "the definition is in the dataset but KernelIndex gives it no identity, so nothing that names it has one",
    "no_dataset_revision": "the build knows no dataset revision (no --revision, not a git clone): no implementation or run digest (§8)",
    "file_not_strict_json": "the file has a line KernelIndex's strict JSON parser refuses (e.g. a bare NaN), so KernelIndex imports none of its runs",
}
IDENTITY_REASONS: dict[str, str] = {
    **kernelindex.IDENTITY_REASON_CODES,
    **WAREHOUSE_IDENTITY_REASONS,
}

# Every current status is a key of the KernelIndex status map (§9.2); "INCORRECT" is the legacy
# status of the Aug 2025 schema doc (incorrect, kind unspecified), which KernelIndex does not map.
LEGACY_STATUSES = frozenset({"INCORRECT"})
STATUSES = frozenset(kernelindex.STATUS_MAP) | LEGACY_STATUSES
# The harness's model validator (format doc §2.5): which blocks each status must carry.
NEEDS_CORRECTNESS = frozenset({"PASSED", "INCORRECT_NUMERICAL"})
FORBIDS_CORRECTNESS = frozenset(
    {"INCORRECT_SHAPE", "INCORRECT_DTYPE", "RUNTIME_ERROR", "COMPILE_ERROR", "TIMEOUT"}
)


@dataclass(frozen=True, slots=True)
class Reject:
    """A record or file that could not be imported."""

    file: str
    line: int | None
    reason: str
    message: str
    raw_prefix: str | None

    def __post_init__(self) -> None:
        if self.reason not in REJECT_REASONS:
            raise ValueError(f"unregistered reject reason {self.reason!r} ({self.file})")
