"""Where a specification comes from: inline (JSON or YAML) or a Git reference.

A Git reference (repository, path, revision) is resolved with dulwich, from a
local repository path or an HTTPS URL; the commit it resolved to is pinned in
the run, so the run always names exactly which desired state it applied.
"""

from __future__ import annotations

import re
import tempfile
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from shared.provisioning.runs import SourceInfo
from shared.provisioning.specification import parse_specification_text


class SourceError(Exception):
    """The specification could not be read from its source (bad Git reference, bad YAML...)."""


class GitReference(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    repository: str = Field(min_length=1, description="local path or https:// URL")
    path: str = Field(min_length=1, description="file inside the repository")
    revision: str = Field(default="main", min_length=1, description="branch, tag or commit")


class Declaration(BaseModel):
    """Desired state as a caller hands it over: exactly one of the three forms."""

    model_config = ConfigDict(extra="forbid")

    specification: dict[str, Any] | None = None
    specification_text: str | None = None
    format: Literal["json", "yaml"] = "json"
    git: GitReference | None = None

    @model_validator(mode="after")
    def _exactly_one_source(self) -> Declaration:
        given = [name for name in ("specification", "specification_text", "git") if getattr(self, name) is not None]
        if len(given) != 1:
            raise ValueError("give exactly one of specification, specification_text or git")
        return self


def resolve(declaration: Declaration) -> tuple[dict[str, Any], SourceInfo]:
    """The specification document and where it came from."""
    if declaration.specification is not None:
        return dict(declaration.specification), SourceInfo(kind="inline")
    if declaration.specification_text is not None:
        return _parse(declaration.specification_text, declaration.format), SourceInfo(kind="inline")
    assert declaration.git is not None
    text, commit = read_from_git(declaration.git)
    media_type: Literal["json", "yaml"] = "yaml" if re.search(r"\.ya?ml$", declaration.git.path) else "json"
    source = SourceInfo(kind="git", repository=declaration.git.repository, path=declaration.git.path,
                        revision=declaration.git.revision, commit=commit)
    return _parse(text, media_type), source


def _parse(text: str, media_type: Literal["json", "yaml"]) -> dict[str, Any]:
    try:
        return parse_specification_text(text, media_type)
    except Exception as error:  # JSON or YAML syntax, or not a mapping
        raise SourceError(f"the specification is not valid {media_type}: {error}") from None


def read_from_git(reference: GitReference) -> tuple[str, str]:
    """(file text, commit id) of ``reference``."""
    from dulwich.repo import Repo

    if reference.repository.startswith("https://"):
        with tempfile.TemporaryDirectory(prefix="spec-") as scratch:
            from dulwich import porcelain

            try:
                repo = porcelain.clone(reference.repository, scratch, bare=True, errstream=_Silent())
            except Exception as error:
                raise SourceError(f"cannot clone {reference.repository}: {error}") from None
            with repo:
                return _read(repo, reference)
    path = Path(reference.repository)
    if not path.exists():
        raise SourceError(f"no repository at {reference.repository}")
    try:
        repo = Repo(str(path))
    except Exception as error:
        raise SourceError(f"{reference.repository} is not a Git repository: {error}") from None
    with repo:
        return _read(repo, reference)


def _read(repo: Any, reference: GitReference) -> tuple[str, str]:
    from dulwich.object_store import tree_lookup_path

    commit_id = _resolve_revision(repo, reference.revision)
    commit = repo[commit_id]
    try:
        _, blob_id = tree_lookup_path(repo.__getitem__, commit.tree, reference.path.strip("/").encode())
    except KeyError:
        raise SourceError(f"{reference.path} does not exist at {reference.revision}") from None
    return repo[blob_id].data.decode("utf-8"), commit_id.decode("ascii")


def _resolve_revision(repo: Any, revision: str) -> bytes:
    candidates = [f"refs/heads/{revision}", f"refs/tags/{revision}", f"refs/remotes/origin/{revision}", revision]
    for candidate in candidates:
        ref = candidate.encode()
        try:
            if ref in repo.refs:
                target = repo.refs[ref]
                obj = repo[target]
                return obj.object[1] if obj.type_name == b"tag" else target
        except KeyError:
            continue
    if re.fullmatch(r"[0-9a-f]{40}", revision) and revision.encode() in repo:
        return revision.encode()
    raise SourceError(f"revision {revision!r} not found")


class _Silent:
    def write(self, _: Any) -> None:
        pass

    def flush(self) -> None:
        pass

