"""The app reads targets as the observer identity, the runner job changes them as the runner identity.

The deployed app's ``RuntimeCloud__Targets`` (from the program, run under
Pulumi's mocks) names the runner identity as a managed-identity target's
``ClientId`` and the observer identity as its ``ObserverClientId``. In the app's
process (its settings, which carry no ``AZURE_CLIENT_ID``) the target clients
and the ARM observer get the observer's credential; in the job's process
(``AZURE_CLIENT_ID`` is the runner's) they get the runner's. Building a
credential contacts nobody, so no identity endpoint is needed here.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from shared.inventory.observers.arm import default_client
from shared.platform.credentials import azure_credential, forget_credentials
from shared.platform.target_access import target_blob_service, target_table_service
from shared.platform.targets import CredentialKind, ProvisioningTarget, TargetKind
from tests.infra.conftest import Deployment

CLEARED = ("AzureWebJobsStorage", "AZURE_CLIENT_ID")


@pytest.fixture
def process(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """Set a process's identity settings (the app's or the job's), and nothing else of them."""
    for key in [key for key in __import__("os").environ if key.startswith(CLEARED)]:
        monkeypatch.delenv(key)
    forget_credentials()

    def settings(values: dict[str, str]) -> None:
        for name, value in values.items():
            if name.startswith(CLEARED):
                monkeypatch.setenv(name, value)

    yield settings
    forget_credentials()


def _client_id(deployment: Deployment, kind: str) -> str:
    return str(deployment.one("managedidentity:UserAssignedIdentity", f"{kind}-identity").outputs["clientId"])


def _targets(deployment: Deployment) -> list[ProvisioningTarget]:
    targets = json.loads(deployment.app_settings()["RuntimeCloud__Targets"])
    return [
        target
        for target in (ProvisioningTarget.model_validate(entry) for entry in targets)
        if target.credential.kind is CredentialKind.MANAGED_IDENTITY
    ]


def _job_environment(deployment: Deployment) -> dict[str, str]:
    (container,) = deployment.one("app:Job").inputs["template"]["containers"]
    return {entry["name"]: entry["value"] for entry in container["env"]}


def _credential_of(target: ProvisioningTarget) -> object:
    if target.kind is TargetKind.STORAGE_ACCOUNT:
        return target_table_service(target).credential
    return default_client(target)._config.credential


def test_the_app_reads_every_target_as_the_observer_with_mocked_pulumi_engine(dev: Deployment, process) -> None:
    process(dev.app_settings())
    observer = azure_credential(_client_id(dev, "observer"))

    targets = _targets(dev)

    assert {target.kind for target in targets} == {TargetKind.STORAGE_ACCOUNT, TargetKind.AZURE_SUBSCRIPTION}
    assert all(_credential_of(target) is observer for target in targets)


def test_the_job_changes_targets_as_the_runner_with_mocked_pulumi_engine(dev: Deployment, process) -> None:
    process(_job_environment(dev))
    runner = azure_credential(_client_id(dev, "runner"))

    targets = _targets(dev)  # the job gets its target from the app, in its input

    assert all(_credential_of(target) is runner for target in targets)


def test_without_an_observer_a_target_is_read_with_its_own_identity(process) -> None:
    process({"AzureWebJobsStorage__clientId": "00000000-0000-0000-0000-0000000000a0"})
    target = ProvisioningTarget.model_validate(
        {
            "Id": "local",
            "Kind": "storage-account",
            "Region": "local",
            "Endpoint": "https://local.blob.core.windows.net",
            "Credential": {"Kind": "managed-identity", "ClientId": "00000000-0000-0000-0000-0000000000b0"},
        }
    )

    assert target_blob_service(target).credential is azure_credential("00000000-0000-0000-0000-0000000000b0")
