"""Refused acquires: recorded per pool with a ``LeaseDenied`` event, kept a day.

Operators read them on ``GET /runtime-cloud/pools/{id}`` (``recent_denials``)
to see pressure before workers complain, and ``LeaseDenied`` lets autoscaling
react. A shared pool serves many tenants: the counts are for everyone, but
which tenant was refused and its worker's name are shown only to that tenant
and to ``PlatformAdmin``. A denial changes no lease, so its row is the state the event
announces.

Denials are aggregated, as Kubernetes aggregates repeated events: each
process writes at most one denial row (and one ``LeaseDenied``) per pool and
reason per second, whose ``count`` says how many refusals it stands for
(itself plus those folded into it since the previous one). A full pool can
refuse hundreds of acquires a second; writing each would make the refusals
that tell workers to back off as expensive as grants, and flood consumers
with identical events. Denial rows of one pool are spread over
``DENIAL_SHARDS`` partitions so that concurrent writers rarely queue behind
one outbox sequence row. Recording is best effort: the refusal itself never
waits for more than a few attempts.
"""

from __future__ import annotations

import random
import threading
import time
import uuid
from datetime import datetime, timedelta
from typing import Any

from shared.capacity.keys import DENIAL_SHARDS, after, denial_partition, stamp
from shared.capacity.store import CapacityStore, commit_and_dispatch, query
from shared.platform import clock
from shared.platform.errors import AlreadyExists, ConcurrencyConflict, StoreError
from shared.platform.events.cloudevents import NewEvent
from shared.platform.logs import app_logger, ids
from shared.platform.storage.optimistic import on_conflict

log = app_logger("capacity")
RECENT_LIMIT = 20
AGGREGATION_SECONDS = 1.0


class _Aggregator:
    """Per process: lets one denial per (pool, reason) through each window, counting the rest."""

    def __init__(self, window_seconds: float = AGGREGATION_SECONDS) -> None:
        self._window = window_seconds
        self._lock = threading.Lock()
        self._open: dict[tuple[str, str], tuple[float, int]] = {}  # key -> (window start, folded since)

    def admit(self, pool_id: str, reason: str) -> int:
        """How many refusals a row written now stands for; 0 means fold this one into the next."""
        key, now = (pool_id, reason), time.monotonic()
        with self._lock:
            started, folded = self._open.get(key, (float("-inf"), 0))
            if now - started < self._window:
                self._open[key] = (started, folded + 1)
                return 0
            self._open[key] = (now, 0)
            return folded + 1


_aggregator = _Aggregator()


def record_denial(
    store: CapacityStore, pool_id: str, tenant: str, kind: str, reason: str, holder: str, detail: str
) -> None:
    count = _aggregator.admit(pool_id, reason)
    if not count:
        return
    try:
        _write_denial(
            store,
            pool_id,
            tenant,
            stamp(clock.utcnow()),
            count,
            {"kind": kind, "reason": reason, "holder": holder, "detail": detail},
        )
    except ConcurrencyConflict:
        log.warning("denial of %s on %s not recorded: too much contention", tenant, pool_id, extra=ids(tenant=tenant))
    except StoreError as error:  # a denial is a record for operators: never fail the refusal for it
        log.warning("denial of %s on %s not recorded: %s", tenant, pool_id, error, extra=ids(tenant=tenant))


@on_conflict(attempts=4)
def _write_denial(store: CapacityStore, pool_id: str, tenant: str, now: str, count: int, what: dict[str, str]) -> None:
    """Write the denial row and its event in a random shard (another shard on each attempt)."""
    partition = denial_partition(pool_id, random.randrange(DENIAL_SHARDS))
    row = {
        "PartitionKey": partition,
        "RowKey": f"{now}|{uuid.uuid4().hex[:12]}",
        "Pool": pool_id,
        "Tenant": tenant,
        "Kind": what["kind"],
        "Reason": what["reason"],
        "Holder": what["holder"],
        "At": now,
        "Count": count,
    }
    event = NewEvent("LeaseDenied", f"pools/{pool_id}", tenant, {"pool": pool_id, **what, "count": count})
    try:
        commit_and_dispatch(store.pools_outbox, partition, [("create", row)], [event])
    except AlreadyExists:
        raise ConcurrencyConflict(f"denial row of {pool_id} taken") from None


def recent_denials(
    store: CapacityStore, pool_id: str, since: datetime, window: timedelta, viewer_tenant: str | None = None
) -> dict[str, Any]:
    """The pool's denials in ``window``; another tenant's name and holder are blanked unless
    ``viewer_tenant`` is None (a platform administrator)."""
    low = denial_partition(pool_id, 0)[:-1]
    # Denial rows are keyed by time; the partitions' outbox rows ("~outbox...") sort after every time.
    rows = query(
        store.pools,
        "PartitionKey ge @low and PartitionKey lt @high and RowKey ge @since and RowKey lt '~'",
        low=low,
        high=after(low),
        since=stamp(since),
    )
    rows.sort(key=lambda row: row["RowKey"], reverse=True)
    by_reason: dict[str, int] = {}
    for row in rows:
        by_reason[row["Reason"]] = by_reason.get(row["Reason"], 0) + int(row.get("Count", 1))
    return {
        "window_minutes": int(window.total_seconds() // 60),
        "count": sum(by_reason.values()),
        "by_reason": by_reason,
        "latest": [_denial_view(row, viewer_tenant) for row in rows[:RECENT_LIMIT]],
    }


def _denial_view(row: dict[str, Any], viewer_tenant: str | None) -> dict[str, Any]:
    visible = viewer_tenant is None or row["Tenant"] == viewer_tenant
    return {
        "at": row["At"],
        "tenant": row["Tenant"] if visible else None,
        "kind": row["Kind"],
        "reason": row["Reason"],
        "holder": row["Holder"] if visible else None,
        "count": int(row.get("Count", 1)),
    }


def purge_denials(store: CapacityStore, older_than: timedelta) -> int:
    cutoff = stamp(clock.utcnow() - older_than)
    low = "denials|"
    purged = 0
    for row in query(
        store.pools,
        "PartitionKey ge @low and PartitionKey lt @high and RowKey lt @cutoff",
        low=low,
        high=after(low),
        cutoff=cutoff,
    ):
        if not row["RowKey"].startswith("~"):  # outbox rows are the outbox purge's business
            store.pools.delete_entity(row["PartitionKey"], row["RowKey"])
            purged += 1
    return purged
