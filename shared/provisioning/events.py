"""The provisioning module's events (CloudEvents through the outbox)."""

from __future__ import annotations

from shared.platform.events.cloudevents import NewEvent
from shared.provisioning.outputs import OutputsReference
from shared.provisioning.runs import FailureReason, Run

MAX_DETAIL = 2000  # a failure's detail can list many fields; the event stays small


def _run_fields(run: Run) -> dict[str, str | None]:
    """What every run event says about its run (and, for a promotion that named a release, the release and the
    commit DeliveryHost resolved it to: delivery's promotion report names what it promoted)."""
    fields: dict[str, str | None] = {
        "run_id": run.id,
        "promotion_id": run.idempotency_key,
        "environment": run.environment,
        "specification_digest": run.specification_digest,
    }
    if run.source.release is not None:
        fields.update(release=run.source.release, commit=run.source.commit)
    return fields


def _subject(run: Run) -> str:
    return f"environments/{run.environment}/runs/{run.id}"


def specification_declared(run: Run) -> NewEvent:
    return NewEvent(
        "SpecificationDeclared",
        _subject(run),
        run.tenant,
        {
            "run_id": run.id,
            "environment": run.environment,
            "environment_class": run.environment_class,
            "specification_digest": run.specification_digest,
            "target": run.target,
            "runner": run.runner,
            "source": run.source.model_dump(mode="json"),
            "requested_by": run.requested_by,
            "requested_by_kind": run.requester.kind.value,
        },
    )


def provisioning_applied(run: Run, outputs: OutputsReference) -> NewEvent:
    # The outputs go by reference: they grow with the environment, an event may not (claim check).
    return NewEvent(
        "ProvisioningApplied",
        _subject(run),
        run.tenant,
        {
            **_run_fields(run),
            "plan_digest": run.plan_digest,
            "apply_receipt_digest": run.apply_receipt_digest,
            "counts": run.plan_counts,
            "outputs_ref": outputs.model_dump(mode="json"),
        },
    )


def provisioning_failed(run: Run, reason: FailureReason, detail: str) -> NewEvent:
    return NewEvent(
        "ProvisioningFailed",
        _subject(run),
        run.tenant,
        {
            **_run_fields(run),
            "reason": reason.value,
            "detail": detail if len(detail) <= MAX_DETAIL else detail[:MAX_DETAIL] + "... (truncated; see the run)",
            "apply_receipt_digest": run.apply_receipt_digest,
        },
    )
