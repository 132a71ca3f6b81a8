"""Capacity's gauges: per pool, the leases its slot rows hold (a slot row is the lease, so counting is exact)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from shared.capacity.pools import list_pools
from shared.capacity.slots import read_pool_slots
from shared.capacity.store import CapacityStore
from shared.platform import clock
from shared.platform.telemetry.metrics import Reading

HOLDINGS_REUSE_SECONDS = 10.0  # both pool gauges are collected in one export: read the slot rows once for both


class PoolHoldings:
    """Reads every pool's slot rows at most once per export for the two gauges that need them."""

    def __init__(self, store: Callable[[], CapacityStore]) -> None:
        self._store = store
        self._lock = threading.Lock()
        self._read: tuple[float, list[tuple[str, int, int]]] | None = None  # (when, per pool: id, held, size)

    def active_leases(self) -> list[Reading]:
        return [(float(held), {"pool": pool_id}) for pool_id, held, _ in self._holdings()]

    def utilization(self) -> list[Reading]:
        return [(held / size if size else float(held), {"pool": pool_id}) for pool_id, held, size in self._holdings()]

    def _holdings(self) -> list[tuple[str, int, int]]:
        with self._lock:
            if self._read is not None and time.monotonic() - self._read[0] < HOLDINGS_REUSE_SECONDS:
                return self._read[1]
            capacity, moment = self._store(), clock.utcnow()
            holdings = [
                (pool.id, sum(1 for slot in read_pool_slots(capacity, pool) if slot.valid_at(moment)), pool.size)
                for pool in list_pools(capacity)
            ]
            self._read = (time.monotonic(), holdings)
            return holdings
