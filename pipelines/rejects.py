"""Why something was refused, and the status vocabulary: each declared once, here.

- `REJECT_REASONS`: the `reason` of a row of the rejects table (a record or file not imported).
- `UNSAFE_NAME_REASONS`: why `sources.safety.check_remote_path` refuses a remote file name; such
  a file is recorded in the rejects table as `unsafe_path`.
- `IDENTITY_REASONS`: why KernelIndex gives a record no identity (the `identity_error` columns).
  It is part of the KernelIndex spec, whose package imports nothing of the project, so it is
  declared there (`kernelindex.IDENTITY_REASON_CODES`) and only named here.
- `STATUSES`, `NEEDS_CORRECTNESS`, `FORBIDS_CORRECTNESS`: FlashInfer-Bench evaluation statuses
  and which blocks each must carry; the KernelIndex status map (`kernelindex.STATUS_MAP`, §9.2)
  is the list of current statuses.

The Hub client's own listing and download failure codes are still declared in
`sources/hub.py` (`LISTING_REJECT_REASONS`, `FAILURE_REASONS`).
"""

from __future__ import annotations

from pipelines import kernelindex

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
    "binary_file": "The file holds binary data, not JSON text.",
    "empty_file": "A .json file with no content.",
    "symlink_outside_source": "A symbolic link that leads outside the source folder (not followed).",
    "unsafe_path": "A remote file name with `..`, an absolute path, a backslash or a control character.",
    "fetch_failed": "A remote file could not be fetched or failed its size/hash check.",
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

IDENTITY_REASONS: dict[str, str] = kernelindex.IDENTITY_REASON_CODES

# Every current status is a key of the KernelIndex status map (§9.2); "INCORRECT" is the legacy
# status of the Aug 2025 schema doc (incorrect, kind unspecified), which KernelIndex does not map.
LEGACY_STATUSES = frozenset({"INCORRECT"})
STATUSES = frozenset(kernelindex.STATUS_MAP) | LEGACY_STATUSES
# The harness's model validator (format doc §2.5): which blocks each status must carry.
NEEDS_CORRECTNESS = frozenset({"PASSED", "INCORRECT_NUMERICAL"})
FORBIDS_CORRECTNESS = frozenset(
    {"INCORRECT_SHAPE", "INCORRECT_DTYPE", "RUNTIME_ERROR", "COMPILE_ERROR", "TIMEOUT"}
)
