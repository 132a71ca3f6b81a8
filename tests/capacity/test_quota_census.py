"""The token census never gives back a quota token whose lease can still be valid.

Before answering 429, acquire sorts the tenant's tokens into held, ended and
in-flight leases and returns the tokens of *ended* ones on the spot (see
:mod:`shared.capacity.refusals`). A lease that merely *expired* on its slot
has not ended: until someone ends it there (a release, a takeover, a sweep;
each conditional on the slot row's ETag), a renew that read the slot while
the lease was valid can still land its ETag-conditional write and make the
lease valid again. Giving its token back in that window lets another acquire
of the tenant claim it, and the tenant holds one lease more than its limit.

These tests drive that interleaving deterministically: the service runs in
process against the session's Azurite, and the renew's slot write is held
back until the competing acquire has answered.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta
from typing import Any

import pytest

from shared.capacity import quota, slots
from shared.capacity.errors import CapacityUnavailable, LeaseLost, QuotaExceeded
from shared.capacity.keys import parse_stamp
from shared.capacity.leases import LeaseService
from shared.capacity.models import AcquireRequest, LeaseView, PoolKind, Purpose
from shared.capacity.settings import CapacitySettings
from shared.capacity.store import CapacityStore
from shared.platform import clock
from shared.platform.storage.clients import clients_from_connection_string
from tests.support.host import wait_until
from tests.support.lease_invariants import valid_leases

# Long enough that nobody takes the expired lease's slot (or token) over while the test looks at it.
GRACE_SECONDS = 60


@pytest.fixture
def service(azurite: Any) -> LeaseService:
    settings = CapacitySettings.model_validate({"TakeoverGraceSeconds": GRACE_SECONDS})
    store = CapacityStore.from_clients(
        clients_from_connection_string(azurite.connection_string()), settings, "/tests/capacity"
    )
    return LeaseService(store)


def request(pool: Any, holder: str, ttl_seconds: int) -> AcquireRequest:
    return AcquireRequest(
        kind=PoolKind(pool.kind), region=pool.region, purpose=Purpose.SANDBOX, holder=holder, ttl_seconds=ttl_seconds
    )


def test_a_lease_expired_on_its_slot_while_its_renew_is_in_flight_keeps_its_token(
    capacity: Any, service: LeaseService, monkeypatch: pytest.MonkeyPatch
) -> None:
    pool = capacity.create_pool(size=2)
    [tenant] = capacity.tenants_with_limit("sandbox", 1)
    first, _ = service.acquire(tenant, request(pool, "worker-a", ttl_seconds=5))

    # The renew reads the slot (valid), extends the token, and is held up before its slot write.
    writing, proceed = threading.Event(), threading.Event()
    renew_slot = slots.renew

    def held_up(store: CapacityStore, row: slots.SlotRow, expires_at: datetime) -> slots.SlotRow:
        writing.set()
        assert proceed.wait(60), "the test never let the renew's slot write go"
        return renew_slot(store, row, expires_at)

    monkeypatch.setattr(slots, "renew", held_up)
    with ThreadPoolExecutor(max_workers=1) as pool_of_one:
        renewing = pool_of_one.submit(service.renew, tenant, first.lease_id, 30)
        try:
            assert writing.wait(30), "the renew never reached its slot write"
            # Meanwhile the lease expires on its slot (and stays there: the takeover grace is long).
            wait_until(
                lambda: clock.utcnow() > parse_stamp(first.expires_at) or None,
                timeout=30,
                interval=0.05,
                message="the first lease's expiry",
            )

            second: LeaseView | Exception
            try:
                second, _ = service.acquire(tenant, request(pool, "worker-b", ttl_seconds=30))
            except (QuotaExceeded, CapacityUnavailable) as refusal:
                second = refusal
        finally:
            proceed.set()
        renewed: LeaseView | Exception
        try:
            renewed = renewing.result(timeout=60)
        except LeaseLost as lost:
            renewed = lost

    # The tenant's limit is 1: the renewed lease and a second grant cannot both be valid.
    held = valid_leases(service.store, pool.id, tenant, clock.utcnow())
    assert len(held) <= 1, (held, second, renewed)
    # What should happen: the first lease was never given up, so its renew succeeds and the
    # acquire is refused; not with 429, since at the census the tenant held no *valid* lease.
    assert isinstance(renewed, LeaseView), renewed
    assert isinstance(second, CapacityUnavailable), second
    assert held == [first.lease_id]


def test_a_token_is_given_back_only_as_it_was_read(capacity: Any, service: LeaseService) -> None:
    """The census's give-back is conditional on the token row's ETag: a renew's extension since wins."""
    pool = capacity.create_pool(size=1)
    [tenant] = capacity.tenants_with_limit("sandbox", 1)
    lease, _ = service.acquire(tenant, request(pool, "worker-a", ttl_seconds=30))
    [token] = quota.read_tokens(service.store, tenant, PoolKind.SANDBOX, clock.utcnow()).held_by(lease.lease_id)

    assert quota.extend(
        service.store, tenant, PoolKind.SANDBOX, token.index, lease.lease_id, clock.utcnow() + timedelta(seconds=60)
    )
    assert not quota.give_back(service.store, tenant, PoolKind.SANDBOX, token)  # read before the extension

    [current] = quota.read_tokens(service.store, tenant, PoolKind.SANDBOX, clock.utcnow()).held_by(lease.lease_id)
    assert current.index == token.index and current.expires_at > token.expires_at
    # As read, it goes (give_back trusts its caller's proof that the lease ended; only its ETag is tested here).
    assert quota.give_back(service.store, tenant, PoolKind.SANDBOX, current)
    assert not quota.read_tokens(service.store, tenant, PoolKind.SANDBOX, clock.utcnow()).held_by(lease.lease_id)
