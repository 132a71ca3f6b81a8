"""A restore refuses a store a host is running on; old exports are pruned, the latest chain never.

Liveness is read from the blob leases a running host holds (the Durable task
hub's ``<hub>-leases``, the Functions host's locks); here a lease is taken the
way the local host takes its own (the drill shows the refusal against a real
running host). Retention runs on exports made with a claimed clock, so days
pass in a moment.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from azure.storage.blob import BlobLeaseClient

from shared.backup.export import export_store
from shared.backup.liveness import HostActive, host_leases
from shared.backup.manifest import latest_manifest, read_manifest
from shared.backup.restore import restore_store
from shared.backup.retention import prune_exports
from shared.backup.settings import BackupSettings

SETTINGS = BackupSettings(OverlapSeconds=0)
DAY0 = datetime(2025, 3, 1, tzinfo=UTC)


def test_a_restore_refuses_while_a_host_holds_the_task_hub_lease_unless_forced(empty_store, fresh_location):
    store, location = empty_store, fresh_location
    store.tables.create_table("CapacityPools")
    store.tables.get_table_client("CapacityPools").create_entity({"PartitionKey": "p", "RowKey": "r"})
    export_store(store, location, SETTINGS, tables=["CapacityPools"], containers=[])
    store.tables.get_table_client("CapacityPools").delete_entity("p", "r")
    hub = store.blobs.create_container("testhubname-leases")
    hub.upload_blob("owner", b"")
    lease = BlobLeaseClient(hub.get_blob_client("owner"))
    lease.acquire(lease_duration=60)  # a host is running: it renews this every few seconds

    with pytest.raises(HostActive, match="testhubname-leases/owner"):
        restore_store(store, location, SETTINGS, tables=["CapacityPools"], containers=[])
    assert not list(store.tables.get_table_client("CapacityPools").list_entities())  # nothing written
    lease.break_lease(lease_break_period=0)  # the host stopped: its lease lapsed
    assert host_leases(store) == []
    report = restore_store(store, location, SETTINGS, tables=["CapacityPools"], containers=[])

    assert report.rows["CapacityPools"] == 1
    lease = BlobLeaseClient(hub.get_blob_client("owner"))
    lease.acquire(lease_duration=60)
    forced = restore_store(store, location, SETTINGS, tables=["CapacityPools"], containers=[], force=True)
    assert forced.rows["CapacityPools"] == 1  # the operator knows better: --force


def export_at(world, moment: datetime, settings: BackupSettings):
    store, location, tables, containers = world
    return export_store(store, location, settings, tables=tables, containers=containers, now=lambda: moment)


def test_prune_keeps_recent_exports_with_their_chains_and_removes_older_chains(world):
    store, location, tables, containers = world
    settings = BackupSettings(OverlapSeconds=0, RetentionDays=1, FullEveryHours=24)
    rows = store.tables.get_table_client(tables[0])
    moments = [DAY0, DAY0 + timedelta(hours=12), DAY0 + timedelta(hours=25), DAY0 + timedelta(hours=36)]
    moments += [DAY0 + timedelta(hours=50), DAY0 + timedelta(hours=51)]
    for index, moment in enumerate(moments):
        rows.upsert_entity({"PartitionKey": "p", "RowKey": f"r{index}"})
        export_at(world, moment, settings)
    fulls = [read_manifest(location, n).full for n in range(1, 7)]  # type: ignore[union-attr]

    # a day before the last export: export 4 (36 h) is within retention, and it needs 3 (the full one at 25 h)
    report = prune_exports(location, settings, DAY0 + timedelta(hours=51))
    again = prune_exports(location, settings, DAY0 + timedelta(hours=51))

    assert fulls == [True, False, True, False, True, False]
    assert report is not None and report.boundary == 3 and report.pruned == [1, 2]
    assert location.names("exports/0000000001/") == [] and location.names("exports/0000000002/") == []
    assert [read_manifest(location, n) is not None for n in range(3, 7)] == [True] * 4
    assert again is not None and again.pruned == []  # idempotent


def test_prune_never_removes_the_chain_of_the_latest_export_and_it_still_restores(world):
    store, location, tables, containers = world
    settings = BackupSettings(OverlapSeconds=0, RetentionDays=0, FullEveryHours=24)
    rows = store.tables.get_table_client(tables[0])
    for index, hours in enumerate([0, 1, 2, 30, 31]):
        rows.upsert_entity({"PartitionKey": "p", "RowKey": f"r{index}"})
        export_at(world, DAY0 + timedelta(hours=hours), settings)
    rows.delete_entity("p", "r0")
    export_at(world, DAY0 + timedelta(hours=32), settings)
    # a week later, nothing is within retention: only the latest chain (4, 5, 6) stays
    report = prune_exports(location, settings, DAY0 + timedelta(days=8))
    latest = latest_manifest(location)
    for row in list(rows.list_entities()):
        rows.delete_entity(row["PartitionKey"], row["RowKey"])
    for container in containers:
        for blob in list(store.blobs.get_container_client(container).list_blobs()):
            store.blobs.get_container_client(container).delete_blob(blob.name)

    restored = restore_store(
        store, location, settings, tables=tables, containers=containers, now=lambda: DAY0 + timedelta(days=8)
    )

    assert report is not None and report.pruned == [1, 2, 3] and latest is not None and latest.chain == [4, 5, 6]
    assert restored.chain == [4, 5, 6]
    assert sorted(row["RowKey"] for row in rows.list_entities()) == ["r1", "r2", "r3", "r4"]
