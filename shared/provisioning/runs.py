"""Provisioning runs: the recorded path by which infrastructure changes.

A run moves ``queued -> planning -> (awaiting-approval ->) applying`` and ends
``applied``, ``failed``, ``rejected``, ``expired``, ``superseded`` or
``cancelled``. Every state change is timestamped in the run's timeline. Only
the moves in :data:`ALLOWED` are possible, so a replayed or duplicated step
cannot walk a finished run backwards.
"""

from __future__ import annotations

import hashlib
from datetime import datetime, timezone
from enum import Enum
from typing import Any

from pydantic import BaseModel, Field


class RunState(str, Enum):
    QUEUED = "queued"
    PLANNING = "planning"
    AWAITING_APPROVAL = "awaiting-approval"
    APPLYING = "applying"
    APPLIED = "applied"
    FAILED = "failed"
    REJECTED = "rejected"
    EXPIRED = "expired"
    SUPERSEDED = "superseded"
    CANCELLED = "cancelled"

    @property
    def is_final(self) -> bool:
        return self in FINAL_STATES


FINAL_STATES = frozenset({RunState.APPLIED, RunState.FAILED, RunState.REJECTED, RunState.EXPIRED,
                          RunState.SUPERSEDED, RunState.CANCELLED})

ALLOWED: dict[RunState, frozenset[RunState]] = {
    RunState.QUEUED: frozenset({RunState.PLANNING, RunState.SUPERSEDED, RunState.CANCELLED, RunState.FAILED}),
    RunState.PLANNING: frozenset({RunState.AWAITING_APPROVAL, RunState.APPLYING, RunState.FAILED,
                                  RunState.CANCELLED}),
    RunState.AWAITING_APPROVAL: frozenset({RunState.APPLYING, RunState.REJECTED, RunState.EXPIRED,
                                           RunState.CANCELLED, RunState.FAILED}),
    RunState.APPLYING: frozenset({RunState.APPLIED, RunState.FAILED}),
}


class FailureReason(str, Enum):
    INVALID_SPECIFICATION = "invalid-specification"
    PLAN_FAILED = "plan-failed"
    APPROVAL_REJECTED = "approval-rejected"
    APPROVAL_EXPIRED = "approval-expired"
    APPLY_FAILED = "apply-failed"
    TARGET_UNREACHABLE = "target-unreachable"
    SUPERSEDED = "superseded"
    CANCELLED = "cancelled"


class TimelineEntry(BaseModel):
    state: RunState
    at: str
    note: str = ""


class Decision(BaseModel):
    decision: str  # "approved" | "rejected" | "cancelled"
    by: str
    at: str
    plan_digest: str
    reason: str = ""
    channel: str = "http"  # or "queue"


class SourceInfo(BaseModel):
    kind: str  # "inline" | "git"
    repository: str | None = None
    path: str | None = None
    revision: str | None = None
    commit: str | None = None


class Run(BaseModel):
    id: str
    tenant: str
    environment: str
    environment_class: str
    target: str
    runner: str
    state: RunState
    ordinal: int
    requested_by: str
    idempotency_key: str
    specification_digest: str
    source: SourceInfo
    created_at: str
    timeline: list[TimelineEntry] = Field(default_factory=list)
    plan_digest: str | None = None
    plan_counts: dict[str, int] | None = None
    requires_approval: bool | None = None
    approval_deadline: str | None = None
    decision: Decision | None = None
    apply_receipt_digest: str | None = None
    failure_reason: FailureReason | None = None
    failure_detail: str | None = None

    def moved_to(self, state: RunState, note: str = "", **changes: Any) -> Run:
        if state not in ALLOWED.get(self.state, frozenset()):
            raise InvalidTransition(f"run {self.id}: {self.state.value} -> {state.value} is not allowed")
        entry = TimelineEntry(state=state, at=utc_now(), note=note)
        return self.model_copy(update={"state": state, "timeline": [*self.timeline, entry], **changes})

    def public_view(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude={"ordinal"})


class InvalidTransition(Exception):
    pass


def run_id_for(tenant: str, idempotency_key: str) -> str:
    """Deterministic: the same request, however often it arrives, names the same run."""
    return "run-" + hashlib.sha256(f"{tenant}\n{idempotency_key}".encode()).hexdigest()[:24]


def utc_now() -> str:
    return datetime.now(timezone.utc).isoformat()
