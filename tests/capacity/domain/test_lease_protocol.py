"""The lease protocol as the domain speaks it: acquire, renew, release, fencing, expiry and takeover.

The same protocol ``tests/capacity/test_leases.py`` drives over HTTP through a host on Azurite,
here called in process on an in-memory store with a clock the test moves: expiry and the
takeover grace pass when the test advances the clock, never by sleeping.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import pytest

from shared.capacity import leases, quota, records, slots
from shared.capacity.errors import CapacityUnavailable, LeaseIdInUse, LeaseLost, LeaseNotFound, QuotaExceeded
from shared.capacity.keys import parse_stamp
from shared.capacity.models import LeaseState
from shared.capacity.pools import read_pool
from shared.capacity.sweeper import sweep_pool
from shared.capacity.usage import tenant_usage
from tests.capacity.domain.conftest import Capacity
from tests.support.domain import unique

GRACE = 1  # the fixture's TakeoverGraceSeconds


def test_acquire_answers_a_fenced_lease_and_release_frees_the_slot(capacity: Capacity) -> None:
    pool = capacity.pool(size=1)
    [tenant] = capacity.tenants(limit=4)

    lease, replayed = capacity.service.acquire(tenant, capacity.request(pool, holder="worker-7", ttl_seconds=30))

    assert not replayed
    assert (lease.pool, lease.slot, lease.state, lease.holder) == (pool.id, 0, LeaseState.ACTIVE, "worker-7")
    assert lease.fencing_token >= 1
    # The TTL runs from the acquire's claim, just before the grant: a lease never outlives what was asked.
    assert (
        timedelta(seconds=29) < parse_stamp(lease.expires_at) - parse_stamp(lease.granted_at) <= timedelta(seconds=30)
    )
    assert capacity.held(pool) == 1

    capacity.service.release(tenant, lease.lease_id)
    assert capacity.held(pool) == 0
    assert capacity.service.get(tenant, lease.lease_id).state == LeaseState.RELEASED
    second, _ = capacity.service.acquire(tenant, capacity.request(pool))
    assert second.slot == lease.slot
    assert second.fencing_token > lease.fencing_token  # every grant of the slot bumps the token


def test_a_retried_acquire_with_the_same_lease_id_returns_the_same_lease(capacity: Capacity) -> None:
    pool = capacity.pool(size=3)
    [tenant] = capacity.tenants(limit=3)
    request = capacity.request(pool, lease_id=unique("lease"))

    first, first_replayed = capacity.service.acquire(tenant, request)
    again, replayed = capacity.service.acquire(tenant, request)

    assert (first_replayed, replayed) == (False, True)
    assert (again.lease_id, again.slot, again.fencing_token) == (first.lease_id, first.slot, first.fencing_token)
    assert capacity.held(pool) == 1


def test_concurrent_acquires_with_one_lease_id_hold_one_slot(capacity: Capacity) -> None:
    pool = capacity.pool(size=4)
    [tenant] = capacity.tenants(limit=4)
    request = capacity.request(pool, lease_id=unique("lease"))

    with ThreadPoolExecutor(max_workers=6) as workers:
        answers = list(workers.map(lambda _: capacity.service.acquire(tenant, request)[0], range(6)))

    assert len({(lease.slot, lease.fencing_token) for lease in answers}) == 1
    assert capacity.held(pool) == 1  # any duplicate grant was given back before answering
    assert tenant_usage(capacity.store, tenant)["kinds"]["sandbox"]["in_use"] == 1


def test_a_lease_id_reused_for_a_different_request_is_refused(capacity: Capacity) -> None:
    pool = capacity.pool(size=2)
    [tenant] = capacity.tenants(limit=2)
    lease_id = unique("lease")
    capacity.service.acquire(tenant, capacity.request(pool, holder="a", lease_id=lease_id))

    with pytest.raises(LeaseIdInUse):
        capacity.service.acquire(tenant, capacity.request(pool, holder="b", lease_id=lease_id))


def test_renew_extends_the_lease_from_now_and_keeps_its_fencing_token(capacity: Capacity) -> None:
    pool = capacity.pool(size=1)
    [tenant] = capacity.tenants(limit=1)
    lease, _ = capacity.service.acquire(tenant, capacity.request(pool, ttl_seconds=5))
    capacity.clock.advance(3)

    before = capacity.clock.now()
    renewed = capacity.service.renew(tenant, lease.lease_id, 120)
    after = capacity.clock.now()

    assert renewed.fencing_token == lease.fencing_token
    assert renewed.ttl_seconds == 120
    assert before + timedelta(seconds=120) <= parse_stamp(renewed.expires_at) <= after + timedelta(seconds=120)


def test_renew_after_expiry_tells_the_worker_to_stop(capacity: Capacity) -> None:
    pool = capacity.pool(size=1)
    [tenant] = capacity.tenants(limit=1)
    lease, _ = capacity.service.acquire(tenant, capacity.request(pool, ttl_seconds=5))
    capacity.clock.advance(5.5)

    assert capacity.service.get(tenant, lease.lease_id).state == LeaseState.EXPIRED
    with pytest.raises(LeaseLost) as lost:
        capacity.service.renew(tenant, lease.lease_id, None)
    assert (lost.value.reason, lost.value.lease_id) == ("expired", lease.lease_id)


def test_an_expired_slot_is_taken_over_only_after_the_grace_and_fences_the_old_holder(capacity: Capacity) -> None:
    pool = capacity.pool(size=1)
    tenant_a, tenant_b = capacity.tenants(limit=1, count=2)
    old, _ = capacity.service.acquire(tenant_a, capacity.request(pool, ttl_seconds=5))

    capacity.clock.advance(5 + GRACE / 2)  # expired, but within the grace: not takeable yet
    with pytest.raises(CapacityUnavailable):
        capacity.service.acquire(tenant_b, capacity.request(pool))

    capacity.clock.advance(GRACE)  # past the grace: the next acquirer takes the slot, no sweep needed
    new, _ = capacity.service.acquire(tenant_b, capacity.request(pool))

    assert (new.slot, new.fencing_token) == (old.slot, old.fencing_token + 1)
    with pytest.raises(LeaseLost) as lost:
        capacity.service.renew(tenant_a, old.lease_id, None)
    assert lost.value.reason in ("taken-over", "expired")
    capacity.service.release(tenant_a, old.lease_id)  # releasing a lost lease is harmless
    assert capacity.service.renew(tenant_b, new.lease_id, None).fencing_token == new.fencing_token
    assert capacity.held(pool) == 1


def test_release_is_idempotent_and_another_tenants_lease_is_not_found(capacity: Capacity) -> None:
    pool = capacity.pool(size=1)
    owner, stranger = capacity.tenants(limit=1, count=2)
    lease, _ = capacity.service.acquire(owner, capacity.request(pool))

    for call in (
        lambda: capacity.service.release(stranger, lease.lease_id),
        lambda: capacity.service.renew(stranger, lease.lease_id, None),
        lambda: capacity.service.get(stranger, lease.lease_id),
    ):
        with pytest.raises(LeaseNotFound):
            call()
    assert capacity.service.get(owner, lease.lease_id).state == LeaseState.ACTIVE

    capacity.service.release(owner, lease.lease_id)
    capacity.service.release(owner, lease.lease_id)
    with pytest.raises(LeaseNotFound):
        capacity.service.release(owner, unique("never-acquired"))
    with pytest.raises(LeaseLost) as lost:
        capacity.service.renew(owner, lease.lease_id, None)
    assert lost.value.reason == "released"


def test_the_tenants_limit_is_429_and_a_full_pool_503(capacity: Capacity) -> None:
    pool = capacity.pool(size=2)
    [limited] = capacity.tenants(limit=1)
    [other] = capacity.tenants(limit=5)
    capacity.service.acquire(limited, capacity.request(pool, ttl_seconds=30))

    with pytest.raises(QuotaExceeded) as over:
        capacity.service.acquire(limited, capacity.request(pool))
    # Retry-After: until the earliest lease ends plus the takeover grace; the ceiling: until the last one ends.
    assert over.value.limit == 1
    assert over.value.retry_after_seconds == pytest.approx(30 + GRACE, abs=0.01)
    assert over.value.retry_ceiling_seconds == pytest.approx(30, abs=0.01)

    capacity.service.acquire(other, capacity.request(pool, ttl_seconds=60))
    with pytest.raises(CapacityUnavailable) as full:
        capacity.service.acquire(other, capacity.request(pool))
    assert full.value.pools == [pool.id] and not full.value.contended
    assert full.value.retry_after_seconds == pytest.approx(30 + GRACE, abs=0.01)


def test_the_sweep_ends_an_abandoned_lease_and_returns_its_token(capacity: Capacity) -> None:
    pool = capacity.pool(size=1)
    [tenant] = capacity.tenants(limit=1)
    lease, _ = capacity.service.acquire(tenant, capacity.request(pool, ttl_seconds=5))

    assert sweep_pool(capacity.store, pool.id).expired == 0  # still valid: nothing to sweep
    capacity.clock.advance(5 + GRACE + 0.5)
    swept = sweep_pool(capacity.store, pool.id)

    assert (swept.expired, swept.contended) == (1, 0)
    assert capacity.service.get(tenant, lease.lease_id).state == LeaseState.EXPIRED
    assert capacity.held(pool) == 0
    now = capacity.clock.now()
    assert not quota.read_tokens(capacity.store, tenant, pool.kind, now).held_by(lease.lease_id)
    again, _ = capacity.service.acquire(tenant, capacity.request(pool))  # the tenant's one token is back
    assert again.fencing_token == lease.fencing_token + 1


def test_a_retry_after_a_crash_between_grant_and_record_adopts_the_grant(
    capacity: Capacity, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The host died after granting the slot and before writing the lease record: the retry must not grant twice."""
    monkeypatch.setattr(leases, "JOIN_SECONDS", 0.2)  # how long the retry waits for a record that never comes
    pool = capacity.pool(size=2)
    [tenant] = capacity.tenants(limit=2)
    lease_id = unique("lease")
    # What the crashed attempt left behind: a quota token and a slot naming the lease id, no record.
    stored = read_pool(capacity.store, pool.id)
    assert stored is not None
    now = capacity.clock.now()
    expires_at = now + timedelta(seconds=60)
    token = quota.claim(
        capacity.store, tenant, pool.kind, 2, lease_id, expires_at, capacity.clock.now, timedelta(seconds=GRACE)
    )
    row = slots.read_shard(capacity.store, pool.id, 0)[1]
    claim = slots.Claim(
        lease_id=lease_id,
        tenant=tenant,
        kind=pool.kind.value,
        requested_region=pool.region,
        holder="worker-1",
        purpose="sandbox",
        token_index=token,
        ttl_seconds=60,
    )
    granted, _ = slots.grant(capacity.store, stored.pool, row, claim, now, expires_at)
    assert records.read_record(capacity.store, tenant, lease_id) is None

    retried, _ = capacity.service.acquire(tenant, capacity.request(pool, ttl_seconds=60, lease_id=lease_id))

    assert (retried.slot, retried.fencing_token) == (granted.index, granted.generation)
    assert capacity.held(pool) == 1
    assert tenant_usage(capacity.store, tenant)["kinds"]["sandbox"]["in_use"] == 1
    capacity.service.release(tenant, lease_id)
    assert capacity.held(pool) == 0
