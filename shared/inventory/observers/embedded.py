"""Observing an embedded-runner environment: its resources in the target storage account.

It reads the account with :func:`shared.iac.embedded.read_target_state` (one
listing per service, so the cost grows with the account, not with the
environment) and keeps only what matters for this environment (decided on each
listed item before it is turned into a resource): the resources
its specification declares, and those tagged as managed for its tenant and
environment. Other environments' and other tenants' resources in a shared
account are never recorded in this environment's inventory.

In a timer tick the account is listed once for all its environments (see
:mod:`shared.inventory.observers.account_reads`); each environment takes its
part of that listing with the same filter.

Cost: :func:`observation_for` looks at every listed resource once. A
resource's key, manager and comparable state were worked out when it was
read (:class:`~shared.iac.embedded.observed.ObservedResource`), so a resource
of another environment costs one comparison, and one of this environment one
item that shares the resource's state, name and type name instead of
copying them (the item's allocations are the step's own: one object and its
dictionary per resource, nothing else; what a collector run costs grows with
them).
"""

from __future__ import annotations

from collections.abc import Mapping

from shared.desired_state.api import EnvironmentSpecification, ResourceType
from shared.iac.api import (
    AccessPolicy,
    Keep,
    ManagementTags,
    ObservedResource,
    ObservedState,
    TargetUnreachable,
    desired_state,
    lookup_key,
    read_target_state,
)
from shared.inventory.model import ExpectedResource, Observation, ObservedItem
from shared.inventory.observers.account_reads import AccountReads
from shared.inventory.observers.base import ObservationFailed, ObservationRequest


def expected_from_specification(specification: EnvironmentSpecification) -> list[ExpectedResource]:
    """Each declared resource in the state the runner gives it (management tags included)."""
    tags = ManagementTags(tenant=specification.tenant, environment=specification.environment)
    return [
        ExpectedResource(
            key=lookup_key(resource.type, resource.name),
            address=resource.address,
            type=resource.type.value,
            name=resource.name,
            state=desired_state(resource, tags),
        )
        for resource in specification.resources
    ]


class EmbeddedObserver:
    name = "embedded"

    def __init__(self, timeout_seconds: float = 5.0) -> None:
        self._policy = AccessPolicy(timeout_seconds=timeout_seconds, retries=1, backoff_seconds=0.5)

    def observe(self, request: ObservationRequest, shared: AccountReads | None = None) -> Observation:
        """The environment's resources; from ``shared`` (the tick's listing of the account) when given."""
        try:
            if shared is not None:
                state = shared.state(request.target, self._policy)
            else:
                state = read_target_state(request.target, self._policy, keep=_relevant_to(request))
        except TargetUnreachable as error:
            raise ObservationFailed(str(error)) from error
        return observation_for(request, state)


def _relevant_to(request: ObservationRequest) -> Keep:
    """The listing filter :func:`observation_for` applies, decided before a resource is built:
    declared by the specification, or tagged as managed for this tenant and environment."""
    ours = ManagementTags(tenant=request.tenant, environment=request.environment)
    declared = request.expected_keys

    def keep(resource_type: ResourceType, name: str, metadata: Mapping[str, str]) -> bool:
        return lookup_key(resource_type, name) in declared or ManagementTags.from_metadata(metadata) == ours

    return keep


def observation_for(request: ObservationRequest, state: ObservedState) -> Observation:
    """The environment's part of an account's state (pure: the benchmark times it apart from the read)."""
    ours = (request.tenant, request.environment)
    declared = request.expected_keys
    items = []
    for resource in state.resources:  # the account's every resource: each is looked at once
        key = resource.key
        managed_here = resource.owner == ours
        if managed_here or key in declared:
            items.append(_item(resource, key, managed_here))
    return Observation(observer=EmbeddedObserver.name, target=state.target, observed_at=state.observed_at, items=items)


# ``ResourceType.value`` as one dictionary lookup (the enum's ``value`` is a Python-level descriptor,
# and ``ObservedResource.type_name`` cuts the address, allocating a new string per resource).
_TYPE_NAMES: Mapping[ResourceType, str] = {resource_type: resource_type.value for resource_type in ResourceType}


def _item(resource: ObservedResource, key: str, managed_here: bool) -> ObservedItem:
    # Built without validation: every field comes from an ObservedResource, already validated, and
    # validating 10,000 items again cost more than the rest of the comparison. The state is the
    # resource's own (both are frozen, and nothing downstream changes a state), not a copy.
    return ObservedItem.trusted(
        key,
        resource.address,
        _TYPE_NAMES[resource.type],
        resource.name,
        resource.comparable,
        managed_here,
        resource.properties,
    )
