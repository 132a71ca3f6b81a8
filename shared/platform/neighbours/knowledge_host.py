"""KnowledgeHost: the audit mirror, keeping plan and apply receipts, run outputs and drift reports as artifacts.

Contract (``RuntimeCloud:KnowledgeHost:BaseUrl`` is ``{base}``):

- ``PUT {base}/v1/artifacts/{artifact_id}`` with an :class:`Artifact`:
  201 stored, 200 already stored with the same digest (so a retried publish is
  harmless), both answering ``{"artifact_id", "sha256"}``; 409 the id is stored
  with another digest (:class:`ArtifactConflict`; nothing is overwritten),
  answering ``{"artifact_id", "sha256"}`` of what it holds.
- ``GET {base}/v1/artifacts/{artifact_id}``: 200 the artifact as stored
  (:class:`StoredArtifact`: its content or reference, with its digest); 404 none
  (:class:`ArtifactNotFound`). Restore reads receipts back this way.

``sha256`` is the hex SHA-256 of ``content`` as UTF-8 (for a receipt: its blob's
bytes, the digest the run keeps), or of the referenced bytes for ``content_ref``.
The client refuses to send content that does not match its digest, and refuses
an answer whose content does not (:class:`NeighbourAnswerInvalid`).
"""

from __future__ import annotations

import hashlib
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from shared.platform.neighbours.errors import ArtifactConflict, ArtifactNotFound, NeighbourAnswerInvalid
from shared.platform.neighbours.http_client import Answer, NeighbourHttp, Token, segment
from shared.platform.neighbours.models import NAME_PATTERN, SHA256_PATTERN, NeighbourAnswer
from shared.platform.neighbours.settings import KnowledgeHostSettings

NAME = "KnowledgeHost"

ArtifactKind = Literal["plan-receipt", "apply-receipt", "run-outputs", "drift-report"]
PutOutcome = Literal["created", "unchanged"]


def sha256_of(content: str) -> str:
    return hashlib.sha256(content.encode("utf-8")).hexdigest()


class _ArtifactFields(BaseModel):
    artifact_id: str = Field(pattern=NAME_PATTERN)
    kind: ArtifactKind
    tenant: str = Field(pattern=NAME_PATTERN)
    environment: str = Field(pattern=NAME_PATTERN)
    run_id: str | None = Field(default=None, pattern=NAME_PATTERN)  # None: a drift report (a scan's, not a run's)
    sha256: str = Field(pattern=SHA256_PATTERN)
    content: str | None = None  # the artifact itself (receipts, drift reports)
    content_ref: str | None = Field(default=None, min_length=1, max_length=2000)  # where it is (run outputs)

    @model_validator(mode="after")
    def _content_or_reference(self) -> _ArtifactFields:
        if (self.content is None) == (self.content_ref is None):
            raise ValueError("an artifact carries exactly one of content and content_ref")
        return self

    @property
    def content_matches(self) -> bool:
        return self.content is None or sha256_of(self.content) == self.sha256


class Artifact(_ArtifactFields):
    """What the host publishes; :meth:`of_content` computes the digest."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    @model_validator(mode="after")
    def _digest_matches(self) -> Artifact:
        if not self.content_matches:
            raise ValueError("sha256 is not the SHA-256 of content")
        return self

    @classmethod
    def of_content(
        cls, *, artifact_id: str, kind: ArtifactKind, tenant: str, environment: str, run_id: str | None, content: str
    ) -> Artifact:
        return cls(
            artifact_id=artifact_id,
            kind=kind,
            tenant=tenant,
            environment=environment,
            run_id=run_id,
            sha256=sha256_of(content),
            content=content,
        )


class StoredArtifact(_ArtifactFields, NeighbourAnswer):
    """An artifact as KnowledgeHost answers it (its digest is checked by the client, not here)."""

    model_config = NeighbourAnswer.model_config


class ArtifactReceipt(NeighbourAnswer):
    """KnowledgeHost's answer to a PUT: which artifact, with which digest it holds."""

    artifact_id: str = Field(pattern=NAME_PATTERN)
    sha256: str = Field(pattern=SHA256_PATTERN)


class KnowledgeHost:
    def __init__(self, settings: KnowledgeHostSettings, token: Token | None = None) -> None:
        self.http = NeighbourHttp(NAME, settings, token)

    def put(self, artifact: Artifact) -> PutOutcome:
        """Store ``artifact`` once: ``created``, or ``unchanged`` when the same id and digest are there;
        :class:`ArtifactConflict` when the id holds another digest."""
        what = f"artifact {artifact.artifact_id}"
        answer = self.http.call("PUT", self._path(artifact.artifact_id), artifact.model_dump(exclude_none=True))
        if answer.status == 409:
            stored = _stored_digest(self.http, answer, what)
            raise ArtifactConflict(NAME, f"{what} is stored with another digest ({stored or 'not said'})", stored)
        if answer.status not in (200, 201):
            raise self.http.unexpected(answer, what)
        receipt = self.http.parse(answer, ArtifactReceipt, what)
        if (receipt.artifact_id, receipt.sha256) != (artifact.artifact_id, artifact.sha256):
            raise NeighbourAnswerInvalid(NAME, f"answered the PUT of {what} about another artifact or digest")
        return "created" if answer.status == 201 else "unchanged"

    def get(self, artifact_id: str) -> StoredArtifact:
        """The artifact as stored, its content checked against its digest; :class:`ArtifactNotFound` on 404."""
        what = f"artifact {artifact_id}"
        stored = self.http.read(
            self._path(artifact_id),
            StoredArtifact,
            what,
            not_found=lambda: ArtifactNotFound(NAME, f"{what} is not stored"),
        )
        if stored.artifact_id != artifact_id:
            raise NeighbourAnswerInvalid(NAME, f"answered {what} with another artifact")
        if not stored.content_matches:
            raise NeighbourAnswerInvalid(NAME, f"answered {what} with content that does not match its sha256")
        return stored

    @staticmethod
    def _path(artifact_id: str) -> str:
        return f"v1/artifacts/{segment(artifact_id)}"


def _stored_digest(http: NeighbourHttp, answer: Answer, what: str) -> str | None:
    """The digest a 409 names, when its body says (a conflict is reported even when it does not)."""
    try:
        return http.parse(answer, ArtifactReceipt, what).sha256
    except NeighbourAnswerInvalid:
        return None
