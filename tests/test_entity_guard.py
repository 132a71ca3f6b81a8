"""The table clients' guard: Azure's entity limits, refused before a write leaves the process.

The contract suite (``tests/storage_contract/``) pins what a caller sees on Azurite and in memory;
here: the guard reads the SDK's wire JSON to the same size the in-memory storage computes from the
typed row (two codings of the one documented formula, so either drifting fails), a refused write
never reaches the store, and the SDK's own ``submit_transaction`` layout is read as well as the
lean batch's.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from azure.core.credentials import AzureNamedKeyCredential
from azure.core.exceptions import HttpResponseError
from azure.data.tables import EdmType, EntityProperty, TableClient, TableServiceClient, TableTransactionError
from azure.data.tables._serialize import _add_entity_properties  # the wire JSON every SDK write sends

from shared.platform.storage.clients import clients_from_connection_string
from shared.platform.storage.conditional import insert_if_absent
from shared.platform.storage.entity_guard import EntityGuard
from shared.platform.storage.limits import (
    MAX_CUSTOM_PROPERTIES,
    MAX_ENTITY_BYTES,
    entity_refusal,
    utf16_units,
)
from tests.support import memory_storage
from tests.support.memory_storage import ACCOUNT_KEY, TABLE_HOST, MemoryStorage


def _code(error: HttpResponseError) -> str:
    code = getattr(error, "error_code", None)
    return str(getattr(code, "value", code))  # a TableErrorCode or the bare string


def _every_type() -> dict[str, Any]:
    return {
        "PartitionKey": "pártition😀",
        "RowKey": "row",
        "Text": "plain",
        "Wide": "😀 and ü",
        "Flag": True,
        "Small": 7,
        "Large": EntityProperty(2**40, EdmType.INT64),
        "Ratio": 0.5,
        "Typed": EntityProperty(3, EdmType.INT64),
        "When": datetime(2026, 12, 2, 15, 0, tzinfo=UTC),
        "Id": uuid.UUID(int=5),
        "Bytes": b"\x00\x01\x02\x03\x04",
        "Nothing": None,
    }


def _memory_size(wire: dict[str, Any]) -> int:
    """The in-memory storage's size of the row it would store from ``wire``."""
    properties = {}
    for name, value in wire.items():
        if name.endswith("@odata.type") or name in ("PartitionKey", "RowKey"):
            continue
        typed = memory_storage._typed_from_json(name, value, wire.get(f"{name}@odata.type"))
        if typed is not None:
            properties[name] = typed
    return memory_storage._entity_size(wire["PartitionKey"], wire["RowKey"], properties)


def test_the_guard_and_the_in_memory_storage_count_an_entity_alike() -> None:
    # Every type, 15 full strings, then a binary that brings the entity to exactly 1 MiB (and one byte over).
    entity = {**_every_type(), **{f"S{i:02d}": "x" * 32 * 1024 for i in range(15)}}
    padding = MAX_ENTITY_BYTES - _memory_size(_add_entity_properties(entity)) - (8 + 2 * len("Pad") + 4)
    assert 0 < padding < 64 * 1024
    exact = _add_entity_properties({**entity, "Pad": b"\x01" * padding})
    over = _add_entity_properties({**entity, "Pad": b"\x01" * (padding + 1)})
    assert _memory_size(exact) == MAX_ENTITY_BYTES
    assert entity_refusal(exact, exact["PartitionKey"], exact["RowKey"]) is None
    refusal = entity_refusal(over, over["PartitionKey"], over["RowKey"])
    assert refusal is not None and refusal.code == "EntityTooLarge"


def test_a_string_counts_utf16_units() -> None:
    assert (utf16_units("abc"), utf16_units("ü"), utf16_units("😀")) == (3, 1, 2)
    assert entity_refusal({"S": "😀" * 16 * 1024}, "p", "r") is None
    refusal = entity_refusal({"S": "😀" * (16 * 1024 + 1)}, "p", "r")
    assert refusal is not None and refusal.code == "PropertyValueTooLarge"


def test_nulls_annotations_and_keys_are_not_counted_as_properties() -> None:
    most = {f"P{i}": i for i in range(MAX_CUSTOM_PROPERTIES)}
    entity = {"PartitionKey": "p", "RowKey": "r", "Timestamp": "t", **most, "Gone": None, "P0@odata.type": "Edm.Int32"}
    assert entity_refusal(entity, "p", "r") is None
    refusal = entity_refusal({**entity, "One": 1}, "p", "r")
    assert refusal is not None and refusal.code == "TooManyProperties"


@pytest.fixture
def guarded_memory() -> Iterator[tuple[MemoryStorage, TableClient]]:
    """A table in memory reached through the guard, as Azurite is reached by the product's clients."""
    storage = MemoryStorage()
    service = TableServiceClient(
        f"https://{TABLE_HOST}/{storage.account}",
        credential=AzureNamedKeyCredential(storage.account, ACCOUNT_KEY),
        transport=EntityGuard(storage.transport()),
        retry_total=0,
    )
    table = service.create_table("Guarded")
    yield storage, table
    service.close()


def test_a_refused_write_never_reaches_the_store(guarded_memory: tuple[MemoryStorage, TableClient]) -> None:
    storage, table = guarded_memory
    before = storage.requests
    too_many = {"PartitionKey": "p", "RowKey": "r", **{f"P{i}": i for i in range(MAX_CUSTOM_PROPERTIES + 1)}}
    with pytest.raises(HttpResponseError) as refused:
        insert_if_absent(table, too_many)
    assert (refused.value.status_code, _code(refused.value)) == (400, "TooManyProperties")
    with pytest.raises(TableTransactionError) as in_batch:
        table.submit_transaction([("create", {"PartitionKey": "p", "RowKey": "a"}), ("upsert", too_many)])
    assert (in_batch.value.index, _code(in_batch.value)) == (1, "TooManyProperties")
    assert storage.requests == before  # answered by the guard: nothing was sent
    insert_if_absent(table, {"PartitionKey": "p", "RowKey": "ok", "Text": "x" * 4000})
    assert storage.requests == before + 1
    assert [row["RowKey"] for row in storage.rows("Guarded")] == ["ok"]


def test_the_sdks_own_batch_is_refused_on_azurite(azurite: Any) -> None:
    clients = clients_from_connection_string(azurite.connection_string())
    name = f"Guard{uuid.uuid4().hex[:16]}"
    table = clients.tables.create_table(name)
    try:
        over = {"PartitionKey": "p", "RowKey": "big", **{f"S{i}": "x" * 32 * 1024 for i in range(16)}}
        with pytest.raises(TableTransactionError) as in_batch:
            table.submit_transaction([("create", {"PartitionKey": "p", "RowKey": "a"}), ("create", over)])
        assert (in_batch.value.status_code, in_batch.value.index) == (400, 1)
        assert _code(in_batch.value) == "EntityTooLarge"
        assert list(table.list_entities()) == []
    finally:
        clients.tables.delete_table(name)
        clients.close()


def test_in_memory_a_merge_is_judged_on_the_row_it_makes() -> None:
    """As Azure judges it; the guard sees only the request, so on Azurite such a merge is stored."""
    clients = MemoryStorage().clients()
    table = clients.tables.create_table("Merged")
    half = MAX_CUSTOM_PROPERTIES // 2
    table.create_entity({"PartitionKey": "p", "RowKey": "r", **{f"A{i}": i for i in range(half)}})
    with pytest.raises(HttpResponseError) as refused:
        table.upsert_entity({"PartitionKey": "p", "RowKey": "r", **{f"B{i}": i for i in range(half + 1)}})
    assert (refused.value.status_code, _code(refused.value)) == (400, "TooManyProperties")
    assert len(table.get_entity("p", "r")) == 2 + half  # the keys and the first write only
    clients.close()
