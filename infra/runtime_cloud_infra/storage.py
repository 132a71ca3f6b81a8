"""The host's storage account: its tables, queues and blobs, the deployment package and the Pulumi state.

No shared key: ``allowSharedKeyAccess`` is off, so only Entra ID tokens reach
the data (the host's identity, operators' accounts); the portal defaults to
Entra ID too. HTTPS only, TLS 1.2, no public blob access, no cross-tenant
replication, no local users or SFTP.

Blob versioning and soft delete (blobs and containers) are on. Retention:

- **receipts**: the environment's lifetime plus seven years, per receipt
  version (docs/azure.md, "Retention: receipts, drift, leases"). The ``receipts``
  container has version-level immutability (set when it is created; an existing
  container is migrated, never recreated). The host writes each receipt with
  its own *locked* version-level policy of seven years and a step ahead, and
  its daily ``receipt_retention`` timer extends that expiry while the
  environment lives and sets seven years from the day it is deleted
  (``RuntimeCloud:Receipts:*``); a locked version policy can be extended any
  number of times and never shortened. The container's default version policy
  of ``receiptRetentionDays`` is the floor for any version written without its
  own (the run's ``outputs.json``, a restore's copies, a host with
  ``Immutability`` off): created unlocked, so a wrong value can be corrected,
  and locked by an operator within a day of the first deploy (README). Account
  level immutability is *not* enabled: it can only be chosen when the account
  is created and would make every container of the Functions host's store
  version-immutable-capable; the one container that needs it has it. Lifecycle
  rules never touch receipts.
- **drift (13 months)** and **leases (90 days)** live in tables, which lifecycle
  management cannot reach: the host's daily purge timers remove them
  (``RuntimeCloud__Inventory__FindingRetentionDays``,
  ``RuntimeCloud__Capacity__LeaseRetentionDays``, set from the same stack values).
  The drift *observations* are blobs (``inventory/``): a lifecycle rule deletes
  their old versions after ``versionRetentionDays`` and an observation not
  rewritten for ``findingRetentionDays`` (an environment nobody scans any more).
- everything else mutable: old blob versions are deleted after ``versionRetentionDays``.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
from pulumi_azure_native import storage

from runtime_cloud_infra.host_settings import PULUMI_STATE_CONTAINER
from runtime_cloud_infra.settings import StackSettings

RECEIPTS_CONTAINER = "receipts"  # shared/provisioning/receipts.py
INVENTORY_CONTAINER = "inventory"  # shared/inventory/store.py
DEPLOYMENT_CONTAINER = "app-package"  # Flex Consumption reads the app's zip from here
# Containers whose blobs are rewritten (versions pile up); receipts are never rewritten.
MUTABLE_CONTAINERS = (
    "inventory",
    "specifications",
    "rejections",
    DEPLOYMENT_CONTAINER,
    PULUMI_STATE_CONTAINER,
    "azure-webjobs-hosts",
    "azure-webjobs-secrets",
)


@dataclass(frozen=True)
class HostStore:
    account: storage.StorageAccount
    blob_service: storage.BlobServiceProperties
    receipts: storage.BlobContainer
    receipts_policy: storage.BlobContainerImmutabilityPolicy
    deployment: storage.BlobContainer
    pulumi_state: storage.BlobContainer
    lifecycle: storage.ManagementPolicy


def host_store(settings: StackSettings, resource_group: pulumi.Input[str]) -> HostStore:
    account = _account(settings, resource_group)
    blob_service = _blob_service(settings, resource_group, account)
    receipts, receipts_policy = _receipts(settings, resource_group, account, blob_service)
    return HostStore(
        account=account,
        blob_service=blob_service,
        receipts=receipts,
        receipts_policy=receipts_policy,
        deployment=_private_container(DEPLOYMENT_CONTAINER, resource_group, account, blob_service),
        pulumi_state=_private_container(PULUMI_STATE_CONTAINER, resource_group, account, blob_service),
        lifecycle=_lifecycle(settings, resource_group, account, blob_service),
    )


def _account(settings: StackSettings, resource_group: pulumi.Input[str]) -> storage.StorageAccount:
    return storage.StorageAccount(
        "host-store",
        account_name=settings.storage_account_name,
        resource_group_name=resource_group,
        location=settings.location,
        kind="StorageV2",
        sku={"name": settings.storage_sku},
        access_tier="Hot",
        allow_shared_key_access=False,
        default_to_o_auth_authentication=True,
        enable_https_traffic_only=True,
        minimum_tls_version="TLS1_2",
        allow_blob_public_access=False,
        allow_cross_tenant_replication=False,
        is_local_user_enabled=False,
        is_sftp_enabled=False,
        # A second layer of encryption at rest; it can only be chosen when the account is created.
        encryption={
            "key_source": "Microsoft.Storage",
            "require_infrastructure_encryption": True,
            "services": {
                "blob": {"enabled": True, "key_type": "Account"},
                "queue": {"enabled": True, "key_type": "Account"},
                "table": {"enabled": True, "key_type": "Account"},
            },
        },
        tags=settings.tags,
        opts=pulumi.ResourceOptions(protect=settings.protect),
    )


def _blob_service(
    settings: StackSettings, resource_group: pulumi.Input[str], account: storage.StorageAccount
) -> storage.BlobServiceProperties:
    days = settings.retention.soft_delete_days
    return storage.BlobServiceProperties(
        "host-store-blobs",
        account_name=account.name,
        resource_group_name=resource_group,
        blob_services_name="default",
        is_versioning_enabled=True,  # version-level immutability (the receipts) needs it
        delete_retention_policy={"enabled": True, "days": days},
        container_delete_retention_policy={"enabled": True, "days": days},
    )


def _receipts(
    settings: StackSettings,
    resource_group: pulumi.Input[str],
    account: storage.StorageAccount,
    blob_service: storage.BlobServiceProperties,
) -> tuple[storage.BlobContainer, storage.BlobContainerImmutabilityPolicy]:
    container = storage.BlobContainer(
        "receipts",
        account_name=account.name,
        resource_group_name=resource_group,
        container_name=RECEIPTS_CONTAINER,
        public_access="None",
        immutable_storage_with_versioning={"enabled": True},  # version-level WORM: per-receipt policies
        opts=pulumi.ResourceOptions(depends_on=[blob_service], protect=settings.protect),
    )
    # The container's default version policy: the floor for a version written without a policy of its
    # own (the host writes receipts with one, locked, and extends it). Unlocked, so a wrong value can be
    # corrected; an operator locks it within a day of the first deploy (README), then it only grows.
    policy = storage.BlobContainerImmutabilityPolicy(
        "receipts-retention",
        account_name=account.name,
        resource_group_name=resource_group,
        container_name=container.name,
        immutability_period_since_creation_in_days=settings.retention.receipt_days,
        allow_protected_append_writes=False,
        opts=pulumi.ResourceOptions(protect=settings.protect),
    )
    return container, policy


def _private_container(
    name: str,
    resource_group: pulumi.Input[str],
    account: storage.StorageAccount,
    blob_service: storage.BlobServiceProperties,
) -> storage.BlobContainer:
    return storage.BlobContainer(
        name,
        account_name=account.name,
        resource_group_name=resource_group,
        container_name=name,
        public_access="None",
        opts=pulumi.ResourceOptions(depends_on=[blob_service]),
    )


def _lifecycle(
    settings: StackSettings,
    resource_group: pulumi.Input[str],
    account: storage.StorageAccount,
    blob_service: storage.BlobServiceProperties,
) -> storage.ManagementPolicy:
    retention = settings.retention
    rules = [
        {
            "name": "old-versions-of-mutable-blobs",
            "enabled": True,
            "type": "Lifecycle",
            "definition": {
                "filters": {
                    "blob_types": ["blockBlob"],
                    "prefix_match": [f"{container}/" for container in MUTABLE_CONTAINERS],
                },
                "actions": {"version": {"delete": {"days_after_creation_greater_than": retention.version_days}}},
            },
        },
        {
            "name": "abandoned-drift-observations",
            "enabled": True,
            "type": "Lifecycle",
            "definition": {
                "filters": {"blob_types": ["blockBlob"], "prefix_match": [f"{INVENTORY_CONTAINER}/"]},
                "actions": {"base_blob": {"delete": {"days_after_modification_greater_than": retention.finding_days}}},
            },
        },
    ]
    return storage.ManagementPolicy(
        "host-store-lifecycle",
        account_name=account.name,
        resource_group_name=resource_group,
        management_policy_name="default",
        policy={"rules": rules},
        opts=pulumi.ResourceOptions(depends_on=[blob_service]),
    )
