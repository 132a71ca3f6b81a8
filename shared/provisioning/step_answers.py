"""Which run a step works on, and the answers steps give their orchestration.

Shared by the in-process steps (:mod:`.lifecycle`), the runner-job steps
(:mod:`.job_steps`) and the run's records (:mod:`.run_records`), so none of
them imports another for a constructor. An answer is a plain dict
(:class:`~shared.provisioning.outcomes.StepAnswer`): it travels through
Durable's history as JSON.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from shared.provisioning.environment_rules import UNRESOLVED_CLASS
from shared.provisioning.outcomes import Outcome, StepAnswer
from shared.provisioning.runs import FailureReason, Run


@dataclass(frozen=True)
class RunRef:
    tenant: str
    environment: str
    run_id: str

    @classmethod
    def of(cls, document: dict[str, Any]) -> RunRef:
        return cls(document["tenant"], document["environment"], document["run_id"])

    def as_dict(self) -> dict[str, str]:
        return {"tenant": self.tenant, "environment": self.environment, "run_id": self.run_id}


def failed(reason: FailureReason, detail: str) -> StepAnswer:
    return {"outcome": Outcome.FAILED, "reason": reason.value, "detail": detail}


def cancelled(detail: str) -> StepAnswer:
    return {"outcome": Outcome.CANCELLED, "reason": FailureReason.CANCELLED.value, "detail": detail}


def unresolved(run: Run) -> StepAnswer | None:
    """The failure of a run whose environment its authority, or whose release DeliveryHost, could not resolve
    when it was declared (None: both were). Answered before any plan starts: the run's class, and so what it
    needs, is unknown; a release's run has no desired state at all."""
    if run.source.release_unresolved:
        why = run.timeline[0].note if run.timeline else ""
        return failed(FailureReason.RELEASE_UNRESOLVED, why or f"release {run.source.release} was not resolved")
    if run.environment_class != UNRESOLVED_CLASS:
        return None
    why = run.timeline[0].note if run.timeline else ""
    return failed(FailureReason.ENVIRONMENT_UNRESOLVED, why or "the environment could not be resolved")


def outcome_of(run: Run) -> StepAnswer:
    """The answer of an apply whose receipt is recorded on the run."""
    if run.failure_reason is FailureReason.CANCELLED:
        return cancelled(run.failure_detail or "")
    if run.failure_reason:
        return failed(run.failure_reason, run.failure_detail or "")
    return {"outcome": Outcome.APPLIED, "reason": None, "detail": ""}
