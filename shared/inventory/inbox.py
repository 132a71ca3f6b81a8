"""Provisioning's events, as the inventory consumes them from ``inventory-inbox``.

- ``SpecificationDeclared``: the environment becomes known to the inventory
  (the scan timer covers it from now on).
- ``ProvisioningApplied``: what is expected changed. Every proposal still
  open for the environment was made against the previous desired state, so
  it is marked superseded, naming the run that replaced it (unless the run is
  the one that proposal's own acceptance started).

Each event is handled once: its id is recorded (``event|{id}``) in the same
batch as the change it causes, so a redelivered message (dispatch is
at-least-once) finds the record and does nothing. The scan does not depend on
these events: it reads the applied state from the provisioning store.
"""

from __future__ import annotations

from typing import Any

from shared.inventory.proposals import ProposalState, Supersession
from shared.inventory.store import InventoryStore
from shared.platform import clock
from shared.platform.errors import AlreadyExists, ConcurrencyConflict, RuntimeCloudError
from shared.platform.events.cloudevents import TYPE_PREFIX
from shared.platform.identifiers import is_idempotency_key, is_tenant
from shared.platform.logs import app_logger, ids
from shared.platform.storage.optimistic import on_conflict

log = app_logger("inventory")

HANDLED = ("SpecificationDeclared", "ProvisioningApplied")


class NotAnEvent(RuntimeCloudError, ValueError):
    """The message is not a CloudEvent this consumer can read; the message is kept with the reason."""


def short_type(event: dict[str, Any]) -> str:
    kind = str(event.get("type", ""))
    return kind[len(TYPE_PREFIX) :] if kind.startswith(TYPE_PREFIX) else kind


def handle_event(store: InventoryStore, event: dict[str, Any]) -> str:
    """``handled``, ``duplicate`` or ``ignored`` (a type the inventory does not consume)."""
    kind = short_type(event)
    if kind not in HANDLED:
        return "ignored"
    data = event.get("data")
    tenant, event_id = event.get("tenant"), event.get("id")
    if not isinstance(data, dict) or not tenant or not event_id or not data.get("environment"):
        raise NotAnEvent("a CloudEvent with id, tenant and data.environment is required")
    environment = data["environment"]
    # They become table keys: an id a key cannot hold is a message to keep, not to retry.
    if not (is_tenant(tenant) and is_idempotency_key(event_id) and is_idempotency_key(environment)):
        raise NotAnEvent("tenant, id or data.environment holds characters a key cannot")
    return _handle_once(store, kind, str(tenant), environment, str(event_id), data)


@on_conflict
def _handle_once(
    store: InventoryStore, kind: str, tenant: str, environment: str, event_id: str, data: dict[str, Any]
) -> str:
    if store.event_handled(tenant, environment, event_id):
        return "duplicate"
    try:
        _apply(store, kind, tenant, environment, event_id, data)
    except AlreadyExists:
        raise ConcurrencyConflict("handled concurrently") from None
    return "handled"


def _apply(
    store: InventoryStore, kind: str, tenant: str, environment: str, event_id: str, data: dict[str, Any]
) -> None:
    now = clock.now_iso()
    env = store.environment(tenant, environment)
    operations = [store.event_operation(tenant, environment, event_id=event_id, event_type=kind, at=now)]
    if kind == "SpecificationDeclared":
        changes = {
            "DeclaredDigest": data.get("specification_digest", ""),
            "Runner": data.get("runner", ""),
            "Target": data.get("target", ""),
            "EnvironmentClass": data.get("environment_class", ""),
        }
    else:
        run_id, digest = str(data.get("run_id", "")), str(data.get("specification_digest", ""))
        changes = {"AppliedDigest": digest, "AppliedRunId": run_id}
        promotion = str(data.get("promotion_id", ""))
        for versioned in store.proposals(tenant, environment, ProposalState.OPEN):
            proposal = versioned.value
            if proposal.id in promotion or proposal.basis_run_id == run_id:
                continue  # its own revert/adopt run, or the very run it was measured against
            superseded = proposal.model_copy(
                update={
                    "state": ProposalState.SUPERSEDED,
                    "updated_at": now,
                    "superseded_by": Supersession(run_id=run_id, specification_digest=digest, at=now),
                }
            )
            operations.append(store.proposal_operation(superseded, versioned.etag))
            log.info(
                "proposal %s superseded by run %s",
                proposal.id,
                run_id,
                extra=ids(tenant=tenant, environment=environment, run=run_id),
            )
    operations.insert(0, store.environment_operation(env, changes))
    store.commit(tenant, environment, operations)
