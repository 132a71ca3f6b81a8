"""Two user-assigned identities, and what each may do.

- **host**: the function app's identity for its own store, telemetry and the
  vault. Data roles on its own storage account only (blob, queue, table: the
  Functions host, the Durable extension and the app create their containers,
  queues and tables at start, so the scope is the account); Monitoring Metrics
  Publisher on its Application Insights (local authentication is off); Key Vault
  Secrets User on its vault; Key Vault Crypto User on the Pulumi state key. No
  role outside its resource group: it cannot change infrastructure.
- **runner**: the identity the IaC runner changes targets with. Its roles on
  target subscriptions (or this stack's resource group, for self-hosting) come
  from ``runnerRoles`` in the stack; none are implied. It has no data role on
  the host's store.
- **operators** (``operatorPrincipalId``, an Entra group): set the vault's secret
  values, and keep the stack's Pulumi state in the host's account (its
  ``pulumi-state`` container and the vault's state key) after bootstrap.

A ``Role Based Access Control Administrator`` grant to the runner is always
constrained (an ABAC condition) to the roles this program itself assigns, less
the privileged ones: the deployed host can keep its own role assignments as
reviewed, never widen them.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
from pulumi_azure_native import authorization, managedidentity

from runtime_cloud_infra.roles import PRIVILEGED_ROLES, assign, constrained_delegation
from runtime_cloud_infra.settings import RESOURCE_GROUP_SCOPE, StackSettings

# The host identity's data roles on its own storage account.
HOST_STORE_ROLES = ("Storage Blob Data Owner", "Storage Queue Data Contributor", "Storage Table Data Contributor")
HOST_TELEMETRY_ROLE = "Monitoring Metrics Publisher"
HOST_VAULT_ROLE = "Key Vault Secrets User"
STATE_KEY_ROLE = "Key Vault Crypto User"
OPERATOR_VAULT_ROLE = "Key Vault Secrets Officer"
OPERATOR_STATE_ROLE = "Storage Blob Data Contributor"
RBAC_ADMINISTRATOR = "Role Based Access Control Administrator"


@dataclass(frozen=True)
class Identities:
    host: managedidentity.UserAssignedIdentity
    runner: managedidentity.UserAssignedIdentity


def identities(settings: StackSettings, resource_group: pulumi.Input[str]) -> Identities:
    def identity(kind: str) -> managedidentity.UserAssignedIdentity:
        return managedidentity.UserAssignedIdentity(
            f"{kind}-identity",
            resource_name_=settings.name(f"{kind}-id"),
            resource_group_name=resource_group,
            location=settings.location,
            tags=settings.tags,
        )

    return Identities(host=identity("host"), runner=identity("runner"))


def grant_host_store(
    host: managedidentity.UserAssignedIdentity, account_id: pulumi.Input[str], subscription: pulumi.Input[str]
) -> list[authorization.RoleAssignment]:
    return [
        assign(
            f"host-store-{_slug(role)}",
            scope=account_id,
            principal_id=host.principal_id,
            role=role,
            subscription_id=subscription,
            description=f"Runtime Cloud host: {role} on its own store",
        )
        for role in HOST_STORE_ROLES
    ]


def grant_host(
    name: str,
    host: managedidentity.UserAssignedIdentity,
    scope: pulumi.Input[str],
    role: str,
    subscription: pulumi.Input[str],
) -> authorization.RoleAssignment:
    return assign(
        name,
        scope=scope,
        principal_id=host.principal_id,
        role=role,
        subscription_id=subscription,
        description=f"Runtime Cloud host: {role}",
    )


def grant_operators(
    settings: StackSettings,
    vault_id: pulumi.Input[str],
    state_container_id: pulumi.Input[str],
    state_key_id: pulumi.Input[str],
    subscription: pulumi.Input[str],
) -> list[authorization.RoleAssignment]:
    """Operators (an Entra group) set the secrets' values, and after bootstrap keep the stack's state
    in the host's account (README, Deploying); nothing in this program ever holds a secret value."""
    if settings.operator_principal_id is None:
        return []
    grants = (
        (vault_id, OPERATOR_VAULT_ROLE, "set the values of the secrets the host references"),
        (state_container_id, OPERATOR_STATE_ROLE, "read and write the Pulumi state"),
        (state_key_id, STATE_KEY_ROLE, "encrypt and decrypt the Pulumi state's secrets"),
    )
    return [
        assign(
            f"operators-{_slug(role)}",
            scope=scope,
            principal_id=settings.operator_principal_id,
            role=role,
            subscription_id=subscription,
            principal_type="Group",
            description=f"Runtime Cloud operators: {why}",
        )
        for scope, role, why in grants
    ]


def grant_runner(
    settings: StackSettings,
    runner: managedidentity.UserAssignedIdentity,
    resource_group_id: pulumi.Input[str],
    subscription: pulumi.Input[str],
) -> list[authorization.RoleAssignment]:
    assignable = _assignable_by_runner(settings)
    grants = []
    for index, entry in enumerate(settings.runner_roles):
        scope = resource_group_id if entry.scope == RESOURCE_GROUP_SCOPE else entry.scope
        condition = constrained_delegation(assignable) if entry.role == RBAC_ADMINISTRATOR else None
        grants.append(
            assign(
                f"runner-{index}-{_slug(entry.role)}",
                scope=scope,
                principal_id=runner.principal_id,
                role=entry.role,
                subscription_id=subscription,
                condition=condition,
                description=f"Runtime Cloud runner: {entry.role} (stack config runnerRoles[{index}])",
            )
        )
    return grants


def _assignable_by_runner(settings: StackSettings) -> list[str]:
    """The roles this program assigns, less the privileged ones."""
    roles = [
        *HOST_STORE_ROLES,
        HOST_TELEMETRY_ROLE,
        HOST_VAULT_ROLE,
        STATE_KEY_ROLE,
        OPERATOR_VAULT_ROLE,
        OPERATOR_STATE_ROLE,
        *(entry.role for entry in settings.runner_roles),
    ]
    return [role for role in dict.fromkeys(roles) if role not in PRIVILEGED_ROLES]


def _slug(role: str) -> str:
    return role.lower().replace(" ", "-")
