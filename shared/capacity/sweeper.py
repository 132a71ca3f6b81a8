"""The expiry sweep: end leases whose holders stopped renewing and never released.

Correctness does not depend on this running (an acquirer takes an expired
slot itself, see :mod:`shared.capacity.slots`). What the sweep adds is
timeliness for slots nobody asks for: the lease is recorded ``expired`` in
the slot's history and on its lease record, ``LeaseExpired`` goes out, the
tenant's quota token returns, and usage reads right. The Durable
orchestration in ``orchestrations/capacity.py`` runs it per pool on a timer.

Idempotent and safe to run concurrently with anything: every change is
conditional on the slot row's ETag, so a lease renewed, released or taken
over meanwhile is left alone, and a lease is ended (and its event emitted)
exactly once whoever gets there first.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from shared.capacity import quota, records, slots
from shared.capacity.keys import parse_stamp
from shared.capacity.models import LeaseState
from shared.capacity.pools import read_pool
from shared.capacity.store import CapacityStore
from shared.platform import clock
from shared.platform.errors import AlreadyExists, ConcurrencyConflict
from shared.platform.logs import app_logger

log = app_logger("capacity")


@dataclass(frozen=True)
class SweepResult:
    pool: str
    expired: int
    contended: int

    def as_dict(self) -> dict[str, object]:
        return {"pool": self.pool, "expired": self.expired, "contended": self.contended}


def sweep_pool(store: CapacityStore, pool_id: str) -> SweepResult:
    stored = read_pool(store, pool_id)
    if stored is None:
        return SweepResult(pool_id, 0, 0)
    pool = stored.pool
    grace = timedelta(seconds=store.settings.takeover_grace_seconds)
    expired = contended = 0
    for shard in pool.shards():
        for row in slots.read_shard(store, pool.id, shard):
            now = clock.utcnow()
            if not row.lease_id or parse_stamp(row.expires_at) + grace >= now:
                continue
            try:
                slots.end(store, row, now, reason="swept")
            except (ConcurrencyConflict, AlreadyExists):
                contended += 1  # renewed, released or taken over meanwhile: not ours to end
                continue
            expired += 1
            quota.release(store, row.tenant, pool.kind, row.token_index, row.lease_id)
            records.update_record(
                store, row.tenant, row.lease_id, State=LeaseState.EXPIRED.value, EndedAt=row.expires_at
            )
    if expired:
        log.info("pool %s: %d expired lease(s) swept", pool_id, expired)
    return SweepResult(pool_id, expired, contended)
