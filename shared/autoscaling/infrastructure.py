"""The pool's infrastructure specification: generated from the pool, the policy and a slot count.

A scaling decision is a provisioning run of this specification, so a pool's
slots exist in the target before they are granted and are removed only after
they drained. Names are derived, never chosen by a caller:

- the **tenant** of the runs is the pool's (a dedicated pool's tenant; the
  platform's, ``platform``, for a shared pool), so its runs and receipts are
  read by that tenant's tokens;
- the **environment** is ``pool-{pool id}`` (shortened with a digest when the
  id would not fit an environment name);
- each slot is one resource named ``{pool id}-s{slot:04d}`` (shortened the same
  way), tagged ``pool`` and ``slot``. Resource names are shared across a target
  account, and a pool id is unique, so two pools never declare one name.

The same pool and count always give the same specification (and digest), so
a retried declaration is the same run.
"""

from __future__ import annotations

import hashlib
import json
import re

from shared.autoscaling.policy import AutoscalingPolicy
from shared.desired_state.api import EnvironmentSpecification, RunnerName

PLATFORM_TENANT = "platform"  # shared pools' owner (the capacity module's name for it too)
MAX_NAME = 63


def owner_of(pool_tenant: str | None) -> str:
    return pool_tenant or PLATFORM_TENANT


def _fitted(base: str, room: int) -> str:
    """``base`` as a lower-case name of at most ``room`` characters: single hyphens, no hyphen at the ends."""
    cleaned = re.sub(r"-{2,}", "-", base).strip("-")
    if len(cleaned) <= room:
        return cleaned
    digest = hashlib.sha256(base.encode()).hexdigest()[:8]
    return cleaned[: room - 9].rstrip("-") + "-" + digest


def environment_for(pool_id: str) -> str:
    return "pool-" + _fitted(pool_id, MAX_NAME - len("pool-"))


def slot_resource_name(pool_id: str, index: int) -> str:
    suffix = f"-s{index:04d}"
    return _fitted(pool_id, MAX_NAME - len(suffix)) + suffix


def specification_for(
    pool_id: str, pool_tenant: str | None, policy: AutoscalingPolicy, slots: int, target: str
) -> EnvironmentSpecification:
    """The desired state of a pool of ``slots`` slots (at least one resource: an empty pool keeps a marker)."""
    infra = policy.infrastructure
    document: dict[str, object] = {
        "tenant": owner_of(pool_tenant),
        "environment": environment_for(pool_id),
        "environment_class": infra.environment_class.value,
        "target": target,
        "runner": infra.runner.value,
    }
    if infra.runner is RunnerName.PULUMI:
        assert infra.pulumi is not None
        config = {**infra.pulumi.config, "pool": pool_id, "slots": str(slots)}
        document["pulumi"] = infra.pulumi.model_copy(update={"config": config}).model_dump(mode="json")
    else:
        document["resources"] = [_slot(pool_id, policy, index) for index in range(slots)] or [_marker(pool_id)]
    return EnvironmentSpecification.model_validate(document)


def _slot(pool_id: str, policy: AutoscalingPolicy, index: int) -> dict[str, object]:
    return {
        "type": policy.infrastructure.resource_type.value,
        "name": slot_resource_name(pool_id, index),
        "metadata": {"pool": pool_id, "slot": str(index)},
    }


def _marker(pool_id: str) -> dict[str, object]:
    """The embedded runner needs at least one resource: a pool scaled to zero keeps this blob container."""
    return {"type": "blob-container", "name": _fitted(pool_id, MAX_NAME - 4) + "-pool", "metadata": {"pool": pool_id}}


def infrastructure_digest(policy: AutoscalingPolicy, target: str) -> str:
    """What a slot is and where (the policy's ``infrastructure`` with its target resolved), as a short digest.

    The scaler remembers the digest its last completed run provisioned; a policy whose digest differs
    (set for the first time, or pointed at another target or resource type) gets a baseline run.
    """
    settings = {**policy.infrastructure.model_dump(mode="json"), "target": target}
    return hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:16]


def slots_declared(specification: EnvironmentSpecification) -> int:
    """How many slots a generated specification provides (its resources tagged with a slot)."""
    if specification.pulumi is not None:
        return int(specification.pulumi.config.get("slots", "0"))
    return sum(1 for resource in specification.resources if "slot" in resource.metadata)
