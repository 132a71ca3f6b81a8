"""Backup epochs against Azurite: an export never resumes across a restore, and a restore never replays a
chain that joins two histories (tables and containers of each test's own; the drill that kills a real
export process is test_epoch_drill.py)."""

from __future__ import annotations

from datetime import datetime

import pytest

from shared.backup.epochs import EPOCH_BLOB, EPOCH_PARTITION, EPOCH_ROW, STATE_TABLE, MixedChain, SupersededStore
from shared.backup.export import export_store
from shared.backup.manifest import manifest_name
from shared.backup.restore import restore_store
from shared.backup.settings import BackupSettings
from tests.backup.test_export_restore import wipe

SETTINGS = BackupSettings(OverlapSeconds=0)


class Interrupted(Exception):
    pass


def interrupted_export(store, location, tables, containers) -> None:
    """An export that dies after its first table's parts (the store was lost under it)."""

    def failing_second_table(table: str) -> object:
        if table == tables[1]:
            raise Interrupted
        return original(table)

    original = store.tables.get_table_client
    store.tables.get_table_client = failing_second_table
    try:
        with pytest.raises(Interrupted):
            export_store(store, location, SETTINGS, tables=tables, containers=containers)
    finally:
        store.tables.get_table_client = original


def test_an_export_interrupted_before_a_restore_is_not_resumed_after_it(world):
    store, location, tables, containers = world
    first, second = (store.tables.get_table_client(name) for name in tables)
    first.create_entity({"PartitionKey": "p", "RowKey": "v1"})
    second.create_entity({"PartitionKey": "p", "RowKey": "v1"})
    backup = export_store(store, location, SETTINGS, tables=tables, containers=containers)
    first.create_entity({"PartitionKey": "p", "RowKey": "v3-lost"})  # after the backup: lost with the store
    interrupted_export(store, location, tables, containers)
    wipe(store, tables, containers)
    report = restore_store(store, location, SETTINGS, tables=tables, containers=containers, force=True)
    first.create_entity({"PartitionKey": "p", "RowKey": "v4-after-restore"})

    after = export_store(store, location, SETTINGS, tables=tables, containers=containers)
    wipe(store, tables, containers)
    restore_store(store, location, SETTINGS, tables=tables, containers=containers, force=True)

    assert after.sequence == backup.sequence + 1 and after.epoch == report.epoch["epoch"] > backup.epoch
    assert after.full and after.chain == [after.sequence] and after.follows == backup.sequence
    assert after.as_of >= datetime.fromisoformat(report.restored_at)  # never stamped before the data it read
    assert sorted(row["RowKey"] for row in first.list_entities()) == ["v1", "v4-after-restore"]


def test_an_interrupted_export_of_the_same_epoch_still_resumes(world):
    store, location, tables, containers = world
    store.tables.get_table_client(tables[0]).create_entity({"PartitionKey": "p", "RowKey": "1"})
    export_store(store, location, SETTINGS, tables=tables, containers=containers)
    wipe(store, tables, containers)
    restore_store(store, location, SETTINGS, tables=tables, containers=containers, force=True)
    interrupted_export(store, location, tables, containers)
    first_part = location.read_json("exports/0000000002/progress.json")["units"][f"table:{tables[0]}"]

    manifest = export_store(store, location, SETTINGS, tables=tables, containers=containers)

    assert manifest.sequence == 2 and manifest.tables[tables[0]].keys == first_part["keys"]


def test_a_restore_refuses_a_chain_that_crosses_a_restore(world):
    store, location, tables, containers = world
    store.tables.get_table_client(tables[0]).create_entity({"PartitionKey": "p", "RowKey": "1"})
    export_store(store, location, SETTINGS, tables=tables, containers=containers)
    second = export_store(store, location, SETTINGS, tables=tables, containers=containers)
    # An incremental export stamped with another epoch than the full one it builds on: two histories.
    document = second.model_dump(mode="json")
    location.write_json(manifest_name(second.sequence), {**document, "epoch": second.epoch + 1})
    wipe(store, tables, containers)

    with pytest.raises(MixedChain, match="crosses a restore"):
        restore_store(store, location, SETTINGS, tables=tables, containers=containers, force=True)
    assert not list(store.tables.get_table_client(tables[0]).list_entities())  # nothing half-done


def test_a_restore_refuses_an_export_that_a_discarded_history_wrote_late(world):
    store, location, tables, containers = world
    store.tables.get_table_client(tables[0]).create_entity({"PartitionKey": "p", "RowKey": "1"})
    backup = export_store(store, location, SETTINGS, tables=tables, containers=containers)
    wipe(store, tables, containers)
    restore_store(store, location, SETTINGS, tables=tables, containers=containers, force=True)
    # An exporter of the lost store that outlived the restore commits export 2 in the old epoch.
    late = {**backup.model_dump(mode="json"), "sequence": 2, "chain": [2], "follows": 1}
    location.write_json(manifest_name(2), late)

    with pytest.raises(MixedChain, match="discarded"):
        restore_store(store, location, SETTINGS, tables=tables, containers=containers, force=True)


def test_a_store_that_a_later_restore_superseded_does_not_export(world):
    store, location, tables, containers = world
    store.tables.get_table_client(tables[0]).create_entity({"PartitionKey": "p", "RowKey": "1"})
    export_store(store, location, SETTINGS, tables=tables, containers=containers)
    restore_store(store, location, SETTINGS, tables=tables, containers=containers, force=True)
    recorded = location.read_json(EPOCH_BLOB)
    # The store forgets its epoch (a store the restore did not write: another history).
    store.tables.get_table_client(STATE_TABLE).delete_entity(EPOCH_PARTITION, EPOCH_ROW)

    with pytest.raises(SupersededStore, match=f"epoch {recorded['epoch']}"):
        export_store(store, location, SETTINGS, tables=tables, containers=containers)
