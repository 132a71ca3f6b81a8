"""The token census never gives back a quota token whose lease can still be valid (in memory, on a moved clock).

``tests/capacity/test_quota_census.py`` drives these interleavings on Azurite, waiting for a real
expiry; here the store is in memory and the expiry is the clock moved on. Before answering 429,
acquire sorts the tenant's tokens into held, ended, lapsed and in-flight leases and returns the
tokens of *ended* ones (:mod:`shared.capacity.refusals`). A lease merely *expired* on its slot has
not ended: a renew that read the slot while it was valid can still land its ETag-conditional
write, so its token must stay taken.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta

import pytest

from shared.capacity import quota, refusals, slots
from shared.capacity.errors import CapacityUnavailable, LeaseLost, QuotaExceeded
from shared.capacity.keys import parse_stamp
from shared.capacity.models import LeaseView, PoolKind
from shared.capacity.store import CapacityStore
from tests.capacity.domain.conftest import Capacity
from tests.support.lease_invariants import valid_leases


def test_a_lease_expired_on_its_slot_while_its_renew_is_in_flight_keeps_its_token(
    capacity: Capacity, monkeypatch: pytest.MonkeyPatch
) -> None:
    capacity = capacity.with_grace(60)  # nobody takes the expired lease's slot (or token) over meanwhile
    pool = capacity.pool(size=2)
    [tenant] = capacity.tenants(limit=1)
    first, _ = capacity.service.acquire(tenant, capacity.request(pool, holder="worker-a", ttl_seconds=5))

    # The renew reads the slot (valid), extends the token, and is held up before its slot write.
    writing, proceed = threading.Event(), threading.Event()
    renew_slot = slots.renew

    def held_up(store: CapacityStore, row: slots.SlotRow, expires_at: datetime) -> slots.SlotRow:
        writing.set()
        assert proceed.wait(30), "the test never let the renew's slot write go"
        return renew_slot(store, row, expires_at)

    monkeypatch.setattr(slots, "renew", held_up)
    with ThreadPoolExecutor(max_workers=1) as pool_of_one:
        renewing = pool_of_one.submit(capacity.service.renew, tenant, first.lease_id, 30)
        try:
            assert writing.wait(30), "the renew never reached its slot write"
            capacity.clock.advance(6)  # meanwhile the lease expires on its slot (and stays there: a long grace)
            assert capacity.clock.now() > parse_stamp(first.expires_at)
            second: LeaseView | Exception
            try:
                second, _ = capacity.service.acquire(tenant, capacity.request(pool, holder="worker-b"))
            except (QuotaExceeded, CapacityUnavailable) as refusal:
                second = refusal
        finally:
            proceed.set()
        renewed: LeaseView | Exception
        try:
            renewed = renewing.result(timeout=30)
        except LeaseLost as lost:
            renewed = lost

    # The tenant's limit is 1: the renewed lease and a second grant cannot both be valid.
    held = valid_leases(capacity.store, pool.id, tenant, capacity.clock.now())
    assert len(held) <= 1, (held, second, renewed)
    # The first lease was never given up, so its renew succeeds and the acquire is refused; not with
    # 429, since at the census the tenant held no *valid* lease.
    assert isinstance(renewed, LeaseView), renewed
    assert isinstance(second, CapacityUnavailable), second
    assert held == [first.lease_id]


def test_a_token_is_given_back_only_as_it_was_read(capacity: Capacity) -> None:
    """The census's give-back is conditional on the token row's ETag: a renew's extension since wins."""
    pool = capacity.pool(size=1)
    [tenant] = capacity.tenants(limit=1)
    lease, _ = capacity.service.acquire(tenant, capacity.request(pool, ttl_seconds=30))
    now = capacity.clock.now
    [token] = quota.read_tokens(capacity.store, tenant, PoolKind.SANDBOX, now()).held_by(lease.lease_id)

    assert quota.extend(
        capacity.store, tenant, PoolKind.SANDBOX, token.index, lease.lease_id, now() + timedelta(seconds=60)
    )
    assert not quota.give_back(capacity.store, tenant, PoolKind.SANDBOX, token)  # read before the extension

    [current] = quota.read_tokens(capacity.store, tenant, PoolKind.SANDBOX, now()).held_by(lease.lease_id)
    assert current.index == token.index and current.expires_at > token.expires_at
    # As read, it goes (give_back trusts its caller's proof that the lease ended; only its ETag is tested here).
    assert quota.give_back(capacity.store, tenant, PoolKind.SANDBOX, current)
    assert not quota.read_tokens(capacity.store, tenant, PoolKind.SANDBOX, now()).held_by(lease.lease_id)


def test_the_census_sorts_held_ended_lapsed_and_in_flight_tokens(capacity: Capacity) -> None:
    """One tenant, four tokens, one of each kind; only the ended one's token is returned, and only once."""
    pool = capacity.pool(size=4)
    [tenant] = capacity.tenants(limit=4)
    service, store, kind = capacity.service, capacity.store, PoolKind.SANDBOX
    held, _ = service.acquire(tenant, capacity.request(pool, holder="held", ttl_seconds=600))
    ended, _ = service.acquire(tenant, capacity.request(pool, holder="ended", ttl_seconds=600))
    lapsed, _ = service.acquire(tenant, capacity.request(pool, holder="lapsed", ttl_seconds=5))
    # In flight: a token claimed for a lease whose grant and record have not landed (yet, or ever).
    quota.claim(store, tenant, kind, 4, "in-flight", capacity.clock.now() + timedelta(seconds=600),
                capacity.clock.now, service.grace)  # fmt: skip
    # Ended: its slot moved past it (freed as a crashed release would leave it: token and record untouched).
    [ended_row] = [row for row in slots.read_pool_slots(store, pool) if row.lease_id == ended.lease_id]
    slots.end(store, ended_row, capacity.clock.now(), reason="released")
    # Lapsed: a renew in flight extended its token (the renew's first write) and has not written its slot yet,
    # which expires meanwhile.
    [lapsed_token] = quota.read_tokens(store, tenant, kind, capacity.clock.now()).held_by(lapsed.lease_id)
    extended_to = capacity.clock.now() + timedelta(seconds=600)
    assert quota.extend(store, tenant, kind, lapsed_token.index, lapsed.lease_id, extended_to)
    capacity.clock.advance(6)  # the 5 s lease has expired on its slot, not ended

    tokens = quota.read_tokens(store, tenant, kind, capacity.clock.now())
    census = refusals.take_census(store, tenant, tokens, limit=3)  # as many as are recorded: every slot is read

    assert [h.lease_id for h in census.held] == [held.lease_id]
    assert [token.lease_id for token, _ in census.ended] == [ended.lease_id]
    assert [token.lease_id for token in census.lapsed] == [lapsed.lease_id]
    assert [token.lease_id for token in census.in_flight] == ["in-flight"]
    assert not census.holds_limit(3)

    assert refusals.return_ended(store, tenant, kind, census) == 1
    assert refusals.return_ended(store, tenant, kind, census) == 0  # conditional on the token as read
    left = quota.read_tokens(store, tenant, kind, capacity.clock.now())
    assert sorted(t.lease_id for t in left.live()) == sorted([held.lease_id, lapsed.lease_id, "in-flight"])


def test_429_only_when_the_limit_is_held_in_valid_leases_at_one_instant(capacity: Capacity) -> None:
    pool = capacity.pool(size=4)
    [tenant] = capacity.tenants(limit=2)
    service = capacity.service
    first, _ = service.acquire(tenant, capacity.request(pool, ttl_seconds=10))
    service.acquire(tenant, capacity.request(pool, ttl_seconds=600))

    with pytest.raises(QuotaExceeded):  # both valid now: the limit is held
        service.acquire(tenant, capacity.request(pool))

    # The first expired on its slot, within the takeover grace: its token is neither returned (the lease has
    # not ended: a renew may revive it) nor takeable yet. Not 429 either: the limit is not held in valid leases.
    capacity.clock.advance(10.5)
    with pytest.raises(CapacityUnavailable):
        service.acquire(tenant, capacity.request(pool))
    capacity.clock.advance(1)  # past the grace: the lapsed lease's token and slot may be taken over
    taken, _ = service.acquire(tenant, capacity.request(pool))
    with pytest.raises(LeaseLost):
        service.renew(tenant, first.lease_id, None)

    service.release(tenant, taken.lease_id)  # ended: its token comes back and the next acquire is served
    third, _ = service.acquire(tenant, capacity.request(pool))
    assert third.state.value == "active"


def test_leases_valid_together_at_one_instant_hold_the_limit_and_ones_never_together_do_not() -> None:
    at = datetime(2026, 1, 1, tzinfo=UTC)

    def held(lease_id: str, granted: float, seen: float) -> refusals.HeldLease:
        return refusals.HeldLease(
            lease_id, at + timedelta(seconds=granted), at + timedelta(seconds=60), at + timedelta(seconds=seen)
        )

    # Granted at the instant both were read (a frozen clock): valid together at that instant.
    assert refusals.TokenCensus(held=[held("a", 0, 0), held("b", 0, 0)]).holds_limit(2)
    assert refusals.TokenCensus(held=[held("a", 0, 5), held("b", 3, 4)]).holds_limit(2)
    # "a" was last seen valid before "b" was granted: nothing shows them valid together.
    assert not refusals.TokenCensus(held=[held("a", 0, 1), held("b", 2, 3)]).holds_limit(2)
    assert not refusals.TokenCensus(held=[held("a", 0, 0)]).holds_limit(2)
