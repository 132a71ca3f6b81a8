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

from azure.core.pipeline import Pipeline
from azure.core.pipeline.transport import HttpTransport, RequestsTransport
from azure.data.tables import TableClient, TableServiceClient
from azure.storage.blob import BlobServiceClient
from azure.storage.queue import QueueClient, QueueServiceClient, TextBase64DecodePolicy, TextBase64EncodePolicy

from shared.platform.credentials import azure_credential
from shared.platform.storage.connection import IdentityConnection, read_connection
from shared.platform.storage.entity_guard import EntityGuard
from storage_protocol.client_options import transport_options


class SharedPipelineTableServiceClient(TableServiceClient):
    """A table service client whose table clients all run on one pipeline, linked once, at construction.

    Why: the SDK's ``get_table_client`` builds a new ``Pipeline`` from the service client's own policy
    instances for every table client, and azure-core's ``Pipeline.__init__`` relinks each shared
    ``HTTPPolicy``'s ``next`` (retry, redirect, credential) to SansIO runners it has only half built.
    A request in flight on another table client then walked into a runner with no ``next`` yet and
    failed (``'_SansIOHTTPPolicyRunner' object has no attribute 'next'``: a host's timer listing pools
    in a worker thread while another thread made a table client). Here the one pipeline is built
    before the client is handed out, so no link ever moves again; its policies, bearer-token cache
    included, and transport (connection pool, :class:`EntityGuard`) are the service client's, as in
    the SDK. Queue and blob clients are not affected: their ``get_*_client`` passes runners already
    built, whose relinking always leaves a complete chain, so they stay the SDK's own.

    Private SDK names relied on (those the SDK's own ``get_table_client`` uses): ``self._policies``,
    ``self._location_mode`` and ``self._hosts``. (Its ``TransportWrapper`` is :class:`_LentTransport`.)
    """

    def __init__(self, endpoint: str, *, transport: HttpTransport[Any, Any], **kwargs: Any) -> None:
        super().__init__(endpoint, transport=transport, **kwargs)
        self._table_pipeline: Pipeline[Any, Any] = Pipeline(_LentTransport(transport), policies=self._policies)

    def get_table_client(self, table_name: str, **kwargs: Any) -> TableClient:
        return TableClient(
            self.url,
            table_name=table_name,
            credential=self.credential,
            api_version=self.api_version,
            pipeline=self._table_pipeline,
            location_mode=self._location_mode,
            _hosts=self._hosts,
            **kwargs,
        )


class _LentTransport(HttpTransport[Any, Any]):
    """The service client's transport, lent to its table clients: closing (or leaving the ``with`` of)
    a table client leaves the shared transport, and its connection pool, open."""

    def __init__(self, transport: HttpTransport[Any, Any]) -> None:
        self._transport = transport

    def send(self, request: Any, **kwargs: Any) -> Any:
        return self._transport.send(request, **kwargs)

    def open(self) -> None:
        pass

    def close(self) -> None:
        pass

    def __enter__(self) -> _LentTransport:
        return self

    def __exit__(self, *exc_details: object) -> None:
        pass


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
        tables=SharedPipelineTableServiceClient.from_connection_string(connection_string, **guarded(options)),
        blobs=BlobServiceClient.from_connection_string(connection_string, **options),
        queues=QueueServiceClient.from_connection_string(connection_string, **QUEUE_CODEC, **options),
    )


def clients_from_identity(identity: IdentityConnection, **options: Any) -> StorageClients:
    """Clients for an identity-based connection; building them fetches no token (the first call does)."""
    credential = azure_credential(identity.client_id)
    options = transport_options(options)
    return StorageClients(
        tables=SharedPipelineTableServiceClient(identity.endpoint("table"), credential=credential, **guarded(options)),
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
