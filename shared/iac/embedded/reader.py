"""Reading a target account's actual state: every container, queue and table.

:func:`read_target_state` is the one public entry for "what is there": the
planner calls it, and so does the inventory's drift scan. It lists each
service once (the SDK pages through large accounts), so its cost grows with
the number of resources, not with the number of declared ones. Containers and
queues are listed by :mod:`shared.iac.embedded.listing` (the client's own
pipeline, one ElementTree parse per page) rather than the SDKs' pagers, whose
per-item deserialization cost more than the service took to answer.

:func:`read_resource` reads one resource; the applier uses it to check a
single step's precondition just before acting on it.

Both raise :class:`~shared.iac.model.TargetUnreachable` when the target cannot
be read: an empty answer always means an empty account, never a failed read.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from azure.core.exceptions import ResourceNotFoundError

from shared.desired_state.api import ResourceType
from shared.iac.embedded.access import AccessPolicy, TargetClients, open_target, unreachable_on_failure
from shared.iac.embedded.listing import list_containers, list_queues
from shared.iac.embedded.observed import ObservedResource, ObservedState, lookup_key
from shared.iac.embedded.table_registry import is_registry, registry_of
from shared.iac.tags import ManagementTags, split_metadata
from shared.platform import clock
from shared.platform.targets import ProvisioningTarget

PAGE_SIZE = 5000  # the services' largest page: fewest round trips for large accounts


# Which listed resources to keep: (type, name, metadata with the management tags) -> keep it?
Keep = Callable[[ResourceType, str, Mapping[str, str]], bool]


def _everything(_type: ResourceType, _name: str, _metadata: Mapping[str, str]) -> bool:
    return True


def read_target_state(
    target: ProvisioningTarget, policy: AccessPolicy | None = None, keep: Keep | None = None
) -> ObservedState:
    """Every container, queue and table of the target's account, with metadata and tags.

    ``keep`` narrows the answer to the resources it accepts, decided on the
    listing's own fields before any is turned into an :class:`ObservedResource`
    (a drift scan of one environment in a shared account keeps its own few).

    Raises :class:`~shared.iac.model.TargetUnreachable` (within seconds, see
    :class:`AccessPolicy`) when the account does not answer or refuses the credential.
    """
    with open_target(target, policy) as clients:
        return read_state(clients, keep)


def read_state(clients: TargetClients, keep: Keep | None = None) -> ObservedState:
    """:func:`read_target_state` with clients the caller already holds."""
    observed_at = clock.now_iso()
    keep = keep or _everything
    resources = _once_each([*_containers(clients, keep), *_queues(clients, keep), *_tables(clients, keep)])
    resources.sort(key=lambda resource: resource.address)
    return ObservedState(
        target=clients.target.id, account=clients.account_name, observed_at=observed_at, resources=resources
    )


def _once_each(resources: list[ObservedResource]) -> list[ObservedResource]:
    """Each resource once: a paged listing can return one twice (Azurite's queue listing pages by
    insertion order but sorts by name, so past one page it repeats some queues and skips others;
    Azure's can repeat one that changed while it was listed)."""
    seen: dict[str, ObservedResource] = {}
    for resource in resources:
        seen.setdefault(resource.key, resource)
    return list(seen.values())


def read_resource(clients: TargetClients, resource_type: ResourceType, name: str) -> ObservedResource | None:
    """One resource as it is now, or None when it does not exist."""
    with unreachable_on_failure(clients.target, f"reading {resource_type.value}/{name}"):
        if resource_type is ResourceType.BLOB_CONTAINER:
            return _one_container(clients, name)
        if resource_type is ResourceType.QUEUE:
            return _one_queue(clients, name)
        return _one_table(clients, name)


def _containers(clients: TargetClients, keep: Keep) -> list[ObservedResource]:
    with unreachable_on_failure(clients.target, "listing blob containers"):
        return [
            _container(clients, item.name, item.metadata, item.last_modified, item.public_access)
            for item in list_containers(clients.blobs, PAGE_SIZE)
            if keep(ResourceType.BLOB_CONTAINER, item.name, item.metadata)
        ]


def _queues(clients: TargetClients, keep: Keep) -> list[ObservedResource]:
    with unreachable_on_failure(clients.target, "listing queues"):
        return [
            _queue(clients, item.name, item.metadata)
            for item in list_queues(clients.queues, PAGE_SIZE)
            if keep(ResourceType.QUEUE, item.name, item.metadata)
        ]


def _tables(clients: TargetClients, keep: Keep) -> list[ObservedResource]:
    with unreachable_on_failure(clients.target, "listing tables"):
        owners = registry_of(clients.tables).owners()
        found = []
        for item in clients.tables.list_tables(results_per_page=1000):
            owner = owners.get(item.name.lower())
            if not is_registry(item.name) and keep(ResourceType.TABLE, item.name, owner.as_metadata() if owner else {}):
                found.append(_table(clients, item.name, owner))
        return found


def _one_container(clients: TargetClients, name: str) -> ObservedResource | None:
    try:
        found = clients.blobs.get_container_client(name).get_container_properties()
    except ResourceNotFoundError:
        return None
    return _container(clients, name, found.metadata, found.last_modified, found.public_access)


def _one_queue(clients: TargetClients, name: str) -> ObservedResource | None:
    try:
        found = clients.queues.get_queue_client(name).get_queue_properties()
    except ResourceNotFoundError:
        return None
    return _queue(clients, name, found.metadata)


def _one_table(clients: TargetClients, name: str) -> ObservedResource | None:
    if is_registry(name):
        return None
    found = _table_name(clients, name)
    return _table(clients, found, registry_of(clients.tables).owner(found)) if found else None


def _table_name(clients: TargetClients, name: str) -> str | None:
    exact = list(clients.tables.query_tables("TableName eq @name", parameters={"name": name}))
    if exact:
        return str(exact[0].name)
    # Table names are case-insensitive in Azure Storage but a filter compares exactly:
    # only when the exact name is absent, look for the same table under other casing.
    key = lookup_key(ResourceType.TABLE, name)
    other = next(
        (item for item in clients.tables.list_tables() if lookup_key(ResourceType.TABLE, item.name) == key), None
    )
    return str(other.name) if other else None


def _container(
    clients: TargetClients, name: str, metadata: Mapping[str, str] | None, last_modified: Any, public_access: Any
) -> ObservedResource:
    user, tags = split_metadata(metadata or {})
    properties = {
        "url": clients.container_url(name),
        "last_modified": last_modified.isoformat() if last_modified else None,
        "public_access": str(public_access) if public_access else None,
    }
    return ObservedResource(
        type=ResourceType.BLOB_CONTAINER, name=name, metadata=user, tags=tags, properties=properties
    )


def _queue(clients: TargetClients, name: str, metadata: Mapping[str, str] | None) -> ObservedResource:
    user, tags = split_metadata(metadata or {})
    return ObservedResource(
        type=ResourceType.QUEUE, name=name, metadata=user, tags=tags, properties={"url": clients.queue_url(name)}
    )


def _table(clients: TargetClients, name: str, owner: ManagementTags | None) -> ObservedResource:
    return ObservedResource(
        type=ResourceType.TABLE,
        name=name,
        tags=owner.as_metadata() if owner else {},
        properties={"url": clients.table_url(name)},
    )
