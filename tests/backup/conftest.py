"""An Azurite of the backup tests' own: a restore writes the store's real tables (the fencing epoch in
``CapacityPools``, the sequence floor in ``OutboxPending``), which must not leak into the session's store
that every other test shares. The drill starts one of its own as well (it wipes the whole account)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from devhost.azurite import TARGET_ACCOUNT, Azurite
from shared.backup.location import BackupLocation
from shared.platform.events.outbox import EVENTS_QUEUE
from shared.platform.storage.clients import StorageClients, clients_from_connection_string


@pytest.fixture(scope="package")
def backup_azurite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Azurite]:
    instance = Azurite(tmp_path_factory.mktemp("backup-azurite"), persist=False).start()
    yield instance
    instance.stop(grace_seconds=0.5)


def consume(store: StorageClients) -> list[dict[str, Any]]:
    """Everything on the public events queue, taken off it as a consumer would."""
    queue = store.queue(EVENTS_QUEUE)
    taken = []
    while batch := list(queue.receive_messages(max_messages=32)):
        for message in batch:
            taken.append(json.loads(message.content))
            queue.delete_message(message)
    return taken


def wipe_account(store: StorageClients) -> None:
    """The store is lost: every table, container and queue of the account."""
    for table in list(store.tables.list_tables()):
        store.tables.delete_table(table.name)
    for container in list(store.blobs.list_containers()):
        store.blobs.delete_container(container.name)
    for queue in list(store.queues.list_queues()):
        store.queues.delete_queue(queue.name)


@pytest.fixture()
def empty_store(backup_azurite: Azurite) -> Iterator[StorageClients]:
    """The host account of the backup tests' Azurite, emptied (tests that restore the real table names)."""
    store = clients_from_connection_string(backup_azurite.connection_string())
    wipe_account(store)
    yield store
    wipe_account(store)


@pytest.fixture()
def fresh_location(backup_azurite: Azurite) -> Iterator[BackupLocation]:
    """A backup location of the test's own in the second account (which a wipe of the store leaves alone)."""
    blobs = clients_from_connection_string(backup_azurite.connection_string(TARGET_ACCOUNT)).blobs
    location = BackupLocation(blobs.get_container_client(f"backup-{uuid.uuid4().hex[:8]}"))
    yield location
    location.container.delete_container()


@pytest.fixture()
def world(backup_azurite):
    """(store, location, tables, containers): fresh names in the backup tests' Azurite (a restore writes
    the fencing epoch and sequence floor into the store's own tables; see conftest.py)."""
    azurite = backup_azurite
    suffix = uuid.uuid4().hex[:8]
    store = clients_from_connection_string(azurite.connection_string())
    tables = [f"Bk{suffix}a", f"Bk{suffix}b"]
    containers = [f"bk-{suffix}"]
    for table in tables:
        store.tables.create_table(table)
    for container in containers:
        store.blobs.create_container(container)
    backups = clients_from_connection_string(azurite.connection_string(TARGET_ACCOUNT)).blobs
    location = BackupLocation(backups.get_container_client(f"backup-{suffix}"))
    yield store, location, tables, containers
    for table in tables:
        store.tables.delete_table(table)
    for container in containers:
        store.blobs.delete_container(container)
    location.container.delete_container()
