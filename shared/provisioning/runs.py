"""Provisioning runs: the recorded path by which infrastructure changes.

A run moves ``queued -> planning -> (awaiting-approval ->) applying`` and ends
``applied``, ``failed``, ``rejected``, ``expired``, ``superseded`` or
``cancelled``. Every state change is timestamped in the run's timeline. Only
the moves in :data:`ALLOWED` are possible, so a replayed or duplicated step
cannot walk a finished run backwards.
"""

from __future__ import annotations

import hashlib
from enum import Enum
from typing import Any

from pydantic import BaseModel, Field

from shared.iac.api import PlanCounts
from shared.platform import clock
from shared.platform.auth.principal import PrincipalKind, Requester
from shared.platform.errors import RuntimeCloudError
from shared.policy.api import PolicySummary
from shared.provisioning.environment_rules import RegistryChange
from shared.provisioning.releases import RELEASE_SOURCE


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


FINAL_STATES = frozenset(
    {RunState.APPLIED, RunState.FAILED, RunState.REJECTED, RunState.EXPIRED, RunState.SUPERSEDED, RunState.CANCELLED}
)

ALLOWED: dict[RunState, frozenset[RunState]] = {
    RunState.QUEUED: frozenset({RunState.PLANNING, RunState.SUPERSEDED, RunState.CANCELLED, RunState.FAILED}),
    RunState.PLANNING: frozenset({RunState.AWAITING_APPROVAL, RunState.APPLYING, RunState.FAILED, RunState.CANCELLED}),
    # A run still awaiting approval has applied nothing: a newer declaration supersedes it.
    RunState.AWAITING_APPROVAL: frozenset(
        {
            RunState.APPLYING,
            RunState.REJECTED,
            RunState.EXPIRED,
            RunState.CANCELLED,
            RunState.FAILED,
            RunState.SUPERSEDED,
        }
    ),
    # An apply stops between steps when cancelled; what it applied is in its apply receipt.
    RunState.APPLYING: frozenset({RunState.APPLIED, RunState.FAILED, RunState.CANCELLED}),
}

MAX_DETAIL_CHARS = 4000  # a run is one table property (64 KiB): a failure's detail is kept bounded


def bounded_detail(text: str) -> str:
    """``text``, cut to :data:`MAX_DETAIL_CHARS` (a validation failure can list thousands of fields)."""
    return text if len(text) <= MAX_DETAIL_CHARS else text[:MAX_DETAIL_CHARS] + "... (truncated)"


class FailureReason(str, Enum):
    INVALID_SPECIFICATION = "invalid-specification"
    PLAN_FAILED = "plan-failed"
    APPROVAL_REJECTED = "approval-rejected"
    APPROVAL_EXPIRED = "approval-expired"
    APPLY_FAILED = "apply-failed"
    TARGET_UNREACHABLE = "target-unreachable"
    SUPERSEDED = "superseded"
    CANCELLED = "cancelled"
    # The store was restored from a backup while the run was under way (shared.backup): its plan and
    # approvals may predate what happened after the backup, so it ends here instead of applying.
    STORE_RESTORED = "store-restored"
    # The policy gate (shared.policy): a deny rule's violation no exception covers; or the policy
    # could not be read (GovernanceHost down, an invalid bundle): never "no policy, go ahead".
    POLICY_DENIED = "policy-denied"
    POLICY_UNAVAILABLE = "policy-unavailable"
    # The environments' authority (ControlPlaneApi) could not say what the environment is when the run was
    # declared: the run ends before any plan (shared.provisioning.environment_rules).
    ENVIRONMENT_UNRESOLVED = "environment-unresolved"
    # The promotion named a release DeliveryHost could not resolve (not configured, down, an answer off its
    # contract, an unknown release): the run ends before any plan, with a receipt (shared.provisioning.releases).
    RELEASE_UNRESOLVED = "release-unresolved"
    # What a runner job handed back does not match its recorded digests (shared.iac.jobs.results):
    # none of it is receipted.
    JOB_RESULT_TAMPERED = "job-result-tampered"


class TimelineEntry(BaseModel):
    state: RunState
    at: str
    note: str = ""


class Decision(BaseModel):
    decision: str  # "approved" | "rejected" | "cancelled" | "superseded" (by the run named in ``reason``)
    by: str  # who decided: the person (oid, else sub), or the approver a queue message names
    client: str | None = None  # the client application they decided through
    at: str
    plan_digest: str
    reason: str = ""
    channel: str = "http"  # or "queue"
    via: str | None = None  # "control-plane": an approval ControlPlaneApi sent, naming its approver (``by``)


class SourceInfo(BaseModel):
    kind: str  # "inline" | "git" | "release" (and the host's own: "proposal", "autoscaling")
    repository: str | None = None
    path: str | None = None
    revision: str | None = None
    commit: str | None = None  # the Git commit the desired state came from (a Git source's, or a release's)
    release: str | None = None  # the release id a promotion named (kind "release"); its commit is ``commit``

    @property
    def release_unresolved(self) -> bool:
        """A release DeliveryHost did not resolve: the run has no desired state (a resolved one has a commit)."""
        return self.kind == RELEASE_SOURCE and self.commit is None


class Run(BaseModel):
    id: str
    tenant: str
    environment: str
    environment_class: str
    target: str
    runner: str
    state: RunState
    ordinal: int
    requested_by: str  # who asked: the person (oid, else sub) or the promoting system
    requested_by_client: str | None = None  # the client application they asked through
    # The requester's kind (shared.platform.auth.principal), set by the code path that declared the run: a
    # token's person or service, a promotion's delivery, or a system actor. A row written before kinds
    # were recorded has none: it was a token's principal (see ``requester``).
    requested_by_kind: PrincipalKind | None = None
    idempotency_key: str
    specification_digest: str
    source: SourceInfo
    created_at: str
    timeline: list[TimelineEntry] = Field(default_factory=list)
    plan_digest: str | None = None
    plan_counts: PlanCounts | None = None
    requires_approval: bool | None = None
    # The policy gate's verdict on the plan, summarised for the approver (the plan receipt has all of it).
    policy: PolicySummary | None = None
    # A PlatformAdmin's declaration that loosens the registered class or moves the target: the run took the
    # registered (stricter) class; this change is registered when it applies (see .environment_rules).
    registry_change: RegistryChange | None = None
    approval_deadline: str | None = None
    decision: Decision | None = None
    # A cancel asked for once the run was approved or applying: the apply stops before its next step.
    cancellation: Decision | None = None
    apply_receipt_digest: str | None = None
    failure_reason: FailureReason | None = None
    failure_detail: str | None = None

    def moved_to(self, state: RunState, note: str = "", **changes: Any) -> Run:
        if state not in ALLOWED.get(self.state, frozenset()):
            raise InvalidTransition(f"run {self.id}: {self.state.value} -> {state.value} is not allowed")
        entry = TimelineEntry(state=state, at=clock.now_iso(), note=bounded_detail(note))
        if changes.get("failure_detail"):
            changes["failure_detail"] = bounded_detail(changes["failure_detail"])
        return self.model_copy(update={"state": state, "timeline": [*self.timeline, entry], **changes})

    @property
    def requester(self) -> Requester:
        """Who declared the run; a row without a recorded kind reads as a token's person."""
        kind = self.requested_by_kind or PrincipalKind.PERSON
        return Requester(self.requested_by, kind, self.requested_by_client)

    @property
    def cancel_requested(self) -> bool:
        return self.cancellation is not None or (self.decision is not None and self.decision.decision == "cancelled")

    def public_view(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude={"ordinal"})


class InvalidTransition(RuntimeCloudError):
    pass


def run_id_for(tenant: str, idempotency_key: str) -> str:
    """Deterministic: the same request, however often it arrives, names the same run."""
    return "run-" + hashlib.sha256(f"{tenant}\n{idempotency_key}".encode()).hexdigest()[:24]
