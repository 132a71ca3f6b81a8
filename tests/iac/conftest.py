"""Fixtures of the IaC runner tests: the real Azurite target account, specifications, a journal.

Each test works in its own environment name and its own resource names, so
tests share the session's target account without seeing each other's plans.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from azure.data.tables import TableServiceClient
from azure.storage.blob import BlobServiceClient
from azure.storage.queue import QueueServiceClient

from devhost.azurite import TARGET_ACCOUNT, Azurite
from shared.desired_state.api import EnvironmentSpecification
from shared.iac.model import StepResult
from shared.iac.tags import ManagementTags
from shared.platform.targets import ProvisioningTarget

TARGET_SETTING = "RuntimeCloudTarget__iac_tests__Connection"
TENANT = "tenant-a"


class DictJournal(dict[str, StepResult]):
    """The run's step journal, kept in a dict (the durable one belongs to the provisioning module)."""

    def finished(self, address: str) -> StepResult | None:
        return self.get(address)

    def record(self, result: StepResult) -> None:
        self[result.address] = result

    def flush(self) -> None:
        pass  # a dict is written at once


@dataclass
class TargetAccount:
    """The test's own SDK clients for the target account, to set cases up and look at results."""

    blobs: BlobServiceClient
    queues: QueueServiceClient
    tables: TableServiceClient

    def container_metadata(self, name: str) -> dict[str, str]:
        return dict(self.blobs.get_container_client(name).get_container_properties().metadata)

    def container_etag(self, name: str) -> str:
        return self.blobs.get_container_client(name).get_container_properties().etag

    def queue_metadata(self, name: str) -> dict[str, str]:
        return dict(self.queues.get_queue_client(name).get_queue_properties().metadata)

    def table_names(self) -> set[str]:
        return {table.name for table in self.tables.list_tables()}


@pytest.fixture()
def target(azurite: Azurite, monkeypatch: pytest.MonkeyPatch) -> ProvisioningTarget:
    monkeypatch.setenv(TARGET_SETTING, azurite.connection_string(TARGET_ACCOUNT))
    return ProvisioningTarget.model_validate(
        {
            "Id": "iac-tests",
            "Kind": "storage-account",
            "Region": "local",
            "Endpoint": azurite.blob_endpoint(TARGET_ACCOUNT),
            "Credential": {"Kind": "app-setting", "Name": TARGET_SETTING},
        }
    )


@pytest.fixture(scope="session")
def account(azurite: Azurite) -> Iterator[TargetAccount]:
    connection = azurite.connection_string(TARGET_ACCOUNT)
    clients = TargetAccount(
        blobs=BlobServiceClient.from_connection_string(connection),
        queues=QueueServiceClient.from_connection_string(connection),
        tables=TableServiceClient.from_connection_string(connection),
    )
    yield clients
    for client in (clients.blobs, clients.queues, clients.tables):
        client.close()


@pytest.fixture()
def names() -> Callable[[str], str]:
    """Unique resource names for this test: ``names("orders")`` -> ``orders-3f9a1c``; tables get letters only."""
    suffix = uuid.uuid4().hex[:8]

    def name(base: str, table: bool = False) -> str:
        return f"{base}{suffix}" if table else f"{base}-{suffix}"

    return name


@pytest.fixture()
def environment() -> str:
    return f"env-{uuid.uuid4().hex[:8]}"


def tags_for(environment: str, tenant: str = TENANT) -> dict[str, str]:
    return ManagementTags(tenant=tenant, environment=environment).as_metadata()


def specification(
    environment: str, resources: list[dict[str, Any]], tenant: str = TENANT, target: str = "iac-tests"
) -> EnvironmentSpecification:
    return EnvironmentSpecification.model_validate(
        {
            "tenant": tenant,
            "environment": environment,
            "environment_class": "non-production",
            "target": target,
            "runner": "embedded",
            "resources": resources,
        }
    )
