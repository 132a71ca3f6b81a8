"""When a newer declaration of an environment replaces an older run.

An environment has one active run; runs declared meanwhile wait, and of the
waiting ones only the newest proceeds (the rest end ``superseded``). A run
that is *awaiting approval* has applied nothing yet, so it does not block a
newer declaration either: approvers would otherwise review a plan of desired
state that has already been replaced. Such a run is superseded by recording
the supersession as its decision, under its ETag, exactly as an approval or a
cancel is recorded, so of a racing approval and a supersession exactly one
wins: an approval recorded first lets the run apply (the newer run then waits
for it), and an approval that comes second is refused (``run-already-decided``).

Both sides look: the declaration supersedes runs already awaiting approval,
and a run entering ``awaiting-approval`` supersedes itself if a newer run
exists (its move is written together with the environment row under that
row's ETag, and every declaration rewrites the row, so neither can miss the
other).
"""

from __future__ import annotations

from shared.platform import clock
from shared.platform.auth.principal import SystemPrincipal
from shared.platform.storage.optimistic import on_conflict
from shared.provisioning.runs import Decision, FailureReason, Run, RunState
from shared.provisioning.store import ProvisioningStore

SYSTEM = SystemPrincipal.HOST.value


def newer_run(store: ProvisioningStore, run: Run) -> Run | None:
    """The newest run of the environment declared after ``run`` that supersedes it, if any.

    A newer run that never stood a chance (an invalid specification, a release DeliveryHost could not resolve,
    or cancelled) does not.
    """
    newer = [
        other
        for other in store.runs(run.tenant, run.environment)
        if other.ordinal > run.ordinal
        and other.failure_reason not in (FailureReason.INVALID_SPECIFICATION, FailureReason.CANCELLED)
        and not other.source.release_unresolved
        and not (other.decision is not None and other.decision.decision == "cancelled")
    ]
    return max(newer, key=lambda other: other.ordinal) if newer else None


def superseded_by(newer: Run, plan_digest: str | None) -> Decision:
    return Decision(
        decision="superseded",
        by=SYSTEM,
        at=clock.now_iso(),
        plan_digest=plan_digest or "",
        reason=f"run {newer.id} declared newer desired state",
        channel="declaration",
    )


def supersede_awaiting_approval(store: ProvisioningStore, tenant: str, environment: str, newer_id: str) -> list[str]:
    """Record on every older run still awaiting a decision that ``newer_id`` supersedes it.

    Returns the runs superseded now (their orchestrations are to be told).
    """
    newer = store.find_run(tenant, environment, newer_id)
    if newer is None or newer.source.release_unresolved:  # it holds no desired state: it replaces nothing
        return []
    return [
        run.id
        for run in store.runs(tenant, environment, RunState.AWAITING_APPROVAL)
        if run.ordinal < newer.ordinal and run.decision is None and _supersede(store, run, newer)
    ]


@on_conflict
def _supersede(store: ProvisioningStore, run: Run, newer: Run) -> bool:
    current, etag = store.run_with_etag(run.tenant, run.environment, run.id)
    if current.state is not RunState.AWAITING_APPROVAL or current.decision is not None:
        return False  # decided (approved, rejected, cancelled) first: that decision stands
    store.save_run(current.model_copy(update={"decision": superseded_by(newer, current.plan_digest)}), etag)
    return True
