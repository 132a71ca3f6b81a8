"""Is a host running on the store? A restore must never write under a live host.

A host that runs while its store is rebuilt would grant leases, number events
and apply runs against half-restored rows, and its in-memory caches describe
the store before the loss. Stopping it is step 1 of the runbook; this module
makes the restore check it.

The signal is the one Functions hosts already keep: **blob leases** they hold
while they run, renewed every few seconds, which lapse on their own when the
host stops or dies (15 s on the local host, 15-60 s in Azure):

- the Durable task hub's ``<hub>-leases`` container (the local host's
  ``owner`` lease; in Azure the control-queue partition leases) and
  ``<hub>-applease`` (the Azure Storage provider's app lease);
- ``azure-webjobs-hosts`` (the Functions host's primary-host and singleton
  locks, timers' included).

A lease still *held* means a host was active within the lease's duration; a
lease *expired* or *broken* means none is. A host killed a moment ago holds
its lease for a few seconds more: the restore refuses until it lapses, which
is what an operator wants (the process may still be finishing a write).
"""

from __future__ import annotations

from azure.core.exceptions import ResourceNotFoundError

from shared.platform.errors import RuntimeCloudError
from shared.platform.storage.clients import StorageClients

HOSTS_CONTAINER = "azure-webjobs-hosts"
LEASE_SUFFIXES = ("-leases", "-applease")


class HostActive(RuntimeCloudError):
    """A host holds leases on the store: it is running (``--force`` overrides, once it is known stopped)."""


def host_leases(store: StorageClients) -> list[str]:
    """``container/blob`` of every blob lease a host holds on the store now."""
    held = []
    for container in store.blobs.list_containers():
        if container.name != HOSTS_CONTAINER and not container.name.endswith(LEASE_SUFFIXES):
            continue
        client = store.blobs.get_container_client(container.name)
        try:
            for blob in client.list_blobs():
                if blob.lease.state == "leased":
                    held.append(f"{container.name}/{blob.name}")
        except ResourceNotFoundError:  # deleted while listed: nothing held there
            continue
    return held


def refuse_live_host(store: StorageClients) -> None:
    """Raise :class:`HostActive` naming the leases, if a host holds any."""
    held = host_leases(store)
    if held:
        shown = ", ".join(held[:5]) + (f" and {len(held) - 5} more" if len(held) > 5 else "")
        raise HostActive(
            f"a host is running on the store (it holds {shown}): stop every instance of the function app "
            "and retry once its leases lapse (within a minute); --force restores anyway"
        )
