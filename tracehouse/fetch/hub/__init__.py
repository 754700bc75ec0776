"""Fetch a FlashInfer-Trace dataset from the Hugging Face Hub into a local, content-addressed cache.

The builder reads a plain local folder; this package produces one, ``cache_dir/snapshots/<sha>/``,
from a dataset repo such as ``hf://datasets/flashinfer-ai/flashinfer-trace``. It talks to the Hub's
HTTP API with httpx directly (no ``huggingface_hub``), so retries, integrity checks and what is
written where are all decided here. One module a concern, in the order a fetch walks them:

* ``uri``: ``hf://datasets/<org>/<name>[@<revision>]`` parsed and checked (pure).
* ``client``: endpoint and token, errors, the retry policy, a JSON GET that retries.
* ``listing``: the commit a revision resolves to, and the selected files of its tree.
* ``download``: one file body streamed, resumed, verified and renamed into ``blobs/``.
* ``cache``: ``fetch_dataset`` and the snapshot folders, manifests and locks of the cache.

Why a listed file is refused or a selected one fails: ``tracehouse.rejects.HUB_LISTING_REASONS``
and ``HUB_FAILURE_REASONS``. What a commit sha is: ``tracehouse.kernelindex.is_commit_sha``.
"""

from tracehouse.fetch.hub.cache import (
    HubOfflineMiss,
    HubSnapshot,
    ProgressCallback,
    fetch_dataset,
    snapshot_root,
)
from tracehouse.fetch.hub.client import (
    DEFAULT_ENDPOINT,
    USER_AGENT,
    HubError,
    HubHTTPError,
    RepositoryNotFoundError,
    RetryPolicy,
    RevisionNotFoundError,
    hub_endpoint,
    hub_offline,
    hub_token,
    hub_token_file,
)
from tracehouse.fetch.hub.listing import (
    BLOB_DIR,
    DATA_DIRS,
    ROOT_FILE_SUFFIXES,
    FailedRemoteFile,
    RejectedRemoteFile,
    RemoteFile,
    file_list_digest,
    list_remote_files,
    resolve_revision,
)
from tracehouse.fetch.hub.uri import DEFAULT_REVISION, HubDatasetRef, parse_hub_uri

__all__ = [
    "BLOB_DIR",
    "DATA_DIRS",
    "DEFAULT_ENDPOINT",
    "DEFAULT_REVISION",
    "ROOT_FILE_SUFFIXES",
    "USER_AGENT",
    "FailedRemoteFile",
    "HubDatasetRef",
    "HubError",
    "HubHTTPError",
    "HubOfflineMiss",
    "HubSnapshot",
    "ProgressCallback",
    "RejectedRemoteFile",
    "RemoteFile",
    "RepositoryNotFoundError",
    "RetryPolicy",
    "RevisionNotFoundError",
    "fetch_dataset",
    "file_list_digest",
    "hub_endpoint",
    "hub_offline",
    "hub_token",
    "hub_token_file",
    "list_remote_files",
    "parse_hub_uri",
    "resolve_revision",
    "snapshot_root",
]
