"""What was last applied to an environment: the basis every comparison is made against.

The provisioning store's environment row is the source of truth: its
``AppliedDigest`` names the specification of the last run that applied, and
``ActiveRunId`` a run in flight. It is read at every scan rather than taken
from events alone, so a lost or late event can delay nothing; the events
(see :mod:`shared.inventory.inbox`) only make the inventory react sooner.

For the embedded runner the expected resources are the specification's, in
the state the runner gives them. For the Pulumi runner they are the apply
receipt's outputs (a program's resources are not listed in its specification).
"""

from __future__ import annotations

from dataclasses import dataclass

from shared.errors import NotFound
from shared.inventory.model import ExpectedResource
from shared.inventory.observers.arm import expected_from_outputs
from shared.inventory.observers.embedded import expected_from_specification
from shared.provisioning.receipts import ReceiptStore
from shared.provisioning.runs import RunState
from shared.provisioning.specification import EnvironmentSpecification
from shared.provisioning.store import ProvisioningStore
from shared.settings import RunnerName


@dataclass(frozen=True)
class AppliedState:
    tenant: str
    environment: str
    digest: str
    run_id: str | None
    specification: EnvironmentSpecification
    environment_class: str
    run_in_flight: str | None  # a run is planning or applying: drift cannot be told from progress

    def expected(self, receipts: ReceiptStore) -> list[ExpectedResource]:
        if self.specification.runner is RunnerName.EMBEDDED:
            return expected_from_specification(self.specification)
        if not self.run_id:
            return []
        try:
            document, _ = receipts.read(self.tenant, self.environment, self.run_id, "apply")
        except NotFound:
            return []
        return expected_from_outputs(document.get("outputs", {}))


def applied_state(store: ProvisioningStore, tenant: str, environment: str) -> AppliedState | None:
    """The environment's last applied state, or None when nothing was applied yet."""
    record = store.environment(tenant, environment)
    digest = record.get("AppliedDigest")
    if not digest:
        return None
    specification = store.load_specification(tenant, environment, digest)
    active = record.get("ActiveRunId") or None
    if active:
        run = store.find_run(tenant, environment, active)
        if run is None or run.state.is_final or run.state is RunState.AWAITING_APPROVAL:
            active = None  # finished (an orphaned lock), or waiting: nothing is changing the target
    return AppliedState(tenant=tenant, environment=environment, digest=digest, run_id=record.get("AppliedRunId"),
                        specification=specification,
                        environment_class=record.get("EnvironmentClass") or specification.environment_class.value,
                        run_in_flight=active)


def environment_exists(store: ProvisioningStore, tenant: str, environment: str) -> bool:
    return store.environment(tenant, environment).etag is not None
