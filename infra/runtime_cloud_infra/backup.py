"""The backup account: where the host's timer exports its store (docs/restore.md, "Backup and restore (runbook)").

A **separate** storage account, so that losing the host's account (deleted,
corrupted, its keys... it has none) does not lose its backups. Like the host's
account: no shared key, HTTPS and TLS 1.2 only, no public access. Inside it:

- ``runtime-cloud-backup``: the exports (manifests, parts, ``status.json``).
  Blob versioning and soft delete (blobs and containers) are on, so a prune
  or an overwrite by mistake can be undone for ``softDeleteDays``; the host
  prunes old exports itself (``RuntimeCloud__Backup__RetentionDays``) and a
  lifecycle rule deletes old *versions* after ``versionRetentionDays``.
- ``runtime-cloud-backup-receipts``: the copies of receipts, with
  version-level immutability like the host's ``receipts``: the host's
  ``receipt_retention`` timer gives each copy the locked policy its receipt
  has (the environment's lifetime plus seven years); the container's default
  version policy of ``receiptRetentionDays`` (unlocked until an operator
  locks it, README) is the floor from the moment a copy is written. Never
  touched by pruning or lifecycle rules; the host writes a copy once,
  create-only, under its SHA-256. A container created before version-level
  immutability was declared here is migrated once (docs/restore.md).

The host's identity gets *Storage Blob Data Contributor* on the account (the
exports are blobs only) and *Storage Blob Data Owner* on the receipt copies'
container only (setting a version's immutability policy needs its
``immutableStorage/runAsSuperUser`` data action), and the app settings name the account by identity:
``RuntimeCloud__Backup__Connection=RuntimeCloudBackup`` and
``RuntimeCloudBackup__accountName`` / ``__blobServiceUri`` / ``__credential`` /
``__clientId``, read by ``shared.platform.storage.connection`` as the host's own store is.

The account's name is the host account's name (at most 22 characters of it)
followed by ``bk``: storage account names are global, and this keeps the pair
recognisable.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import pulumi
from pulumi_azure_native import storage

if TYPE_CHECKING:  # settings imports host_settings, which imports this module's setting names
    from runtime_cloud_infra.settings import StackSettings

CONNECTION = "RuntimeCloudBackup"  # the connection setting RuntimeCloud__Backup__Connection names
EXPORTS_CONTAINER = "runtime-cloud-backup"  # shared/backup/settings.py, Container's default
RECEIPTS_CONTAINER = "runtime-cloud-backup-receipts"
ROLE = "Storage Blob Data Contributor"
# Setting a blob's immutability policy takes the data action immutableStorage/runAsSuperUser, which only
# Storage Blob Data Owner carries: the host has it on the receipt copies' container alone, to give each copy
# its receipt's locked policy (the exports stay Contributor's).
RECEIPT_POLICY_ROLE = "Storage Blob Data Owner"
# The app settings this module computes (hostSettings may not set them: one source per setting).
COMPUTED_SETTINGS = (
    "RuntimeCloud__Backup__Connection",
    "RuntimeCloud__Backup__Container",
    "RuntimeCloud__Backup__ReceiptsContainer",
    f"{CONNECTION}__accountName",
    f"{CONNECTION}__blobServiceUri",
    f"{CONNECTION}__credential",
    f"{CONNECTION}__clientId",
)


@dataclass(frozen=True)
class BackupStore:
    account: storage.StorageAccount
    blob_service: storage.BlobServiceProperties
    exports: storage.BlobContainer
    receipts: storage.BlobContainer
    receipts_policy: storage.BlobContainerImmutabilityPolicy
    lifecycle: storage.ManagementPolicy


def account_name(settings: StackSettings) -> str:
    return f"{settings.storage_account_name[:22]}bk"


def backup_store(settings: StackSettings, resource_group: pulumi.Input[str]) -> BackupStore:
    account = _account(settings, resource_group)
    days = settings.retention.soft_delete_days
    blob_service = storage.BlobServiceProperties(
        "backup-store-blobs",
        account_name=account.name,
        resource_group_name=resource_group,
        blob_services_name="default",
        is_versioning_enabled=True,
        delete_retention_policy={"enabled": True, "days": days},
        container_delete_retention_policy={"enabled": True, "days": days},
    )
    exports = _container("backup-exports", EXPORTS_CONTAINER, settings, resource_group, account, blob_service)
    receipts = _container(
        "backup-receipts", RECEIPTS_CONTAINER, settings, resource_group, account, blob_service, worm=True
    )
    # The default version policy, the floor of every copy; unlocked, like the host's receipts policy, until an
    # operator locks it (docs/azure.md, Deploying); then it only grows.
    policy = storage.BlobContainerImmutabilityPolicy(
        "backup-receipts-retention",
        account_name=account.name,
        resource_group_name=resource_group,
        container_name=receipts.name,
        immutability_period_since_creation_in_days=settings.retention.receipt_days,
        allow_protected_append_writes=False,
        opts=pulumi.ResourceOptions(protect=settings.protect),
    )
    lifecycle = _lifecycle(settings, resource_group, account, blob_service)
    return BackupStore(account, blob_service, exports, receipts, policy, lifecycle)


def app_settings(backup: BackupStore, host_client_id: pulumi.Input[str]) -> dict[str, pulumi.Input[str]]:
    """The settings that point the host's backup timer at this account, by identity (no key)."""
    return {
        "RuntimeCloud__Backup__Connection": CONNECTION,
        "RuntimeCloud__Backup__Container": EXPORTS_CONTAINER,
        "RuntimeCloud__Backup__ReceiptsContainer": RECEIPTS_CONTAINER,
        f"{CONNECTION}__accountName": backup.account.name,
        f"{CONNECTION}__blobServiceUri": backup.account.primary_endpoints.blob.apply(lambda url: url.rstrip("/")),
        f"{CONNECTION}__credential": "managedidentity",
        f"{CONNECTION}__clientId": host_client_id,
    }


def _account(settings: StackSettings, resource_group: pulumi.Input[str]) -> storage.StorageAccount:
    return storage.StorageAccount(
        "backup-store",
        account_name=account_name(settings),
        resource_group_name=resource_group,
        location=settings.location,
        kind="StorageV2",
        sku={"name": settings.storage_sku},
        access_tier="Cool",  # written every few minutes, read at a restore
        allow_shared_key_access=False,
        default_to_o_auth_authentication=True,
        enable_https_traffic_only=True,
        minimum_tls_version="TLS1_2",
        allow_blob_public_access=False,
        allow_cross_tenant_replication=False,
        is_local_user_enabled=False,
        is_sftp_enabled=False,
        tags=settings.tags,
        opts=pulumi.ResourceOptions(protect=settings.protect),
    )


def _container(
    resource: str,
    name: str,
    settings: StackSettings,
    resource_group: pulumi.Input[str],
    account: storage.StorageAccount,
    blob_service: storage.BlobServiceProperties,
    *,
    worm: bool = False,
) -> storage.BlobContainer:
    """A private container; ``worm``: with version-level immutability (per-version policies), the exports not,
    so that pruning can delete them."""
    return storage.BlobContainer(
        resource,
        account_name=account.name,
        resource_group_name=resource_group,
        container_name=name,
        public_access="None",
        immutable_storage_with_versioning={"enabled": True} if worm else None,
        opts=pulumi.ResourceOptions(depends_on=[blob_service], protect=settings.protect),
    )


def _lifecycle(
    settings: StackSettings,
    resource_group: pulumi.Input[str],
    account: storage.StorageAccount,
    blob_service: storage.BlobServiceProperties,
) -> storage.ManagementPolicy:
    """Old versions of export blobs go after ``versionRetentionDays``; receipt copies are never touched."""
    rule = {
        "name": "old-versions-of-exports",
        "enabled": True,
        "type": "Lifecycle",
        "definition": {
            "filters": {"blob_types": ["blockBlob"], "prefix_match": [f"{EXPORTS_CONTAINER}/"]},
            "actions": {"version": {"delete": {"days_after_creation_greater_than": settings.retention.version_days}}},
        },
    }
    return storage.ManagementPolicy(
        "backup-store-lifecycle",
        account_name=account.name,
        resource_group_name=resource_group,
        management_policy_name="default",
        policy={"rules": [rule]},
        opts=pulumi.ResourceOptions(depends_on=[blob_service]),
    )
