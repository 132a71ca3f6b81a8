"""The listener lock a timer function runs under: one host at a time fires it.

As the Functions host does it, a timer's listener is a singleton: it starts
only on the host holding a blob lease on
``azure-webjobs-hosts/locks/{host id}/Host.Functions.{function}.Listener``,
taken for host.json ``singleton.listenerLockPeriod`` (default one minute) and
renewed at half that period. A host that does not get it looks again every
``singleton.listenerLockRecoveryPollingInterval`` (default one minute). A
holder killed without releasing leaves the lease to expire, and another host
takes it at its next look; a holder that stops releases it. Hosts with the
same host id (``AzureFunctionsWebHost__hostid``) on one storage account share
the lock, as instances of one app do in Azure.
"""

from __future__ import annotations

import asyncio
import logging
import time

from azure.core.exceptions import HttpResponseError, ResourceExistsError
from azure.storage.blob.aio import BlobClient, BlobLeaseClient, BlobServiceClient

from devhost.config import SingletonOptions

log = logging.getLogger("devhost.timers")

LOCK_CONTAINER = "azure-webjobs-hosts"
RENEWAL_RETRY_SECONDS = 1.0


class ListenerLockLost(Exception):
    """The lease lapsed or was taken: another host may be firing the timer now, so this one stops."""


def lock_blob_name(host_id: str, function_name: str) -> str:
    return f"locks/{host_id}/Host.Functions.{function_name}.Listener"


class ListenerLock:
    def __init__(self, service: BlobServiceClient, host_id: str, function_name: str, options: SingletonOptions) -> None:
        self._service = service
        self._blob: BlobClient = service.get_blob_client(LOCK_CONTAINER, lock_blob_name(host_id, function_name))
        self._function = function_name
        self._period = options.listener_lock_period
        self._polling = options.listener_lock_recovery_polling_interval
        self._lease: BlobLeaseClient | None = None
        self._renewed_at = 0.0

    async def acquire(self) -> None:
        """Wait until this host holds the lock."""
        told = False
        while not await self._try_acquire():
            if not told:
                log.info(
                    "timer %s: another host holds its listener lock; looking again every %.0f s",
                    self._function,
                    self._polling,
                )
                told = True
            await asyncio.sleep(self._polling)
        log.info("timer %s: this host holds its listener lock", self._function)

    async def keep(self) -> None:
        """Renew at half the period until cancelled. A renewal the store does not answer is tried again
        while the lease still runs; raises :class:`ListenerLockLost` once it cannot be held."""
        assert self._lease is not None
        while True:
            await asyncio.sleep(self._period / 2)
            await self._renew()

    async def release(self) -> None:
        lease, self._lease = self._lease, None
        if lease is None:
            return
        try:
            await lease.release()
        except Exception as error:  # noqa: BLE001 - an unreleased lease expires by itself
            log.info("timer %s: listener lock not released (%s); it expires", self._function, error)

    async def _renew(self) -> None:
        assert self._lease is not None
        while True:
            try:
                await self._lease.renew()
                self._renewed_at = time.monotonic()
                return
            except HttpResponseError as error:
                if error.status_code == 409:  # expired and taken, or broken
                    raise ListenerLockLost(f"timer {self._function}: listener lock lost") from error
                failure: Exception = error
            except Exception as error:  # noqa: BLE001 - the store unreachable: the lease may still run
                failure = error
            if time.monotonic() - self._renewed_at >= self._period - RENEWAL_RETRY_SECONDS:
                raise ListenerLockLost(f"timer {self._function}: listener lock not renewed: {failure}")
            await asyncio.sleep(RENEWAL_RETRY_SECONDS)

    async def _try_acquire(self) -> bool:
        await self._ensure_blob()
        lease = BlobLeaseClient(self._blob)
        try:
            await lease.acquire(lease_duration=int(self._period))
        except HttpResponseError as error:
            if error.status_code == 409:
                return False
            raise
        self._lease, self._renewed_at = lease, time.monotonic()
        return True

    async def _ensure_blob(self) -> None:
        try:
            await self._service.create_container(LOCK_CONTAINER)
        except ResourceExistsError:
            pass
        try:
            await self._blob.upload_blob(b"", overwrite=False)
        except ResourceExistsError:
            pass
        except HttpResponseError as error:
            if error.status_code != 412:  # (a leased blob refuses the write: it exists)
                raise
