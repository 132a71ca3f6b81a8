"""A host of the inventory tests' own (the provisioning tests' settings), and a second one whose target
never answers."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from devhost.azurite import TARGET_ACCOUNT
from shared.inventory.store import InventoryStore
from shared.platform.storage.clients import clients_from_connection_string
from shared.platform.storage.resources import ensure_resources
from tests.conftest import REPO
from tests.provisioning.conftest import provisioning_settings
from tests.support.host import HostProcess
from tests.support.ports import closed_port


@pytest.fixture
def inventory_host(runtime_host: HostProcess) -> HostProcess:
    """The session's host: one host per settings, so queue messages meet one behaviour."""
    return runtime_host


@pytest.fixture
def blind_host(azurite, key_dir, tmp_path_factory) -> Iterator[HostProcess]:
    """The same store, but target ``local-storage`` has a connection string to a port nobody listens on.

    Only the inventory module is enabled, so this host runs no provisioning
    orchestrations against the unreachable target; it is stopped after the test.
    """
    closed = closed_port()
    unreachable = azurite.connection_string(TARGET_ACCOUNT)
    for port in (azurite.blob_port, azurite.queue_port, azurite.table_port):
        unreachable = unreachable.replace(str(port), str(closed))
    settings = provisioning_settings(
        azurite,
        key_dir,
        RuntimeCloudTarget__local_storage__Connection=unreachable,
        RuntimeCloud__Host__EnabledModules="inventory",
        RuntimeCloud__Inventory__TargetTimeoutSeconds="2",
    )
    log = tmp_path_factory.mktemp("logs") / "blind-host.log"
    host = HostProcess(REPO, settings, log).start()
    yield host
    host.stop()


@pytest.fixture
def store(azurite) -> InventoryStore:
    """The inventory's store on the tests' Azurite, for tests below the HTTP API."""
    clients = clients_from_connection_string(azurite.connection_string())
    ensure_resources(clients)
    return InventoryStore(clients, "/runtime-cloud/inventory-tests")
