"""A branch's head and how far an environment is behind it, read from a local repository.

Only repositories the installation allows are opened (the same allow-list and
confinement as provisioning's Git reads). An https repository is read by
provisioning one commit deep, so its history is not here to count: both
answers are None for it, and the status says only whether the head differs.
Counting stops at ``cap`` commits ("at least this many").
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from shared.platform.git_policy import AllowedSource, LocalRepository, NotAllowed, locate
from shared.platform.logs import app_logger

log = app_logger("gitops")


@dataclass(frozen=True)
class Behind:
    commits: int
    capped: bool  # at least ``commits``: counting stopped at the cap


def head_commit(repository: str, branch: str, allowed: list[AllowedSource]) -> str | None:
    """The commit ``branch`` points at, or None (remote, not allowed, unreadable, no such branch)."""
    with _opened(repository, allowed) as repo:
        if repo is None:
            return None
        ref = f"refs/heads/{branch}".encode()
        try:
            return repo.refs[ref].decode("ascii") if ref in repo.refs else None
        except (KeyError, ValueError, OSError):
            return None


def commits_behind(
    repository: str, head: str, applied: str | None, allowed: list[AllowedSource], cap: int
) -> Behind | None:
    """Commits reachable from ``head`` but not from ``applied`` (all of them when nothing was applied)."""
    with _opened(repository, allowed) as repo:
        if repo is None:
            return None
        try:
            exclude = [applied.encode()] if applied and applied.encode() in repo else []
            walker = repo.get_walker(include=[head.encode()], exclude=exclude, max_entries=cap + 1)
            count = sum(1 for _ in walker)
        except (KeyError, ValueError, OSError) as error:
            log.info("gitops: history of a bound repository not walked: %s", type(error).__name__)
            return None
        return Behind(min(count, cap), count > cap)


class _opened:
    """The repository, opened only when it is local, allowed and confined to its allowed folder; else None."""

    def __init__(self, repository: str, allowed: list[AllowedSource]) -> None:
        self._repository, self._allowed = repository, allowed
        self._repo: Any = None

    def __enter__(self) -> Any:
        try:
            location = locate(self._repository, self._allowed)
        except NotAllowed:
            return None
        if not isinstance(location, LocalRepository):
            return None
        from dulwich.repo import Repo

        try:
            self._repo = Repo(str(location.path))
        except Exception:  # noqa: BLE001 - missing, not a repository, unreadable: nothing to count
            return None
        if not _confined(self._repo, location):
            return None
        return self._repo

    def __exit__(self, *exc: object) -> None:
        if self._repo is not None:
            self._repo.close()


def _confined(repo: Any, location: LocalRepository) -> bool:
    folders = [Path(repo.controldir()), Path(repo.commondir())]
    folders += [Path(alternate.path) for alternate in repo.object_store.alternates if hasattr(alternate, "path")]
    return all(folder.resolve().is_relative_to(location.root) for folder in folders)
