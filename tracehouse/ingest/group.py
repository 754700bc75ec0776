"""What a group's parse is given and gives back: the chunking a plan hands each task, the
files whose rows are carried instead of parsed, and each file's counts.

A module of its own, without pyarrow: the build's parent plans the tasks and reads their
results, and a parent that loaded pyarrow before the parse held its ~45 MiB through it, beside
the workers (tracehouse/ingest/worker.py does the parse).
"""

from __future__ import annotations

from dataclasses import dataclass, field

# Rows a worker holds before appending them to its parts: memory stays flat whatever the size
# of a file or group. Rows are Python dicts (a run's log included) until then; at 20,000 rows a
# worker's peak was ~45 MiB higher on the bench corpus (docs/benchmarks.md), and a row group of
# 2,000 costs the write nothing measurable.
CHUNK_ROWS = 2_000

# A file KernelIndex reads starts a chunk of its own, and holds its rows until it ends, up to this
# many beyond a chunk, while KernelIndex may still find it unreadable (a later line that is not
# strict JSON): its runs are then completed again by the worker (worker.FileIngester.
# _complete_again_as_unreadable), where otherwise every runs part with an earlier chunk of the
# file is resolved again by finalize (ingest/resolution.py): with 10% odd lines in the
# 1,000,000-line bench corpus (files of ~1,900 lines), all 72 of them, 10-12 s. A longer file is
# written a chunk at a time. A worker holds at most a chunk and this many rows: at 4,000 more,
# the parse's process tree peaked 30-80 MiB higher on that corpus.
FILE_HOLD_ROWS = 500


@dataclass
class FileResult:
    """What one file contributed to its group's parts."""

    rel: str
    # SHA-256 of the file's bytes (empty when it could not be read).
    content_sha256: str = ""
    # One line KernelIndex's strict parser refuses makes it skip the whole file (§2.2).
    kernelindex_unreadable: bool = False
    records: int = 0
    runs: int = 0
    workload_records: int = 0
    rejected: int = 0
    # Where the read ended, when a later build may read on from there should the file only
    # grow (records.FileEnd: the last line's number and the bytes read); None otherwise.
    end_line: int | None = None
    end_offset: int | None = None
    # Only its lines past its old end were parsed (the file only grew: _read_on).
    read_on: bool = False


@dataclass(frozen=True)
class CarriedFile:
    """A file of a group whose bytes are what the group's previous parts were parsed from:
    its rows are carried over from those parts (``worker.carry_rows``) instead of parsed again.

    A file that only grew (``grown``: FlashInfer-Bench appends each re-run) is carried too: its
    rows up to where its last read ended (``end_line``, ``end_offset``) are carried and only the
    lines after are parsed (``worker._read_on``), once its bytes up to there are checked."""

    location: str  # the file, parsed after all if its rows cannot be carried
    rel: str
    sha256: str  # of the bytes the previous parts were parsed from
    records: int
    runs: int
    rejected: int
    kernelindex_unreadable: bool
    end_line: int | None = None
    end_offset: int | None = None
    grown: bool = False

    def result(self) -> FileResult:
        return FileResult(
            self.rel,
            self.sha256,
            self.kernelindex_unreadable,
            self.records,
            self.runs,
            rejected=self.rejected,
            end_line=self.end_line,
            end_offset=self.end_offset,
        )


@dataclass
class GroupResult:
    """The staging parts written for one group of files, and each file's counts."""

    parts: dict[str, list[str]] = field(default_factory=dict)  # table -> part file names
    files: dict[str, FileResult] = field(default_factory=dict)
