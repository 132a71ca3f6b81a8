"""Three user-assigned identities, and what each may do (docs/azure.md, Deploying: the access matrix).

- **host**: the function app's identity for its own store, telemetry and the
  secrets it resolves. Data roles on its own storage account (blob, queue,
  table: the Functions host, the Durable extension and the app create their
  containers, queues and tables at start, so the scope is the account);
  Monitoring Metrics Publisher on its Application Insights (local
  authentication is off); Key Vault Secrets User on each secret of the stack's
  ``secrets`` catalogue (scope ``{vault}/secrets/{name}``), never the whole
  vault. It does not hold the Pulumi state key (the runner job runs Pulumi), and
  no role outside the stack's two resource groups: it cannot change infrastructure.
- **observer**: what the app's inventory observers read targets with: Reader
  at every scope where the runner has a role, and the data-plane *reader* role
  of every storage data role the runner has there (the embedded observer lists
  containers, queues and tables with their metadata; the ARM observer lists
  resources). Read-only, nothing else.
- **runner**: the only identity of the runner job. Its roles on target
  subscriptions (or the stack's resource group, which holds the runner jobs and
  monitoring, for self-hosting) come from ``runnerRoles`` in the stack; none are
  implied, and none may cover the host's group (``hostResourceGroupName``: the
  app, these identities, the store, backups and vault). In the host's account it
  reaches only the job exchange (runtime_cloud_infra/runner_job.py), each
  table, container and queue by a role scoped to it alone.
- **operators** (``operatorPrincipalId``, an Entra group): set the vault's secret
  values, and keep the stack's Pulumi state in the host's account (its
  ``pulumi-state`` container and the vault's state key) after bootstrap.

The function app carries host + observer, the runner job runner only: any code
in a process can get a token for every identity attached to it. The identities
live in the host's group: a role on one would let the runner attach it to the
job (``userAssignedIdentities/assign/action``) or give it a federated credential
that an outside issuer can use.

A ``Role Based Access Control Administrator`` grant to the runner is always
constrained (an ABAC condition): it may write and delete role assignments only
of Monitoring Metrics Publisher, Reader and the Storage Blob, Queue and Table
Data Reader roles (what this program gives the host and the observer outside the
host's group), and only for the host and the observer. The runner never grants
itself a role, nor anyone else, nor a data role that would widen the app's
reach; the operators' roles are all in the host's group. On ``resource-group``
(the factory stack) its scope is the stack's group: in effect the host's
Monitoring Metrics Publisher on Application Insights and the observer's Reader.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
from pulumi_azure_native import authorization, managedidentity

from runtime_cloud_infra.roles import PRIVILEGED_ROLES, assign, constrained_delegation
from runtime_cloud_infra.runner_roles import RESOURCE_GROUP_SCOPE
from runtime_cloud_infra.settings import PROJECT, StackConfigError, StackSettings

# The host identity's data roles on its own storage account.
HOST_STORE_ROLES = ("Storage Blob Data Owner", "Storage Queue Data Contributor", "Storage Table Data Contributor")
HOST_TELEMETRY_ROLE = "Monitoring Metrics Publisher"
HOST_VAULT_ROLE = "Key Vault Secrets User"  # on each catalogued secret, never the vault
OBSERVER_ROLE = "Reader"
# The reader role the observer gets wherever the runner holds a storage data role of that service.
OBSERVER_DATA_READERS = {
    "Storage Blob Data": "Storage Blob Data Reader",
    "Storage Queue Data": "Storage Queue Data Reader",
    "Storage Table Data": "Storage Table Data Reader",
}
STATE_KEY_ROLE = "Key Vault Crypto User"
OPERATOR_VAULT_ROLE = "Key Vault Secrets Officer"
OPERATOR_STATE_ROLE = "Storage Blob Data Contributor"
RBAC_ADMINISTRATOR = "Role Based Access Control Administrator"


@dataclass(frozen=True)
class Identities:
    host: managedidentity.UserAssignedIdentity
    observer: managedidentity.UserAssignedIdentity
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

    return Identities(host=identity("host"), observer=identity("observer"), runner=identity("runner"))


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


def grant_host_secrets(
    settings: StackSettings,
    host: managedidentity.UserAssignedIdentity,
    vault_id: pulumi.Input[str],
    subscription: pulumi.Input[str],
) -> list[authorization.RoleAssignment]:
    """Key Vault Secrets User on each secret the host resolves (the stack's catalogue), one by one."""
    return [
        assign(
            f"host-secret-{entry.name}",
            scope=pulumi.Output.concat(vault_id, "/secrets/", entry.name),
            principal_id=host.principal_id,
            role=HOST_VAULT_ROLE,
            subscription_id=subscription,
            description=f"Runtime Cloud host: resolves the secret {entry.name}",
        )
        for entry in settings.secrets
    ]


def observer_grants(settings: StackSettings) -> list[tuple[str, str]]:
    """(role, scope) of the observer: Reader where the runner has any role, and the reader role of each
    storage data role the runner has there; a grant that a broader one of the same role already covers
    is left out. ``scope`` is an ARM scope or ``resource-group`` (the stack's own), as in ``runnerRoles``."""
    wanted: dict[tuple[str, str], None] = {}
    for entry in settings.runner_roles:
        wanted[(OBSERVER_ROLE, entry.scope)] = None
        for family, reader in OBSERVER_DATA_READERS.items():
            if entry.role.startswith(family):
                wanted[(reader, entry.scope)] = None
    return [
        (role, scope)
        for role, scope in wanted
        if not any(other != scope and covers(other, scope) for same, other in wanted if same == role)
    ]


def covers(scope: str, resource: str) -> bool:
    """Whether a role at ``scope`` applies to ``resource`` (ARM ids compare case-insensitively)."""
    outer, inner = scope.lower().rstrip("/"), resource.lower().rstrip("/")
    return inner == outer or inner.startswith(outer + "/")


def grant_observer(
    settings: StackSettings,
    observer: managedidentity.UserAssignedIdentity,
    resource_group_id: pulumi.Input[str],
    subscription: pulumi.Input[str],
) -> list[authorization.RoleAssignment]:
    return [
        assign(
            f"observer-{index}-{_slug(role)}",
            scope=resource_group_id if scope == RESOURCE_GROUP_SCOPE else scope,
            principal_id=observer.principal_id,
            role=role,
            subscription_id=subscription,
            description=f"Runtime Cloud observer: {role}, read-only where the runner may change things",
        )
        for index, (role, scope) in enumerate(observer_grants(settings))
    ]


def grant_operators(
    settings: StackSettings,
    vault_id: pulumi.Input[str],
    state_container_id: pulumi.Input[str],
    state_key_id: pulumi.Input[str],
    subscription: pulumi.Input[str],
) -> list[authorization.RoleAssignment]:
    """Operators (an Entra group) set the secrets' values, and after bootstrap keep the stack's state
    in the host's account (docs/azure.md, Deploying); nothing in this program ever holds a secret value."""
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
    ids: Identities,
    resource_group_id: pulumi.Input[str],
    subscription: pulumi.Input[str],
) -> list[authorization.RoleAssignment]:
    """The stack's ``runnerRoles``. Role administration is constrained to the host's and the observer's
    roles outside the host's group, and to those two: never to the runner itself, so a program the job
    runs cannot widen the runner's own rights (a new grant to the runner is an operator's deploy)."""
    runner = ids.runner
    assignable = _assignable_by_runner()
    # The operators' roles are all in the host's group, where the runner has none: not theirs to serve.
    grantees = [ids.host.principal_id, ids.observer.principal_id]
    grants = []
    for index, entry in enumerate(settings.runner_roles):
        scope = (
            resource_group_id
            if entry.scope == RESOURCE_GROUP_SCOPE
            else _outside_host_group(settings, index, subscription)
        )
        condition = constrained_delegation(assignable, grantees) if entry.role == RBAC_ADMINISTRATOR else None
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


def host_group_id(settings: StackSettings, subscription: str) -> str:
    return f"/subscriptions/{subscription}/resourceGroups/{settings.host_resource_group_name}"


def _outside_host_group(settings: StackSettings, index: int, subscription: pulumi.Input[str]) -> pulumi.Output[str]:
    """``runnerRoles[index]``'s scope, refused when it is the host's group, in it or above it (its
    subscription): the runner has no role on the host's store, vault, identities or app. Known only once the
    deployment's subscription is, so the deploy fails before any role is assigned."""
    scope = settings.runner_roles[index].scope

    def checked(subscription_id: str) -> str:
        group = host_group_id(settings, subscription_id)
        if covers(scope, group) or covers(group, scope):
            raise StackConfigError(
                f"{PROJECT}:runnerRoles[{index}].scope {scope!r} covers the host's own resource group or is in it "
                f"({PROJECT}:hostResourceGroupName): the runner never has a role there"
            )
        return scope

    return pulumi.Output.from_input(subscription).apply(checked)


def _assignable_by_runner() -> list[str]:
    """The roles this program gives the host and the observer outside the host's group, where the runner may
    hold role administration: the host's telemetry role, the observer's read-only ones. Never a role of the
    runner's own (it would widen the app's reach), never a privileged one, and none of the host's data roles,
    whose scopes are all in the host's group (given elsewhere, they would widen the app's reach too)."""
    roles = [HOST_TELEMETRY_ROLE, OBSERVER_ROLE, *OBSERVER_DATA_READERS.values()]
    return [role for role in dict.fromkeys(roles) if role not in PRIVILEGED_ROLES]


def _slug(role: str) -> str:
    return role.lower().replace(" ", "-")
