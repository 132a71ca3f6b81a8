"""The embedded runner's plan: a specification against the target's actual state.

Pure: it reads nothing itself, so it is tested and benchmarked without I/O.

For each declared resource:

- absent -> ``create`` (every field listed with ``before = None``);
- present and equal (metadata and management tags) -> ``no-change``;
- present and different -> ``update`` with the differing fields; a resource
  that carries no management tags (a table: no registration) is adopted this
  way (the diff shows the tags being added, and a diagnostic says so);
- present but tagged (or registered) for another environment or tenant ->
  :class:`OwnedElsewhere`: planning stops, nothing is adopted from another owner.

For each resource tagged (a table: registered, see
:mod:`shared.iac.embedded.table_registry`) as managed for this tenant and
environment that the specification no longer declares -> ``delete``.

Each resource appears once, whatever the listing returned. Changes come in
the order they are applied: creates, updates and no-changes by address, then
deletes by address.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from shared.desired_state.api import EmbeddedResource, EnvironmentSpecification, ResourceType
from shared.iac.embedded.errors import OwnedElsewhere
from shared.iac.embedded.observed import ObservedResource, ObservedState, lookup_key
from shared.iac.embedded.state import desired_state, field_changes
from shared.iac.model import Action, ResourceChange
from shared.iac.tags import ManagementTags


@dataclass(frozen=True)
class PlannedChanges:
    changes: list[ResourceChange]
    diagnostics: list[str] = field(default_factory=list)


def plan_changes(specification: EnvironmentSpecification, observed: ObservedState) -> PlannedChanges:
    """Per-resource changes that make the target match the specification.

    Raises :class:`OwnedElsewhere` naming the resource (and, for the same tenant,
    the environment that owns it) when a declared resource belongs to someone else.
    """
    ours = ManagementTags(tenant=specification.tenant, environment=specification.environment)
    actual = observed.by_key()
    changes: list[ResourceChange] = []
    diagnostics: list[str] = []
    for resource in specification.resources:
        found = actual.get(lookup_key(resource.type, resource.name))
        if found is not None:
            _check_owner(found, ours, observed.target)
            if found.management is None:
                diagnostics.append(f"{found.address} exists without management tags: the plan adopts it")
        changes.append(_change_for(resource, found, ours))
    planned = {lookup_key(resource.type, resource.name) for resource in specification.resources}
    for leftover in observed.managed_for(ours):
        if leftover.key not in planned:  # once each, even if the listing repeated it
            planned.add(leftover.key)
            changes.append(_deletion(leftover))
            diagnostics.append(_deletion_warning(leftover))
    return PlannedChanges(changes=changes, diagnostics=diagnostics)


def _change_for(resource: EmbeddedResource, found: ObservedResource | None, ours: ManagementTags) -> ResourceChange:
    after = desired_state(resource, ours)
    before = found.state() if found is not None else None
    if before is None:
        action = Action.CREATE
    elif before == after:
        action = Action.NO_CHANGE
    else:
        action = Action.UPDATE
    return ResourceChange(
        address=resource.address,
        type=resource.type.value,
        # The target's spelling when it exists (table names are case-insensitive).
        name=found.name if found is not None else resource.name,
        action=action,
        before=before,
        after=after,
        fields=field_changes(before, after),
    )


def _deletion(resource: ObservedResource) -> ResourceChange:
    before = resource.state()
    return ResourceChange(
        address=resource.address,
        type=resource.type.value,
        name=resource.name,
        action=Action.DELETE,
        before=before,
        after=None,
        fields=field_changes(before, None),
    )


def _check_owner(found: ObservedResource, ours: ManagementTags, target_id: str) -> None:
    owner = found.management
    if owner is None or owner == ours:
        return
    if owner.tenant == ours.tenant:
        whose = f"environment {owner.environment!r}"
    else:
        # Never name another tenant (or its environments) in this tenant's run.
        whose = "another tenant"
    raise OwnedElsewhere(
        f"{found.address} in target {target_id} is managed by {whose}; it cannot also belong to "
        f"environment {ours.environment!r}. Rename the resource in the specification, or remove it "
        "from the other environment first."
    )


def _deletion_warning(resource: ObservedResource) -> str:
    contents = {
        ResourceType.BLOB_CONTAINER: "its blobs",
        ResourceType.QUEUE: "its messages",
        ResourceType.TABLE: "its entities",
    }
    lost = contents.get(resource.type, "its contents")
    return f"{resource.address} is no longer declared: the plan deletes it, with {lost}"
