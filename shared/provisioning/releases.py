"""A promotion that names a release: resolved through DeliveryHost to specification text and its commit.

A declaration may carry ``{"release": {"id": ..., "environment": ...}}`` instead of
desired state. The host asks DeliveryHost (:mod:`shared.platform.neighbours.delivery_host`)
when the declaration arrives, because everything a run is judged by (its
environment's class and target, its digest, its registry decision) comes from
the specification: a run recorded without one would leave each step to handle
"not known yet". What it resolved is pinned in the run (``source.release``,
``source.commit``) and so in its plan receipt.

DeliveryHost is fail-fast: when it cannot answer (not configured, down, a 5xx,
an answer off its contract, an unknown release) the declaration is still
recorded, as a run that fails ``release-unresolved`` at its first step, with an
apply receipt, before any plan job (:func:`shared.provisioning.step_answers.unresolved`).
Such a run carries no desired state, so it supersedes nothing.
"""

from __future__ import annotations

import hashlib
from typing import Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field

from shared.desired_state.api import NAME_PATTERN as ENVIRONMENT_PATTERN
from shared.platform.errors import RuntimeCloudError
from shared.platform.neighbours.delivery_host import NAME as DELIVERY_HOST
from shared.platform.neighbours.delivery_host import Release
from shared.platform.neighbours.errors import NeighbourError, ReleaseUnknown
from shared.platform.neighbours.models import NAME_PATTERN as RELEASE_PATTERN

RELEASE_SOURCE = "release"  # SourceInfo.kind of a run declared by naming a release


class ReleaseReference(BaseModel):
    """The release a declaration names, for one environment."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(pattern=RELEASE_PATTERN, description="the release, as DeliveryHost names it")
    environment: str = Field(pattern=ENVIRONMENT_PATTERN, description="the environment it is promoted to")

    def digest(self) -> str:
        """What a run that could not resolve it is declared with: the reference, since there is no specification."""
        return hashlib.sha256(f"release\n{self.id}\n{self.environment}".encode()).hexdigest()


class Releases(Protocol):
    """DeliveryHost's release resolution (:class:`shared.platform.neighbours.delivery_host.DeliveryHost`)."""

    def release(self, release_id: str, environment: str) -> Release: ...


class ReleaseUnresolved(RuntimeCloudError):
    """DeliveryHost could not say what the release holds: the declaration becomes a run failing
    ``release-unresolved``."""

    def __init__(self, reference: ReleaseReference, detail: str, *, unknown: bool = False) -> None:
        super().__init__(f"release {reference.id} for environment {reference.environment} was not resolved: {detail}")
        self.reference = reference
        self.unknown = unknown  # DeliveryHost answered that it knows no such release (else: it could not answer)


def resolve_release(reference: ReleaseReference, releases: Releases | None) -> Release:
    """The release's specification text and commit; :class:`ReleaseUnresolved` when DeliveryHost cannot say."""
    if releases is None:
        raise ReleaseUnresolved(reference, f"{DELIVERY_HOST} is not configured (RuntimeCloud:DeliveryHost:BaseUrl)")
    try:
        return releases.release(reference.id, reference.environment)
    except ReleaseUnknown as error:
        raise ReleaseUnresolved(reference, str(error), unknown=True) from None
    except NeighbourError as error:  # unknown (404), unavailable or an answer off its contract: all fail fast
        raise ReleaseUnresolved(reference, str(error)) from None


def media_type_of(text: str) -> Literal["json", "yaml"]:
    """DeliveryHost's text is JSON or YAML and says not which: a JSON document starts with ``{``."""
    return "json" if text.lstrip().startswith("{") else "yaml"
