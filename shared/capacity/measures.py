"""The capacity metrics of a lease acquisition: grants, denials by reason, acquire latency.

Dimensions are the pool (a pool an administrator made: a bounded set) and the
reason; the tenant and the lease are span attributes, never dimensions.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from shared.capacity.errors import CapacityUnavailable, KindNotInEdition, QuotaExceeded
from shared.platform import telemetry
from shared.platform.telemetry import names


@contextmanager
def measured_acquire(tenant: str, kind: str) -> Iterator[Callable[[str, str], None]]:
    """Around one acquire; call the function it yields with the granted lease's pool and id."""
    started = time.perf_counter()
    telemetry.annotate(tenant=tenant)

    def granted(pool: str, lease_id: str) -> None:
        telemetry.annotate(pool=pool, lease=lease_id)
        telemetry.count(names.LEASE_GRANTS, pool=pool)
        telemetry.record(names.ACQUIRE_DURATION, time.perf_counter() - started, pool=pool, outcome="granted")

    try:
        yield granted
    except (QuotaExceeded, KindNotInEdition, CapacityUnavailable) as error:
        reason = {QuotaExceeded: "quota-exceeded", KindNotInEdition: "kind-not-in-edition"}.get(
            type(error), "capacity-unavailable"
        )
        pools = getattr(error, "pools", None) or []
        pool = pools[0] if len(pools) == 1 else f"kind:{kind}"
        telemetry.count(names.LEASE_DENIALS, pool=pool, reason=reason)
        telemetry.record(names.ACQUIRE_DURATION, time.perf_counter() - started, pool=pool, outcome="denied")
        raise
