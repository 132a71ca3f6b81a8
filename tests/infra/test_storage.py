"""The host's store, as the program declares it: no shared key, and receipts that cannot be rewritten."""

from __future__ import annotations

from shared.inventory.store import INVENTORY_CONTAINER
from shared.provisioning.receipt_retention import PolicyMode
from shared.provisioning.receipt_settings import ReceiptSettings
from shared.provisioning.receipts import RECEIPTS_CONTAINER
from shared.wiring.features import enabled_manifests
from tests.infra.conftest import INFRA, Deployment, run_program, stack_file_config

SEVEN_YEARS_DAYS = 2557


def test_storage_account_takes_no_shared_key_with_mocked_pulumi_engine(deployment: Deployment) -> None:
    account = deployment.one("storage:StorageAccount", "host-store").inputs

    assert account["allowSharedKeyAccess"] is False
    assert account["defaultToOAuthAuthentication"] is True
    assert account["enableHttpsTrafficOnly"] is True
    assert account["minimumTlsVersion"] == "TLS1_2"
    assert account["allowBlobPublicAccess"] is False
    assert account["allowCrossTenantReplication"] is False
    assert account["isLocalUserEnabled"] is False and account["isSftpEnabled"] is False
    assert account["encryption"]["requireInfrastructureEncryption"] is True


def test_blob_versioning_and_soft_delete_are_on_with_mocked_pulumi_engine(deployment: Deployment) -> None:
    blobs = deployment.one("storage:BlobServiceProperties", "host-store-blobs").inputs

    assert blobs["isVersioningEnabled"] is True
    assert blobs["deleteRetentionPolicy"]["enabled"] is True and blobs["deleteRetentionPolicy"]["days"] >= 7
    assert blobs["containerDeleteRetentionPolicy"]["enabled"] is True


def test_receipts_are_write_once_for_seven_years_with_mocked_pulumi_engine(deployment: Deployment) -> None:
    container = deployment.one("storage:BlobContainer", "receipts").inputs
    policy = deployment.one("storage:BlobContainerImmutabilityPolicy", "receipts-retention").inputs

    assert container["containerName"] == RECEIPTS_CONTAINER  # the container the host writes receipts to
    assert container["publicAccess"] == "None"
    # Version-level immutability: a receipt's own expiry can be extended to its environment's end + 7 years.
    assert container["immutableStorageWithVersioning"] == {"enabled": True}
    # The container's default version policy: the floor of every version written without a policy of its own.
    assert policy["containerName"] == RECEIPTS_CONTAINER
    assert policy["immutabilityPeriodSinceCreationInDays"] >= SEVEN_YEARS_DAYS
    assert policy["allowProtectedAppendWrites"] is False


def test_receipts_follow_the_lifetime_rule_in_azure_with_mocked_pulumi_engine(deployment: Deployment) -> None:
    settings = deployment.app_settings()
    blobs = deployment.one("storage:BlobServiceProperties", "host-store-blobs").inputs
    account = deployment.one("storage:StorageAccount", "host-store").inputs

    # The host writes each receipt under a locked version policy and its timer extends it: nothing in the
    # deployment turns that off or loosens it (those settings are the local sample's and a trial's).
    receipts = ReceiptSettings.model_validate(
        {
            key.removeprefix("RuntimeCloud__Receipts__"): value
            for key, value in settings.items()
            if key.startswith("RuntimeCloud__Receipts__")
        }
    )
    assert receipts.immutability is True and receipts.policy_mode is PolicyMode.LOCKED
    assert receipts.retention_days >= SEVEN_YEARS_DAYS
    assert blobs["isVersioningEnabled"] is True  # version-level immutability needs versioning
    # Account-level immutability is chosen at creation only and would cover the Functions host's containers.
    assert "immutableStorageWithVersioning" not in account
    provisioning_triggers = [name for manifest in enabled_manifests(["provisioning"]) for name in manifest.triggers]
    assert "functions.receipt_retention" in provisioning_triggers  # the timer ships with the app


def test_the_host_keeps_receipts_as_long_as_the_stack_says_with_mocked_pulumi_engine(deployment: Deployment) -> None:
    """receiptRetentionDays sets the host's receipt policies and both containers' default policies alike."""
    stack_days = deployment.config["runtime-cloud-infra:receiptRetentionDays"]
    defaults = {
        deployment.one("storage:BlobContainerImmutabilityPolicy", name).inputs["immutabilityPeriodSinceCreationInDays"]
        for name in ("receipts-retention", "backup-receipts-retention")
    }

    assert deployment.app_settings()["RuntimeCloud__Receipts__RetentionDays"] == stack_days
    assert defaults == {int(stack_days)}


def test_a_longer_receipt_retention_reaches_the_host_with_mocked_pulumi_engine() -> None:
    config = {**stack_file_config(INFRA / "Pulumi.dev.yaml"), "runtime-cloud-infra:receiptRetentionDays": "3653"}

    deployment = run_program("dev", config)

    assert deployment.app_settings()["RuntimeCloud__Receipts__RetentionDays"] == "3653"
    receipts = ReceiptSettings.model_validate(
        {"RetentionDays": deployment.app_settings()["RuntimeCloud__Receipts__RetentionDays"]}
    )
    assert receipts.retention_days == 3653  # the host's own loader takes it


def test_lifecycle_rules_never_touch_receipts_and_follow_the_host_retention_with_mocked_pulumi_engine(
    deployment: Deployment,
) -> None:
    rules = deployment.one("storage:ManagementPolicy", "host-store-lifecycle").inputs["policy"]["rules"]
    prefixes = [prefix for rule in rules for prefix in rule["definition"]["filters"]["prefixMatch"]]
    by_name = {rule["name"]: rule for rule in rules}

    assert not any(prefix.startswith(f"{RECEIPTS_CONTAINER}/") for prefix in prefixes)
    observations = by_name["abandoned-drift-observations"]["definition"]
    assert observations["filters"]["prefixMatch"] == [f"{INVENTORY_CONTAINER}/"]
    # Drift is kept 13 months: the blob rule and the host's purge timer read the same stack value.
    days = observations["actions"]["baseBlob"]["delete"]["daysAfterModificationGreaterThan"]
    assert str(int(days)) == deployment.app_settings()["RuntimeCloud__Inventory__FindingRetentionDays"]


def test_deployment_and_state_containers_are_private_with_mocked_pulumi_engine(deployment: Deployment) -> None:
    for name in ("app-package", "pulumi-state"):
        assert deployment.one("storage:BlobContainer", name).inputs["publicAccess"] == "None"
