"""Who may do what in the deployment: the access matrix, declared once.

Each row is one identity's roles on one resource (or on each resource of a
kind), with what those roles let it do. docs/azure.md (Deploying, "Who may do what")
shows this table as :func:`markdown` renders it, and
``tests/infra/test_access_matrix.py`` compares it, both ways, with the role
assignments the program declares under Pulumi's mocks: every identity's
effective rights (a role at a scope covers everything below it) must be what
the matrix says, no more and no less.

Resources are named, and resolved per deployment by :func:`scopes`:

- the host's store, its backup account, Application Insights, the vault, the
  Pulumi state key;
- ``table:<name>``, ``container:<name>``, ``queue:<name>``: one resource of the
  host's store (the runner job's exchange, shared/iac/jobs/access.py);
- ``secret:*``: each secret of the stack's ``secrets`` catalogue;
- ``runnerRoles``: each entry of the stack's ``runnerRoles`` (its role at its
  scope; ``resource-group`` is the stack's group of runner jobs and monitoring,
  never the host's); ``runnerRoles scopes``: each of their scopes, with
  ``Storage * Data Reader`` only where the runner holds a data role of that
  storage service.

Everything the host identity's rows name lives in the host's group
(``hostResourceGroupName``) but Application Insights; ``test_access_matrix.py``
also checks that no runner role's scope is that group, or at or above its
store, receipts, secrets, identities or app.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass

from tests.infra.conftest import Deployment

HOST, OBSERVER, RUNNER, OPERATORS = "host", "observer", "runner", "operators"
DELIVERY, CONTROL_PLANE = "delivery", "control-plane"  # neighbours' identities (runtime_cloud_infra/neighbours.py)
IDENTITIES = (HOST, OBSERVER, RUNNER, OPERATORS, DELIVERY, CONTROL_PLANE)
# Principals the stack names rather than creates: an identity the stack does not name gets no row's rights.
NAMED_BY_THE_STACK = {
    OPERATORS: "operatorPrincipalId",
    DELIVERY: "deliveryPrincipalId",
    CONTROL_PLANE: "controlPlanePrincipalId",
}

STORE = "host store account"
BACKUP = "backup store account"
BACKUP_RECEIPTS = "backup container:runtime-cloud-backup-receipts"
INSIGHTS = "Application Insights"
VAULT = "Key Vault"
STATE_KEY = "Pulumi state key"
SECRETS = "secret:* (each of the stack's secrets)"
RUNNER_ROLES = "runnerRoles (each entry: its role at its scope)"
RUNNER_SCOPES = "runnerRoles scopes"
# Stand-in: the reader role of each storage service where the runner holds that service's data role.
DATA_READERS = "Storage {Blob,Queue,Table} Data Reader, where the runner has that data role"


@dataclass(frozen=True)
class Row:
    identity: str
    resource: str
    roles: tuple[str, ...]
    allows: str


MATRIX: tuple[Row, ...] = (
    Row(
        HOST,
        STORE,
        ("Storage Blob Data Owner", "Storage Queue Data Contributor", "Storage Table Data Contributor"),
        "its store: blobs, queues, tables (the Functions host, Durable and the app create them at start); "
        "receipts stay write-once by immutability",
    ),
    Row(HOST, BACKUP, ("Storage Blob Data Contributor",), "write and read backup exports"),
    Row(
        HOST,
        BACKUP_RECEIPTS,
        ("Storage Blob Data Owner",),
        "set each receipt copy's locked immutability policy (immutableStorage/runAsSuperUser)",
    ),
    Row(HOST, INSIGHTS, ("Monitoring Metrics Publisher",), "send its telemetry (Entra ID only)"),
    Row(HOST, SECRETS, ("Key Vault Secrets User",), "read each catalogued secret's value (Key Vault references)"),
    Row(OBSERVER, RUNNER_SCOPES, ("Reader",), "list and read resources (control plane), no keys"),
    Row(OBSERVER, RUNNER_SCOPES, (DATA_READERS,), "list containers, queues, tables and their metadata"),
    Row(
        RUNNER,
        RUNNER_ROLES,
        ("(as configured)",),
        "plan and apply on targets (resource-group: the stack's group of jobs and monitoring); "
        "never at, in or above the host's group",
    ),
    Row(
        RUNNER,
        "table:RunnerJobs",
        ("Storage Table Data Contributor",),
        "claim, heartbeat, finish its job; cancel flag; stack-lock owners",
    ),
    Row(RUNNER, "table:ProvisioningSteps", ("Storage Table Data Contributor",), "the apply's step journal"),
    Row(
        RUNNER,
        "container:runner-jobs",
        ("Storage Blob Data Contributor",),
        "read its input; write its result, engine events and outputs",
    ),
    Row(RUNNER, "container:pulumi-plans", ("Storage Blob Data Contributor",), "saved Pulumi plans"),
    Row(RUNNER, "container:pulumi-state", ("Storage Blob Data Contributor",), "the Pulumi state (azblob backend)"),
    Row(
        RUNNER,
        "queue:runner-jobs",
        ("Storage Queue Data Message Processor", "Storage Queue Data Reader"),
        "receive and delete its request; KEDA reads the queue's length",
    ),
    Row(RUNNER, "queue:runner-jobs-poison", ("Storage Queue Data Message Sender",), "set aside a malformed request"),
    Row(RUNNER, "queue:runner-job-results", ("Storage Queue Data Message Sender",), "send its completion notice"),
    Row(RUNNER, STATE_KEY, ("Key Vault Crypto User",), "encrypt and decrypt the Pulumi state's secrets"),
    Row(RUNNER, INSIGHTS, ("Monitoring Metrics Publisher",), "send the job's telemetry (Entra ID only)"),
    Row(OPERATORS, VAULT, ("Key Vault Secrets Officer",), "set the secrets' values"),
    Row(OPERATORS, "container:pulumi-state", ("Storage Blob Data Contributor",), "keep the stack's state"),
    Row(OPERATORS, STATE_KEY, ("Key Vault Crypto User",), "encrypt and decrypt the state's secrets"),
    Row(DELIVERY, "queue:promotions", ("Storage Queue Data Message Sender",), "send promotions; nothing else"),
    Row(
        CONTROL_PLANE,
        "queue:approvals",
        ("Storage Queue Data Message Sender",),
        "send production approvals (named only where it owns the host's environments); nothing else",
    ),
)

_DATA_FAMILIES = {
    "Storage Blob Data": "Storage Blob Data Reader",
    "Storage Queue Data": "Storage Queue Data Reader",
    "Storage Table Data": "Storage Table Data Reader",
}
_CHILD = {"table": "tableServices/default/tables", "container": "blobServices/default/containers"}
_CHILD["queue"] = "queueServices/default/queues"


def covers(scope: str, resource: str) -> bool:
    """A role at ``scope`` applies to ``resource`` and everything below it (ids compare case-insensitively)."""
    outer, inner = scope.lower().rstrip("/"), resource.lower().rstrip("/")
    return inner == outer or inner.startswith(outer + "/")


def store_child(deployment: Deployment, kind: str, name: str) -> str:
    return f"{deployment.one('storage:StorageAccount', 'host-store').id}/{_CHILD[kind]}/{name}"


def runner_roles(deployment: Deployment) -> list[tuple[str, str]]:
    """(role, scope) of each ``runnerRoles`` entry, ``resource-group`` resolved to the stack's group."""
    group = deployment.one("resources:ResourceGroup", "resource-group").id
    entries = json.loads(deployment.config.get("runtime-cloud-infra:runnerRoles", "[]"))
    return [(e["role"], group if e["scope"] == "resource-group" else e["scope"]) for e in entries]


def scopes(deployment: Deployment, resource: str) -> list[str]:
    """The ARM scopes a named resource of the matrix stands for, in this deployment."""
    if ":" in resource and resource.split(":", 1)[0] in _CHILD:
        kind, name = resource.split(":", 1)
        return [store_child(deployment, kind, name)]
    vault = deployment.one("keyvault:Vault").id
    if resource == SECRETS:
        catalogue = json.loads(deployment.config.get("runtime-cloud-infra:secrets", "[]"))
        return [f"{vault}/secrets/{entry['name']}" for entry in catalogue]
    fixed = {
        STORE: lambda: deployment.one("storage:StorageAccount", "host-store").id,
        BACKUP: lambda: deployment.one("storage:StorageAccount", "backup-store").id,
        BACKUP_RECEIPTS: lambda: deployment.one("storage:BlobContainer", "backup-receipts").id,
        INSIGHTS: lambda: deployment.one("applicationinsights:Component").id,
        VAULT: lambda: vault,
        STATE_KEY: lambda: deployment.one("keyvault:Key").id,
    }
    return [fixed[resource]()]


def named_principal(deployment: Deployment, identity: str) -> str | None:
    """The Entra object id the stack names for ``identity`` (operators, a neighbour), if it names one."""
    return deployment.config.get(f"runtime-cloud-infra:{NAMED_BY_THE_STACK[identity]}") or None


def expected(deployment: Deployment, identity: str) -> set[tuple[str, str]]:
    """(role, scope) pairs the matrix grants ``identity`` in this deployment."""
    grants: set[tuple[str, str]] = set()
    if identity in NAMED_BY_THE_STACK and named_principal(deployment, identity) is None:
        return grants
    for row in (row for row in MATRIX if row.identity == identity):
        if row.resource == RUNNER_ROLES:
            grants |= set(runner_roles(deployment))
        elif row.resource == RUNNER_SCOPES:
            grants |= set(_observer(deployment, row.roles))
        else:
            grants |= {(role, scope) for scope in scopes(deployment, row.resource) for role in row.roles}
    return grants


def _observer(deployment: Deployment, roles: tuple[str, ...]) -> Iterable[tuple[str, str]]:
    for runner_role, scope in runner_roles(deployment):
        if DATA_READERS not in roles:
            yield from ((role, scope) for role in roles)
            continue
        yield from ((reader, scope) for family, reader in _DATA_FAMILIES.items() if runner_role.startswith(family))


def rights(grants: Iterable[tuple[str, str]], resource: str) -> set[str]:
    """The roles that apply to ``resource``: every grant whose scope covers it."""
    return {role for role, scope in grants if covers(scope, resource)}


def markdown() -> str:
    """The matrix as docs/azure.md shows it (Deploying: "Who may do what")."""
    lines = ["| identity | resource | roles | allows |", "|---|---|---|---|"]
    for row in MATRIX:
        roles = ", ".join(row.roles)
        lines.append(f"| {row.identity} | {row.resource} | {roles} | {row.allows} |")
    return "\n".join(lines)
