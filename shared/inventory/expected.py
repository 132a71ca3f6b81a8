"""What was last applied to an environment: the basis every comparison is made against.

Provisioning's applied state (:class:`shared.provisioning.api.AppliedEnvironment`)
is read at every scan rather than taken from events alone, so a lost or late
event can delay nothing; the events (see :mod:`shared.inventory.inbox`) only
make the inventory react sooner.

For the embedded runner the expected resources are the specification's, in
the state the runner gives them. For the Pulumi runner they are the apply
receipt's outputs (a program's resources are not listed in its specification).
"""

from __future__ import annotations

from shared.desired_state.api import RunnerName
from shared.inventory.model import ExpectedResource
from shared.inventory.observers.arm import expected_from_outputs
from shared.inventory.observers.embedded import expected_from_specification
from shared.provisioning.api import AppliedEnvironment, ProvisioningApi


def expected_resources(applied: AppliedEnvironment, provisioning: ProvisioningApi) -> list[ExpectedResource]:
    """The resources the environment's applied desired state says exist."""
    if applied.specification.runner is RunnerName.EMBEDDED:
        return expected_from_specification(applied.specification)
    if not applied.run_id:
        return []
    outputs = provisioning.apply_outputs(applied.tenant, applied.environment, run_id=applied.run_id)
    return expected_from_outputs(outputs) if outputs is not None else []
