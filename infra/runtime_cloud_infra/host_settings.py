"""The function app's app settings: exactly the host's settings, identity-based, with no secret value.

They come from three places, each setting from exactly one:

- **computed here** from the resources the program declares: the host's store
  (``AzureWebJobsStorage__*``, identity-based: account, service URIs,
  ``credential=managedidentity`` and the host identity's ``clientId``), Application
  Insights (its connection string and ``Authorization=AAD`` with the same identity),
  the Durable task hub name that ``host.json`` references, the targets (with the
  runner identity as ``ClientId``, the observer identity as ``ObserverClientId``
  and Key Vault references filled in), the topology, the Pulumi
  state backend, the two retention settings that storage lifecycle rules
  mirror, and the receipts' retention (``receiptRetentionDays``, which also sets
  the receipt containers' default immutability policies);
- **fixed**: ``PYTHON_ISOLATE_WORKER_DEPENDENCIES=1`` (docs/azure.md, Deploying);
- **the stack's** ``hostSettings``: the rest of the host's settings as the README
  names them (``RuntimeCloud__Auth__Authority``, ``RuntimeCloud__Capacity__Pools``...).

``hostSettings`` may not set what is computed (one source per setting), nor a
local-only setting, nor a platform setting that Flex Consumption refuses (its
runtime and package live in ``functionAppConfig``), nor anything that looks
like a secret: a credential is named by reference (a Key Vault reference, filled
in here from a target's ``Credential.SecretName``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pulumi

from runtime_cloud_infra.backup import COMPUTED_SETTINGS as BACKUP_SETTINGS

if TYPE_CHECKING:
    from runtime_cloud_infra.settings import StackSettings

HOST_CONNECTION = "AzureWebJobsStorage"
PULUMI_STATE_CONTAINER = "pulumi-state"  # the stack's state after bootstrap (docs/azure.md, Deploying)
STATE_KEY = "pulumi-state"  # the vault key that encrypts Pulumi stack secrets (key_vault.STATE_KEY)
# The GitOps webhooks' default secret (shared/gitops/settings.py: RuntimeCloud:GitOps:WebhookSecret names
# this app setting): a Key Vault reference to the vault secret of this name, when the stack's ``secrets``
# catalogue lists it; without it no webhook is accepted unless its binding names a secret of its own.
GITOPS_WEBHOOK_SETTING = "RuntimeCloudGitOps__WebhookSecret"
GITOPS_WEBHOOK_SECRET = "gitops-webhook-secret"

# Names this module computes; hostSettings may not set them.
COMPUTED = (
    f"{HOST_CONNECTION}__accountName",
    f"{HOST_CONNECTION}__blobServiceUri",
    f"{HOST_CONNECTION}__queueServiceUri",
    f"{HOST_CONNECTION}__tableServiceUri",
    f"{HOST_CONNECTION}__credential",
    f"{HOST_CONNECTION}__clientId",
    "APPLICATIONINSIGHTS_CONNECTION_STRING",
    "APPLICATIONINSIGHTS_AUTHENTICATION_STRING",
    "PYTHON_ISOLATE_WORKER_DEPENDENCIES",
    "RuntimeCloud__Topology",
    "RuntimeCloud__Targets",
    "RuntimeCloud__Durable__TaskHubName",
    "RuntimeCloud__IaC__PulumiBackendUrl",
    "RuntimeCloud__IaC__PulumiSecretsProvider",
    "RuntimeCloud__Inventory__FindingRetentionDays",
    "RuntimeCloud__Capacity__LeaseRetentionDays",
    "RuntimeCloud__Receipts__RetentionDays",
    GITOPS_WEBHOOK_SETTING,
    *BACKUP_SETTINGS,  # the backup account's (runtime_cloud_infra/backup.py)
)
# Plans and applies run in the runner job on Azure; the in-process launcher is a local-only mode.
JOB_LAUNCHER = "RuntimeCloud__IaC__JobLauncher"
IN_PROCESS_LAUNCHER = "in-process"
# For the local host only (docs/settings.md): in Azure they would be wrong or a secret store.
LOCAL_ONLY = (
    "RuntimeCloud__Auth__LocalSigningKeyDirectory",
    "RuntimeCloud__Secrets__LocalValues",
)
# Settings that Flex Consumption does not take (runtime, package and scale are in functionAppConfig),
# and the key-based store connection.
REFUSED_PLATFORM = (
    HOST_CONNECTION,
    "FUNCTIONS_WORKER_RUNTIME",
    "FUNCTIONS_EXTENSION_VERSION",
    "FUNCTIONS_WORKER_RUNTIME_VERSION",
    "WEBSITE_RUN_FROM_PACKAGE",
    "WEBSITE_CONTENTAZUREFILECONNECTIONSTRING",
    "WEBSITE_CONTENTSHARE",
    "WEBSITE_NODE_DEFAULT_VERSION",
    "SCM_DO_BUILD_DURING_DEPLOYMENT",
    "ENABLE_ORYX_BUILD",
    "APPINSIGHTS_INSTRUMENTATIONKEY",
)
_HOST_SETTING = re.compile(r"(RuntimeCloud|OrleansMessaging)__[A-Za-z0-9_]+")

# What a secret value looks like (the host refuses the same shapes in targets and specifications,
# see shared/platform/secret_values.py; this is the deploy-time subset).
_SECRET_SHAPES = re.compile(
    r"(AccountKey=|SharedAccessSignature=|[?&]sig=|password=|pwd=|client_secret|"
    r"-----BEGIN [A-Z ]*PRIVATE KEY-----|\beyJ[A-Za-z0-9_-]{8,}\.eyJ|://[^/\s:@]+:[^/\s@]+@|"
    r"^[A-Za-z0-9+/]{40,}={1,2}$)",
    re.IGNORECASE,
)


def looks_secret(value: str) -> bool:
    return bool(_SECRET_SHAPES.search(value))


def problems(values: Mapping[str, str]) -> list[str]:
    """What is wrong with a stack's ``hostSettings``; names only, never values."""
    found = []
    for name, value in values.items():
        if _folded(name) in _folded_set(COMPUTED):
            found.append(f"{name} is set by the program (one source per setting)")
        elif _folded(name) in _folded_set(LOCAL_ONLY):
            found.append(f"{name} is for the local host only")
        elif _folded(name) in _folded_set(REFUSED_PLATFORM):
            found.append(f"{name} is not an app setting of a Flex Consumption app with an identity-based store")
        elif not _HOST_SETTING.fullmatch(name):
            found.append(f"{name} is not a host setting (RuntimeCloud__... or OrleansMessaging__...)")
        elif looks_secret(value):
            found.append(f"{name} holds a secret value; reference it from Key Vault instead")
        elif _folded(name) == _folded(JOB_LAUNCHER) and value.strip().lower() == IN_PROCESS_LAUNCHER:
            found.append(f"{name}={IN_PROCESS_LAUNCHER} is for the local host only (Azure runs runner jobs)")
    for required in ("RuntimeCloud__Auth__Issuer", "RuntimeCloud__Auth__Audience"):
        if _folded(required) not in _folded_set(values):
            found.append(f"{required} is required in Azure")
    if not {_folded("RuntimeCloud__Auth__Authority"), _folded("RuntimeCloud__Auth__JwksUri")} & _folded_set(values):
        found.append(
            "RuntimeCloud__Auth__Authority or RuntimeCloud__Auth__JwksUri is required in Azure "
            "(the development issuer's key folder is local only)"
        )
    return found


@dataclass(frozen=True)
class Wiring:
    """What the app settings point at: outputs of the resources the program declares."""

    account_name: pulumi.Input[str]
    blob_endpoint: pulumi.Input[str]
    queue_endpoint: pulumi.Input[str]
    table_endpoint: pulumi.Input[str]
    host_client_id: pulumi.Input[str]
    observer_client_id: pulumi.Input[str]
    runner_client_id: pulumi.Input[str]
    insights_connection_string: pulumi.Input[str]
    vault_uri: str


def app_settings(settings: StackSettings, wiring: Wiring) -> dict[str, pulumi.Input[str]]:
    """Every app setting of the function app, by name."""
    values: dict[str, pulumi.Input[str]] = {
        **identity_store(wiring),
        "APPLICATIONINSIGHTS_CONNECTION_STRING": wiring.insights_connection_string,
        # Local authentication is off on Application Insights: telemetry is sent with the host identity.
        "APPLICATIONINSIGHTS_AUTHENTICATION_STRING": entra_authentication(wiring.host_client_id),
        "PYTHON_ISOLATE_WORKER_DEPENDENCIES": "1",
        # The Python worker runs each invocation in the Functions host's trace context (host.json
        # telemetryMode OpenTelemetry); the app exports its own spans, metrics and logs (shared/telemetry).
        "PYTHON_ENABLE_OPENTELEMETRY": "true",
        "RuntimeCloud__Topology": settings.topology,
        # host.json names the task hub as %RuntimeCloud:Durable:TaskHubName%; unset, the host refuses to start.
        "RuntimeCloud__Durable__TaskHubName": settings.task_hub_name,
        "RuntimeCloud__IaC__PulumiBackendUrl": pulumi.Output.concat(
            "azblob://", PULUMI_STATE_CONTAINER, "?storage_account=", wiring.account_name
        ),
        # Stack secrets are encrypted with the vault's state key; runner jobs take both from the app's settings.
        "RuntimeCloud__IaC__PulumiSecretsProvider": secrets_provider(settings),
        # The host's purge timers and the storage lifecycle rules keep the same periods.
        "RuntimeCloud__Inventory__FindingRetentionDays": str(settings.retention.finding_days),
        "RuntimeCloud__Capacity__LeaseRetentionDays": str(settings.retention.lease_days),
        # The host's receipt policies (each version's own, and the timer's extensions) keep the same period
        # as the containers' default policies: one stack value, so they never disagree.
        "RuntimeCloud__Receipts__RetentionDays": str(settings.retention.receipt_days),
        "RuntimeCloud__Targets": pulumi.Output.all(wiring.runner_client_id, wiring.observer_client_id).apply(
            lambda ids: json.dumps(
                host_targets(settings.targets, ids[0], wiring.vault_uri, observer_client_id=ids[1]),
                separators=(",", ":"),
                sort_keys=True,
            )
        ),
        **key_vault_references(settings.targets, settings.key_vault_name),
        **gitops_webhook_reference({entry.name for entry in settings.secrets}, settings.key_vault_name),
        **settings.host_settings,
    }
    return values


def entra_authentication(client_id: pulumi.Input[str]) -> pulumi.Output[str]:
    """``APPLICATIONINSIGHTS_AUTHENTICATION_STRING`` for a user-assigned identity: the exporter sends
    with an Entra ID token of that identity (Application Insights refuses anything else)."""
    return pulumi.Output.concat("Authorization=AAD;ClientId=", client_id)


def secrets_provider(settings: StackSettings) -> str:
    return f"azurekeyvault://{settings.key_vault_name}.vault.azure.net/keys/{STATE_KEY}"


def identity_store(wiring: Wiring) -> dict[str, pulumi.Input[str]]:
    """``AzureWebJobsStorage`` by identity, as the Flex Consumption templates write it: no key anywhere."""
    return {
        f"{HOST_CONNECTION}__accountName": wiring.account_name,
        f"{HOST_CONNECTION}__blobServiceUri": _without_slash(wiring.blob_endpoint),
        f"{HOST_CONNECTION}__queueServiceUri": _without_slash(wiring.queue_endpoint),
        f"{HOST_CONNECTION}__tableServiceUri": _without_slash(wiring.table_endpoint),
        f"{HOST_CONNECTION}__credential": "managedidentity",
        f"{HOST_CONNECTION}__clientId": wiring.host_client_id,
    }


def host_targets(
    targets: tuple[Mapping[str, Any], ...],
    runner_client_id: str,
    vault_uri: str,
    observer_client_id: str | None = None,
) -> list[dict[str, Any]]:
    """The targets as the host reads them: a managed identity is the runner's unless named (the job acts
    as it) and the observer's for reading (``ObserverClientId``, the app's inventory), a secret a URI."""
    return [_host_target(dict(target), runner_client_id, vault_uri, observer_client_id) for target in targets]


def _host_target(
    target: dict[str, Any], runner_client_id: str, vault_uri: str, observer_client_id: str | None
) -> dict[str, Any]:
    credential = dict(target["Credential"])
    secret = credential.pop("SecretName", None)
    if credential["Kind"] == "managed-identity":
        # Without ClientId the host would use its own identity, which may change nothing outside its store.
        credential.setdefault("ClientId", runner_client_id)
        if observer_client_id:
            # The app does not carry the runner identity: it reads targets as the observer.
            credential.setdefault("ObserverClientId", observer_client_id)
    elif credential["Kind"] == "key-vault" and secret:
        credential["Uri"] = f"{vault_uri.rstrip('/')}/secrets/{secret}"
    return {**target, "Credential": credential}


def key_vault_references(targets: tuple[Mapping[str, Any], ...], vault_name: str) -> dict[str, str]:
    """App settings that a target's ``app-setting`` credential names, as Key Vault references."""
    references = {}
    for target in targets:
        credential = target["Credential"]
        if credential["Kind"] == "app-setting" and credential.get("SecretName"):
            references[credential["Name"]] = (
                f"@Microsoft.KeyVault(VaultName={vault_name};SecretName={credential['SecretName']})"
            )
    return references


def gitops_webhook_reference(secret_names: set[str], vault_name: str) -> dict[str, str]:
    """The GitOps webhooks' default secret as a Key Vault reference, when the vault holds it (by catalogue)."""
    if GITOPS_WEBHOOK_SECRET not in secret_names:
        return {}
    return {GITOPS_WEBHOOK_SETTING: f"@Microsoft.KeyVault(VaultName={vault_name};SecretName={GITOPS_WEBHOOK_SECRET})"}


def _without_slash(endpoint: pulumi.Input[str]) -> pulumi.Output[str]:
    return pulumi.Output.from_input(endpoint).apply(lambda url: url.rstrip("/"))


def _folded(name: str) -> str:
    return name.lower()


def _folded_set(names: Any) -> set[str]:
    return {_folded(name) for name in names}
