"""Which environments' inventories are stale, across tenants: for health's summary of the inventory.

Each environment's status lives in its own partition, so "which targets
cannot be read right now" would mean reading every environment of every
tenant. Instead a scan that finds its target unreadable also upserts a row in
partition ``~stale`` (no tenant id starts with ``~``), and the next scan that
reads the target deletes it. Health reads that one partition.

The index is written after the scan's own commit, best effort: a crash in
between is repaired by the next scan of the environment. Health shows only
counts per target and times, never a tenant or environment name (the
caller of health is not a tenant's operator).
"""

from __future__ import annotations

from azure.core.exceptions import ResourceNotFoundError
from azure.data.tables import TableClient, UpdateMode

# typing_extensions' TypedDict, not typing's: health's response view (shared.health.responses) is a pydantic
# model derived from these, and pydantic takes only typing_extensions.TypedDict before Python 3.12.
from typing_extensions import TypedDict

from shared.platform.storage.streams import stream_key

STALE_PARTITION = "~stale"


class StaleTarget(TypedDict):
    """One target's stale environments: how many, the latest failed attempt, the oldest good observation."""

    target: str | None
    stale_environments: int
    last_attempt_at: str | None
    oldest_good_observation_at: str | None


class StaleSummary(TypedDict):
    """Every target that could not be read at its environments' last scans (health's ``inventory``)."""

    stale_environments: int
    targets: list[StaleTarget]


def mark_stale(
    table: TableClient, tenant: str, environment: str, *, target: str, attempt_at: str, last_good_at: str | None
) -> None:
    table.upsert_entity(
        {
            "PartitionKey": STALE_PARTITION,
            "RowKey": stream_key(tenant, environment),
            "Target": target,
            "LastAttemptAt": attempt_at,
            "LastGoodAt": last_good_at or "",
        },
        mode=UpdateMode.REPLACE,
    )


def clear_stale(table: TableClient, tenant: str, environment: str) -> None:
    try:
        table.delete_entity(STALE_PARTITION, stream_key(tenant, environment))
    except ResourceNotFoundError:
        pass


def stale_summary(table: TableClient) -> StaleSummary:
    """Per target, how many environments cannot be read (one query over the ``~stale`` partition)."""
    by_target: dict[str, StaleTarget] = {}
    rows = table.query_entities(
        "PartitionKey eq @p", parameters={"p": STALE_PARTITION}, select=["Target", "LastAttemptAt", "LastGoodAt"]
    )
    for row in rows:
        entry = by_target.setdefault(
            row.get("Target") or "",
            StaleTarget(
                target=row.get("Target") or None,
                stale_environments=0,
                last_attempt_at=None,
                oldest_good_observation_at=None,
            ),
        )
        entry["stale_environments"] += 1
        entry["last_attempt_at"] = max(filter(None, [entry["last_attempt_at"], row.get("LastAttemptAt")]), default=None)
        entry["oldest_good_observation_at"] = min(
            filter(None, [entry["oldest_good_observation_at"], row.get("LastGoodAt")]), default=None
        )
    targets = sorted(by_target.values(), key=lambda entry: entry["target"] or "")
    return StaleSummary(stale_environments=sum(entry["stale_environments"] for entry in targets), targets=targets)
