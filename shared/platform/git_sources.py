"""Reading a specification file from Git (dulwich), within the installation's limits.

Only repositories the installation allows are read (see
:mod:`shared.platform.git_policy`). An https repository is fetched into a
scratch folder with a byte budget and a deadline, without following
redirects, and only the ref the revision names (one commit deep) unless the
revision is a commit id. The file read is at most :data:`MAX_FILE_BYTES`.

What goes wrong is said without naming paths, files, hosts or the
underlying error: "not an allowed Git source" for anything not allowed
(whether or not it exists), "cannot be read" for an allowed repository that
could not be opened or fetched. The detail goes to the log, for operators.
"""

from __future__ import annotations

import re
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from shared.platform.errors import RuntimeCloudError
from shared.platform.git_policy import (
    AllowedSource,
    LocalRepository,
    NotAllowed,
    RemoteRepository,
    locate,
)
from shared.platform.logs import app_logger

log = app_logger("provisioning")

MAX_FILE_BYTES = 1024 * 1024  # a specification is a few kilobytes; anything larger is not one
NOT_ALLOWED = "the repository is not an allowed Git source for this tenant"
UNREADABLE = "the repository cannot be read"
_COMMIT_ID = re.compile(r"^[0-9a-f]{40}$")


class GitSourceError(RuntimeCloudError):
    """The file could not be read; the message is safe to show to the caller."""


@dataclass(frozen=True)
class GitLimits:
    allowed: list[AllowedSource]
    max_fetch_bytes: int
    timeout_seconds: float


def read_file(repository: str, path: str, revision: str, limits: GitLimits) -> tuple[str, str]:
    """(text of ``path`` at ``revision``, the commit id it resolved to)."""
    try:
        location = locate(repository, limits.allowed)
    except NotAllowed:
        raise GitSourceError(NOT_ALLOWED) from None
    if isinstance(location, RemoteRepository):
        return _read_remote(location.url, path, revision, limits)
    return _read_local(location, path, revision)


# -- local repositories -------------------------------------------------------------------------


def _read_local(location: LocalRepository, path: str, revision: str) -> tuple[str, str]:
    from dulwich.repo import Repo

    try:
        repo = Repo(str(location.path))
    except Exception as error:  # noqa: BLE001 - missing, not a repository, unreadable: one answer for all
        log.info("git source %s not opened: %s", location.path, type(error).__name__)
        raise GitSourceError(UNREADABLE) from None
    with repo:
        if not _confined(repo, location):
            raise GitSourceError(NOT_ALLOWED)
        return _read(repo, path, revision)


def _confined(repo: Any, location: LocalRepository) -> bool:
    """The repository's own folders (a worktree's .git file, commondir, object alternates) stay in the root."""
    folders = [Path(repo.controldir()), Path(repo.commondir())]
    folders += [Path(alternate.path) for alternate in repo.object_store.alternates if hasattr(alternate, "path")]
    return all(folder.resolve().is_relative_to(location.root) for folder in folders)


# -- https repositories --------------------------------------------------------------------------


class _OverBudget(RuntimeCloudError):
    pass


class _Budget:
    """Bytes received and time taken by one fetch; exceeding either ends the fetch."""

    def __init__(self, max_bytes: int, timeout_seconds: float) -> None:
        self.max_bytes = max_bytes
        self.timeout_seconds = timeout_seconds
        self.received = 0
        self._deadline = time.monotonic() + timeout_seconds

    def spend(self, size: int) -> None:
        self.received += size
        if self.received > self.max_bytes:
            raise _OverBudget(f"the repository is larger than {self.max_bytes} bytes; fetch a smaller one")
        self.check_time()

    def check_time(self) -> None:
        if time.monotonic() > self._deadline:
            raise _OverBudget(f"fetching the repository took longer than {self.timeout_seconds:g} seconds")


def _bounded_client(url: str, budget: _Budget) -> Any:
    import urllib3
    from dulwich.client import Urllib3HttpGitClient

    class BoundedHttpGitClient(Urllib3HttpGitClient):
        """Counts every byte read against the budget; never follows a redirect (it could leave the allow-list)."""

        def _http_request(
            self, url: str, headers: dict[str, str] | None = None, data: Any = None, raise_for_status: bool = True
        ) -> tuple[Any, Callable[..., bytes]]:
            budget.check_time()
            response, read = super()._http_request(url, headers, data, raise_for_status)

            def bounded_read(*args: Any, **kwargs: Any) -> bytes:
                chunk = read(*args, **kwargs)
                budget.spend(len(chunk))
                return chunk

            return response, bounded_read

    per_read = min(budget.timeout_seconds, 10.0)
    pool = urllib3.PoolManager(
        timeout=urllib3.Timeout(connect=per_read, read=per_read),
        retries=urllib3.Retry(total=1, redirect=False, raise_on_redirect=True),
        cert_reqs="CERT_REQUIRED",
    )
    return BoundedHttpGitClient(url, pool_manager=pool, quiet=True)


def _read_remote(url: str, path: str, revision: str, limits: GitLimits) -> tuple[str, str]:
    from dulwich.repo import Repo

    budget = _Budget(limits.max_fetch_bytes, limits.timeout_seconds)
    chosen: dict[str, bytes] = {}

    def wants(refs: dict[bytes, bytes], depth: int | None = None) -> list[bytes]:
        sha = _ref_for(refs, revision)
        if sha is not None:
            chosen["sha"] = sha
            return [sha]
        return list(set(refs.values())) if _COMMIT_ID.match(revision) else []

    with tempfile.TemporaryDirectory(prefix="spec-") as scratch:
        with Repo.init_bare(scratch) as repo:
            named = not _COMMIT_ID.match(revision)
            try:
                _bounded_client(url, budget).fetch("", repo, determine_wants=wants, depth=1 if named else None)
            except Exception as error:  # noqa: BLE001 - network, TLS, protocol, refused redirect: never echoed to the caller
                raise GitSourceError(_fetch_failure(error, budget)) from None
            target = chosen.get("sha") or revision.encode()
            if target not in repo:
                raise GitSourceError(f"revision {revision!r} not found")
            return _read_at(repo, _peeled(repo, target), path, revision)


def _fetch_failure(error: Exception, budget: _Budget) -> str:
    """What to tell the caller about a failed fetch: over budget, too slow, or just unreadable."""
    import urllib3

    chain: list[BaseException] = []
    current: BaseException | None = error
    while current is not None and len(chain) < 10:  # dulwich and urllib3 wrap each other's errors
        chain.append(current)
        current = current.__cause__ or current.__context__
    if over := next((e for e in chain if isinstance(e, _OverBudget)), None):
        return str(over)
    if any(isinstance(e, (TimeoutError, urllib3.exceptions.TimeoutError)) for e in chain):
        return f"fetching the repository took longer than {budget.timeout_seconds:g} seconds"
    log.info("git fetch from an allowed source failed: %s", " <- ".join(type(e).__name__ for e in chain))
    return UNREADABLE


def _ref_for(refs: dict[bytes, bytes], revision: str) -> bytes | None:
    for name in (f"refs/heads/{revision}", f"refs/tags/{revision}"):
        if (sha := refs.get(name.encode())) is not None:
            return sha
    return None


# -- reading the file -----------------------------------------------------------------------------


def _read(repo: Any, path: str, revision: str) -> tuple[str, str]:
    return _read_at(repo, _resolve_revision(repo, revision), path, revision)


def _read_at(repo: Any, commit_id: bytes, path: str, revision: str) -> tuple[str, str]:
    from dulwich.object_store import tree_lookup_path

    try:
        commit = repo[commit_id]
        _, blob_id = tree_lookup_path(repo.__getitem__, commit.tree, path.strip("/").encode())
        blob = repo[blob_id]
    except (KeyError, AttributeError, NotADirectoryError):
        raise GitSourceError(f"{path} does not exist at {revision}") from None
    if blob.type_name != b"blob":
        raise GitSourceError(f"{path} is not a file at {revision}")
    if blob.raw_length() > MAX_FILE_BYTES:
        raise GitSourceError(f"{path} is larger than {MAX_FILE_BYTES} bytes; a specification is not")
    try:
        return blob.data.decode("utf-8"), commit_id.decode("ascii")
    except UnicodeDecodeError:
        raise GitSourceError(f"{path} is not UTF-8 text") from None


def _resolve_revision(repo: Any, revision: str) -> bytes:
    for candidate in (f"refs/heads/{revision}", f"refs/tags/{revision}", f"refs/remotes/origin/{revision}"):
        ref = candidate.encode()
        try:
            if ref in repo.refs:
                return _peeled(repo, repo.refs[ref])
        except (KeyError, ValueError):
            continue
    if _COMMIT_ID.match(revision) and revision.encode() in repo:
        return _peeled(repo, revision.encode())
    raise GitSourceError(f"revision {revision!r} not found")


def _peeled(repo: Any, sha: bytes) -> bytes:
    """A tag's commit (tags of tags too); a commit is itself."""
    obj = repo[sha]
    for _ in range(10):
        if obj.type_name != b"tag":
            break
        sha = obj.object[1]
        obj = repo[sha]
    if obj.type_name != b"commit":
        raise GitSourceError("the revision does not name a commit")
    return sha
