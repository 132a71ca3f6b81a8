"""Approving or rejecting a run that waits for approval.

The rules hold for every channel (HTTP from the Studio, the ``approvals``
queue from the control plane): the run must be waiting; the decision is bound
to the plan's digest, so an approval of anything but the reviewed plan is
refused; whoever requested the run cannot approve it; one decision per run.
The decision is recorded on the run; the run's orchestration acts on it.
"""

from __future__ import annotations

from typing import Callable, Literal

from shared.errors import Conflict, NotFound, PermissionDenied
from shared.provisioning.runs import Decision, Run, RunState, utc_now
from shared.provisioning.store import ProvisioningStore
from shared.storage.streams import optimistic

DecisionKind = Literal["approved", "rejected"]


def decide(store: ProvisioningStore, tenant: str, run_id: str, decided_by: str, decision: DecisionKind,
           plan_digest: str, reason: str, channel: str) -> Run:
    def check(run: Run) -> None:
        _check(run, decided_by, decision, plan_digest)

    return _record(store, tenant, run_id, check, lambda run: Decision(
        decision=decision, by=decided_by, at=utc_now(), plan_digest=plan_digest, reason=reason, channel=channel))


def cancel(store: ProvisioningStore, tenant: str, run_id: str, cancelled_by: str, reason: str) -> Run:
    """Ask a run that has not started applying to end ``cancelled``; its orchestration ends it."""

    def check(run: Run) -> None:
        if run.state not in (RunState.QUEUED, RunState.PLANNING, RunState.AWAITING_APPROVAL):
            raise Conflict("run-not-cancellable", f"run {run.id} is {run.state.value}; only runs that "
                           "have not started applying can be cancelled")
        if run.decision is not None:
            raise Conflict("run-already-decided", f"run {run.id} was already {run.decision.decision}")

    return _record(store, tenant, run_id, check, lambda run: Decision(
        decision="cancelled", by=cancelled_by, at=utc_now(), plan_digest=run.plan_digest or "", reason=reason,
        channel="http"))


def _record(store: ProvisioningStore, tenant: str, run_id: str, check: Callable[[Run], None],
            decision_for: Callable[[Run], Decision]) -> Run:
    """Record a decision on the run if ``check`` allows it, under the run's ETag."""
    environment = store.environment_of_run(tenant, run_id)
    if environment is None:
        raise NotFound(f"run {run_id}")
    for attempt in optimistic():
        with attempt:
            run, etag = store.run_with_etag(tenant, environment, run_id)
            check(run)
            updated = run.model_copy(update={"decision": decision_for(run)})
            store.save_run(updated, etag)
            return updated
    raise AssertionError("unreachable")


def _check(run: Run, decided_by: str, decision: DecisionKind, plan_digest: str) -> None:
    if run.state is not RunState.AWAITING_APPROVAL:
        raise Conflict("run-not-awaiting-approval", f"run {run.id} is {run.state.value}, not awaiting approval")
    if run.decision is not None:
        raise Conflict("run-already-decided", f"run {run.id} was already {run.decision.decision}")
    if decision == "approved" and decided_by == run.requested_by:
        raise PermissionDenied("whoever requested a run cannot approve it")
    if plan_digest != run.plan_digest:
        raise Conflict("plan-digest-mismatch",
                       f"the decision names plan {plan_digest}, but the run's plan is {run.plan_digest}")
