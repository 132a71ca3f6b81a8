"""The stack's ``runnerRoles``: where the runner identity may change things, as the stack names them.

A scope is an ARM scope (``/subscriptions/...``) or ``resource-group``: the
stack's resource group (the runner jobs and monitoring), for self-hosting.
None may be at, in or above the host's own group (``hostResourceGroupName``):
that is checked at deploy, once the subscription is known (identity.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from runtime_cloud_infra.config_reader import Reader, StackConfigError
from runtime_cloud_infra.roles import known_role

RESOURCE_GROUP_SCOPE = "resource-group"  # a runner role on the stack's resource group (jobs, monitoring)
_GUID = re.compile(r"[0-9a-fA-F]{8}-([0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}")


@dataclass(frozen=True)
class RunnerRole:
    """A role of the runner identity: ``scope`` is an ARM scope or ``resource-group``."""

    scope: str
    role: str


def runner_roles(reader: Reader) -> tuple[RunnerRole, ...]:
    roles = []
    for index, entry in enumerate(reader.structured("runnerRoles", [], list)):
        where = f"{reader.key('runnerRoles')}[{index}]"
        if not isinstance(entry, dict) or set(entry) != {"scope", "role"}:
            raise StackConfigError(f"{where} must be {{scope, role}}")
        scope, role = str(entry["scope"]), str(entry["role"])
        if scope != RESOURCE_GROUP_SCOPE and not scope.lower().startswith("/subscriptions/"):
            raise StackConfigError(
                f"{where}.scope must be {RESOURCE_GROUP_SCOPE!r} or an ARM scope (/subscriptions/...)"
            )
        if not (known_role(role) or _GUID.fullmatch(role)):
            raise StackConfigError(
                f"{where}.role {role!r} is neither a known built-in role name nor a role definition GUID"
            )
        if scope == RESOURCE_GROUP_SCOPE and _is_data_role(role):
            # Self-hosting manages the jobs' and monitoring's group (the host's data is in a group of its own,
            # where the runner has no role): the job needs no data role there (its telemetry role is the program's).
            raise StackConfigError(f"{where}.role {role!r} is a data role: never on the stack's resource group")
        roles.append(RunnerRole(scope=scope, role=role))
    return tuple(roles)


def _is_data_role(role: str) -> bool:
    return " Data " in role or role.startswith("Key Vault ")
