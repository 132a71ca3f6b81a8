"""Export and restore against Azurite, on tables and containers of each test's own.

The drill (test_drill.py) runs the whole product through the local host; these
pin the export's and restore's own rules: deletes are captured, an incremental
export reads only what changed, types survive, a resumed export reuses its
finished parts, a tampered part is refused, a store with data is refused, a
failed export shows in the status health reads, and capacity rows come back
with their leases ended and their generations raised.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from azure.data.tables import EdmType, EntityProperty

from shared.backup.export import export_store
from shared.backup.location import BackupCorrupt
from shared.backup.restore import StoreNotEmpty, restore_store
from shared.backup.settings import BackupSettings
from shared.backup.status import backup_health, record_failure, record_success
from shared.capacity import epoch
from shared.capacity.keys import LEASES_TABLE, SLOTS_TABLE
from shared.platform.storage.clients import StorageClients


def wipe(store: StorageClients, tables: list[str], containers: list[str]) -> None:
    for table in tables:
        for row in list(store.tables.get_table_client(table).list_entities()):
            store.tables.get_table_client(table).delete_entity(row["PartitionKey"], row["RowKey"])
    for container in containers:
        client = store.blobs.get_container_client(container)
        for blob in list(client.list_blobs()):
            client.delete_blob(blob.name)


SETTINGS = BackupSettings(OverlapSeconds=0)


def test_a_restore_brings_back_every_type_and_leaves_deleted_rows_deleted(world):
    store, location, tables, containers = world
    rows = store.tables.get_table_client(tables[0])
    rows.create_entity(
        {
            "PartitionKey": "p",
            "RowKey": "typed",
            "Text": "x",
            "Small": 7,
            "Big": EntityProperty(2**40, EdmType.INT64),
            "Ratio": 0.25,
            "Flag": True,
            "When": datetime(2025, 1, 31, 12, tzinfo=UTC),
            "Bytes": b"\x00\xff",
        }
    )
    rows.create_entity({"PartitionKey": "p", "RowKey": "doomed", "Text": "y"})
    receipts = store.blobs.get_container_client(containers[0])
    receipts.upload_blob("t/e/run-1/apply.json", b'{"ok": true}', metadata={"digest": "abc"})
    first = export_store(store, location, SETTINGS, tables=tables, containers=containers)
    rows.delete_entity("p", "doomed")
    rows.create_entity({"PartitionKey": "p", "RowKey": "late", "Text": "z"})
    second = export_store(store, location, SETTINGS, tables=tables, containers=containers)
    wipe(store, tables, containers)

    report = restore_store(store, location, SETTINGS, tables=tables, containers=containers)

    assert (first.full, second.full, second.chain) == (True, False, [1, 2])
    back = {row["RowKey"]: row for row in rows.list_entities()}
    assert sorted(back) == ["late", "typed"]
    typed = back["typed"]
    assert typed["Big"] == EntityProperty(2**40, EdmType.INT64) and typed["Small"] == 7
    assert typed["When"] == datetime(2025, 1, 31, 12, tzinfo=UTC) and typed["Bytes"] == b"\x00\xff"
    assert (typed["Ratio"], typed["Flag"], typed["Text"]) == (0.25, True, "x")
    blob = receipts.get_blob_client("t/e/run-1/apply.json")
    assert blob.download_blob().readall() == b'{"ok": true}'
    assert blob.get_blob_properties().metadata == {"digest": "abc"}
    assert report.rows[tables[0]] == 2 and report.blobs[containers[0]] == 1


def test_an_incremental_export_reads_only_rows_changed_since_the_previous_one(world):
    store, location, tables, containers = world
    rows = store.tables.get_table_client(tables[0])
    for index in range(20):
        rows.create_entity({"PartitionKey": "p", "RowKey": f"r{index:02d}"})
    # The first export claims to start later than every write above: the next one's window begins there.
    later = datetime.now(UTC) + timedelta(minutes=10)
    export_store(store, location, SETTINGS, tables=tables, containers=containers, now=lambda: later)
    rows.upsert_entity({"PartitionKey": "p", "RowKey": "r00", "Changed": True})

    second = export_store(store, location, SETTINGS, tables=tables, containers=containers, now=lambda: later)

    assert second.tables[tables[0]].keys["lines"] == 20
    assert second.tables[tables[0]].changes["lines"] == 0  # nothing stamped after the (claimed) start


def test_an_interrupted_export_resumes_with_the_parts_it_finished(world):
    store, location, tables, containers = world
    store.tables.get_table_client(tables[0]).create_entity({"PartitionKey": "p", "RowKey": "1"})
    store.tables.get_table_client(tables[1]).create_entity({"PartitionKey": "p", "RowKey": "1"})

    class Interrupted(Exception):
        pass

    def failing_second_table(table: str) -> object:  # the host dies while exporting the second table
        if table == tables[1]:
            raise Interrupted
        return original(table)

    original = store.tables.get_table_client
    store.tables.get_table_client = failing_second_table  # type: ignore[method-assign]
    with pytest.raises(Interrupted):
        export_store(store, location, SETTINGS, tables=tables, containers=containers)
    store.tables.get_table_client = original  # type: ignore[method-assign]
    first_part = location.read_json("exports/0000000001/progress.json")["units"][f"table:{tables[0]}"]

    manifest = export_store(store, location, SETTINGS, tables=tables, containers=containers)

    assert manifest.sequence == 1  # the same export, finished
    assert manifest.tables[tables[0]].keys == first_part["keys"]  # not exported again
    assert manifest.tables[tables[1]].keys["lines"] == 1


def test_a_part_that_no_longer_hashes_to_its_manifest_is_refused(world):
    store, location, tables, containers = world
    store.tables.get_table_client(tables[0]).create_entity({"PartitionKey": "p", "RowKey": "1"})
    manifest = export_store(store, location, SETTINGS, tables=tables, containers=containers)
    location.write_bytes(manifest.tables[tables[0]].changes["blob"], b"tampered")
    wipe(store, tables, containers)

    with pytest.raises(BackupCorrupt):
        restore_store(store, location, SETTINGS, tables=tables, containers=containers)


def test_a_store_that_holds_data_is_refused_unless_forced(world):
    store, location, tables, containers = world
    store.tables.get_table_client(tables[0]).create_entity({"PartitionKey": "p", "RowKey": "1", "V": 1})
    export_store(store, location, SETTINGS, tables=tables, containers=containers)
    store.tables.get_table_client(tables[0]).upsert_entity({"PartitionKey": "p", "RowKey": "1", "V": 2})

    with pytest.raises(StoreNotEmpty, match=tables[0]):
        restore_store(store, location, SETTINGS, tables=tables, containers=containers)
    restore_store(store, location, SETTINGS, tables=tables, containers=containers, force=True)

    assert store.tables.get_table_client(tables[0]).get_entity("p", "1")["V"] == 1


def test_a_failed_export_and_an_old_one_degrade_the_backup_health(world):
    store, location, tables, containers = world
    settings = BackupSettings(RpoMinutes=15)
    location.ensure()
    assert not backup_health(settings, location, datetime.now(UTC)).healthy  # nothing exported yet
    manifest = export_store(store, location, settings, tables=tables, containers=containers)
    record_success(location, manifest, datetime.now(UTC))
    assert backup_health(settings, location, datetime.now(UTC)).healthy

    record_failure(location, "ServiceRequestError: connection refused", datetime.now(UTC))
    failed = backup_health(settings, location, datetime.now(UTC))
    aged = backup_health(settings, location, manifest.as_of + timedelta(minutes=16))

    assert not failed.healthy and "connection refused" in failed.detail and failed.consecutive_failures == 1
    assert not aged.healthy and "RPO" in aged.detail
    assert failed.as_dict()["rpo_minutes"] == 15 and failed.as_dict()["schedule"] == settings.schedule


def test_a_schedule_that_fires_less_often_than_the_rpo_is_refused():
    with pytest.raises(ValueError, match="RpoMinutes"):
        BackupSettings(Schedule="0 0 * * * *", RpoMinutes=15)
    assert BackupSettings(Schedule="0 */15 * * * *", RpoMinutes=15).rpo_minutes == 15


def test_restored_capacity_rows_hold_no_lease_and_tokens_jump_past_the_loss():
    now = datetime(2025, 1, 31, 12, tzinfo=UTC)
    as_of = now - timedelta(minutes=15)
    jump = epoch.fencing_jump(as_of, now, grants_per_second=1000)
    slot = {"PartitionKey": "pool|000", "RowKey": "slot|00001", "Generation": 41, "LeaseId": "l1", "Tenant": "t"}
    record = {"PartitionKey": "t|1", "RowKey": "l1", "State": "active", "ExpiresAt": "x"}

    restored_slot = epoch.restored_entity(SLOTS_TABLE, slot, jump, now)
    restored_record = epoch.restored_entity(LEASES_TABLE, record, jump, now)

    assert jump > 15 * 60 * 1000  # every grant the slot could have seen since the backup
    assert restored_slot["Generation"] == 41 + jump and restored_slot["LeaseId"] == ""
    assert restored_record["State"] == "expired" and restored_record["Reason"] == "store-restored"
    with pytest.raises(epoch.FencingOverflow):
        epoch.restored_entity(SLOTS_TABLE, {**slot, "Generation": epoch.MAX_GENERATION}, jump, now)
