"""The Flex Consumption app: its runtime and package by functionAppConfig, its settings exactly the host's."""

from __future__ import annotations

import json
import os
import re

import pytest

from shared.platform.credentials import forget_credentials
from shared.platform.storage.connection import read_connection
from shared.wiring.settings import load_settings
from tests.infra.conftest import REPO, Deployment
from tests.infra.host_setting_names import app_setting_names, host_json_references, is_host_setting


def test_plan_is_flex_consumption_with_mocked_pulumi_engine(deployment: Deployment) -> None:
    plan = deployment.one("web:AppServicePlan").inputs

    assert plan["sku"] == {"name": "FC1", "tier": "FlexConsumption"}
    assert plan["kind"] == "functionapp" and plan["reserved"] is True


def test_function_app_config_reads_its_package_with_the_host_identity_with_mocked_pulumi_engine(
    deployment: Deployment,
) -> None:
    app = deployment.one("web:WebApp").inputs
    host = deployment.one("managedidentity:UserAssignedIdentity", "host-identity")
    store = deployment.one("storage:StorageAccount", "host-store")
    config = app["functionAppConfig"]

    assert app["kind"] == "functionapp,linux"
    assert config["runtime"] == {"name": "python", "version": "3.11"}
    storage = config["deployment"]["storage"]
    assert storage["type"] == "blobContainer"
    assert storage["value"] == f"{store.outputs['primaryEndpoints']['blob']}app-package"
    assert storage["authentication"] == {"type": "UserAssignedIdentity", "userAssignedIdentityResourceId": host.id}
    scale = config["scaleAndConcurrency"]
    assert scale["instanceMemoryMB"] == int(deployment.config["runtime-cloud-infra:instanceMemoryMb"])
    assert scale["maximumInstanceCount"] == int(deployment.config["runtime-cloud-infra:maximumInstanceCount"])


def test_function_app_is_https_only_without_basic_auth_with_mocked_pulumi_engine(deployment: Deployment) -> None:
    app = deployment.one("web:WebApp").inputs

    assert app["httpsOnly"] is True
    assert app["siteConfig"]["minTlsVersion"] == "1.2"
    assert app["siteConfig"]["ftpsState"] == "Disabled"
    assert deployment.one("web:WebAppFtpAllowed").inputs["allow"] is False
    assert deployment.one("web:WebAppScmAllowed").inputs["allow"] is False


def test_store_settings_are_identity_based_with_mocked_pulumi_engine(deployment: Deployment) -> None:
    settings = deployment.app_settings()
    host = deployment.one("managedidentity:UserAssignedIdentity", "host-identity")
    account = deployment.one("storage:StorageAccount", "host-store").inputs["accountName"]

    assert settings["AzureWebJobsStorage__accountName"] == account
    assert settings["AzureWebJobsStorage__credential"] == "managedidentity"
    assert settings["AzureWebJobsStorage__clientId"] == host.outputs["clientId"]
    for service in ("blob", "queue", "table"):
        assert settings[f"AzureWebJobsStorage__{service}ServiceUri"] == f"https://{account}.{service}.core.windows.net"
    assert "AzureWebJobsStorage" not in settings, "no connection string, so no key"
    assert settings["APPLICATIONINSIGHTS_AUTHENTICATION_STRING"] == (
        f"Authorization=AAD;ClientId={host.outputs['clientId']}"
    )
    assert settings["PYTHON_ISOLATE_WORKER_DEPENDENCIES"] == "1"  # docs/azure.md, Deploying


def test_the_app_reads_targets_as_the_observer_and_hands_jobs_the_runner_with_mocked_pulumi_engine(
    deployment: Deployment,
) -> None:
    from shared.platform.targets import CredentialKind, ProvisioningTarget

    observer = deployment.one("managedidentity:UserAssignedIdentity", "observer-identity").outputs["clientId"]
    runner = deployment.one("managedidentity:UserAssignedIdentity", "runner-identity").outputs["clientId"]
    targets = [
        ProvisioningTarget.model_validate(t) for t in json.loads(deployment.app_settings()["RuntimeCloud__Targets"])
    ]
    by_identity = [t.credential for t in targets if t.credential.kind is CredentialKind.MANAGED_IDENTITY]

    assert by_identity, "the sample stacks have targets reached by identity"
    assert all(c.client_id == runner and c.observer_client_id == observer for c in by_identity)


def test_the_in_process_launcher_is_never_an_app_setting_on_azure_with_mocked_pulumi_engine(
    deployment: Deployment,
) -> None:
    launcher = deployment.app_settings().get("RuntimeCloud__IaC__JobLauncher", "queue")

    assert launcher != "in-process"


def test_no_setting_flex_consumption_refuses_with_mocked_pulumi_engine(deployment: Deployment) -> None:
    refused = {
        "FUNCTIONS_WORKER_RUNTIME",
        "FUNCTIONS_EXTENSION_VERSION",
        "WEBSITE_RUN_FROM_PACKAGE",
        "WEBSITE_CONTENTAZUREFILECONNECTIONSTRING",
        "WEBSITE_CONTENTSHARE",
        "APPINSIGHTS_INSTRUMENTATIONKEY",
    }

    assert not refused & set(deployment.app_settings())


def test_every_app_setting_is_one_the_host_or_its_platform_reads_with_mocked_pulumi_engine(
    deployment: Deployment,
) -> None:
    """'Exactly the host's settings': a misspelt name would be silently ignored by the host."""
    settings = deployment.app_settings()
    platform = {
        "APPLICATIONINSIGHTS_CONNECTION_STRING",
        "APPLICATIONINSIGHTS_AUTHENTICATION_STRING",
        "PYTHON_ISOLATE_WORKER_DEPENDENCIES",
        "PYTHON_ENABLE_OPENTELEMETRY",
    }
    named_by_targets = {
        target["Credential"]["Name"]
        for target in json.loads(settings["RuntimeCloud__Targets"])
        if target["Credential"]["Kind"] == "app-setting"
    }
    known = app_setting_names()

    unknown = [
        name for name in settings if name not in platform | named_by_targets and not is_host_setting(name, known)
    ]

    assert not unknown, f"app settings the host does not read: {unknown}"


def test_every_setting_reference_in_host_json_is_set_with_mocked_pulumi_engine(deployment: Deployment) -> None:
    """A %Setting% the host cannot resolve makes it refuse to start (host.json's task hub name)."""
    names = {name.lower() for name in deployment.app_settings()}

    missing = [ref for ref in host_json_references() if ref.lower() not in names]

    assert not missing, f"host.json references unset app settings: {missing}"


@pytest.fixture
def azure_environment(monkeypatch: pytest.MonkeyPatch):
    """The process environment of the deployed app: exactly its app settings, nothing from local runs."""
    for key in list(os.environ):
        if key.startswith(("AzureWebJobs", "RuntimeCloud", "OrleansMessaging", "AZURE_", "APPLICATIONINSIGHTS")):
            monkeypatch.delenv(key)
    forget_credentials()

    def apply(settings: dict[str, str]) -> None:
        for name, value in settings.items():
            monkeypatch.setenv(name, value)

    yield apply
    forget_credentials()


def test_the_host_starts_with_exactly_these_settings_with_mocked_pulumi_engine(
    deployment: Deployment, azure_environment
) -> None:
    """The host's own loader (shared.wiring.settings) accepts them: nothing it requires is missing or wrong."""
    settings = deployment.app_settings()
    azure_environment(settings)

    loaded = load_settings()
    connection = read_connection("AzureWebJobsStorage")

    assert connection.identity is not None and connection.identity.managed_identity_only
    assert connection.identity.client_id == settings["AzureWebJobsStorage__clientId"]
    assert loaded.runtime_cloud.topology.value == deployment.config["runtime-cloud-infra:topology"]
    runner = deployment.one("managedidentity:UserAssignedIdentity", "runner-identity").outputs["clientId"]
    for target in loaded.runtime_cloud.targets:
        if target.credential.kind.value == "managed-identity":
            assert target.credential.client_id == runner, "a target is reached with the runner's identity"


def test_make_deploy_uploads_to_the_group_and_app_the_stack_exports_with_mocked_pulumi_engine(
    deployment: Deployment,
) -> None:
    """`make deploy` names the app by two stack outputs; they must be the app's own group and name."""
    makefile = (REPO / "Makefile").read_text(encoding="utf-8")
    group_output = re.search(r"--resource-group \"\$\$\(cd infra && pulumi stack output (\w+)", makefile)
    name_output = re.search(r"--name \"\$\$\(cd infra && pulumi stack output (\w+)", makefile)
    app = deployment.one("web:WebApp").inputs

    assert group_output and name_output, "make deploy's config-zip step names the app by stack outputs"
    assert deployment.exports[group_output.group(1)] == app["resourceGroupName"]
    assert deployment.exports[name_output.group(1)] == app["name"]
