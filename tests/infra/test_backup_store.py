"""The backup account, as the program declares it (mocked Pulumi engine: Azure is the edge of the world).

A separate account with versioning and soft delete, receipt copies write-once
for as long as the receipts themselves, the host's identity a blob data
contributor on it and nothing more, and app settings the host's own loader
accepts: a backup location it can open by identity, with no key.
"""

from __future__ import annotations

import os

import pytest
from runtime_cloud_infra.roles import BUILT_IN_ROLES

from shared.backup.settings import BackupSettings
from shared.platform.credentials import forget_credentials
from shared.platform.storage.connection import read_connection
from shared.wiring.settings import load_settings
from tests.infra.conftest import Deployment

SEVEN_YEARS_DAYS = 2557


def test_backups_live_in_an_account_of_their_own_without_shared_keys_with_mocked_pulumi_engine(
    deployment: Deployment,
) -> None:
    host = deployment.one("storage:StorageAccount", "host-store").inputs
    backup = deployment.one("storage:StorageAccount", "backup-store").inputs
    blobs = deployment.one("storage:BlobServiceProperties", "backup-store-blobs").inputs

    assert backup["accountName"] != host["accountName"] and len(backup["accountName"]) <= 24
    assert backup["allowSharedKeyAccess"] is False and backup["allowBlobPublicAccess"] is False
    assert backup["enableHttpsTrafficOnly"] is True and backup["minimumTlsVersion"] == "TLS1_2"
    assert blobs["isVersioningEnabled"] is True
    assert blobs["deleteRetentionPolicy"]["enabled"] is True and blobs["deleteRetentionPolicy"]["days"] >= 7
    assert blobs["containerDeleteRetentionPolicy"]["enabled"] is True


def test_receipt_copies_are_write_once_and_lifecycle_rules_never_touch_them_with_mocked_pulumi_engine(
    deployment: Deployment,
) -> None:
    receipts = deployment.one("storage:BlobContainer", "backup-receipts").inputs
    policy = deployment.one("storage:BlobContainerImmutabilityPolicy", "backup-receipts-retention").inputs
    exports = deployment.one("storage:BlobContainer", "backup-exports").inputs
    rules = deployment.one("storage:ManagementPolicy", "backup-store-lifecycle").inputs["policy"]["rules"]
    prefixes = [prefix for rule in rules for prefix in rule["definition"]["filters"]["prefixMatch"]]

    assert policy["containerName"] == receipts["containerName"]
    # Version-level, like the host's receipts: each copy gets its receipt's locked policy from the host's
    # retention timer; the default version policy is the floor. The exports stay prunable.
    assert receipts["immutableStorageWithVersioning"] == {"enabled": True}
    assert "immutableStorageWithVersioning" not in exports
    assert policy["immutabilityPeriodSinceCreationInDays"] >= SEVEN_YEARS_DAYS
    assert policy["allowProtectedAppendWrites"] is False
    assert exports["containerName"] == BackupSettings().container  # the host's default
    assert receipts["publicAccess"] == exports["publicAccess"] == "None"
    assert prefixes == [f"{exports['containerName']}/"]  # old export versions only


def test_the_host_identity_is_blob_data_contributor_on_the_backup_account_with_mocked_pulumi_engine(
    deployment: Deployment,
) -> None:
    account = deployment.one("storage:StorageAccount", "backup-store")
    host = deployment.one("managedidentity:UserAssignedIdentity", "host-identity").outputs["principalId"]
    on_backup = [
        a.inputs for a in deployment.of_type("authorization:RoleAssignment") if a.inputs["scope"] == account.id
    ]

    assert [(a["principalId"], a["roleDefinitionId"].rsplit("/", 1)[-1]) for a in on_backup] == [
        (host, BUILT_IN_ROLES["Storage Blob Data Contributor"])
    ]


def test_the_host_may_set_policies_on_receipt_copies_only_with_mocked_pulumi_engine(deployment: Deployment) -> None:
    # Set Blob Immutability Policy takes immutableStorage/runAsSuperUser: Blob Data Owner, on that container only.
    receipts = deployment.one("storage:BlobContainer", "backup-receipts")
    host = deployment.one("managedidentity:UserAssignedIdentity", "host-identity").outputs["principalId"]
    owner = BUILT_IN_ROLES["Storage Blob Data Owner"]
    owned = [
        a.inputs["scope"]
        for a in deployment.of_type("authorization:RoleAssignment")
        if a.inputs["principalId"] == host and a.inputs["roleDefinitionId"].endswith(owner)
    ]

    assert receipts.id in owned
    assert deployment.one("storage:BlobContainer", "backup-exports").id not in owned
    assert deployment.one("storage:StorageAccount", "backup-store").id not in owned


@pytest.fixture
def azure_environment(monkeypatch: pytest.MonkeyPatch):
    for key in list(os.environ):
        if key.startswith(("AzureWebJobs", "RuntimeCloud", "OrleansMessaging", "AZURE_", "APPLICATIONINSIGHTS")):
            monkeypatch.delenv(key)
    forget_credentials()
    yield lambda settings: [monkeypatch.setenv(name, value) for name, value in settings.items()]
    forget_credentials()


def test_the_host_reads_its_backup_location_by_identity_with_mocked_pulumi_engine(
    deployment: Deployment, azure_environment
) -> None:
    settings = deployment.app_settings()
    azure_environment(settings)
    account = deployment.one("storage:StorageAccount", "backup-store")
    host = deployment.one("managedidentity:UserAssignedIdentity", "host-identity").outputs["clientId"]

    section = load_settings().runtime_cloud.backup
    connection = read_connection(section.connection)

    assert section.configured and section.receipts_container == "runtime-cloud-backup-receipts"
    assert connection.identity is not None and connection.identity.managed_identity_only
    assert connection.identity.client_id == host
    assert settings[f"{section.connection}__blobServiceUri"] == account.outputs["primaryEndpoints"]["blob"].rstrip("/")
