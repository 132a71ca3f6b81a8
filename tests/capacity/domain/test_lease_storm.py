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
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from shared.capacity.errors import CapacityUnavailable, ContentionExhausted, LeaseLost, QuotaExceeded
from shared.capacity.keys import SLOTS_TABLE, parse_stamp
from shared.capacity.models import LeaseView, PoolKind, PoolSpec
from shared.capacity.pools import put_pool
from tests.capacity.domain.conftest import Capacity
from tests.support.domain import unique

POOL_SIZE = 12
SLOTS_PER_SHARD = 4  # three shards: grants and releases in one shard contend on its outbox sequence row
LIMITS = {"big": 5, "small": 2}  # 2 x 5 + 2 x 2 = 14 > 12: both the quotas and the pool bind
WORKERS = 24
OPERATIONS = 400


@dataclass
class Tally:
    lock: threading.Lock = field(default_factory=threading.Lock)
    operations: int = 0
    answers: Counter[str] = field(default_factory=Counter)
    grants: dict[str, LeaseView] = field(default_factory=dict)
    released: set[str] = field(default_factory=set)
    abandoned: set[str] = field(default_factory=set)
    lost_on_renew: set[str] = field(default_factory=set)
    quota_refusals: list[tuple[str, datetime, datetime]] = field(default_factory=list)
    release_answered: dict[str, datetime] = field(default_factory=dict)
    failures: list[BaseException] = field(default_factory=list)

    def count(self, kind: str) -> None:
        with self.lock:
            self.operations += 1
            self.answers[kind] += 1


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
                tally.grants[lease_id] = lease
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


def max_overlap(intervals: list[tuple[datetime, datetime]]) -> int:
    edges = sorted([(start, 1) for start, _ in intervals] + [(end, -1) for _, end in intervals])  # ends first
    held = peak = 0
    for _, step in edges:
        held += step
        peak = max(peak, held)
    return peak


def held_during(intervals: list[tuple[datetime, datetime]], start: datetime, end: datetime) -> int:
    clipped = [(max(a, start), min(b, end)) for a, b in intervals if a < end and b > start]
    return max_overlap(clipped) if clipped else 0


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

    # Every grant the workers received is in the history, and nothing else is.
    received = {(g.slot, g.fencing_token): g for g in tally.grants.values()}
    recorded = {(int(h["Slot"]), int(h["FencingToken"])): h for h in history}
    assert len(recorded) == len(history) and received.keys() == recorded.keys()
    for key, grant in received.items():
        assert (recorded[key]["LeaseId"], recorded[key]["Tenant"]) == (grant.lease_id, grant.tenant)

    # Fencing tokens run 1, 2, 3... per slot in grant order; a slot's validity intervals never overlap.
    def valid_interval(h: dict[str, Any]) -> tuple[datetime, datetime]:
        end = h["EndedAt"] if h["Outcome"] == "released" else h["ExpiresAt"]
        return parse_stamp(h["GrantedAt"]), parse_stamp(end)

    by_slot: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for h in history:
        by_slot[int(h["Slot"])].append(h)
    assert set(by_slot) <= set(range(POOL_SIZE))
    for slot, grants in by_slot.items():
        grants.sort(key=lambda h: int(h["FencingToken"]))
        assert [int(h["FencingToken"]) for h in grants] == list(range(1, len(grants) + 1)), slot
        intervals = [valid_interval(h) for h in grants]
        assert all(start < end for start, end in intervals), slot
        assert all(intervals[i][1] <= intervals[i + 1][0] for i in range(len(intervals) - 1)), slot

    # At no instant more than the pool's slots, or a tenant's limit, were validly held.
    assert max_overlap([valid_interval(h) for h in history]) <= POOL_SIZE
    for tenant, limit in tenants.items():
        assert max_overlap([valid_interval(h) for h in history if h["Tenant"] == tenant]) <= limit, tenant

    # No 429 while the tenant held fewer granted leases than its limit (held until the release answered).
    def held_interval(h: dict[str, Any]) -> tuple[datetime, datetime]:
        start, end = valid_interval(h)
        if h["Outcome"] != "released":
            return start, end
        return start, max(end, tally.release_answered.get(h["LeaseId"], end))

    held: dict[str, list[tuple[datetime, datetime]]] = defaultdict(list)
    for h in history:
        held[h["Tenant"]].append(held_interval(h))
    unjustified = [
        (tenant, sent.isoformat())
        for tenant, sent, answered in tally.quota_refusals
        if held_during(held[tenant], sent, answered) < tenants[tenant]
    ]
    assert not unjustified, f"{len(unjustified)} of {len(tally.quota_refusals)} 429s: {unjustified[:5]}"

    # Every grant ended: released by its worker, or expired (a lost or abandoned lease, or a release too late).
    for h in recorded.values():
        if h["LeaseId"] in tally.released and h["Outcome"] == "released":
            assert parse_stamp(h["EndedAt"]) < parse_stamp(h["ExpiresAt"])
        else:
            assert h["Outcome"] in ("expired", "held") and parse_stamp(h["ExpiresAt"]) < now, h
            assert h["LeaseId"] in tally.abandoned | tally.lost_on_renew | tally.released, h
    assert {h["LeaseId"] for h in history if h["Outcome"] == "released"} <= tally.released

    # The outbox announced each grant once and each ending at most once.
    announced = Counter((e["type"].rsplit(".", 1)[1], e["data"]["slot"], e["data"]["fencing_token"]) for e in events)
    assert all(count == 1 for count in announced.values()), [k for k, c in announced.items() if c > 1][:5]
    for (slot, token), h in recorded.items():
        assert announced[("LeaseGranted", slot, token)] == 1
        ending = {"released": "LeaseReleased", "expired": "LeaseExpired"}.get(h["Outcome"])
        if ending:
            assert announced[(ending, slot, token)] == 1
