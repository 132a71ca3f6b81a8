"""One engine per task hub: a blob lease that a host holds while it runs orchestrations.

In Azure, hosts share a task hub by leasing its control-queue partitions. The
local host keeps it simpler: one lease for the whole hub, on
``<hub>-leases/owner``, renewed while the host runs. A second host on the same
hub (say, a developer's host and a test run against the same Azurite) waits
instead of running the same instances twice. The lease names the holder's
process; a host restarted after a crash on the same machine takes the lease
over at once when that process is gone, instead of waiting for it to expire.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket

from azure.core.exceptions import HttpResponseError, ResourceExistsError
from azure.storage.blob.aio import BlobClient, BlobLeaseClient, ContainerClient

log = logging.getLogger("devhost.durable")

LEASE_SECONDS = 15
RENEW_SECONDS = 5


class HubLeaseLost(Exception):
    """The lease could not be renewed; another host may take over, so this one stops."""


class HubLease:
    def __init__(self, container: ContainerClient) -> None:
        self._container = container
        self._blob: BlobClient = container.get_blob_client("owner")
        self._lease: BlobLeaseClient | None = None

    async def acquire(self) -> None:
        """Wait until this host holds the hub."""
        try:
            await self._container.create_container()
        except ResourceExistsError:
            pass
        try:
            await self._blob.upload_blob(b"", overwrite=False)
        except ResourceExistsError:
            pass
        told = False
        while True:
            if await self._try_acquire():
                return
            if not told:
                log.warning("the task hub is in use by another host (%s); waiting for it", await self._holder())
                told = True
            await asyncio.sleep(RENEW_SECONDS)

    async def keep(self) -> None:
        """Renew the lease until cancelled; raises :class:`HubLeaseLost` if a renewal fails."""
        assert self._lease is not None
        while True:
            await asyncio.sleep(RENEW_SECONDS)
            try:
                await self._lease.renew()
            except HttpResponseError as error:
                raise HubLeaseLost(f"the task hub lease could not be renewed: {error.reason}") from error

    async def release(self) -> None:
        if self._lease is not None:
            try:
                await self._lease.release()
            except HttpResponseError:
                pass
            self._lease = None

    async def _try_acquire(self) -> bool:
        lease = BlobLeaseClient(self._blob)
        try:
            await lease.acquire(lease_duration=LEASE_SECONDS)
        except HttpResponseError as error:
            if error.status_code != 409:
                raise
            if not await self._holder_is_gone():
                return False
            log.info("the task hub's previous host (%s) is gone; taking over its lease", await self._holder())
            await BlobLeaseClient(self._blob).break_lease(lease_break_period=0)
            await lease.acquire(lease_duration=LEASE_SECONDS)
        await self._blob.set_blob_metadata({"host": socket.gethostname(), "pid": str(os.getpid())}, lease=lease)
        self._lease = lease
        return True

    async def _holder(self) -> str:
        metadata = (await self._blob.get_blob_properties()).metadata or {}
        return f"process {metadata.get('pid', '?')} on {metadata.get('host', '?')}"

    async def _holder_is_gone(self) -> bool:
        metadata = (await self._blob.get_blob_properties()).metadata or {}
        if metadata.get("host") != socket.gethostname() or not metadata.get("pid", "").isdigit():
            return False
        pid = int(metadata["pid"])
        if pid == os.getpid():
            return True
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            return False
        return False
