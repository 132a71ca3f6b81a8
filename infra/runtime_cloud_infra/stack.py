"""The whole stack: what depends on what, and what the stack exports.

Two resource groups. The **host's group** (``hostResourceGroupName``) holds
everything that holds the host's data or can act as the host: the store (its
receipts), the backup account, the vault, the three identities, the function
app and its plan. The runner identity has no role on it, nor in it but the job
exchange's per-table, -container and -queue data roles and the state key,
whatever ``runnerRoles`` says (identity.py refuses such a scope): a role on a
storage account's or vault's control plane reaches its data (keys, access
policies), one on an identity lets its holder attach it or trust a new
federated credential, and one on the function app lets its holder deploy code
that runs as the host identity. The **stack's group**
(``resourceGroupName``) holds the runner jobs and monitoring: the one a
self-hosting stack lets the runner manage (``runnerRoles`` on ``resource-group``).

Order matters in one place: the function app is declared after its role
assignments, so that its first start can already read its package and its store.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import pulumi
from pulumi_azure_native import authorization, resources

from runtime_cloud_infra import (
    backup,
    function_app,
    host_settings,
    identity,
    key_vault,
    monitoring,
    neighbours,
    runner_job,
    storage,
)
from runtime_cloud_infra.settings import StackSettings


@dataclass(frozen=True)
class Stack:
    resource_group: resources.ResourceGroup
    host_group: resources.ResourceGroup
    store: storage.HostStore
    identities: identity.Identities
    vault: key_vault.Vault
    sinks: monitoring.Monitoring
    app: function_app.HostApp
    runner: runner_job.RunnerJob


def build(settings: StackSettings) -> Stack:
    client = authorization.get_client_config_output()
    group = resources.ResourceGroup(
        "resource-group",
        resource_group_name=settings.resource_group_name,
        location=settings.location,
        tags=settings.tags,
    )
    host_group = resources.ResourceGroup(
        "host-resource-group",
        resource_group_name=settings.host_resource_group_name,
        location=settings.location,
        tags=settings.tags,
        opts=pulumi.ResourceOptions(protect=settings.protect),  # deleting it would delete the receipts' store
    )
    rg, host_rg = group.name, host_group.name
    store = storage.host_store(settings, host_rg)
    backups = backup.backup_store(settings, host_rg)
    ids = identity.identities(settings, host_rg)
    vault = key_vault.host_vault(settings, host_rg, client.tenant_id)
    sinks = monitoring.telemetry_sinks(settings, rg)

    grants = _grants(settings, (group, host_group), store, ids, vault, sinks, client.subscription_id)
    grants.append(
        identity.grant_host("host-backup-blobs", ids.host, backups.account.id, backup.ROLE, client.subscription_id)
    )
    grants.append(  # the receipt copies' locked policies (the host's receipt retention timer sets them)
        identity.grant_host(
            "host-backup-receipt-policies",
            ids.host,
            backups.receipts.id,
            backup.RECEIPT_POLICY_ROLE,
            client.subscription_id,
        )
    )
    wiring = host_settings.Wiring(
        account_name=store.account.name,
        blob_endpoint=store.account.primary_endpoints.blob,
        queue_endpoint=store.account.primary_endpoints.queue,
        table_endpoint=store.account.primary_endpoints.table,
        host_client_id=ids.host.client_id,
        observer_client_id=ids.observer.client_id,
        runner_client_id=ids.runner.client_id,
        insights_connection_string=sinks.insights.connection_string,
        vault_uri=key_vault.vault_uri(settings),
    )
    settings_by_name = host_settings.app_settings(settings, wiring)
    settings_by_name.update(backup.app_settings(backups, ids.host.client_id))
    app = function_app.host_app(
        settings,
        host_rg,
        function_app.AppWiring(
            host_identity_id=ids.host.id,
            observer_identity_id=ids.observer.id,
            deployment_container_url=pulumi.Output.concat(
                store.account.primary_endpoints.blob, storage.DEPLOYMENT_CONTAINER
            ),
            app_settings=settings_by_name,
        ),
        depends_on=[*grants, store.deployment],
    )

    jobs = runner_job.runner_job(
        settings,
        rg,
        runner_job.JobWiring(
            runner_identity=ids.runner,
            account_name=store.account.name,
            # The store's settings as the app has them, but by the runner identity (its exchange roles).
            store_settings=host_settings.identity_store(
                dataclasses.replace(wiring, host_client_id=ids.runner.client_id)
            ),
            backend_url=runner_job.backend_url(store.account.name),
            secrets_provider=host_settings.secrets_provider(settings),
            insights_connection_string=sinks.insights.connection_string,
        ),
    )
    monitoring.audit_logs("runner-jobs", jobs.environment.id, sinks, category_group="allLogs")

    monitoring.alerts(settings, rg, sinks)
    monitoring.workbook(settings, rg, sinks)
    monitoring.audit_logs("vault", vault.vault.id, sinks, category_group="audit")
    monitoring.audit_logs(
        "blobs", pulumi.Output.concat(store.account.id, "/blobServices/default"), sinks, category_group="audit"
    )
    monitoring.audit_logs("app", app.app.id, sinks, category="FunctionAppLogs")
    return Stack(
        resource_group=group,
        host_group=host_group,
        store=store,
        identities=ids,
        vault=vault,
        sinks=sinks,
        app=app,
        runner=jobs,
    )


def _grants(
    settings: StackSettings,
    groups: tuple[resources.ResourceGroup, resources.ResourceGroup],
    store: storage.HostStore,
    ids: identity.Identities,
    vault: key_vault.Vault,
    sinks: monitoring.Monitoring,
    subscription: pulumi.Input[str],
) -> list[pulumi.Resource]:
    """Every role assignment but the backup's (and the queues the neighbours' grants need); ``groups``: the
    stack's (runner jobs, monitoring), the host's."""
    group, host_group = groups
    grants: list[pulumi.Resource] = [
        *identity.grant_host_store(ids.host, store.account.id, subscription),
        identity.grant_host("host-telemetry", ids.host, sinks.insights.id, identity.HOST_TELEMETRY_ROLE, subscription),
        *identity.grant_host_secrets(settings, ids.host, vault.vault.id, subscription),
        *identity.grant_observer(settings, ids.observer, group.id, subscription),
        *identity.grant_runner(settings, ids, group.id, subscription),
        *identity.grant_operators(settings, vault.vault.id, store.pulumi_state.id, vault.state_key.id, subscription),
        *neighbours.grant_neighbours(settings, host_group.name, store.account, subscription),
        *runner_job.grant_runner_job(
            ids.runner,
            store.account.id,
            runner_job.job_exchange(
                host_group.name, store.account, store.blob_service, declared=[host_settings.PULUMI_STATE_CONTAINER]
            )
            + [store.pulumi_state],
            vault.state_key.id,
            sinks.insights.id,
            subscription,
        ),
    ]
    return grants


def export(stack: Stack, settings: StackSettings) -> None:
    """What `make deploy` and the README's next steps read (`pulumi stack output`); no secret among them."""
    pulumi.export("resourceGroupName", stack.resource_group.name)
    pulumi.export("hostResourceGroupName", stack.host_group.name)
    pulumi.export("functionAppName", stack.app.app.name)
    pulumi.export("hostUrl", pulumi.Output.concat("https://", stack.app.app.default_host_name))
    pulumi.export("storageAccountName", stack.store.account.name)
    pulumi.export("deploymentContainer", storage.DEPLOYMENT_CONTAINER)
    pulumi.export("hostIdentityClientId", stack.identities.host.client_id)
    pulumi.export("observerIdentityClientId", stack.identities.observer.client_id)
    pulumi.export("runnerIdentityClientId", stack.identities.runner.client_id)
    pulumi.export("keyVaultUri", key_vault.vault_uri(settings))
    pulumi.export(
        "pulumiBackendUrl",
        pulumi.Output.concat(
            "azblob://", host_settings.PULUMI_STATE_CONTAINER, "?storage_account=", stack.store.account.name
        ),
    )
    pulumi.export(
        "pulumiSecretsProvider", f"azurekeyvault://{settings.key_vault_name}.vault.azure.net/keys/{key_vault.STATE_KEY}"
    )
    pulumi.export("secretNames", [entry.name for entry in settings.secrets])
    pulumi.export("backupStorageAccountName", backup.account_name(settings))
    pulumi.export("runnerJobName", stack.runner.job.name)
    pulumi.export("runnerJobQueue", runner_job.JOB_QUEUE)
