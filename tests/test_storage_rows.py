"""The lean single-row writes (shared.platform.storage.rows) store and raise exactly what the SDK's methods do.

Both ways write to Azurite on twin rows: the stored rows (every type the lease
path writes and a few more), the ETag each answers, and the error each raises
(type and status) for a taken key, a moved ETag, a deleted row and a missing
row must be the same.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import pytest
from azure.core import MatchConditions
from azure.core.exceptions import HttpResponseError
from azure.data.tables import TableClient, UpdateMode

from shared.platform.errors import AlreadyExists, ConcurrencyConflict
from shared.platform.storage.clients import clients_from_connection_string
from shared.platform.storage.conditional import insert_if_absent, replace_if_unchanged
from shared.platform.storage.rows import insert_row, merge_row, replace_row

STALE = "W/\"datetime'2020-01-01T00%3A00%3A00.0000000Z'\""


@pytest.fixture(scope="module")
def table(azurite: Any) -> TableClient:
    return clients_from_connection_string(azurite.connection_string()).tables.create_table_if_not_exists("RowTwins")


def _entity(partition: str, row: str = "r") -> dict[str, Any]:
    return {
        "PartitionKey": partition,
        "RowKey": row,
        "Text": "zwölf ✓ 'quoted'",
        "N": 7,
        "Ratio": 1.5,
        "Flag": True,
        "At": datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC),
        "Blob": b"\x00\x01",
        "Empty": "",
    }


def _stored(table: TableClient, entity: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """The stored row (without its partition key, which differs between the twins) and its ETag."""
    found = table.get_entity(entity["PartitionKey"], entity["RowKey"])
    return {k: v for k, v in found.items() if k != "PartitionKey"}, found.metadata["etag"]


def _pair() -> tuple[str, str]:
    base = uuid.uuid4().hex[:10]
    return f"sdk-{base}'x", f"lean-{base}'x"  # a quote in the key: quoted as the SDK quotes it


def test_insert_replace_and_merge_store_what_the_sdk_stores_and_answer_the_stored_etag(table):
    sdk, lean = _pair()
    sdk_etag = table.create_entity(_entity(sdk))["etag"]
    lean_etag = insert_row(table, _entity(lean))
    assert _stored(table, _entity(lean)) == (_stored(table, _entity(sdk))[0], lean_etag)
    assert sdk_etag

    changed = {"N": 8, "Text": "replaced"}
    table.update_entity(
        {**_entity(sdk), **changed},
        mode=UpdateMode.REPLACE,
        etag=sdk_etag,
        match_condition=MatchConditions.IfNotModified,
    )
    lean_etag = replace_row(table, {**_entity(lean), **changed}, lean_etag)
    assert _stored(table, _entity(lean))[1] == lean_etag
    assert _stored(table, _entity(lean))[0] == _stored(table, _entity(sdk))[0]

    table.update_entity({"PartitionKey": sdk, "RowKey": "r", "Extra": 1}, mode=UpdateMode.MERGE)
    lean_etag = merge_row(table, {"PartitionKey": lean, "RowKey": "r", "Extra": 1})
    assert _stored(table, _entity(lean))[1] == lean_etag
    assert _stored(table, _entity(lean))[0] == _stored(table, _entity(sdk))[0]
    assert _stored(table, _entity(lean))[0]["Extra"] == 1


def _raised(call: Any) -> tuple[type, int | None]:
    with pytest.raises(HttpResponseError) as caught:
        call()
    return type(caught.value), caught.value.status_code


def test_each_refusal_is_the_sdks_own_error_with_its_status(table):
    sdk, lean = _pair()
    sdk_etag = table.create_entity(_entity(sdk))["etag"]
    lean_etag = insert_row(table, _entity(lean))
    taken = (_raised(lambda: table.create_entity(_entity(sdk))), _raised(lambda: insert_row(table, _entity(lean))))
    assert taken[0] == taken[1] and taken[1][1] == 409

    def sdk_replace(etag: str) -> Any:
        return table.update_entity(
            _entity(sdk), mode=UpdateMode.REPLACE, etag=etag, match_condition=MatchConditions.IfNotModified
        )

    moved = (_raised(lambda: sdk_replace(STALE)), _raised(lambda: replace_row(table, _entity(lean), STALE)))
    assert moved[0] == moved[1] and moved[1][1] == 412

    table.delete_entity(sdk, "r")
    table.delete_entity(lean, "r")
    gone = (_raised(lambda: sdk_replace(sdk_etag)), _raised(lambda: replace_row(table, _entity(lean), lean_etag)))
    assert gone[0] == gone[1] and gone[1][1] == 404
    missing = (
        _raised(lambda: table.update_entity({"PartitionKey": sdk, "RowKey": "r", "X": 1}, mode=UpdateMode.MERGE)),
        _raised(lambda: merge_row(table, {"PartitionKey": lean, "RowKey": "r", "X": 1})),
    )
    assert missing[0] == missing[1] and missing[1][1] == 404


def test_the_conditional_helpers_keep_their_domain_meaning_on_the_lean_writes(table):
    _, lean = _pair()
    etag = insert_if_absent(table, _entity(lean))
    with pytest.raises(AlreadyExists):
        insert_if_absent(table, _entity(lean))
    newer = replace_if_unchanged(table, _entity(lean), etag)
    with pytest.raises(ConcurrencyConflict):
        replace_if_unchanged(table, _entity(lean), etag)  # the ETag moved on
    table.delete_entity(lean, "r")
    with pytest.raises(ConcurrencyConflict):
        replace_if_unchanged(table, _entity(lean), newer)  # deleted since read


def test_a_value_the_table_cannot_store_is_refused_before_anything_is_sent(table):
    _, lean = _pair()
    with pytest.raises(TypeError):
        insert_row(table, {**_entity(lean), "TooBig": 2**70})
    with pytest.raises(TypeError):
        table.create_entity({**_entity(lean), "TooBig": 2**70})
