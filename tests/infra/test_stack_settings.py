"""The program refuses a stack configuration it cannot deploy safely, naming the key and never the value."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pulumi
import pytest
from runtime_cloud_infra import host_settings
from runtime_cloud_infra.settings import StackConfigError, load

from tests.infra.conftest import INFRA, stack_file_config

STORAGE_KEY = "DefaultEndpointsProtocol=https;AccountName=x;AccountKey=" + "A" * 86 + "=="


@pytest.fixture
def configure() -> Iterator[Any]:
    def apply(**changes: Any) -> None:
        config = stack_file_config(INFRA / "Pulumi.dev.yaml")
        for key, value in changes.items():
            name = key if ":" in key else f"runtime-cloud-infra:{key}"
            if value is None:
                config.pop(name, None)
            else:
                config[name] = value if isinstance(value, str) else json.dumps(value)
        pulumi.runtime.set_all_config(config)

    yield apply
    pulumi.runtime.set_all_config({})


def _host_settings(**changes: str | None) -> dict[str, str]:
    settings = json.loads(stack_file_config(INFRA / "Pulumi.dev.yaml")["runtime-cloud-infra:hostSettings"])
    settings.update(changes)
    return {name: value for name, value in settings.items() if value is not None}


def test_the_sample_stack_loads(configure) -> None:
    configure()

    settings = load(stack="dev")

    assert settings.storage_account_name == "rtclouddevhost01" and settings.topology == "saas-default"


@pytest.mark.parametrize(
    "name, problem",
    [
        ("RuntimeCloud__Targets", "set by the program"),
        ("AzureWebJobsStorage__clientId", "set by the program"),
        ("RuntimeCloud__Auth__LocalSigningKeyDirectory", "local host only"),
        ("RuntimeCloud__Secrets__LocalValues", "local host only"),
        ("FUNCTIONS_WORKER_RUNTIME", "Flex Consumption"),
        ("AzureWebJobsStorage", "Flex Consumption"),
        ("Some__Other__Setting", "not a host setting"),
    ],
)
def test_host_settings_the_program_owns_or_azure_refuses_are_refused(configure, name: str, problem: str) -> None:
    configure(hostSettings=_host_settings(**{name: "x"}))

    with pytest.raises(StackConfigError, match=problem):
        load(stack="dev")


def test_the_in_process_job_launcher_is_refused_on_azure(configure) -> None:
    configure(hostSettings=_host_settings(RuntimeCloud__IaC__JobLauncher="in-process"))

    with pytest.raises(StackConfigError, match="RuntimeCloud__IaC__JobLauncher=in-process is for the local host only"):
        load(stack="dev")


def test_the_host_group_defaults_to_the_stack_group_name_with_host(configure) -> None:
    configure(hostResourceGroupName=None)

    settings = load(stack="dev")

    assert settings.host_resource_group_name == f"{settings.resource_group_name}-host"


def test_the_smallest_flex_maximum_instance_count_is_accepted(configure) -> None:
    configure(maximumInstanceCount="40")

    assert load(stack="dev").maximum_instance_count == 40


def test_a_secret_value_is_refused_without_being_repeated(configure) -> None:
    configure(hostSettings=_host_settings(RuntimeCloud__ConfigPlatform__Url=STORAGE_KEY))

    with pytest.raises(StackConfigError) as refused:
        load(stack="dev")

    assert "RuntimeCloud__ConfigPlatform__Url holds a secret value" in str(refused.value)
    assert "AccountKey" not in str(refused.value)


def test_a_token_issuer_is_required_in_azure(configure) -> None:
    configure(hostSettings=_host_settings(RuntimeCloud__Auth__Authority=None))

    with pytest.raises(StackConfigError, match="Authority or RuntimeCloud__Auth__JwksUri is required"):
        load(stack="dev")


@pytest.mark.parametrize(
    "key, value, problem",
    [
        ("receiptRetentionDays", "365", "between 2557"),
        ("storageAccountName", "Not-Valid", "lower-case letters and digits"),
        ("topology", "multi-cloud", "must be one of"),
        ("instanceMemoryMb", "1024", "must be one of"),
        ("maximumInstanceCount", "39", r"maximumInstanceCount must be between 40 and 1000, not 39"),
        ("maximumInstanceCount", "1001", r"maximumInstanceCount must be between 40 and 1000"),
        ("location", None, "is required"),
        ("hostSettings", None, "is required"),
        ("runnerRoles", [{"scope": "everywhere", "role": "Reader"}], "ARM scope"),
        ("runnerRoles", [{"scope": "resource-group", "role": "Wizard"}], "known built-in role"),
        (
            "runnerRoles",
            [{"scope": "resource-group", "role": "Storage Blob Data Reader"}],
            "a data role: never on the stack's resource group",
        ),
        (
            "runnerRoles",
            [{"scope": "resource-group", "role": "Key Vault Secrets User"}],
            "a data role: never on the stack's resource group",
        ),
        ("hostResourceGroupName", "RG-Runtime-Cloud-Dev", "must differ from runtime-cloud-infra:resourceGroupName"),
        ("hostResourceGroupName", "rg-ends-with-a-dot.", "not ending with '.'"),
        ("secrets", [{"name": "iac-runner-identity", "value": "hunter2"}], "never a value"),
        (
            "targets",
            [
                {
                    "Id": "t",
                    "Kind": "kubernetes-cluster",
                    "Region": "x",
                    "Endpoint": "https://k",
                    "Credential": {"Kind": "key-vault", "SecretName": "not-in-the-catalogue"},
                }
            ],
            "is not in",
        ),
        (
            "targets",
            [
                {
                    "Id": "t",
                    "Kind": "storage-account",
                    "Region": "x",
                    "Endpoint": STORAGE_KEY,
                    "Credential": {"Kind": "app-setting", "Name": "T"},
                }
            ],
            "holds a secret value",
        ),
        ("runtime-cloud:resourceGroup", "rg-somewhere-else", "target's resource group"),
    ],
)
def test_unusable_values_are_refused_naming_the_key(configure, key: str, value: Any, problem: str) -> None:
    configure(**{key: value})

    with pytest.raises(StackConfigError, match=problem) as refused:
        load(stack="dev")

    assert "hunter2" not in str(refused.value) and "AccountKey" not in str(refused.value)


def test_a_target_credential_in_the_vault_becomes_a_reference_never_a_value() -> None:
    targets = (
        {
            "Id": "orders",
            "Kind": "storage-account",
            "Region": "westeurope",
            "Credential": {
                "Kind": "app-setting",
                "Name": "RuntimeCloudTarget__orders__Connection",
                "SecretName": "orders-connection",
            },
        },
        {
            "Id": "cluster",
            "Kind": "kubernetes-cluster",
            "Region": "westeurope",
            "Endpoint": "https://k",
            "Credential": {"Kind": "key-vault", "SecretName": "iac-runner-identity"},
        },
        {
            "Id": "own",
            "Kind": "azure-subscription",
            "Region": "westeurope",
            "SubscriptionId": "s",
            "Credential": {"Kind": "managed-identity", "ClientId": "someone-else"},
        },
    )

    references = host_settings.key_vault_references(targets, "kv-host")
    host_targets = host_settings.host_targets(
        targets, "runner-client-id", "https://kv-host.vault.azure.net", observer_client_id="observer-client-id"
    )

    assert references == {
        "RuntimeCloudTarget__orders__Connection": "@Microsoft.KeyVault(VaultName=kv-host;SecretName=orders-connection)"
    }
    assert host_targets[0]["Credential"] == {"Kind": "app-setting", "Name": "RuntimeCloudTarget__orders__Connection"}
    assert host_targets[1]["Credential"] == {
        "Kind": "key-vault",
        "Uri": "https://kv-host.vault.azure.net/secrets/iac-runner-identity",
    }
    assert host_targets[2]["Credential"]["ClientId"] == "someone-else"  # a named identity is kept
    assert host_targets[2]["Credential"]["ObserverClientId"] == "observer-client-id"  # the app reads as the observer
