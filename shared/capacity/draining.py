"""Draining chosen slots: no new grants on them, while their held leases live on until they end.

A pool-wide drain (``POST /pools/{id}/drain``) and a shrink close slots with
the ``Open`` flag, which the pool's size owns (reconciling re-opens every slot
below the size). A scale-down must stop grants on *some* slots below the size
before it shrinks the pool, so that the run removing their resources never
removes a slot in use: that is the slot row's ``Draining`` flag, which only
this module sets and which :meth:`SlotRow.takeable_at` honours.

Setting the flag is a replace under the row's ETag, so a grant that read the
row before it was set fails its own conditional write and tries another slot:
once :func:`set_draining` returns, no new lease can land on those slots.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from shared.capacity.models import Pool
from shared.capacity.slots import SlotRow, read_pool_slots, read_slot
from shared.capacity.store import CapacityStore
from shared.platform.storage.conditional import replace_if_unchanged
from shared.platform.storage.optimistic import on_conflict


def set_draining(store: CapacityStore, pool: Pool, indices: Iterable[int], draining: bool) -> int:
    """Set (or clear) the flag on each slot that exists; returns how many rows changed."""
    return sum(_set_one(store, pool, index, draining) for index in indices if index < pool.slots_created)


@on_conflict(attempts=50)
def _set_one(store: CapacityStore, pool: Pool, index: int, draining: bool) -> int:
    row = read_slot(store, pool.id, pool.shard_of(index), index)
    if row is None or row.draining == draining:
        return 0
    replace_if_unchanged(store.slots, row.entity(draining=draining), row.etag)  # a moved row: read again
    return 1


def live_leases(store: CapacityStore, pool: Pool, now: datetime) -> list[SlotRow]:
    """The pool's slot rows that hold a lease valid now (on open, closed or draining slots alike)."""
    return [row for row in read_pool_slots(store, pool) if row.valid_at(now)]
