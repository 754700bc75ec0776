"""``hf://datasets/<org>/<name>[@<revision>]``: which dataset repo and revision to read.

Pure: no network, no file system. Every pattern here is applied with ``fullmatch``, so a value
with a trailing newline (which a ``$``-anchored ``match`` lets through) is refused.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import quote, unquote

DEFAULT_REVISION = "main"

_REPO_PART = re.compile(r"[A-Za-z0-9_](?:[A-Za-z0-9_.-]{0,94}[A-Za-z0-9_])?")
_SPECIAL_REF = re.compile(r"refs/(?:pr/[0-9]+|convert/[A-Za-z0-9_.-]+)")
_BAD_REVISION_CHARS = re.compile(r"[\x00-\x20\x7f~^:?*\[\\]")


@dataclass(frozen=True)
class HubDatasetRef:
    """A dataset repo on the Hub and the revision (branch, tag or commit) to read."""

    repo_id: str  # "<org>/<name>"
    revision: str = DEFAULT_REVISION

    def __post_init__(self) -> None:
        problem = repo_id_problem(self.repo_id) or revision_problem(self.revision)
        if problem:
            raise ValueError(problem)

    @property
    def uri(self) -> str:
        """Canonical ``hf://`` form; ``parse_hub_uri(ref.uri) == ref``."""
        base = f"hf://datasets/{self.repo_id}"
        if self.revision == DEFAULT_REVISION:
            return base
        return f"{base}@{quote(self.revision, safe='')}"


def parse_hub_uri(text: str) -> HubDatasetRef | None:
    """Parse ``hf://datasets/<org>/<name>[@<revision>]``.

    Returns None when ``text`` does not start with ``hf://`` (it is then a local path or another
    scheme); raises ValueError with the reason for a malformed ``hf://`` URI.

    The revision is percent-decoded, so a branch named ``feature/x`` is written
    ``@feature%2Fx``. A raw ``/`` after ``@`` is accepted only in the Hub's special refs
    ``refs/pr/<n>`` and ``refs/convert/<name>`` (as ``huggingface_hub``'s ``HfFileSystem`` does);
    anything else with a raw ``/`` would be a path inside the repo, which is not supported. A
    single trailing ``/`` is ignored. Org and name follow the Hub's rules: ASCII letters, digits,
    ``_ . -``, at most 96 characters, not starting/ending with ``.`` or ``-``, no ``--``/``..``.
    """
    if not isinstance(text, str) or not text.startswith("hf://"):
        return None
    rest = text[len("hf://") :]
    if not rest.startswith("datasets/"):
        kind = rest.split("/", 1)[0] or "(nothing)"
        raise ValueError(
            f"{text!r}: only dataset repos are supported, as hf://datasets/<org>/<name>[@<revision>]"
            f" (got {kind!r} after hf://)"
        )
    rest = rest[len("datasets/") :]
    if "?" in rest or "#" in rest:
        raise ValueError(f"{text!r}: query strings and fragments are not supported in hf:// URIs")
    rest = rest.removesuffix("/")
    repo_part, at, rev_part = rest.partition("@")
    parts = repo_part.split("/")
    if len(parts) != 2 or not all(parts):
        if at == "" and len(parts) > 2:
            raise ValueError(
                f"{text!r}: expected hf://datasets/<org>/<name>[@<revision>]; paths inside the repo"
                " are not supported"
            )
        raise ValueError(f"{text!r}: expected hf://datasets/<org>/<name>[@<revision>]")
    problem = repo_id_problem(repo_part)
    if problem:
        raise ValueError(f"{text!r}: {problem}")
    if not at:
        return HubDatasetRef(repo_id=repo_part)
    if rev_part == "":
        raise ValueError(f"{text!r}: empty revision after '@'")
    if "/" in rev_part and not _SPECIAL_REF.fullmatch(rev_part):
        raise ValueError(
            f"{text!r}: revision {rev_part!r} contains '/'; write a branch or tag with a slash"
            " percent-encoded (e.g. 'feature%2Fx'); paths inside the repo are not supported"
        )
    try:
        revision = unquote(rev_part, errors="strict")
    except UnicodeDecodeError:
        raise ValueError(f"{text!r}: revision is not valid percent-encoded UTF-8") from None
    problem = revision_problem(revision)
    if problem:
        raise ValueError(f"{text!r}: {problem}")
    return HubDatasetRef(repo_id=repo_part, revision=revision)


def repo_id_problem(repo_id: str) -> str | None:
    """Why ``repo_id`` is not ``<org>/<name>`` under the Hub's naming rules, or None."""
    parts = repo_id.split("/") if isinstance(repo_id, str) else []
    if len(parts) != 2:
        return f"repo id {repo_id!r} is not of the form <org>/<name>"
    for part in parts:
        if not _REPO_PART.fullmatch(part) or "--" in part or ".." in part:
            return (
                f"invalid repo name component {part!r} (letters, digits, '_', '.', '-';"
                " at most 96 characters; no leading/trailing '.' or '-'; no '--' or '..')"
            )
    if parts[1].endswith(".git"):
        return "repo name must not end with '.git'"
    return None


def revision_problem(revision: str) -> str | None:
    """Why ``revision`` cannot be a git branch, tag or commit name, or None."""
    if (
        not isinstance(revision, str)
        or not revision
        or _BAD_REVISION_CHARS.search(revision)
        or ".." in revision
        or "@{" in revision
        or revision.startswith("/")
        or revision.endswith("/")
        or "//" in revision
        or revision.endswith(".lock")
    ):
        return f"{revision!r} is not a valid git revision name"
    return None


def as_ref(ref: HubDatasetRef | str) -> HubDatasetRef:
    """``ref`` itself, or the ``hf://`` URI ``ref`` parsed (ValueError for anything else)."""
    if isinstance(ref, HubDatasetRef):
        return ref
    parsed = parse_hub_uri(ref)
    if parsed is None:
        raise ValueError(f"{ref!r} is not an hf://datasets/... URI")
    return parsed
