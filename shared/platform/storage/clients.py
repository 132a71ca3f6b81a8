"""The one place that creates Table, Blob and Queue clients.

Locally (and in tests) the ``AzureWebJobsStorage`` connection string points at
Azurite; in Azure, the identity-based settings ``AzureWebJobsStorage__...``
(see :mod:`shared.platform.storage.connection`) name the endpoints and the host's
managed identity authenticates (the process's one credential, from
:mod:`shared.platform.credentials`), so no key is ever configured.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from azure.core.pipeline.transport import RequestsTransport
from azure.data.tables import TableServiceClient
from azure.storage.blob import BlobServiceClient
from azure.storage.queue import QueueClient, QueueServiceClient, TextBase64DecodePolicy, TextBase64EncodePolicy

from shared.platform.credentials import azure_credential
from shared.platform.storage.connection import IdentityConnection, read_connection
from shared.platform.storage.entity_guard import EntityGuard
from storage_protocol.client_options import transport_options


@dataclass(frozen=True)
class StorageClients:
    tables: TableServiceClient
    blobs: BlobServiceClient
    queues: QueueServiceClient

    def queue(self, name: str) -> QueueClient:
        """A queue client that speaks base64, like the Functions queue trigger.

        (``QueueServiceClient.get_queue_client`` does not pass the service's
        message encoding on, so every queue client is made here.)"""
        return self.queues.get_queue_client(name, **QUEUE_CODEC)

    @property
    def account_name(self) -> str:
        return self.blobs.account_name or ""

    def close(self) -> None:
        for client in (self.tables, self.blobs, self.queues):
            client.close()


# Queue-triggered functions read base64 by default (host.json messageEncoding),
# so everything this package sends to a queue is encoded the same way.
QUEUE_CODEC: dict[str, Any] = {
    "message_encode_policy": TextBase64EncodePolicy(),
    "message_decode_policy": TextBase64DecodePolicy(),
}


def clients_from_connection_string(connection_string: str, **options: Any) -> StorageClients:
    options = transport_options(options)
    return StorageClients(
        tables=TableServiceClient.from_connection_string(connection_string, **guarded(options)),
        blobs=BlobServiceClient.from_connection_string(connection_string, **options),
        queues=QueueServiceClient.from_connection_string(connection_string, **QUEUE_CODEC, **options),
    )


def clients_from_identity(identity: IdentityConnection, **options: Any) -> StorageClients:
    """Clients for an identity-based connection; building them fetches no token (the first call does)."""
    credential = azure_credential(identity.client_id)
    options = transport_options(options)
    return StorageClients(
        tables=TableServiceClient(identity.endpoint("table"), credential=credential, **guarded(options)),
        blobs=BlobServiceClient(identity.endpoint("blob"), credential=credential, **options),
        queues=QueueServiceClient(identity.endpoint("queue"), credential=credential, **QUEUE_CODEC, **options),
    )


def guarded(options: dict[str, Any]) -> dict[str, Any]:
    """Table client options whose transport refuses, before sending, an entity Azure refuses.

    Azurite stores entities Azure refuses (over 252 properties, over 1 MiB): see
    :mod:`shared.platform.storage.entity_guard`. The transport is the SDK's default one, made from
    the same options the client would have made it from (time-outs, environment settings), or the
    caller's own, wrapped.
    """
    transport = options.get("transport") or RequestsTransport(**options)
    return {**options, "transport": EntityGuard(transport)}


def host_storage(connection_setting: str = "AzureWebJobsStorage", **options: Any) -> StorageClients:
    """Clients for the host's own store, named like a Functions connection setting."""
    connection = read_connection(connection_setting)
    if connection.connection_string:
        return clients_from_connection_string(connection.connection_string, **options)
    assert connection.identity is not None  # read_connection returns one form or raises
    return clients_from_identity(connection.identity, **options)


def fail_fast_options(timeout_seconds: float) -> dict[str, Any]:
    """Client options for probes: no retries, short time-outs, so a dead store answers quickly."""
    return {
        "retry_total": 0,
        "connection_timeout": timeout_seconds,
        "read_timeout": timeout_seconds,
    }


_shared: StorageClients | None = None


def shared_host_storage() -> StorageClients:
    """Process-wide clients for the host's store (clients are thread-safe and pool connections)."""
    global _shared
    if _shared is None:
        _shared = host_storage()
    return _shared
