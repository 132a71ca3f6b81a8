"""The lean table batch for the async client (storage_protocol.table_batch) answers as the SDK's submit_transaction.

Both are sent to Azurite with the same operations, on twin partitions: the
rows they leave, the metadata they answer and the errors they raise (type,
status, error code, failing index) must be the same. The engine writes every
episode's history rows this way, so an SDK upgrade that moves the private
helpers it leans on fails here first.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import pytest
from azure.core import MatchConditions
from azure.core.exceptions import ResourceExistsError
from azure.data.tables import TableTransactionError, UpdateMode
from azure.data.tables.aio import TableClient

from storage_protocol.table_batch import send_batch_async
from tests.support.azurite import Azurite

Send = Callable[[TableClient, Sequence[Any]], Awaitable[Any]]
WAYS: dict[str, Send] = {"lean": send_batch_async, "sdk": lambda table, ops: table.submit_transaction(list(ops))}
TABLE = "DurableBatchTwins"


def _in_table(azurite: Azurite, work: Callable[[TableClient], Awaitable[Any]]) -> Any:
    async def run() -> Any:
        async with TableClient.from_connection_string(azurite.connection_string(), TABLE) as table:
            try:
                await table.create_table()
            except ResourceExistsError:
                pass
            return await work(table)

    return asyncio.run(run())


async def _rows(table: TableClient, partition: str) -> list[dict[str, Any]]:
    rows = [dict(e) async for e in table.query_entities("PartitionKey eq @p", parameters={"p": partition})]
    return sorted(rows, key=lambda row: row["RowKey"])


def _operations(partition: str, etag: str) -> list[tuple[Any, ...]]:
    return [
        (
            "update",
            {"PartitionKey": partition, "RowKey": "a", "N": 2, "Text": "zwölf ✓", "Flag": True, "Ratio": 1.5},
            {"mode": UpdateMode.REPLACE, "etag": etag, "match_condition": MatchConditions.IfNotModified},
        ),
        ("create", {"PartitionKey": partition, "RowKey": "b", "Payload": "x" * 30_000}),
        ("upsert", {"PartitionKey": partition, "RowKey": "c", "Merged": "yes"}, {"mode": UpdateMode.MERGE}),
        ("upsert", {"PartitionKey": partition, "RowKey": "d", "Replaced": 1}, {"mode": UpdateMode.REPLACE}),
        ("delete", {"PartitionKey": partition, "RowKey": "e"}),
    ]


async def _seed(table: TableClient, partition: str) -> str:
    await table.create_entity({"PartitionKey": partition, "RowKey": "e"})
    return str((await table.create_entity({"PartitionKey": partition, "RowKey": "a", "N": 1}))["etag"])


def test_a_batch_leaves_the_same_rows_and_answers_each_operations_etag_like_the_sdk(azurite: Azurite) -> None:
    async def both(table: TableClient) -> tuple[dict[str, Any], dict[str, Any]]:
        answers, rows = {}, {}
        for way, send in WAYS.items():
            partition = f"{way}-{uuid.uuid4().hex[:8]}"
            answers[way] = await send(table, _operations(partition, await _seed(table, partition)))
            rows[way] = [{k: v for k, v in row.items() if k != "PartitionKey"} for row in await _rows(table, partition)]
        return answers, rows

    answers, rows = _in_table(azurite, both)
    assert rows["lean"] == rows["sdk"]
    assert [row["RowKey"] for row in rows["lean"]] == ["a", "b", "c", "d"]
    assert rows["lean"][0]["Text"] == "zwölf ✓" and rows["lean"][1]["Payload"] == "x" * 30_000
    assert len(answers["lean"]) == len(answers["sdk"]) == 5
    # every operation but the delete answers the row's new ETag, as the SDK reads it
    assert [sorted(a) for a in answers["lean"]] == [sorted(a) for a in answers["sdk"]]
    assert all(a["etag"].startswith('W/"datetime') for a in answers["lean"][:4])


@pytest.mark.parametrize(
    "spoil, index",
    [
        pytest.param(
            lambda ops: ops.__setitem__(0, (*ops[0][:2], {**ops[0][2], "etag": _stale()})), 0, id="stale-etag"
        ),
        pytest.param(lambda ops: ops.__setitem__(1, ("create", {**ops[1][1], "RowKey": "a"})), 1, id="row-exists"),
        pytest.param(
            lambda ops: ops.append(("delete", {"PartitionKey": ops[0][1]["PartitionKey"], "RowKey": "zz"})),
            5,
            id="row-missing",
        ),
    ],
)
def test_a_failed_batch_raises_the_sdks_error_with_the_failing_index_and_changes_nothing(
    azurite: Azurite, spoil: Callable[[list[Any]], None], index: int
) -> None:
    async def both(table: TableClient) -> dict[str, tuple[Any, ...]]:
        seen = {}
        for way, send in WAYS.items():
            partition = f"{way}-{uuid.uuid4().hex[:8]}"
            operations = _operations(partition, await _seed(table, partition))
            spoil(operations)
            before = await _rows(table, partition)
            with pytest.raises(TableTransactionError) as raised:
                await send(table, operations)
            error = raised.value
            assert await _rows(table, partition) == before  # all or nothing
            seen[way] = (type(error), error.status_code, error.error_code, error.index)
        return seen

    seen = _in_table(azurite, both)
    assert seen["lean"] == seen["sdk"]
    assert seen["lean"][3] == index


def test_an_empty_batch_sends_nothing_and_answers_nothing(azurite: Azurite) -> None:
    assert _in_table(azurite, lambda table: send_batch_async(table, [])) == []


def _stale() -> str:
    return "W/\"datetime'2020-01-01T00%3A00%3A00.0000000Z'\""
