"""The storage contract: one suite, run against Azurite and against the in-memory store.

The domain tier runs the domain's logic on :class:`tests.support.memory_storage.MemoryStorage`
instead of Azurite. That is only sound while the two answer alike on everything the domain relies
on, so every case here runs twice, through the product's own adapters
(:mod:`shared.platform.storage.conditional`, :mod:`shared.platform.storage.paging`, the SDK
calls the stores make) and must pass on both:

- :class:`TestAzuriteStore`: the session's Azurite (the real protocol, as in every other test);
- :class:`TestMemoryStore`: the in-memory store (the ``domain`` tier: no Azurite, no host).

What is pinned: a taken key is :class:`AlreadyExists`; a moved ETag or a row deleted since it was
read is :class:`ConcurrencyConflict`, and racing read-modify-writes under
:func:`shared.platform.storage.optimistic.on_conflict` lose no update; merge, replace and upsert
keep or drop properties as the service does; a batch is all or nothing, names the failing change's
index, holds at most 100 changes, one per row, in one partition, in at most 4 MiB, and answers each
change's new ETag; queries come back in key order, one page at a time with a continuation that
resumes where the page ended; the filters the stores write (key ranges, typed comparisons, ``not``,
``or``, a missing property never matching); the key characters and lengths the service refuses;
the property sizes it refuses; the types a row keeps; every write's new ETag and ``Timestamp``. Queues:
a message sent is peeked, received (then invisible) and deleted. Blobs: a name written once with
``overwrite=False`` keeps its first bytes; an overwrite on a moved ETag is refused; listing by prefix
in name order; empty and larger blobs read back whole.

Limits Azurite does not enforce (more than 252 custom properties, more than 1 MiB per entity by the
service's size formula) are pinned too: on Azurite the product's own clients refuse them before
sending (:mod:`shared.platform.storage.entity_guard`, the transport every table write goes through),
the in-memory store refuses them as Azure does, and both answer as Azure answers (400,
``TooManyProperties`` / ``EntityTooLarge``; in a batch, the failing change's index).
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from azure.core import MatchConditions
from azure.core.exceptions import (
    HttpResponseError,
    ResourceExistsError,
    ResourceModifiedError,
    ResourceNotFoundError,
)
from azure.data.tables import (
    EdmType,
    EntityProperty,
    RequestTooLargeError,
    TableClient,
    TableServiceClient,
    TableTransactionError,
    UpdateMode,
)

from shared.platform.errors import AlreadyExists, ConcurrencyConflict
from shared.platform.storage.clients import StorageClients, clients_from_connection_string
from shared.platform.storage.conditional import (
    delete_if_unchanged,
    insert_if_absent,
    query_rows,
    read_row,
    replace_if_unchanged,
    submit_batch,
)
from shared.platform.storage.limits import MAX_CUSTOM_PROPERTIES, MAX_ENTITY_BYTES
from shared.platform.storage.optimistic import on_conflict
from shared.platform.storage.paging import PageSeal, after, read_page
from tests.support.memory_storage import MemoryStorage

STALE = "W/\"datetime'2020-01-01T00%3A00%3A00.0000000Z'\""
TOO_MANY, TOO_LARGE = "TooManyProperties", "EntityTooLarge"
SEAL = PageSeal(b"contract-suite-seal-key-32-bytes")


def _code(error: HttpResponseError) -> str:
    """The service's error code as the SDK decoded it (a ``TableErrorCode`` or the bare string)."""
    code = getattr(error, "error_code", None)
    return str(getattr(code, "value", code))


def _assert_refused(write: Callable[[], object], code: str) -> None:
    with pytest.raises(HttpResponseError) as refused:
        write()
    assert (refused.value.status_code, _code(refused.value)) == (400, code)


def _entity_of_size(row_key: str, size: int) -> dict[str, Any]:
    """An entity of exactly ``size`` bytes by the service's formula: full 64 KiB strings, then a binary tail.

    Each property costs 8 bytes, twice its name's length, and its value (a string: 4 + twice its
    length; a binary: 4 + its length); the entity 4 bytes and twice its keys' length.
    """
    entity: dict[str, Any] = {"PartitionKey": "p", "RowKey": row_key}
    left = size - 4 - 2 * (len("p") + len(row_key))
    full_string = 8 + 2 * len("S00") + 4 + 2 * 32 * 1024
    index = 0
    while left - full_string > 8 + 2 * len("Tail") + 4:
        entity[f"S{index:02d}"] = "x" * 32 * 1024
        left -= full_string
        index += 1
    entity["Tail"] = b"\x02" * (left - 8 - 2 * len("Tail") - 4)
    assert len(entity["Tail"]) <= 64 * 1024
    return entity


def _timestamp(table: TableClient, partition: str, row: str) -> datetime:
    stamp = table.get_entity(partition, row).metadata["timestamp"]
    assert isinstance(stamp, datetime)
    return stamp


class TableContract:
    """The cases. A subclass provides ``clients``: the product's storage clients on one store."""

    @pytest.fixture
    def clients(self) -> Iterator[StorageClients]:
        raise NotImplementedError

    @pytest.fixture
    def tables(self, clients: StorageClients) -> TableServiceClient:
        return clients.tables

    @pytest.fixture
    def table(self, tables: TableServiceClient) -> Iterator[TableClient]:
        name = f"Contract{uuid.uuid4().hex[:16]}"
        client = tables.create_table(name)
        yield client
        tables.delete_table(name)

    # -- single rows -------------------------------------------------------------------------------

    def test_an_insert_of_a_taken_key_is_already_exists_and_leaves_the_row(self, table: TableClient) -> None:
        etag = insert_if_absent(table, {"PartitionKey": "p", "RowKey": "r", "Owner": "first"})
        with pytest.raises(AlreadyExists):
            insert_if_absent(table, {"PartitionKey": "p", "RowKey": "r", "Owner": "second"})
        row = read_row(table, "p", "r")
        assert row is not None
        assert (row["Owner"], row["etag"]) == ("first", etag)

    def test_a_replace_on_a_moved_etag_or_a_deleted_row_is_a_conflict(self, table: TableClient) -> None:
        first = insert_if_absent(table, {"PartitionKey": "p", "RowKey": "r", "N": 1})
        second = replace_if_unchanged(table, {"PartitionKey": "p", "RowKey": "r", "N": 2}, first)
        assert second != first
        with pytest.raises(ConcurrencyConflict):
            replace_if_unchanged(table, {"PartitionKey": "p", "RowKey": "r", "N": 3}, first)
        with pytest.raises(ConcurrencyConflict):
            replace_if_unchanged(table, {"PartitionKey": "p", "RowKey": "r", "N": 3}, STALE)
        assert read_row(table, "p", "r") == {"PartitionKey": "p", "RowKey": "r", "N": 2, "etag": second}
        delete_if_unchanged(table, "p", "r", second)
        with pytest.raises(ConcurrencyConflict):
            replace_if_unchanged(table, {"PartitionKey": "p", "RowKey": "r", "N": 4}, second)
        assert read_row(table, "p", "r") is None

    def test_a_conditional_delete_refuses_a_moved_etag_and_accepts_a_row_gone_already(self, table: TableClient) -> None:
        first = insert_if_absent(table, {"PartitionKey": "p", "RowKey": "r"})
        second = replace_if_unchanged(table, {"PartitionKey": "p", "RowKey": "r", "N": 1}, first)
        with pytest.raises(ConcurrencyConflict):
            delete_if_unchanged(table, "p", "r", first)
        assert read_row(table, "p", "r") is not None
        delete_if_unchanged(table, "p", "r", second)
        assert read_row(table, "p", "r") is None
        delete_if_unchanged(table, "p", "r", second)  # gone already is fine
        table.delete_entity("p", "never-there")  # an unconditional delete of a missing row too

    def test_merge_keeps_properties_replace_drops_them_and_a_merge_needs_the_row(self, table: TableClient) -> None:
        table.upsert_entity({"PartitionKey": "p", "RowKey": "r", "A": 1, "B": "b"})  # merge, the SDK's default
        table.upsert_entity({"PartitionKey": "p", "RowKey": "r", "C": True})
        assert dict(table.get_entity("p", "r")) == {"PartitionKey": "p", "RowKey": "r", "A": 1, "B": "b", "C": True}
        table.upsert_entity({"PartitionKey": "p", "RowKey": "r", "D": 2.5}, mode=UpdateMode.REPLACE)
        assert dict(table.get_entity("p", "r")) == {"PartitionKey": "p", "RowKey": "r", "D": 2.5}
        table.update_entity({"PartitionKey": "p", "RowKey": "r", "E": "e"}, mode=UpdateMode.MERGE)
        assert dict(table.get_entity("p", "r"))["E"] == "e"
        with pytest.raises(ResourceNotFoundError):
            table.update_entity({"PartitionKey": "p", "RowKey": "missing", "E": "e"}, mode=UpdateMode.MERGE)
        etag = table.get_entity("p", "r").metadata["etag"]
        table.update_entity(
            {"PartitionKey": "p", "RowKey": "r"}, etag=etag, match_condition=MatchConditions.IfNotModified
        )
        with pytest.raises(HttpResponseError) as moved:
            table.update_entity(
                {"PartitionKey": "p", "RowKey": "r"}, etag=etag, match_condition=MatchConditions.IfNotModified
            )
        assert moved.value.status_code == 412

    def test_every_write_answers_a_new_etag_and_a_later_timestamp(self, table: TableClient) -> None:
        etags = [insert_if_absent(table, {"PartitionKey": "p", "RowKey": "r", "N": 0})]
        stamps = [_timestamp(table, "p", "r")]
        for n in range(1, 4):
            etags.append(replace_if_unchanged(table, {"PartitionKey": "p", "RowKey": "r", "N": n}, etags[-1]))
            entity = table.get_entity("p", "r")
            assert entity.metadata["etag"] == etags[-1]
            stamps.append(_timestamp(table, "p", "r"))
        assert len(set(etags)) == len(etags)
        assert stamps == sorted(stamps) and len(set(stamps)) == len(stamps)
        assert all(stamp.tzinfo is not None and stamp.utcoffset() == timedelta(0) for stamp in stamps)

    def test_timestamp_is_filterable_as_a_datetime(self, table: TableClient) -> None:
        insert_if_absent(table, {"PartitionKey": "p", "RowKey": "r"})
        written = _timestamp(table, "p", "r")
        since = written - timedelta(seconds=1)
        assert [row["RowKey"] for row in query_rows(table, "Timestamp ge @since", since=since)] == ["r"]
        assert query_rows(table, "Timestamp gt @later", later=written + timedelta(seconds=1)) == []

    def test_racing_read_modify_writes_under_on_conflict_lose_no_update(self, table: TableClient) -> None:
        insert_if_absent(table, {"PartitionKey": "p", "RowKey": "counter", "N": 0})

        @on_conflict(attempts=200, max_wait_seconds=0.02)
        def increment() -> None:
            row = read_row(table, "p", "counter")
            assert row is not None
            replace_if_unchanged(table, {"PartitionKey": "p", "RowKey": "counter", "N": row["N"] + 1}, row["etag"])

        def worker() -> None:
            for _ in range(5):
                increment()

        threads = [threading.Thread(target=worker) for _ in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        row = read_row(table, "p", "counter")
        assert row is not None and row["N"] == 30

    def test_a_row_keeps_its_types(self, table: TableClient) -> None:
        at = datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)
        guid = uuid.UUID("12345678-1234-5678-1234-567812345678")
        insert_if_absent(
            table,
            {
                "PartitionKey": "p",
                "RowKey": "r",
                "Text": "zwölf ✓ 'quoted'",
                "Empty": "",
                "N": -7,
                "Big": EntityProperty(2**40, EdmType.INT64),
                "Ratio": 1.5,
                "Whole": 2.0,
                "Flag": False,
                "At": at,
                "Blob": b"\x00\x01\xff",
                "Id": guid,
                "Nothing": None,
            },
        )
        found = table.get_entity("p", "r")
        assert {k: v for k, v in found.items() if k not in ("Big", "At", "Id")} == {
            "PartitionKey": "p",
            "RowKey": "r",
            "Text": "zwölf ✓ 'quoted'",
            "Empty": "",
            "N": -7,
            "Ratio": 1.5,
            "Whole": 2.0,
            "Flag": False,
            "Blob": b"\x00\x01\xff",
        }
        assert found["Big"] == EntityProperty(2**40, EdmType.INT64)
        assert found["At"] == at and found["At"].tzinfo is not None
        assert str(found["Id"]) == str(guid)
        assert isinstance(found["Whole"], float)

    def test_a_missing_table_is_not_found_and_a_second_create_exists(self, tables: TableServiceClient) -> None:
        name = f"Missing{uuid.uuid4().hex[:12]}"
        with pytest.raises(ResourceNotFoundError):
            tables.get_table_client(name).get_entity("p", "r")
        tables.create_table(name)
        try:
            with pytest.raises(ResourceExistsError):
                tables.create_table(name)
            tables.create_table_if_not_exists(name)
        finally:
            tables.delete_table(name)

    # -- keys and limits ---------------------------------------------------------------------------

    @pytest.mark.parametrize("key", ["it's", "a b", "100%", "a+b", "é|ü", "tenant|env|~", "x" * 512, ""])
    def test_keys_the_service_takes_work_in_every_operation(self, table: TableClient, key: str) -> None:
        etag = insert_if_absent(table, {"PartitionKey": key, "RowKey": key, "N": 1})
        etag = replace_if_unchanged(table, {"PartitionKey": key, "RowKey": key, "N": 2}, etag)
        [result] = submit_batch(table, [("update", {"PartitionKey": key, "RowKey": key, "N": 3}, {"mode": "merge"})])
        assert query_rows(table, "PartitionKey eq @k and RowKey eq @k", k=key)[0]["N"] == 3
        delete_if_unchanged(table, key, key, result["etag"])
        assert read_row(table, key, key) is None
        assert etag

    @pytest.mark.parametrize("key", ["a/b", "a\\b", "a#b", "a?b", "a\tb", "a\x01b", "a\x7fb", "a\x85b", "x" * 513])
    def test_keys_the_service_refuses_are_a_bad_request(self, table: TableClient, key: str) -> None:
        for entity in ({"PartitionKey": key, "RowKey": "r"}, {"PartitionKey": "p", "RowKey": key}):
            with pytest.raises(HttpResponseError) as refused:
                insert_if_absent(table, entity)
            assert refused.value.status_code == 400
        with pytest.raises(TableTransactionError) as in_batch:
            submit_batch(
                table,
                [("create", {"PartitionKey": "p", "RowKey": "ok"}), ("create", {"PartitionKey": "p", "RowKey": key})],
            )
        assert (in_batch.value.status_code, in_batch.value.index) == (400, 1)
        assert query_rows(table, "PartitionKey eq 'p'") == []

    def test_a_string_holds_32_ki_utf16_units_and_a_binary_64_kib(self, table: TableClient) -> None:
        insert_if_absent(table, {"PartitionKey": "p", "RowKey": "s", "S": "x" * 32 * 1024})
        insert_if_absent(table, {"PartitionKey": "p", "RowKey": "e", "S": "😀" * 16 * 1024})  # two units each
        insert_if_absent(table, {"PartitionKey": "p", "RowKey": "b", "B": b"\x01" * 64 * 1024})
        for name, value in (
            ("S", "x" * (32 * 1024 + 1)),
            ("S", "😀" * (16 * 1024 + 1)),
            ("B", b"\x01" * (64 * 1024 + 1)),
        ):
            with pytest.raises(HttpResponseError) as refused:
                insert_if_absent(table, {"PartitionKey": "p", "RowKey": "too-large", name: value})
            assert refused.value.status_code == 400
            assert str(getattr(refused.value, "error_code", None)) in (
                "PropertyValueTooLarge",
                "TableErrorCode.PROPERTY_VALUE_TOO_LARGE",
            )
        assert read_row(table, "p", "too-large") is None

    def test_an_entity_holds_252_properties_and_no_more(self, table: TableClient) -> None:
        most = {f"P{i:03d}": i for i in range(MAX_CUSTOM_PROPERTIES)}
        insert_if_absent(table, {"PartitionKey": "p", "RowKey": "most", **most})
        row = read_row(table, "p", "most")
        assert row is not None and row["P251"] == 251
        too_many = {**most, "P252": 252}
        _assert_refused(lambda: insert_if_absent(table, {"PartitionKey": "p", "RowKey": "r", **too_many}), TOO_MANY)
        _assert_refused(lambda: table.upsert_entity({"PartitionKey": "p", "RowKey": "r", **too_many}), TOO_MANY)
        _assert_refused(  # a replace of the stored row is held to the same count
            lambda: replace_if_unchanged(table, {"PartitionKey": "p", "RowKey": "most", **too_many}, row["etag"]),
            TOO_MANY,
        )
        with pytest.raises(TableTransactionError) as in_batch:
            submit_batch(
                table,
                [
                    ("create", {"PartitionKey": "p", "RowKey": "ok"}),
                    ("upsert", {"PartitionKey": "p", "RowKey": "r", **too_many}),
                ],
            )
        assert (in_batch.value.status_code, in_batch.value.index, _code(in_batch.value)) == (400, 1, TOO_MANY)
        assert [r["RowKey"] for r in query_rows(table, "PartitionKey eq 'p'")] == ["most"]

    def test_an_entity_holds_1_mib_as_the_service_counts_it(self, table: TableClient) -> None:
        largest = _entity_of_size("largest", MAX_ENTITY_BYTES)
        insert_if_absent(table, largest)
        stored = read_row(table, "p", "largest")
        assert stored is not None and stored["Tail"] == largest["Tail"]
        over = _entity_of_size("over", MAX_ENTITY_BYTES + 1)
        _assert_refused(lambda: insert_if_absent(table, over), TOO_LARGE)
        _assert_refused(lambda: table.upsert_entity(over, mode=UpdateMode.REPLACE), TOO_LARGE)
        with pytest.raises(HttpResponseError) as refused:  # create_entity raises the SDK's undecoded error
            table.create_entity(over)
        assert refused.value.status_code == 400 and TOO_LARGE in str(refused.value)
        with pytest.raises(TableTransactionError) as in_batch:
            submit_batch(table, [("upsert", over), ("create", {"PartitionKey": "p", "RowKey": "ok"})])
        assert (in_batch.value.status_code, in_batch.value.index, _code(in_batch.value)) == (400, 0, TOO_LARGE)
        assert [r["RowKey"] for r in query_rows(table, "PartitionKey eq 'p'", select=["RowKey"])] == ["largest"]

    # -- batches -----------------------------------------------------------------------------------

    def test_a_batch_merges_or_replaces_as_each_change_says(self, table: TableClient) -> None:
        for key in ("merged", "replaced", "upserted"):
            insert_if_absent(table, {"PartitionKey": "p", "RowKey": key, "Kept": 1, "N": 1})
        submit_batch(
            table,
            [
                ("update", {"PartitionKey": "p", "RowKey": "merged", "N": 2}, {"mode": "merge"}),
                ("update", {"PartitionKey": "p", "RowKey": "replaced", "N": 2}, {"mode": "replace"}),
                ("upsert", {"PartitionKey": "p", "RowKey": "upserted", "N": 2}, {"mode": "replace"}),
                ("upsert", {"PartitionKey": "p", "RowKey": "new", "N": 2}, {"mode": "merge"}),
            ],
        )
        stored = {
            row["RowKey"]: {k: v for k, v in row.items() if k in ("Kept", "N")}
            for row in query_rows(table, "PartitionKey eq 'p'")
        }
        assert stored == {
            "merged": {"Kept": 1, "N": 2},
            "replaced": {"N": 2},
            "upserted": {"N": 2},
            "new": {"N": 2},
        }

    def test_a_batch_answers_each_changes_etag_in_order(self, table: TableClient) -> None:
        old = insert_if_absent(table, {"PartitionKey": "p", "RowKey": "a", "N": 1})
        insert_if_absent(table, {"PartitionKey": "p", "RowKey": "gone"})
        results = submit_batch(
            table,
            [
                ("create", {"PartitionKey": "p", "RowKey": "b"}),
                (
                    "update",
                    {"PartitionKey": "p", "RowKey": "a", "N": 2},
                    {"etag": old, "match_condition": MatchConditions.IfNotModified},
                ),
                ("upsert", {"PartitionKey": "p", "RowKey": "c"}, {"mode": "replace"}),
                ("delete", {"PartitionKey": "p", "RowKey": "gone"}),
            ],
        )
        assert [set(result) for result in results] == [{"etag"}, {"etag"}, {"etag"}, set()]
        stored = {row["RowKey"]: row for row in query_rows(table, "PartitionKey eq 'p'")}
        assert sorted(stored) == ["a", "b", "c"]
        assert [stored[key]["etag"] for key in "abc"] == [results[1]["etag"], results[0]["etag"], results[2]["etag"]]
        assert stored["a"]["N"] == 2

    @pytest.mark.parametrize(
        ("failing", "error"),
        [
            (("create", {"PartitionKey": "p", "RowKey": "taken"}), AlreadyExists),
            (
                (
                    "update",
                    {"PartitionKey": "p", "RowKey": "taken"},
                    {"etag": STALE, "match_condition": MatchConditions.IfNotModified},
                ),
                ConcurrencyConflict,
            ),
            (
                (
                    "delete",
                    {"PartitionKey": "p", "RowKey": "missing"},
                    {"etag": STALE, "match_condition": MatchConditions.IfNotModified},
                ),
                ConcurrencyConflict,
            ),
            (("update", {"PartitionKey": "p", "RowKey": "missing"}, {"mode": "merge"}), ConcurrencyConflict),
        ],
        ids=["taken-key", "moved-etag", "delete-missing", "merge-missing"],
    )
    def test_a_batch_is_all_or_nothing_and_names_the_failing_change(
        self, table: TableClient, failing: tuple[Any, ...], error: type[Exception]
    ) -> None:
        etag = insert_if_absent(table, {"PartitionKey": "p", "RowKey": "taken", "N": 1})
        batch = [
            ("create", {"PartitionKey": "p", "RowKey": "new"}),
            ("update", {"PartitionKey": "p", "RowKey": "taken", "N": 2}, {"mode": "merge"}),
        ]
        if failing[1]["RowKey"] == "taken":
            batch = batch[:1]  # one change per row
        with pytest.raises(error) as failed:
            submit_batch(table, [*batch, failing])
        cause = failed.value.__cause__
        assert isinstance(cause, TableTransactionError) and cause.index == len(batch)
        assert read_row(table, "p", "new") is None
        assert read_row(table, "p", "taken") == {"PartitionKey": "p", "RowKey": "taken", "N": 1, "etag": etag}

    def test_a_batch_holds_100_changes(self, table: TableClient) -> None:
        assert (
            len(submit_batch(table, [("create", {"PartitionKey": "p", "RowKey": f"{n:03d}"}) for n in range(100)]))
            == 100
        )
        with pytest.raises(TableTransactionError) as refused:
            submit_batch(table, [("create", {"PartitionKey": "q", "RowKey": f"{n:03d}"}) for n in range(101)])
        assert refused.value.status_code == 400
        assert query_rows(table, "PartitionKey eq 'q'") == []

    def test_a_batch_holds_one_change_per_row_in_one_partition(self, table: TableClient) -> None:
        with pytest.raises(TableTransactionError) as duplicate:
            submit_batch(
                table,
                [("create", {"PartitionKey": "p", "RowKey": "r"}), ("upsert", {"PartitionKey": "p", "RowKey": "r"})],
            )
        assert (duplicate.value.status_code, duplicate.value.index) == (400, 1)
        with pytest.raises(ValueError, match="Partition Keys"):  # refused by the SDK before it is sent
            submit_batch(
                table,
                [("create", {"PartitionKey": "p", "RowKey": "r"}), ("create", {"PartitionKey": "q", "RowKey": "r"})],
            )
        assert query_rows(table, "RowKey eq 'r'") == []

    def test_a_batch_over_4_mib_is_refused_whole(self, table: TableClient) -> None:
        wide = {f"Text{k}": "x" * 30_000 for k in range(4)}
        with pytest.raises(RequestTooLargeError):
            submit_batch(table, [("create", {"PartitionKey": "p", "RowKey": f"{n:02d}", **wide}) for n in range(40)])
        assert query_rows(table, "PartitionKey eq 'p'") == []
        assert (
            len(
                submit_batch(table, [("create", {"PartitionKey": "p", "RowKey": f"{n:02d}", **wide}) for n in range(8)])
            )
            == 8
        )

    # -- queries -----------------------------------------------------------------------------------

    def test_a_query_answers_in_partition_then_row_key_order(self, table: TableClient) -> None:
        keys = [("b", "2"), ("a", "z"), ("b", "10"), ("a", "B"), ("a", "a"), ("é", "x"), ("A", "~"), ("a", "a|b")]
        for pk, rk in keys:
            table.upsert_entity({"PartitionKey": pk, "RowKey": rk})
        found = [(row["PartitionKey"], row["RowKey"]) for row in table.list_entities()]
        assert found == sorted(keys)

    def test_pages_resume_where_the_last_one_ended(self, table: TableClient) -> None:
        for n in range(7):
            table.upsert_entity({"PartitionKey": "p" if n < 5 else "q", "RowKey": f"{n:02d}", "N": n})
        pages = table.query_entities("N ge @low", parameters={"low": 1}, results_per_page=2).by_page()
        seen = [[row["N"] for row in page] for page in pages]
        assert seen == [[1, 2], [3, 4], [5, 6]]

        first = read_page(table, "N ge @low", {"low": 1}, scope="s", seal=SEAL, limit=3, continuation=None)
        assert [row["N"] for row in first.rows] == [1, 2, 3] and first.continuation
        table.delete_entity("p", "01")  # rows before the continuation come and go: the next page does not move
        table.upsert_entity({"PartitionKey": "p", "RowKey": "00a", "N": 9})
        second = read_page(
            table, "N ge @low", {"low": 1}, scope="s", seal=SEAL, limit=3, continuation=first.continuation
        )
        assert [row["N"] for row in second.rows] == [4, 5, 6]
        assert (
            second.continuation is None
            or read_page(
                table, "N ge @low", {"low": 1}, scope="s", seal=SEAL, limit=3, continuation=second.continuation
            ).rows
            == []
        )

    def test_a_query_answers_at_most_1000_rows_a_page(self, table: TableClient) -> None:
        for start in range(0, 1001, 100):
            submit_batch(
                table,
                [("create", {"PartitionKey": "p", "RowKey": f"{n:04d}"}) for n in range(start, min(start + 100, 1001))],
            )
        pages = table.query_entities("PartitionKey eq 'p'", select=["RowKey"]).by_page()
        assert [len(list(page)) for page in pages] == [1000, 1]

    def test_the_filters_the_stores_write(self, table: TableClient) -> None:
        at = datetime(2026, 3, 1, tzinfo=UTC)
        rows: list[dict[str, Any]] = [
            {"PartitionKey": "t", "RowKey": "run|a", "State": "open", "N": 1, "Flag": True, "At": at},
            {
                "PartitionKey": "t",
                "RowKey": "run|b",
                "State": "closed",
                "N": 5,
                "Flag": False,
                "At": at + timedelta(days=1),
            },
            {"PartitionKey": "t", "RowKey": "run}", "State": "open", "N": 9},
            {"PartitionKey": "t", "RowKey": "rule|x", "Big": EntityProperty(2**40, EdmType.INT64)},
            {"PartitionKey": "u", "RowKey": "run|c", "State": "it's", "N": 3},
        ]
        for row in rows:
            table.upsert_entity(row)

        def keys(query: str, **parameters: Any) -> list[str]:
            return [f"{row['PartitionKey']}/{row['RowKey']}" for row in query_rows(table, query, **parameters)]

        prefix = "run|"
        assert keys("RowKey ge @start and RowKey lt @end", start=prefix, end=after(prefix)) == [
            "t/run|a",
            "t/run|b",
            "u/run|c",
        ]
        assert keys("PartitionKey eq @p and State eq @s", p="t", s="open") == ["t/run|a", "t/run}"]
        assert keys("State ne 'open'") == ["t/run|b", "u/run|c"]  # no State: matches neither eq nor ne
        assert keys("State eq @s", s="it's") == ["u/run|c"]
        assert keys("N gt @n and N le 5", n=1) == ["t/run|b", "u/run|c"]
        assert keys("Big ge @big", big=2**40) == ["t/rule|x"]
        assert keys("Flag eq @f", f=True) == ["t/run|a"]
        assert keys("At lt @at", at=at + timedelta(hours=1)) == ["t/run|a"]
        assert keys("not (PartitionKey eq 't') or (N eq 9)") == ["t/run}", "u/run|c"]
        selected = query_rows(table, "PartitionKey eq 'u'", select=["State"])
        assert [{k: v for k, v in row.items() if k != "etag"} for row in selected] == [{"State": "it's"}]
        assert selected[0]["etag"]
        keys_only = query_rows(table, "PartitionKey eq 't'", select=["PartitionKey", "RowKey"])
        assert [sorted(k for k in row if k != "etag") for row in keys_only] == [["PartitionKey", "RowKey"]] * 4

    # -- queues (the outbox publishes through them) ------------------------------------------------

    def test_a_queue_message_is_peeked_received_and_deleted(self, clients: StorageClients) -> None:
        queue = clients.queue(f"contract-{uuid.uuid4().hex[:12]}")
        queue.create_queue()
        try:
            queue.send_message('{"event": "one"}')
            queue.send_message('{"event": "two"}')
            assert [m.content for m in queue.peek_messages(max_messages=5)] == ['{"event": "one"}', '{"event": "two"}']
            received = list(queue.receive_messages(max_messages=5, visibility_timeout=30))
            assert [m.content for m in received] == ['{"event": "one"}', '{"event": "two"}']
            assert list(queue.peek_messages(max_messages=5)) == []  # invisible while received
            for message in received:
                queue.delete_message(message)
        finally:
            queue.delete_queue()

    # -- blobs (specifications and observations are kept as blobs) ---------------------------------

    def test_a_content_addressed_blob_is_written_once_and_read_back_whole(self, clients: StorageClients) -> None:
        container = clients.blobs.create_container(f"contract-{uuid.uuid4().hex[:12]}")
        try:
            with pytest.raises(ResourceExistsError):
                clients.blobs.create_container(container.container_name)
            container.upload_blob("t/e/digest.json", b'{"first": true}', overwrite=False)
            with pytest.raises(ResourceExistsError):  # the name is taken: the first bytes stay
                container.upload_blob("t/e/digest.json", b'{"second": true}', overwrite=False)
            assert container.download_blob("t/e/digest.json").readall() == b'{"first": true}'
            container.upload_blob("t/e/empty", b"", overwrite=True)
            assert container.download_blob("t/e/empty").readall() == b""
            large = bytes(range(256)) * 4096  # 1 MiB
            container.upload_blob("t/e/large", large)
            assert container.download_blob("t/e/large").readall() == large
            with pytest.raises(ResourceNotFoundError):
                container.download_blob("t/e/missing").readall()
        finally:
            container.delete_container()

    def test_a_blob_overwrite_on_a_moved_etag_is_refused(self, clients: StorageClients) -> None:
        container = clients.blobs.create_container(f"contract-{uuid.uuid4().hex[:12]}")
        try:
            blob = container.get_blob_client("observation.json")
            first = blob.upload_blob(b"one")["etag"]
            assert blob.get_blob_properties().etag == first
            second = blob.upload_blob(b"two", overwrite=True, etag=first, match_condition=MatchConditions.IfNotModified)
            assert second["etag"] != first
            with pytest.raises(ResourceModifiedError):
                blob.upload_blob(b"three", overwrite=True, etag=first, match_condition=MatchConditions.IfNotModified)
            assert blob.download_blob().readall() == b"two"
        finally:
            container.delete_container()

    def test_blobs_are_listed_by_prefix_in_name_order_and_deleted(self, clients: StorageClients) -> None:
        container = clients.blobs.create_container(f"contract-{uuid.uuid4().hex[:12]}")
        try:
            for name in ("t/b/2.json", "t/a/1.json", "t/b/1.json", "u/a/1.json"):
                container.upload_blob(name, name.encode())
            assert [b.name for b in container.list_blobs(name_starts_with="t/")] == [
                "t/a/1.json",
                "t/b/1.json",
                "t/b/2.json",
            ]
            listed = {b.name: b for b in container.list_blobs()}
            assert listed["u/a/1.json"].size == len(b"u/a/1.json")
            container.delete_blob("t/b/1.json")
            assert not container.get_blob_client("t/b/1.json").exists()
            with pytest.raises(ResourceNotFoundError):
                container.delete_blob("t/b/1.json")
            assert [b.name for b in container.list_blobs(name_starts_with="t/b/")] == ["t/b/2.json"]
        finally:
            container.delete_container()


class TestAzuriteStore(TableContract):
    """The suite on the session's Azurite."""

    @pytest.fixture
    def clients(self, azurite: Any) -> Iterator[StorageClients]:
        clients = clients_from_connection_string(azurite.connection_string())
        yield clients
        clients.close()


class TestMemoryStore(TableContract):
    """The suite on the in-memory store: part of the domain tier."""

    @pytest.fixture
    def clients(self) -> Iterator[StorageClients]:
        clients = MemoryStorage().clients()
        yield clients
        clients.close()
