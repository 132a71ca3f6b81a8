"""Approving or rejecting a run that waits for approval.

The rules hold for every channel (HTTP from the Studio, the ``approvals``
queue from the control plane): the run must be waiting; the decision is bound
to the plan's digest, so an approval of anything but the reviewed plan is
refused; whoever requested the run cannot approve it; one decision per run.
"Whoever" is a person (the token's ``oid``, else ``sub``), not a client
application: one person approving their own run through a second client app
is still refused. The client app is recorded beside the person.
The decision is recorded on the run; the run's orchestration acts on it.

Approvals from ControlPlaneApi (:func:`decide_as_control_plane`) come only
while it is the environments' authority (``RuntimeCloud:Environments:Source=
control-plane``), and name the run's environment and the person who approved
there. The queue is the host's own storage, so whatever can write to it is
trusted as ControlPlaneApi's channel (the host's identity and ControlPlaneApi's
are the only writers the deployment grants); everything else is checked as for
any approval: the approver is a named person other than the requester, the
digest is the reviewed plan's. They are recorded with ``via: control-plane``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

from shared.iac.api import JobStore
from shared.platform import clock
from shared.platform.errors import Conflict, NotFound, PermissionDenied
from shared.platform.logs import app_logger
from shared.platform.storage.optimistic import on_conflict
from shared.provisioning.runs import Decision, Run, RunState
from shared.provisioning.store import ProvisioningStore

log = app_logger("provisioning")

DecisionKind = Literal["approved", "rejected"]
CONTROL_PLANE = "control-plane"


def decide(
    store: ProvisioningStore,
    *,
    tenant: str,
    run_id: str,
    decided_by: str,
    decision: DecisionKind,
    plan_digest: str,
    reason: str,
    channel: str,
    client: str | None = None,
    via: str | None = None,
) -> Run:
    def check(run: Run) -> None:
        _check(run, decided_by, decision, plan_digest)

    return _record(
        store,
        tenant,
        run_id,
        check,
        lambda run: {
            "decision": Decision(
                decision=decision,
                by=decided_by,
                client=client,
                at=clock.now_iso(),
                plan_digest=plan_digest,
                reason=reason,
                channel=channel,
                via=via,
            )
        },
    )


def decide_as_control_plane(
    store: ProvisioningStore,
    *,
    control_plane_is_authority: bool,
    tenant: str,
    environment: str,
    run_id: str,
    approver: str,
    approver_client: str | None,
    decision: DecisionKind,
    plan_digest: str,
    reason: str,
) -> Run:
    """A decision ControlPlaneApi put on the approvals queue, recorded with the approver it names.

    Refused (:class:`Conflict`) while ControlPlaneApi is not the environments' authority, and
    when the run is not of ``environment``; then as :func:`decide` (four eyes, the plan's digest)."""
    if not control_plane_is_authority:
        raise Conflict(
            "approvals-not-from-control-plane",
            "approvals arrive on the queue only from ControlPlaneApi, and it is not the environments' "
            "authority here (RuntimeCloud:Environments:Source is local): approve over HTTP",
        )
    if not approver.strip():
        raise PermissionDenied("an approval names the person who approved: four eyes need a person")
    recorded = store.environment_of_run(tenant, run_id)
    if recorded is None:
        raise NotFound(f"run {run_id}")
    if recorded != environment:
        raise Conflict("environment-mismatch", f"run {run_id} is not of environment {environment}")
    return decide(
        store,
        tenant=tenant,
        run_id=run_id,
        decided_by=approver,
        decision=decision,
        plan_digest=plan_digest,
        reason=reason,
        channel="queue",
        client=approver_client,
        via=CONTROL_PLANE,
    )


def cancel(
    store: ProvisioningStore,
    *,
    jobs: JobStore,
    tenant: str,
    run_id: str,
    cancelled_by: str,
    reason: str,
    client: str | None = None,
) -> Run:
    """Ask a run that has not ended to end ``cancelled``; its orchestration ends it.

    Before it is approved, the cancel is the run's decision. Once approved or applying, it is
    recorded beside the approval (``cancellation``): the apply stops before its next step, and
    what it applied so far stays, listed in its apply receipt.

    A runner job never reads the run, so the cancel is then set on the run's job rows
    (``CancelRequested``, which the job's watch reads). The order closes the race with a launch:
    the run is written before its job rows are read, and a launch inserts its row before it reads
    the run (:meth:`shared.provisioning.runner_jobs.RunnerJobs.launch`), so one of the two sees the other.
    """

    def check(run: Run) -> None:
        if run.state.is_final:
            raise Conflict("run-not-cancellable", f"run {run.id} is {run.state.value}: it has ended")
        if run.cancel_requested:
            raise Conflict("run-already-decided", f"run {run.id} was already cancelled")
        if run.decision is not None and run.decision.decision != "approved":
            raise Conflict("run-already-decided", f"run {run.id} was already {run.decision.decision}")

    def record(run: Run) -> dict[str, Decision]:
        cancelled = Decision(
            decision="cancelled",
            by=cancelled_by,
            client=client,
            at=clock.now_iso(),
            plan_digest=run.plan_digest or "",
            reason=reason,
            channel="http",
        )
        approved = run.decision is not None or run.state is RunState.APPLYING
        return {"cancellation": cancelled} if approved else {"decision": cancelled}

    cancelled = _record(store, tenant, run_id, check, record)
    try:
        jobs.request_cancel(cancelled.id)
    except Exception as error:  # noqa: BLE001 - the cancel is recorded; the run's next job check passes it on
        log.warning("cancel of run %s not yet set on its jobs: %s", run_id, type(error).__name__)
    return cancelled


def _record(
    store: ProvisioningStore,
    tenant: str,
    run_id: str,
    check: Callable[[Run], None],
    changes_for: Callable[[Run], dict[str, Decision]],
) -> Run:
    """Record a decision on the run if ``check`` allows it, under the run's ETag."""
    environment = store.environment_of_run(tenant, run_id)
    if environment is None:
        raise NotFound(f"run {run_id}")
    return _record_on(store, tenant, environment, run_id, check, changes_for)


@on_conflict
def _record_on(
    store: ProvisioningStore,
    tenant: str,
    environment: str,
    run_id: str,
    check: Callable[[Run], None],
    changes_for: Callable[[Run], dict[str, Decision]],
) -> Run:
    run, etag = store.run_with_etag(tenant, environment, run_id)
    check(run)
    updated = run.model_copy(update=changes_for(run))
    store.save_run(updated, etag)
    return updated


def _check(run: Run, decided_by: str, decision: DecisionKind, plan_digest: str) -> None:
    if run.state is not RunState.AWAITING_APPROVAL:
        raise Conflict("run-not-awaiting-approval", f"run {run.id} is {run.state.value}, not awaiting approval")
    if run.decision is not None:
        raise Conflict("run-already-decided", f"run {run.id} was already {run.decision.decision}")
    if decision == "approved" and decided_by == run.requested_by:
        raise PermissionDenied("whoever requested a run cannot approve it")
    if plan_digest != run.plan_digest:
        raise Conflict(
            "plan-digest-mismatch", f"the decision names plan {plan_digest}, but the run's plan is {run.plan_digest}"
        )
