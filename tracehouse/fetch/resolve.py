"""Which source a build reads: a local folder as it is, or a Hub dataset fetched (incrementally)
into the cache; its name and uri in the warehouse; and what it is at right now, cheaply (the
Dagster source asset's data version)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tracehouse.fetch.local import SourceFile, discover, git_revision, require_dataset
from tracehouse.settings import Settings, SettingsError
from tracehouse.warehouse import source_key

ProgressFn = Callable[[str, int, int], None]  # (phase, done, total)


NO_SOURCE = (
    "no source given: pass --source <dataset folder | hf://datasets/<org>/<name>[@rev]> or set "
    "TRACEHOUSE_SOURCE (`tracehouse demo` builds the demo data)"
)


@dataclass
class ResolvedSource:
    root: Path
    source: str  # as given to the build
    requested_revision: str | None
    resolved_sha: str | None
    fetch_rejects: list[Any] = field(default_factory=list)  # rejects.Reject
    transferred_files: list[str] = field(default_factory=list)
    name: str = ""  # the source's name in the warehouse (source_identity)
    uri: str = ""  # what the name stands for: an absolute folder, or hf:// without @revision
    # A Hub snapshot's cache blobs, where its entries may link (huggingface_hub's symlinks)
    links_within: Path | None = None
    # Why a Hub source was read from the cache without being asked for (the Hub was down)
    note: str | None = None

    @property
    def key(self) -> str:
        return source_key(self.name)


def source_identity(source: str, name: str | None) -> tuple[str, str]:
    """(name, uri) of a source: the uri is the absolute folder or the hf:// dataset without
    its revision, so every revision of a source has one name; the default name is the
    folder's own name or the Hub's <org>/<name>."""
    if source.startswith("hf://"):
        from tracehouse.fetch import hub

        reference = hub.parse_hub_uri(source)
        assert reference is not None
        uri = f"hf://datasets/{reference.repo_id}"
        return name or reference.repo_id, uri
    folder = Path(source).resolve()
    return name or folder.name or str(folder), str(folder)


def _source_name(settings: Settings) -> str | None:
    """The name a build gives its source: ``--revision-of`` (the source it continues) or
    ``--source-name``; both only when they agree."""
    if (
        settings.revision_of is not None
        and settings.source_name is not None
        and settings.revision_of != settings.source_name
    ):
        raise SettingsError(
            f"--revision-of {settings.revision_of!r} and --source-name {settings.source_name!r}: "
            "a revision keeps its source's name; give one of them"
        )
    return settings.revision_of or settings.source_name


def resolve_source(
    source: str, settings: Settings, progress: ProgressFn | None = None
) -> ResolvedSource:
    """A local folder as it is, or a Hub dataset fetched (incrementally) into the cache."""
    if not source.startswith("hf://"):  # a folder; the Hub client is not even imported
        root = Path(source).resolve()
        require_dataset(root, source)
        revision = settings.revision or git_revision(root)
        name, uri = source_identity(source, _source_name(settings))
        return ResolvedSource(root, source, None, revision, name=name, uri=uri)
    from tracehouse.fetch import hub

    reference = hub.parse_hub_uri(source)
    assert reference is not None
    from tracehouse.rejects import Reject

    def callback(done_files: int, total_files: int, *_: Any) -> None:
        if progress is not None:
            progress("fetch", done_files, total_files)

    cache_dir = settings.hub_cache_for(reference.repo_id)
    snapshot = hub.fetch_dataset(
        reference,
        cache_dir,
        include_blobs=settings.include_blobs,
        progress=callback,
        retry=hub.RetryPolicy.within(settings.hub_timeout_s, settings.hub_fetch_timeout_s),
        offline=settings.hub_offline,
    )
    require_complete(snapshot)
    require_dataset(snapshot.root, source)
    rejects = [Reject(r.path, None, "unsafe_path", r.message, None) for r in snapshot.rejected]
    name, uri = source_identity(source, _source_name(settings))
    return ResolvedSource(
        snapshot.root,
        source,
        reference.revision,
        snapshot.resolved_sha,
        rejects,
        list(snapshot.transferred_files),
        name=name,
        uri=uri,
        links_within=cache_dir / "blobs",
        note=snapshot.note,
    )


def require_complete(snapshot: Any) -> None:
    """Refuse a Hub snapshot that lacks a selected file (``hub.HubSnapshot.failed``).

    A build publishes a complete reading of its source or nothing. Building without the file
    would drop its runs from the tables (under the shrink guard when it holds fewer than half)
    and record them in run_history as having left the source, which they did not. Keeping the
    file's rows from the previous build instead would publish a generation that claims to be
    the new commit while holding another commit's bytes for that file. So the build stops; the
    files that did arrive stay in the cache, and the next build fetches only what is missing.
    """
    if not snapshot.failed:
        return
    first = snapshot.failed[0]
    others = len(snapshot.failed) - 1
    more = f" (and {others} more file{'s' if others > 1 else ''})" if others else ""
    from tracehouse.fetch.hub import HubError

    raise HubError(
        f"{snapshot.source_uri}: {first.message}{more}; nothing was published, the warehouse "
        "is unchanged (files already fetched stay cached for the next build)"
    )


def file_fingerprints(files: list[SourceFile]) -> dict[str, list[int]]:
    """What a build compares to find a source's files unchanged (its manifest's
    ``fingerprints``): each discovered file's size, modification time and inode, by path. The
    one rule for "the files are as the last build read them"; content is hashed only past it."""
    return {f.rel: list(f.fingerprint) for f in files}


def source_version(settings: Settings) -> str:
    """What the configured source is at right now, cheaply: the commit a Hub revision resolves
    to; for a folder, a digest of its files' ``file_fingerprints``, after its git HEAD (or the
    given revision) when it has one, as ``<sha>+files:<digest>``; with several sources (the
    ``sources`` setting), a digest of each one's. The Dagster source asset's data version."""
    if settings.sources:
        from tracehouse.settings import parse_sources

        versions = [
            f"{name}={_one_source_version(uri, settings)}"
            for name, uri in sorted(parse_sources(settings.sources).items())
        ]
        return "sources:" + hashlib.sha256("\n".join(versions).encode()).hexdigest()[:32]
    if settings.source is None:
        raise SettingsError(NO_SOURCE)
    return _one_source_version(settings.source, settings)


def _one_source_version(source: str, settings: Settings) -> str:
    if source.startswith("hf://"):
        from tracehouse.fetch import hub

        reference = hub.parse_hub_uri(source)
        assert reference is not None
        if hub.hub_offline(settings.hub_offline):  # the commit the cache holds, asking no one
            cache_dir = settings.hub_cache_for(reference.repo_id)
            return hub.fetch_dataset(reference, cache_dir, offline=True).resolved_sha
        return hub.resolve_revision(reference, retry=hub.RetryPolicy.within(settings.hub_timeout_s))
    root = Path(source)
    require_dataset(root, source)
    # The files as the build would find them, compared by the build's own rule: a file edited
    # or written into a clone whose HEAD did not move (``flashinfer-bench run --local``) is a
    # new version, as it is a rebuild for ``tracehouse build``. Only stat calls, no reads.
    files, _ = discover(root)
    listing = json.dumps(sorted(file_fingerprints(files).items())).encode()
    digest = "files:" + hashlib.sha256(listing).hexdigest()[:32]
    revision = settings.revision or git_revision(root)
    return digest if revision is None else f"{revision}+{digest}"
