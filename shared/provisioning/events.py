"""The provisioning module's events (CloudEvents through the outbox)."""

from __future__ import annotations

from typing import Any

from shared.events.cloudevents import NewEvent
from shared.provisioning.runs import FailureReason, Run


def _subject(run: Run) -> str:
    return f"environments/{run.environment}/runs/{run.id}"


def specification_declared(run: Run) -> NewEvent:
    return NewEvent("SpecificationDeclared", _subject(run), run.tenant, {
        "run_id": run.id, "environment": run.environment, "environment_class": run.environment_class,
        "specification_digest": run.specification_digest, "target": run.target, "runner": run.runner,
        "source": run.source.model_dump(mode="json"), "requested_by": run.requested_by,
    })


def provisioning_applied(run: Run, outputs: dict[str, Any]) -> NewEvent:
    return NewEvent("ProvisioningApplied", _subject(run), run.tenant, {
        "run_id": run.id, "promotion_id": run.idempotency_key, "environment": run.environment,
        "specification_digest": run.specification_digest, "plan_digest": run.plan_digest,
        "apply_receipt_digest": run.apply_receipt_digest, "counts": run.plan_counts, "outputs": outputs,
    })


def provisioning_failed(run: Run, reason: FailureReason, detail: str) -> NewEvent:
    return NewEvent("ProvisioningFailed", _subject(run), run.tenant, {
        "run_id": run.id, "promotion_id": run.idempotency_key, "environment": run.environment,
        "specification_digest": run.specification_digest, "reason": reason.value, "detail": detail,
        "apply_receipt_digest": run.apply_receipt_digest,
    })
