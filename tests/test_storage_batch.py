"""The lean table batch (storage_protocol.table_batch, sync client) answers as the SDK's submit_transaction does.

Both are sent to Azurite with the same operations, on twin partitions: the
rows they leave, the metadata they answer and the errors they raise (type,
status, error code, failing index) must be the same.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from azure.core import MatchConditions
from azure.data.tables import TableClient, TableTransactionError, UpdateMode

from shared.platform.errors import AlreadyExists, ConcurrencyConflict
from shared.platform.storage.clients import clients_from_connection_string
from shared.platform.storage.conditional import submit_batch
from storage_protocol.table_batch import send_batch

Send = Callable[[TableClient, Sequence[Any]], Any]
WAYS: dict[str, Send] = {"lean": send_batch, "sdk": lambda table, ops: table.submit_transaction(list(ops))}
STALE = "W/\"datetime'2020-01-01T00%3A00%3A00.0000000Z'\""


@pytest.fixture(scope="module")
def table(azurite: Any) -> TableClient:
    return clients_from_connection_string(azurite.connection_string()).tables.create_table_if_not_exists("BatchTwins")


def _rows(table: TableClient, partition: str) -> list[dict[str, Any]]:
    return sorted(
        (dict(e) for e in table.query_entities("PartitionKey eq @p", parameters={"p": partition})),
        key=lambda row: row["RowKey"],
    )


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


def _seed(table: TableClient, partition: str) -> str:
    table.create_entity({"PartitionKey": partition, "RowKey": "e"})
    return str(table.create_entity({"PartitionKey": partition, "RowKey": "a", "N": 1})["etag"])


def test_a_batch_leaves_the_same_rows_and_answers_each_operations_etag_like_the_sdk(table):
    answers, rows = {}, {}
    for way, send in WAYS.items():
        partition = f"{way}-{uuid.uuid4().hex}"
        answers[way] = send(table, _operations(partition, _seed(table, partition)))
        rows[way] = [{k: v for k, v in row.items() if k != "PartitionKey"} for row in _rows(table, partition)]

    assert rows["lean"] == rows["sdk"]
    assert [row["RowKey"] for row in rows["lean"]] == ["a", "b", "c", "d"]  # e deleted
    assert [set(answer) for answer in answers["lean"]] == [set(answer) for answer in answers["sdk"]]
    etag_of_a = str(answers["lean"][0]["etag"])
    lean_partition = next(p for p in {r["PartitionKey"] for r in table.list_entities()} if p.startswith("lean-"))
    assert table.get_entity(lean_partition, "a").metadata["etag"] == etag_of_a


@pytest.mark.parametrize(
    ("break_it", "status", "code", "index"),
    [
        (lambda ops: ops.__setitem__(0, (ops[0][0], ops[0][1], {**ops[0][2], "etag": STALE})), 412, None, 0),
        (lambda ops: ops.__setitem__(4, ("create", {**ops[4][1]})), 409, "EntityAlreadyExists", 4),
    ],
    ids=["stale-etag", "duplicate-insert"],
)
def test_a_failed_batch_raises_the_sdks_error_with_the_failing_index_and_changes_nothing(
    table, break_it, status, code, index
):
    errors = {}
    for way, send in WAYS.items():
        partition = f"{way}-{uuid.uuid4().hex}"
        operations = _operations(partition, _seed(table, partition))
        break_it(operations)
        with pytest.raises(TableTransactionError) as raised:
            send(table, operations)
        errors[way] = raised.value
        assert [row["RowKey"] for row in _rows(table, partition)] == ["a", "e"]  # all or nothing

    lean, sdk = errors["lean"], errors["sdk"]
    assert (type(lean), lean.status_code, lean.error_code, lean.index) == (
        type(sdk),
        sdk.status_code,
        sdk.error_code,
        sdk.index,
    )
    assert lean.status_code == status
    assert lean.index == index
    if code:
        assert lean.error_code == code


def test_the_storage_adapter_turns_batch_conflicts_into_domain_errors(table):
    partition = f"adapter-{uuid.uuid4().hex}"
    etag = _seed(table, partition)
    with pytest.raises(ConcurrencyConflict) as stale:
        submit_batch(
            table,
            [
                (
                    "update",
                    {"PartitionKey": partition, "RowKey": "a", "N": 3},
                    {"etag": STALE, "match_condition": MatchConditions.IfNotModified},
                )
            ],
        )
    assert isinstance(stale.value.__cause__, TableTransactionError) and stale.value.__cause__.index == 0
    with pytest.raises(AlreadyExists):
        submit_batch(
            table,
            [
                ("upsert", {"PartitionKey": partition, "RowKey": "z"}),
                ("create", {"PartitionKey": partition, "RowKey": "e"}),
            ],
        )
    assert [row["RowKey"] for row in _rows(table, partition)] == ["a", "e"]
    assert submit_batch(table, []) == []
    fresh = submit_batch(
        table,
        [
            (
                "update",
                {"PartitionKey": partition, "RowKey": "a", "N": 3},
                {"etag": etag, "match_condition": MatchConditions.IfNotModified},
            )
        ],
    )
    assert table.get_entity(partition, "a")["N"] == 3 and fresh[0]["etag"] != etag
