"""The shared table batch against Azurite at the service's limits, for both clients.

One copy serves the app (sync client) and the local host's Durable engine
(async client): a full batch of 100 operations goes through, a 101st change or
a body over 4 MiB is refused with the SDK's error and nothing written, every
operation must share one partition, and an insert asks for no content back
(``Prefer: return-no-content``) yet still answers its ETag.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import pytest
from azure.data.tables import RequestTooLargeError, TableClient, TableTransactionError
from azure.data.tables.aio import TableClient as AsyncTableClient

from storage_protocol.table_batch import _batch_request, _parts, _sub_requests, send_batch, send_batch_async
from tests.support.azurite import Azurite

TABLE = "ProtocolLimits"
WIDE = {f"Text{k}": "x" * 30_000 for k in range(4)}  # about 120 kB of JSON a row; 40 rows pass 4 MiB


@pytest.fixture(scope="module")
def table(azurite: Azurite) -> Iterator[TableClient]:
    client = TableClient.from_connection_string(azurite.connection_string(), TABLE)
    client.create_table()
    yield client
    client.close()


def _send_async(azurite: Azurite, operations: Sequence[Any]) -> list[Mapping[str, Any]]:
    async def run() -> list[Mapping[str, Any]]:
        async with AsyncTableClient.from_connection_string(azurite.connection_string(), TABLE) as client:
            return await send_batch_async(client, operations)

    return asyncio.run(run())


def _rows(table: TableClient, partition: str) -> list[dict[str, Any]]:
    return list(table.query_entities("PartitionKey eq @p", parameters={"p": partition}))


def _creates(partition: str, count: int, **extra: Any) -> list[tuple[Any, ...]]:
    return [("create", {"PartitionKey": partition, "RowKey": f"{i:03}", **extra}) for i in range(count)]


@pytest.mark.parametrize("client", ["sync", "async"])
def test_a_batch_of_100_operations_is_written_whole(table: TableClient, azurite: Azurite, client: str) -> None:
    partition = f"full-{client}-{uuid.uuid4().hex[:8]}"
    operations = _creates(partition, 100)
    answers = send_batch(table, operations) if client == "sync" else _send_async(azurite, operations)
    assert len(answers) == 100 and all(answer["etag"] for answer in answers)
    assert len(_rows(table, partition)) == 100


def test_a_101st_change_is_refused_by_the_service_and_nothing_is_written(table: TableClient) -> None:
    partition = f"over-{uuid.uuid4().hex[:8]}"
    with pytest.raises(TableTransactionError) as raised:
        send_batch(table, _creates(partition, 101))
    assert raised.value.status_code == 400
    assert _rows(table, partition) == []


@pytest.mark.parametrize("client", ["sync", "async"])
def test_a_body_over_4_mib_is_refused_as_too_large_and_nothing_is_written(
    table: TableClient, azurite: Azurite, client: str
) -> None:
    partition = f"large-{client}-{uuid.uuid4().hex[:8]}"
    operations = _creates(partition, 40, **WIDE)
    with pytest.raises(RequestTooLargeError) as raised:
        send_batch(table, operations) if client == "sync" else _send_async(azurite, operations)
    assert raised.value.status_code == 413
    assert _rows(table, partition) == []


def test_every_operation_must_share_one_partition_and_is_refused_before_sending(table: TableClient) -> None:
    first, second = f"one-{uuid.uuid4().hex[:8]}", f"two-{uuid.uuid4().hex[:8]}"
    operations = [*_creates(first, 1), *_creates(second, 1)]
    with pytest.raises(ValueError, match="Partition Keys in the batch must all be the same"):
        send_batch(table, operations)
    assert _rows(table, first) == [] and _rows(table, second) == []


def test_an_insert_asks_for_no_content_yet_answers_the_etag_the_row_has(table: TableClient) -> None:
    partition = f"prefer-{uuid.uuid4().hex[:8]}"
    operations = [
        ("create", {"PartitionKey": partition, "RowKey": "a", "Payload": "y" * 1_000}),
        ("upsert", {"PartitionKey": partition, "RowKey": "b"}),
    ]
    request = _batch_request(table, _sub_requests(table, operations, "shape"))
    body = request.content.decode("utf-8")
    assert body.count("Prefer: return-no-content") == 1  # the insert (a POST) only; an upsert answers no entity anyway
    assert uuid.UUID(request.headers["x-ms-client-request-id"]).version == 4

    response = table._client.send_request(request, stream=True)
    response.read()
    parts = _parts(response.text(), response.headers.get("Content-Type", ""))
    # Without the header the service answers the insert 201 with the whole entity echoed back.
    assert [part.status_code for part in parts] == [204, 204]
    assert parts[0].text() == ""
    stored = table.get_entity(partition, "a")
    assert parts[0].headers["etag"] == stored.metadata["etag"]


def test_a_malformed_operation_is_refused_with_the_sdks_own_message(table: TableClient, azurite: Azurite) -> None:
    with pytest.raises(TypeError, match="must be an iterator of Tuples"):
        send_batch(table, [42])
    with pytest.raises(TypeError, match="must be an iterator or async iterator of Tuples"):
        _send_async(azurite, [42])
