"""What the host's inbound provisioning queues carry: a promotion from delivery (``promotions``) and a
decision ControlPlaneApi made (``approvals``). Their triggers are in ``functions/provisioning.py``; a
message that is not one is kept as a rejection (:mod:`shared.platform.rejections`), never retried."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from shared.desired_state.api import NAME_PATTERN
from shared.platform.identifiers import IDEMPOTENCY_KEY_PATTERN, TENANT_PATTERN


class Promotion(BaseModel):
    """A promotion's envelope; its desired state is read as a :class:`~shared.provisioning.sources.Declaration`."""

    model_config = ConfigDict(extra="ignore")

    # The promotion id is the run's idempotency key, part of a table key: the same characters only.
    promotion_id: str = Field(pattern=IDEMPOTENCY_KEY_PATTERN)
    tenant: str = Field(max_length=64, pattern=TENANT_PATTERN)
    environment: str = Field(pattern=NAME_PATTERN)
    requested_by: str = Field(min_length=1, max_length=256)
    # W3C trace context of the work that sent the promotion: handling it continues that trace
    # (a malformed one is ignored, never a reason to refuse the promotion).
    traceparent: str | None = Field(default=None, max_length=128)
    tracestate: str | None = Field(default=None, max_length=512)


class ApprovalMessage(BaseModel):
    """A decision ControlPlaneApi made, on the host's ``approvals`` queue (shared.provisioning.decisions)."""

    model_config = ConfigDict(extra="forbid")

    # Tenant and run id become table keys: only characters keys can hold (else a rejection record).
    tenant: str = Field(pattern=TENANT_PATTERN)
    environment: str = Field(pattern=NAME_PATTERN, description="the run's environment")
    run_id: str = Field(pattern=IDEMPOTENCY_KEY_PATTERN)
    decision: Literal["approve", "reject"]
    plan_digest: str = Field(pattern=r"^[0-9a-f]{64}$", description="the plan approved (the run's plan_digest)")
    approver: str = Field(pattern=r"^\S+$", max_length=256, description="the person (oid, else sub)")
    approver_client: str | None = Field(default=None, max_length=256, description="the app they used")
    reason: str = Field(default="", max_length=2000)
    traceparent: str | None = Field(
        default=None, max_length=128, description="W3C trace context (a malformed one is ignored)"
    )
    tracestate: str | None = Field(default=None, max_length=512)
