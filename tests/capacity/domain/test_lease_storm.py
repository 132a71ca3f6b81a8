"""A small lease storm in memory: racing workers never over-grant, and every grant is accounted for.

``tests/capacity/test_storm.py`` blows its storm through a host on Azurite in real time. This one
calls the lease service from 24 threads on the in-memory store, so every storage call of every
acquire, renew and release interleaves with the others as the threads happen to run; time is the
test's clock, moved on a little by every worker step, so short TTLs expire, takeovers happen, and
no one sleeps for them. The checks read the pool's lease history (the grant rows beside the slot
rows) and the outbox rows, never the service's own view of what is held:

- every grant a worker received is in the history with its slot and fencing token, and nothing else;
- each slot's fencing tokens run 1, 2, 3... and its validity intervals never overlap;
- at no instant were more leases valid than the pool has slots, or than a tenant's edition allows;
- no 429 while the tenant held fewer granted leases than its limit;
- each grant and each ending was announced once.
"""

from __future__ import annotations

import json
import random
import threading
import uuid
from dataclasses import dataclass, field
from typing import Any

from shared.capacity.errors import CapacityUnavailable, ContentionExhausted, LeaseLost, QuotaExceeded
from shared.capacity.keys import SLOTS_TABLE
from shared.capacity.models import PoolKind, PoolSpec
from shared.capacity.pools import put_pool
from tests.capacity.domain.conftest import Capacity
from tests.support.domain import unique
from tests.support.lease_invariants import StormTally, assert_storm_invariants

POOL_SIZE = 12
SLOTS_PER_SHARD = 4  # three shards: grants and releases in one shard contend on its outbox sequence row
LIMITS = {"big": 5, "small": 2}  # 2 x 5 + 2 x 2 = 14 > 12: both the quotas and the pool bind
WORKERS = 24
OPERATIONS = 400


@dataclass
class Tally(StormTally):
    failures: list[BaseException] = field(default_factory=list)


def worker(capacity: Capacity, pool: Any, tenant: str, tally: Tally, seed: int) -> None:
    rng = random.Random(seed)
    service, clock = capacity.service, capacity.clock
    try:
        while tally.operations < OPERATIONS:
            clock.advance(rng.uniform(0.002, 0.01))  # a step of one worker; all of them move the one clock
            lease_id = f"storm-{uuid.uuid4().hex[:16]}"
            request = capacity.request(
                pool, holder=f"{tenant}-w{seed}", ttl_seconds=rng.choice((1, 2, 2, 3)), lease_id=lease_id
            )
            sent = clock.now()
            try:
                lease, _ = service.acquire(tenant, request)
            except QuotaExceeded:
                with tally.lock:
                    tally.quota_refusals.append((tenant, sent, clock.now()))
                tally.count("acquire 429")
                continue
            except CapacityUnavailable:
                tally.count("acquire 503")
                continue
            tally.count("acquire 201")
            with tally.lock:
                tally.grants[lease_id] = (lease.slot, lease.fencing_token, tenant)
            renews = rng.choice((0, 0, 1, 2))
            lost = False
            for _ in range(renews):
                clock.advance(rng.uniform(0.01, 0.06))
                try:
                    renewed = service.renew(tenant, lease_id, rng.choice((1, 2)))
                except LeaseLost:
                    tally.count("renew lost")
                    with tally.lock:
                        tally.lost_on_renew.add(lease_id)
                    lost = True
                    break
                tally.count("renew 200")
                assert renewed.fencing_token == lease.fencing_token
            if lost:
                continue
            clock.advance(rng.uniform(0.0, 0.04))
            if rng.random() < 0.15:
                with tally.lock:
                    tally.abandoned.add(lease_id)  # a crashed worker: never releases, the lease expires
                continue
            while True:
                try:
                    service.release(tenant, lease_id)
                    break
                except ContentionExhausted:  # lost every race in a busy shard: again, as a worker does
                    tally.count("release 503")
            tally.count("release 204")
            with tally.lock:
                tally.released.add(lease_id)
                tally.release_answered[lease_id] = clock.now()
    except BaseException as failure:  # surfaced by the test, which fails on it
        with tally.lock:
            tally.failures.append(failure)


def test_racing_workers_never_over_grant_and_every_grant_is_accounted_for(capacity: Capacity) -> None:
    spec = PoolSpec(
        kind=PoolKind.SANDBOX,
        region=unique("region"),
        size=POOL_SIZE,
        min=0,
        max=POOL_SIZE,
        slots_per_shard=SLOTS_PER_SHARD,
    )
    pool, _ = put_pool(capacity.store, unique("pool"), spec)
    tenants: dict[str, int] = {}
    for limit in LIMITS.values():
        for tenant in capacity.tenants(limit=limit, count=2):
            tenants[tenant] = limit
    tally = Tally()
    threads = [
        threading.Thread(target=worker, args=(capacity, pool, tenant, tally, seed))
        for seed, tenant in enumerate(list(tenants) * (WORKERS // len(tenants)))
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert tally.failures == []
    capacity.clock.advance(10)  # every lease has ended or expired
    now = capacity.clock.now()

    rows = [r for r in capacity.storage.rows(SLOTS_TABLE) if r["PartitionKey"].startswith(f"{pool.id}|")]
    history = [r for r in rows if r["RowKey"].startswith("grant|")]
    events = [json.loads(r["Event"]) for r in rows if r["RowKey"].startswith("~outbox|")]

    print(f"storm: {tally.operations} operations, {len(history)} grants: {dict(tally.answers)}")
    # The storm happened, and both refusals with it.
    assert tally.operations >= OPERATIONS, tally.answers
    assert tally.answers["acquire 201"] > 50 and tally.answers["acquire 429"] > 0, tally.answers
    assert tally.answers["acquire 503"] > 0, tally.answers

    assert_storm_invariants(history, events, tally, tenants, POOL_SIZE, now)
