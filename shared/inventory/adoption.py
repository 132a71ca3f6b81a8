"""The specification a proposal's decision declares: reverted findings go back, the rest stay as observed.

From the last applied specification and the environment's open findings:

- a finding decided ``revert`` keeps its applied state, so the run puts the
  resource back as applied;
- a finding decided ``adopt`` becomes desired state: ``missing`` -> the
  resource is removed from the specification, ``changed`` -> its metadata
  becomes the observed metadata (management tags are the product's own and
  never copied into a specification), ``unexpected`` -> it is added with its
  observed metadata;
- every other open finding -- suppressed by an ignore rule, or not part of
  this decision (another proposal's, a rejected one's) -- is *kept*: declared
  as observed too, because a run applies a whole specification and would
  otherwise revert (or delete) drift nobody decided to revert. So are the
  fields an ignore rule hides in a finding that is reverted.

The result is shown as per-resource diffs (``diff`` for what is adopted,
``kept`` for what is left as it is) before anyone accepts it; accepting
declares it like any other specification (plan -> approve -> apply). Only the
embedded runner's resources can be rewritten this way: a Pulumi program's
desired state is code, which the inventory does not rewrite, so there only a
plain revert with nothing to keep is possible.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from shared.desired_state.api import EmbeddedResource, EnvironmentSpecification, ResourceType, RunnerName
from shared.iac.api import field_changes, split_metadata
from shared.inventory.findings import Finding
from shared.inventory.model import FindingKind
from shared.inventory.proposals import AdoptedChange
from shared.platform.errors import RuntimeCloudError


class NotAdoptable(RuntimeCloudError):
    """The findings cannot be expressed as a specification change; the message says why."""


@dataclass
class Declared:
    specification: EnvironmentSpecification
    diff: list[AdoptedChange] = field(default_factory=list)  # adopted by the decision
    kept: list[AdoptedChange] = field(default_factory=list)  # left as observed: not the decision's to change


def declared_specification(
    applied: EnvironmentSpecification, open_findings: Iterable[Finding], decided: Mapping[str, str]
) -> Declared:
    """``decided`` maps finding ids to ``revert`` or ``adopt``; every other open finding is kept."""
    findings = sorted(open_findings, key=lambda f: (f.address, f.kind.value))
    adopted = [f for f in findings if decided.get(f.id) == "adopt"]
    kept = [f for f in findings if decided.get(f.id) not in ("adopt", "revert")]
    reverted = [f for f in findings if decided.get(f.id) == "revert"]
    if applied.runner is not RunnerName.EMBEDDED:
        return _program(applied, adopted, kept)
    resources: dict[str, EmbeddedResource] = {resource.address: resource for resource in applied.resources}
    result = Declared(applied)
    result.diff = [change for f in adopted if (change := _adopt(resources, f)) is not None]
    result.kept = [change for f in kept if (change := _adopt(resources, f)) is not None]
    result.kept += [change for f in reverted if (change := _keep_hidden_fields(resources, f)) is not None]
    if not result.diff and not result.kept:
        return result  # a plain revert: the applied specification itself
    if not resources:
        raise NotAdoptable("the environment would be left with no resources; revert or accept instead")
    result.specification = applied.with_resources(list(resources.values()))
    return result


def _program(applied: EnvironmentSpecification, adopted: list[Finding], kept: list[Finding]) -> Declared:
    if adopted:
        raise NotAdoptable(
            f"the {applied.runner.value} runner's desired state is a program: change it in its "
            "repository and promote it"
        )
    # A program's run leaves alone what its state does not hold (unexpected resources), nothing else.
    touched = [f.address for f in kept if f.kind is not FindingKind.UNEXPECTED]
    if touched:
        raise NotAdoptable(
            f"a run of the {applied.runner.value} program would also revert drift that is not "
            f"this decision's (ignored, or another proposal's): {', '.join(touched[:10])}"
        )
    return Declared(applied)


def _adopt(resources: dict[str, EmbeddedResource], finding: Finding) -> AdoptedChange | None:
    """Declare ``finding`` as observed (in ``resources``); the change it makes, if any."""
    declared = _declared(resources, finding)
    if finding.kind is FindingKind.MISSING and declared is not None:
        resources.pop(declared.address)
        return AdoptedChange(
            address=declared.address, action="remove", fields=_fields({"metadata": declared.metadata}, None)
        )
    if finding.kind is FindingKind.CHANGED and declared is not None:
        metadata = _user_metadata(finding.observed)
        resources[declared.address] = _resource(declared.type, declared.name, metadata)
        return AdoptedChange(
            address=declared.address,
            action="update",
            fields=_fields({"metadata": declared.metadata}, {"metadata": metadata}),
        )
    if finding.kind is FindingKind.UNEXPECTED:
        metadata = _user_metadata(finding.observed)
        added = _resource(ResourceType(finding.type), finding.name, metadata)
        resources[added.address] = added
        return AdoptedChange(address=added.address, action="add", fields=_fields(None, {"metadata": metadata}))
    return None


def _keep_hidden_fields(resources: dict[str, EmbeddedResource], finding: Finding) -> AdoptedChange | None:
    """A reverted ``changed`` finding whose other fields an ignore rule hides: those stay as observed."""
    declared = _declared(resources, finding)
    if finding.kind is not FindingKind.CHANGED or declared is None:
        return None
    reverted = {f.path for f in finding.fields}
    observed = _user_metadata(finding.observed)
    metadata = dict(declared.metadata)
    for change in field_changes({"metadata": declared.metadata}, {"metadata": observed}):
        key = change.path.removeprefix("metadata.")
        if change.path in reverted or key == change.path:
            continue
        if change.after is None:
            metadata.pop(key, None)
        else:
            metadata[key] = change.after
    if metadata == declared.metadata:
        return None
    resources[declared.address] = _resource(declared.type, declared.name, metadata)
    return AdoptedChange(
        address=declared.address,
        action="update",
        fields=_fields({"metadata": declared.metadata}, {"metadata": metadata}),
    )


def _declared(resources: dict[str, EmbeddedResource], finding: Finding) -> EmbeddedResource | None:
    found = resources.get(finding.address)
    if found is not None:
        return found
    same_name = finding.name.lower()
    return next((r for r in resources.values() if r.type.value == finding.type and r.name.lower() == same_name), None)


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
