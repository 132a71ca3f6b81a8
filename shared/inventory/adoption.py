"""Adopt: the specification that makes desired state match what was observed.

From the last applied specification and the proposal's active findings:

- ``missing`` -> the resource is removed from the specification;
- ``changed`` -> the resource's metadata becomes the observed metadata
  (management tags are the product's own and never copied into a specification);
- ``unexpected`` -> the resource is added with its observed metadata.

The result is shown as a per-resource diff before anyone accepts it;
accepting declares it like any other specification (plan -> approve -> apply).
Only the embedded runner's resources can be adopted this way: a Pulumi
program's desired state is code, which the inventory does not rewrite.
"""

from __future__ import annotations

from typing import Any, Iterable

from pydantic import ValidationError

from shared.iac.embedded.state import field_changes
from shared.iac.tags import split_metadata
from shared.inventory.findings import Finding
from shared.inventory.model import FindingKind
from shared.inventory.proposals import AdoptedChange
from shared.provisioning.specification import EmbeddedResource, EnvironmentSpecification, ResourceType
from shared.settings import RunnerName


class NotAdoptable(Exception):
    """The findings cannot be expressed as a specification change; the message says why."""


def adopted_specification(applied: EnvironmentSpecification,
                          findings: Iterable[Finding]) -> tuple[EnvironmentSpecification, list[AdoptedChange]]:
    if applied.runner is not RunnerName.EMBEDDED:
        raise NotAdoptable(f"the {applied.runner.value} runner's desired state is a program: change it in its "
                           "repository and promote it")
    resources = {resource.address: resource for resource in applied.resources}
    diff: list[AdoptedChange] = []
    for finding in sorted(findings, key=lambda f: f.address):
        declared = _declared(resources, finding)
        if finding.kind is FindingKind.MISSING and declared is not None:
            resources.pop(declared.address)
            diff.append(AdoptedChange(address=declared.address, action="remove",
                                      fields=_fields({"metadata": declared.metadata}, None)))
        elif finding.kind is FindingKind.CHANGED and declared is not None:
            metadata = _user_metadata(finding.observed)
            resources[declared.address] = _resource(declared.type, declared.name, metadata)
            diff.append(AdoptedChange(address=declared.address, action="update",
                                      fields=_fields({"metadata": declared.metadata}, {"metadata": metadata})))
        elif finding.kind is FindingKind.UNEXPECTED:
            metadata = _user_metadata(finding.observed)
            added = _resource(ResourceType(finding.type), finding.name, metadata)
            resources[added.address] = added
            diff.append(AdoptedChange(address=added.address, action="add", fields=_fields(None, {"metadata": metadata})))
    if not resources:
        raise NotAdoptable("adopting would leave the environment with no resources; revert or accept instead")
    return applied.with_resources(list(resources.values())), diff


def _declared(resources: dict[str, EmbeddedResource], finding: Finding) -> EmbeddedResource | None:
    found = resources.get(finding.address)
    if found is not None:
        return found
    return next((r for r in resources.values() if r.type.value == finding.type and r.name.lower() == finding.name.lower()),
                None)


def _user_metadata(state: dict[str, Any] | None) -> dict[str, str]:
    user, _ = split_metadata(dict((state or {}).get("metadata") or {}))
    return user


def _resource(resource_type: ResourceType, name: str, metadata: dict[str, str]) -> EmbeddedResource:
    try:
        return EmbeddedResource(type=resource_type, name=name, metadata=metadata)
    except ValidationError as error:
        problems = "; ".join(issue["msg"] for issue in error.errors())
        raise NotAdoptable(f"{resource_type.value}/{name} cannot be declared as observed: {problems}") from None


def _fields(before: dict[str, Any] | None, after: dict[str, Any] | None) -> list[dict[str, Any]]:
    return [change.model_dump(mode="json") for change in field_changes(before, after)]
