"""What the ``gitops-sync`` queue carries: one sync of one binding, queued by the poll, a webhook or a resume
(its trigger is ``functions/gitops.py``'s ``gitops_sync``; a message that is not one is kept as a rejection)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from shared.desired_state.api import NAME_PATTERN
from shared.platform.identifiers import TENANT_PATTERN

BUSY_RETRIES = 20  # a sync that meets another commit's declaration is queued again, this many times at most


class SyncMessage(BaseModel):
    model_config = ConfigDict(extra="forbid")

    tenant: str = Field(pattern=TENANT_PATTERN)
    environment: str = Field(pattern=NAME_PATTERN)
    trigger: Literal["poll", "webhook", "resume"]
    attempt: int = Field(default=0, ge=0, le=BUSY_RETRIES)
