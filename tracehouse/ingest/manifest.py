"""The build manifest (<warehouse>/cache/manifest.json): what each source's last build read,
so the next build of that source re-parses only the files whose bytes changed.

One entry per source, each with one entry per JSONL file. Typed here, read and written only
through ``read_manifest`` / ``write_manifest``; an unreadable or older manifest reads as empty
(everything is parsed again, nothing is lost: the parts are keyed by content).

The files of one group share their staging parts, so a group's part names and digests are
stored once, under ``groups`` by group key, and held once in memory (every entry of the group
refers to the same dicts): with 200,000 one-line files a copy per file was most of a build's
memory (issue 26).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from tracehouse.files import write_atomically

# 1: one source, files as plain dicts; 2: parts and digests with every file
MANIFEST_VERSION = 3


@dataclass
class FileEntry:
    """One JSONL file as the last build of its source read it."""

    fingerprint: list[Any]  # SourceFile.fingerprint: (size, mtime_ns, inode) as a list
    sha256: str | None = None  # content digest, from the worker that read the file
    group_key: str | None = None  # what its group's parts depend on (ingest.plan.group_parts_key)
    parts: dict[str, list[str]] = field(default_factory=dict)  # staging table -> part names
    # SHA-256 of each staging part, taken when it was written: a part is reused only while
    # its bytes match (a damaged part is parsed again from the source file).
    part_digests: dict[str, str] = field(default_factory=dict)
    records: int = 0
    runs: int = 0
    rejected: int = 0
    kernelindex_unreadable: bool = False
    # Where its read ended, when the file may be read on from there should it only grow
    # (group.FileResult): the last line's number and the bytes read.
    end_line: int | None = None
    end_offset: int | None = None

    @classmethod
    def from_json(
        cls, entry: dict[str, Any], groups: dict[str, tuple[dict[str, list[str]], dict[str, str]]]
    ) -> FileEntry:
        group_key = entry.get("group_key")
        parts, part_digests = groups.get(group_key, ({}, {})) if group_key else ({}, {})
        return cls(
            fingerprint=list(entry["fingerprint"]),
            sha256=entry.get("sha256"),
            group_key=group_key,
            parts=parts,
            part_digests=part_digests,
            records=int(entry.get("records", 0)),
            runs=int(entry.get("runs", 0)),
            rejected=int(entry.get("rejected", 0)),
            kernelindex_unreadable=bool(entry.get("kernelindex_unreadable", False)),
            end_line=_optional_int(entry.get("end_line")),
            end_offset=_optional_int(entry.get("end_offset")),
        )

    def to_json(self) -> dict[str, Any]:
        """The entry without its group's parts (``SourceManifest.to_json`` stores them once)."""
        return {
            "fingerprint": self.fingerprint,
            "sha256": self.sha256,
            "group_key": self.group_key,
            "records": self.records,
            "runs": self.runs,
            "rejected": self.rejected,
            "kernelindex_unreadable": self.kernelindex_unreadable,
            "end_line": self.end_line,
            "end_offset": self.end_offset,
        }


def _optional_int(value: Any) -> int | None:
    return value if type(value) is int and value >= 0 else None


@dataclass
class SourceManifest:
    """What the last build of one source read and produced."""

    state: dict[str, Any]  # ingest.plan.state_key: importer, source, root, revision, baselines
    context: str  # the dataset context fingerprint (definitions, solutions, workloads)
    fingerprints: dict[str, list[Any]]  # every discovered file -> fingerprint
    files: dict[str, FileEntry]  # JSONL files -> their entry
    snapshot_id: str

    @classmethod
    def from_json(cls, entry: dict[str, Any]) -> SourceManifest:
        groups = {
            str(key): (
                {table: list(names) for table, names in group["parts"].items()},
                {str(k): str(v) for k, v in group["part_digests"].items()},
            )
            for key, group in entry["groups"].items()
        }
        return cls(
            state=dict(entry["state"]),
            context=str(entry["context"]),
            fingerprints={rel: list(fp) for rel, fp in entry["fingerprints"].items()},
            files={rel: FileEntry.from_json(e, groups) for rel, e in entry["files"].items()},
            snapshot_id=str(entry["snapshot_id"]),
        )

    def to_json(self) -> dict[str, Any]:
        groups: dict[str, dict[str, Any]] = {}
        for entry in self.files.values():
            if entry.group_key is not None and entry.group_key not in groups:
                groups[entry.group_key] = {
                    "parts": entry.parts,
                    "part_digests": entry.part_digests,
                }
        return {
            "state": self.state,
            "context": self.context,
            "fingerprints": self.fingerprints,
            "files": {rel: entry.to_json() for rel, entry in self.files.items()},
            "groups": groups,
            "snapshot_id": self.snapshot_id,
        }


@dataclass
class Manifest:
    sources: dict[str, SourceManifest] = field(default_factory=dict)  # by source name

    def staging_parts(self) -> set[str]:
        """Every staging part name some source's files still use."""
        return {
            name
            for source in self.sources.values()
            for entry in source.files.values()
            for names in entry.parts.values()
            for name in names
        }


def read_manifest(path: Path) -> Manifest:
    try:
        stored = orjson.loads(path.read_bytes())
        if stored.get("version") != MANIFEST_VERSION:
            return Manifest()
        return Manifest(
            {name: SourceManifest.from_json(e) for name, e in stored["sources"].items()}
        )
    except (OSError, ValueError, KeyError, TypeError, AttributeError):  # orjson's is a ValueError
        return Manifest()


def write_manifest(path: Path, manifest: Manifest) -> None:
    stored = {
        "version": MANIFEST_VERSION,
        "sources": {name: entry.to_json() for name, entry in manifest.sources.items()},
    }
    write_atomically(path, orjson.dumps(stored, option=orjson.OPT_SORT_KEYS))
