"""Lease history and records are kept 90 days (LeaseRetentionDays), denials a day, then purged."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from azure.core.exceptions import ResourceNotFoundError
from azure.data.tables import TableServiceClient

from tests.capacity.conftest import unique
from tests.support.host import wait_until


def stamp(days_ago: float) -> str:
    moment = datetime.now(UTC) - timedelta(days=days_ago)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def exists(table, partition: str, row: str) -> bool:
    try:
        table.get_entity(partition, row)
        return True
    except ResourceNotFoundError:
        return False


def test_the_daily_purge_removes_what_is_older_than_its_retention(capacity, azurite):
    tables = TableServiceClient.from_connection_string(azurite.connection_string())
    slots, leases, pools = (
        tables.get_table_client(name) for name in ("CapacitySlots", "CapacityLeases", "CapacityPools")
    )
    pool, tenant = unique("retention"), unique("tenant")
    shard = f"{pool}|000"
    grant = {"PartitionKey": shard, "Pool": pool, "Slot": 0, "LeaseId": "x", "Tenant": tenant}
    slots.create_entity(
        {
            **grant,
            "RowKey": "grant|00000|0000000001",
            "Outcome": "released",
            "GrantedAt": stamp(91),
            "ExpiresAt": stamp(91),
            "EndedAt": stamp(91),
        }
    )
    slots.create_entity(
        {
            **grant,
            "RowKey": "grant|00000|0000000002",
            "Outcome": "expired",
            "GrantedAt": stamp(89),
            "ExpiresAt": stamp(89),
            "EndedAt": stamp(89),
        }
    )
    slots.create_entity(
        {
            **grant,
            "RowKey": "grant|00000|0000000003",
            "Outcome": "held",
            "GrantedAt": stamp(0),
            "ExpiresAt": stamp(-1),
            "EndedAt": "",
        }
    )
    record = {"PartitionKey": f"{tenant}|0", "Tenant": tenant, "State": "released"}
    leases.create_entity({**record, "RowKey": "old", "ExpiresAt": stamp(95), "EndedAt": stamp(95)})
    leases.create_entity({**record, "RowKey": "recent", "ExpiresAt": stamp(1), "EndedAt": stamp(1)})
    denials = f"denials|{pool}|0"
    pools.create_entity({"PartitionKey": denials, "RowKey": f"{stamp(2)}|a", "Reason": "quota-exceeded"})
    pools.create_entity({"PartitionKey": denials, "RowKey": f"{stamp(0.01)}|b", "Reason": "quota-exceeded"})

    answer = capacity.call("POST", "admin/functions/capacity_purge", None, json={"input": ""})

    assert answer.status_code == 202
    wait_until(lambda: not exists(slots, shard, "grant|00000|0000000001"), timeout=20, message="the purge")
    wait_until(lambda: not exists(leases, f"{tenant}|0", "old"), timeout=20, message="the old record purged")
    assert exists(slots, shard, "grant|00000|0000000002")  # 89 days: kept
    assert exists(slots, shard, "grant|00000|0000000003")  # still held: never purged
    assert exists(leases, f"{tenant}|0", "recent")
    remaining = lambda: [r["RowKey"] for r in pools.query_entities("PartitionKey eq @pk", parameters={"pk": denials})]  # noqa: E731
    wait_until(lambda: len(remaining()) == 1, timeout=20, message="the old denial purged")
    assert remaining()[0].endswith("|b")
