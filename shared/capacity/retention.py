"""Retention: lease history and records are kept ``LeaseRetentionDays`` (90), denials a day.

Ninety days covers a quarter's billing and incident reviews; after that the
rows are purged by the daily maintenance timer. Only ended leases are
purged (a grant row still ``held`` is never touched), and deleting a row
that is already gone is fine, so the purge can be re-run or run twice.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from azure.core.exceptions import ResourceNotFoundError

from shared.capacity.denials import purge_denials
from shared.capacity.keys import GRANT_PREFIX, after, stamp
from shared.capacity.records import purge_records
from shared.capacity.store import CapacityStore, query
from shared.platform import clock


@dataclass(frozen=True)
class PurgeResult:
    grants: int
    records: int
    denials: int


def purge_grant_history(store: CapacityStore, older_than: timedelta) -> int:
    cutoff = stamp(clock.utcnow() - older_than)
    purged = 0
    rows = query(
        store.slots,
        "RowKey ge @low and RowKey lt @high and Outcome ne 'held' and EndedAt lt @cutoff",
        low=GRANT_PREFIX,
        high=after(GRANT_PREFIX),
        cutoff=cutoff,
    )
    for row in rows:
        try:
            store.slots.delete_entity(row["PartitionKey"], row["RowKey"])
        except ResourceNotFoundError:
            continue
        purged += 1
    return purged


def purge_expired_history(store: CapacityStore) -> PurgeResult:
    settings = store.settings
    keep = timedelta(days=settings.lease_retention_days)
    return PurgeResult(
        grants=purge_grant_history(store, keep),
        records=purge_records(store, keep),
        denials=purge_denials(store, timedelta(hours=settings.denial_retention_hours)),
    )
