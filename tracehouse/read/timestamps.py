"""``evaluation.timestamp`` → ``observed_at``: one rule, shared by every ingest path.

FlashInfer-Bench requires only a non-empty string here, and keeps a run whatever the text says.
So a run is never dropped for its timestamp: the raw text is stored as written
(``runs.timestamp_raw``) and ``observed_at`` is filled where the text is unambiguous:

* an ISO date-time, read exactly as KernelIndex reads it (identity doc §9.5: a zone-less time
  is taken as UTC, the fraction truncated to milliseconds);
* a bare ISO date (``2026-03-17``): midnight UTC of that day;
* epoch seconds (9-10 digits, optional fraction) or milliseconds (12-13 digits): that instant.

Anything else (``Tue Mar 17 14:20:40 2026``, ``unknown``) gives null. KernelIndex itself rejects
every non-ISO date-time line (``bad_timestamp``), which the run's ``identity_error`` records.
"""

from __future__ import annotations

import re
from datetime import UTC, date, datetime

from tracehouse import kernelindex

DATE_ONLY = re.compile(r"([0-9]{4})-([0-9]{2})-([0-9]{2})\Z")
EPOCH_SECONDS = re.compile(r"[0-9]{9,10}(?:\.[0-9]+)?\Z")
EPOCH_MILLISECONDS = re.compile(r"[0-9]{12,13}\Z")


def observed_at(timestamp: str) -> datetime | None:
    """The UTC instant ``timestamp`` names (millisecond precision), or None when unclear."""
    text = timestamp.strip()
    try:
        return datetime.fromisoformat(kernelindex.observed_at(text))
    except (kernelindex.IdentityError, ValueError):
        pass
    try:
        if DATE_ONLY.match(text):
            day = date.fromisoformat(text)
            return datetime(day.year, day.month, day.day, tzinfo=UTC)
        if EPOCH_SECONDS.match(text):
            return _truncated_to_ms(datetime.fromtimestamp(float(text), UTC))
        if EPOCH_MILLISECONDS.match(text):
            return datetime.fromtimestamp(int(text) / 1000, UTC).replace(
                microsecond=int(text) % 1000 * 1000
            )
    except (ValueError, OverflowError, OSError):
        return None
    return None


def _truncated_to_ms(moment: datetime) -> datetime:
    return moment.replace(microsecond=moment.microsecond // 1000 * 1000)
