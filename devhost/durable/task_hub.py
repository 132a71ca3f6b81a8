"""The task hub's storage in one place: its tables, queues and blob containers.

Names follow the Azure Storage provider, so a developer looking at Azurite
with Storage Explorer sees what they would see in Azure: ``<hub>Instances``,
``<hub>History``, ``<hub>-control-00``.., ``<hub>-workitems``,
``<hub>-largemessages`` (and ``<hub>-leases``).
"""

from __future__ import annotations

import asyncio

from azure.data.tables.aio import TableServiceClient
from azure.storage.blob.aio import BlobServiceClient, ContainerClient

from devhost.durable.instance_cache import InstanceCache
from devhost.durable.payloads import PayloadStore
from devhost.durable.queues import TaskHubQueues
from devhost.durable.settings import DurableSettings
from devhost.durable.store import InstanceStore
from storage_protocol.client_options import client_options


class TaskHub:
    def __init__(self, settings: DurableSettings) -> None:
        connection = settings.connection_string()
        prefix = settings.queue_prefix
        self.settings = settings
        options = client_options()
        self._blobs = BlobServiceClient.from_connection_string(connection, **options)
        self._tables = TableServiceClient.from_connection_string(connection, **options)
        self.payloads = PayloadStore(self._blobs.get_container_client(f"{prefix}-largemessages"))
        self.store = InstanceStore(
            self._tables.get_table_client(f"{settings.hub_name}Instances"),
            self._tables.get_table_client(f"{settings.hub_name}History"),
            self.payloads,
        )
        self.queues = TaskHubQueues(connection, prefix, settings.partition_count, self.payloads)
        # the engine's remembered instances; the management API's writes drop an instance's copy
        self.cache = InstanceCache()
        self._ready = False
        self._lock = asyncio.Lock()

    def lease_container(self) -> ContainerClient:
        return self._blobs.get_container_client(f"{self.settings.queue_prefix}-leases")

    async def ready(self) -> None:
        """Create the tables, queues and containers (once per process)."""
        if self._ready:
            return
        async with self._lock:
            if not self._ready:
                await self.store.ensure()
                await self.queues.ensure()
                await self.payloads.ensure()
                self._ready = True

    async def close(self) -> None:
        await self.queues.close()
        await self._tables.close()
        await self._blobs.close()
