"""What a plan is checked against: plain data built once per evaluation, the variables CEL rules read.

Built from the run (or a dry-run's request), its specification, its target and
the runner's planned changes; nothing here reads storage. See
:mod:`shared.policy.evaluation` for which variables each kind of rule sees.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from shared.iac.api import Action, ResourceChange
from shared.platform.auth.principal import Requester
from shared.platform.targets import ProvisioningTarget

MANAGEMENT_PREFIX = "rc_"  # the product's own tags on a resource (shared.iac.tags): not the author's metadata


@dataclass(frozen=True)
class PlanFacts:
    tenant: str
    environment: str
    environment_class: str
    target: dict[str, Any]
    requester: dict[str, Any]
    specification: dict[str, Any]
    changes: list[dict[str, Any]]
    counts: dict[str, int]

    @classmethod
    def of(
        cls,
        *,
        tenant: str,
        environment: str,
        environment_class: str,
        target: ProvisioningTarget,
        requester: Requester,
        specification: dict[str, Any],
        changes: Sequence[ResourceChange],
    ) -> PlanFacts:
        counts = {action.value: 0 for action in Action}
        for change in changes:
            counts[change.action.value] += 1
        return cls(
            tenant=tenant,
            environment=environment,
            environment_class=environment_class,
            target={"id": target.id, "kind": target.kind.value, "region": target.region},
            # ``kind`` comes from the code path that declared the run, never from a claim: a rule that
            # trusts a system actor checks ``requester.kind == "system"`` as well as its name.
            requester={
                "principal": requester.principal,
                "kind": requester.kind.value,
                "client": requester.client or "",
            },
            specification=specification,
            changes=[_change(change) for change in changes],
            counts=counts,
        )

    def common_variables(self) -> dict[str, Any]:
        return {
            "environment": {"name": self.environment, "class": self.environment_class, "tenant": self.tenant},
            "target": self.target,
            "requester": self.requester,
        }

    def plan_summary(self) -> dict[str, Any]:
        return {"counts": self.counts, "total": sum(n for a, n in self.counts.items() if a != Action.NO_CHANGE.value)}

    def plan_variable(self) -> dict[str, Any]:
        return {**self.plan_summary(), "changes": self.changes}


def _change(change: ResourceChange) -> dict[str, Any]:
    document = change.model_dump(mode="json")
    state = change.after if change.after is not None else change.before
    metadata = (state or {}).get("metadata") or {}
    document["metadata"] = {key: value for key, value in metadata.items() if not str(key).startswith(MANAGEMENT_PREFIX)}
    # CEL has no "absent" for a map field the rule reads: null states become empty maps.
    document["before"] = change.before or {}
    document["after"] = change.after or {}
    return document
