"""Where a specification comes from: inline (JSON or YAML), a Git reference, or a release.

A Git reference (repository, path, revision) is resolved with dulwich, from a
local repository path or an HTTPS URL that the installation allows
(:mod:`shared.platform.git_sources`); the commit it resolved to is pinned
in the run, so the run always names exactly which desired state it applied.
A release (``{"release": {"id", "environment"}}``) is resolved through DeliveryHost
(:mod:`shared.provisioning.releases`); its id and commit are pinned the same way.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, GetCoreSchemaHandler, model_validator
from pydantic_core import CoreSchema, core_schema

from shared.desired_state.api import DeclaredSpecification
from shared.platform.errors import RuntimeCloudError
from shared.platform.git_sources import NOT_ALLOWED, GitLimits, GitSourceError, read_file
from shared.platform.json_types import exactly_one_of, one_given
from shared.provisioning.releases import RELEASE_SOURCE, ReleaseReference, Releases, media_type_of, resolve_release
from shared.provisioning.runs import SourceInfo
from shared.provisioning.specification_text import SpecificationTextError, parse_specification_text


class SourceError(RuntimeCloudError):
    """The specification could not be read from its source (bad Git reference, bad YAML...)."""


class GitReference(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    repository: str = Field(min_length=1, max_length=2048, description="local path or https:// URL")
    path: str = Field(min_length=1, max_length=1024, description="file inside the repository")
    revision: str = Field(
        default="main",
        min_length=1,
        max_length=255,
        pattern=r"^[A-Za-z0-9][A-Za-z0-9._/-]*$",
        description="branch, tag or commit",
    )


SOURCES = ("specification", "specification_text", "git", "release")


class SpecificationDocument(dict[str, Any]):
    """An inline specification: read as the JSON object it is, checked for secrets and then validated as an
    :class:`~shared.desired_state.EnvironmentSpecification` by the service (the secret check comes first, so
    that a refused message can be kept without them). The document states that model's schema
    (:class:`~shared.desired_state.DeclaredSpecification`: the tenant may be left out), as a reference to
    that model's own component, so that a generated client has one class for it."""

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        # Validation reads any JSON object (the identity function adds nothing); the JSON schema is the
        # input schema's, which pydantic states as a $ref (a schema returned by __get_pydantic_json_schema__
        # would be inlined).
        return core_schema.no_info_before_validator_function(
            lambda value: value,
            core_schema.dict_schema(keys_schema=core_schema.str_schema(), values_schema=core_schema.any_schema()),
            json_schema_input_schema=handler.generate_schema(DeclaredSpecification),
        )


class Declaration(BaseModel):
    """Desired state as a caller hands it over: exactly one of the four forms."""

    model_config = ConfigDict(extra="forbid", json_schema_extra=exactly_one_of(*SOURCES))

    specification: SpecificationDocument | None = None
    specification_text: str | None = None
    format: Literal["json", "yaml"] = "json"
    git: GitReference | None = None
    release: ReleaseReference | None = None  # resolved through DeliveryHost when declared

    @model_validator(mode="after")
    def _exactly_one_source(self) -> Declaration:
        one_given(self, *SOURCES)
        return self


def resolve(
    declaration: Declaration, git_limits: GitLimits | None = None, releases: Releases | None = None
) -> tuple[dict[str, Any], SourceInfo]:
    """The specification document and where it came from (Git only within ``git_limits``; a release through
    ``releases``, DeliveryHost: :class:`~shared.provisioning.releases.ReleaseUnresolved` when it cannot say)."""
    if declaration.specification is not None:
        return dict(declaration.specification), SourceInfo(kind="inline")
    if declaration.specification_text is not None:
        return _parse(declaration.specification_text, declaration.format), SourceInfo(kind="inline")
    if declaration.release is not None:
        release = resolve_release(declaration.release, releases)
        source = SourceInfo(kind=RELEASE_SOURCE, release=release.release_id, commit=release.commit)
        return _parse(release.specification_text, media_type_of(release.specification_text)), source
    assert declaration.git is not None
    if git_limits is None or not git_limits.allowed:
        raise SourceError(NOT_ALLOWED)
    reference = declaration.git
    try:
        text, commit = read_file(reference.repository, reference.path, reference.revision, git_limits)
    except GitSourceError as error:
        raise SourceError(str(error)) from None
    media_type: Literal["json", "yaml"] = "yaml" if re.search(r"\.ya?ml$", reference.path) else "json"
    source = SourceInfo(
        kind="git", repository=reference.repository, path=reference.path, revision=reference.revision, commit=commit
    )
    return _parse(text, media_type), source


def _parse(text: str, media_type: Literal["json", "yaml"]) -> dict[str, Any]:
    try:
        return parse_specification_text(text, media_type)
    except SpecificationTextError as error:  # says where, never quotes the text
        raise SourceError(str(error)) from None
