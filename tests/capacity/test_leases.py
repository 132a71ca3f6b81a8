"""A worker's lease protocol over HTTP: acquire, renew, release, and what each answer means."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

from shared.capacity import quota, slots
from shared.capacity.models import PoolKind
from shared.capacity.pools import read_pool
from shared.capacity.settings import CapacitySettings
from shared.capacity.store import CapacityStore
from shared.platform import clock
from shared.platform.storage.clients import clients_from_connection_string
from tests.capacity.conftest import PROBLEM, unique
from tests.support.host import wait_until


def test_acquire_answers_a_fenced_lease_and_release_frees_the_slot(capacity):
    pool = capacity.create_pool(size=1)
    [tenant] = capacity.tenants_with_limit("sandbox", 4)

    first = capacity.acquire(tenant, pool, holder="worker-7", ttl_seconds=30)

    assert first.status_code == 201, first.text
    lease = first.json()
    assert first.headers["Location"] == f"/runtime-cloud/leases/{lease['lease_id']}"
    assert (lease["pool"], lease["slot"], lease["state"], lease["holder"]) == (pool.id, 0, "active", "worker-7")
    assert lease["fencing_token"] >= 1 and lease["expires_at"] > lease["granted_at"]
    assert capacity.pool_view(pool)["held"] == 1

    assert capacity.release(tenant, lease["lease_id"]).status_code == 204
    second = capacity.acquire(tenant, pool).json()

    assert second["slot"] == lease["slot"]
    assert second["fencing_token"] > lease["fencing_token"]  # every grant of the slot bumps the token
    assert capacity.lease(tenant, lease["lease_id"]).json()["state"] == "released"


def test_a_retried_acquire_with_the_same_lease_id_returns_the_same_lease(capacity):
    pool = capacity.create_pool(size=3)
    [tenant] = capacity.tenants_with_limit("sandbox", 3)
    lease_id = unique("lease")

    first = capacity.acquire(tenant, pool, lease_id=lease_id)
    again = capacity.acquire(tenant, pool, lease_id=lease_id)

    assert first.status_code == again.status_code == 201
    assert again.headers["Idempotent-Replayed"] == "true"
    assert {k: again.json()[k] for k in ("lease_id", "slot", "fencing_token")} == {
        k: first.json()[k] for k in ("lease_id", "slot", "fencing_token")
    }
    assert capacity.pool_view(pool)["held"] == 1


def test_concurrent_acquires_with_one_lease_id_hold_one_slot(capacity):
    pool = capacity.create_pool(size=4)
    [tenant] = capacity.tenants_with_limit("sandbox", 4)
    lease_id = unique("lease")

    with ThreadPoolExecutor(max_workers=6) as workers:
        answers = list(workers.map(lambda _: capacity.acquire(tenant, pool, lease_id=lease_id), range(6)))

    assert {a.status_code for a in answers} == {201}
    assert len({(a.json()["slot"], a.json()["fencing_token"]) for a in answers}) == 1

    def in_use() -> int:
        usage = capacity.call("GET", f"runtime-cloud/tenants/{tenant}/usage", capacity.worker(tenant)).json()
        return usage["kinds"]["sandbox"]["in_use"]

    assert capacity.pool_view(pool)["held"] == 1  # any duplicate grant was given back before answering
    assert in_use() == 1


def test_a_lease_id_reused_for_a_different_request_is_refused(capacity):
    pool = capacity.create_pool(size=2)
    [tenant] = capacity.tenants_with_limit("sandbox", 2)
    lease_id = unique("lease")
    assert capacity.acquire(tenant, pool, lease_id=lease_id, holder="a").status_code == 201

    answer = capacity.acquire(tenant, pool, lease_id=lease_id, holder="b")

    assert answer.status_code == 409
    assert answer.json()["type"] == PROBLEM + "lease-id-in-use"


def test_renew_extends_the_lease_and_keeps_its_fencing_token(capacity):
    pool = capacity.create_pool(size=1)
    [tenant] = capacity.tenants_with_limit("sandbox", 1)
    lease = capacity.acquire(tenant, pool, ttl_seconds=5).json()

    renewed = capacity.renew(tenant, lease["lease_id"], ttl_seconds=120)

    assert renewed.status_code == 200, renewed.text
    assert renewed.json()["fencing_token"] == lease["fencing_token"]
    assert renewed.json()["expires_at"] > lease["expires_at"]
    assert renewed.json()["ttl_seconds"] == 120


def test_renew_after_expiry_tells_the_worker_to_stop(capacity):
    pool = capacity.create_pool(size=1)
    [tenant] = capacity.tenants_with_limit("sandbox", 1)
    lease = capacity.acquire(tenant, pool, ttl_seconds=1).json()
    wait_until(
        lambda: capacity.lease(tenant, lease["lease_id"]).json()["state"] == "expired",
        timeout=10,
        message="the lease to expire",
    )

    answer = capacity.renew(tenant, lease["lease_id"])

    assert answer.status_code == 409
    problem = answer.json()
    assert problem["type"] == PROBLEM + "lease-lost"
    assert problem["reason"] == "expired" and problem["lease_id"] == lease["lease_id"]


def test_an_expired_slot_is_taken_by_the_next_acquirer_without_a_sweep(capacity):
    pool = capacity.create_pool(size=1)
    tenant_a, tenant_b = capacity.tenants_with_limit("sandbox", 1, count=2)
    old = capacity.acquire(tenant_a, pool, ttl_seconds=1).json()
    time.sleep(2.2)  # past the expiry and the takeover grace (1 s)

    new = capacity.acquire(tenant_b, pool)

    assert new.status_code == 201, new.text
    assert new.json()["slot"] == old["slot"] and new.json()["fencing_token"] == old["fencing_token"] + 1
    lost = capacity.renew(tenant_a, old["lease_id"])
    assert lost.status_code == 409 and lost.json()["reason"] in ("taken-over", "expired")
    assert capacity.release(tenant_a, old["lease_id"]).status_code == 204  # releasing a lost lease is harmless
    assert capacity.renew(tenant_b, new.json()["lease_id"]).status_code == 200


def test_release_is_idempotent_and_another_tenants_lease_is_not_found(capacity):
    pool = capacity.create_pool(size=1)
    owner, stranger = capacity.tenants_with_limit("sandbox", 1, count=2)
    lease = capacity.acquire(owner, pool).json()

    for answer in (
        capacity.release(stranger, lease["lease_id"]),
        capacity.renew(stranger, lease["lease_id"]),
        capacity.lease(stranger, lease["lease_id"]),
    ):
        assert answer.status_code == 404
        assert answer.json()["type"] == PROBLEM + "not-found"
    assert capacity.lease(owner, lease["lease_id"]).json()["state"] == "active"

    assert capacity.release(owner, lease["lease_id"]).status_code == 204
    assert capacity.release(owner, lease["lease_id"]).status_code == 204
    assert capacity.release(owner, unique("never-acquired")).status_code == 404
    renew = capacity.renew(owner, lease["lease_id"])
    assert renew.status_code == 409 and renew.json()["reason"] == "released"


def test_leases_are_listed_per_tenant_by_pool_and_holder(capacity):
    pool = capacity.create_pool(size=3)
    [tenant] = capacity.tenants_with_limit("sandbox", 3)
    [other] = capacity.tenants_with_limit("sandbox", 3)
    mine = [capacity.acquire(tenant, pool, holder=h).json() for h in ("w-1", "w-2")]
    capacity.acquire(other, pool, holder="w-1")
    capacity.release(tenant, mine[1]["lease_id"])

    everything = capacity.call("GET", f"runtime-cloud/leases?pool={pool.id}", capacity.worker(tenant)).json()
    by_holder = capacity.call("GET", f"runtime-cloud/leases?pool={pool.id}&holder=w-1", capacity.worker(tenant)).json()
    active = capacity.call("GET", f"runtime-cloud/leases?pool={pool.id}&state=active", capacity.worker(tenant)).json()

    assert sorted(lease["lease_id"] for lease in everything["leases"]) == sorted(m["lease_id"] for m in mine)
    assert [lease["lease_id"] for lease in by_holder["leases"]] == [mine[0]["lease_id"]]
    assert [lease["lease_id"] for lease in active["leases"]] == [mine[0]["lease_id"]]
    paged = capacity.call("GET", f"runtime-cloud/leases?pool={pool.id}&limit=1", capacity.worker(tenant)).json()
    assert len(paged["leases"]) == 1 and paged["continuation"]
    rest = capacity.call(
        "GET",
        f"runtime-cloud/leases?pool={pool.id}&limit=1&continuation={paged['continuation']}",
        capacity.worker(tenant),
    ).json()
    assert {paged["leases"][0]["lease_id"], rest["leases"][0]["lease_id"]} == {m["lease_id"] for m in mine}


def test_a_retry_after_a_crash_between_grant_and_record_adopts_the_grant(capacity, azurite):
    """The host died after granting the slot and before writing the lease record: the retry must not grant twice."""
    pool = capacity.create_pool(size=2)
    [tenant] = capacity.tenants_with_limit("sandbox", 2)
    lease_id = unique("lease")
    # What the crashed attempt left behind: a quota token and a slot naming the lease id, no record.
    store = CapacityStore.from_clients(
        clients_from_connection_string(azurite.connection_string()), CapacitySettings(), "/tests"
    )
    stored = read_pool(store, pool.id).pool
    expires_at = clock.utcnow() + timedelta(seconds=60)
    token = quota.claim(store, tenant, PoolKind.SANDBOX, 2, lease_id, expires_at, clock.utcnow, timedelta(seconds=1))
    row = slots.read_shard(store, pool.id, 0)[1]
    claim = slots.Claim(
        lease_id=lease_id,
        tenant=tenant,
        kind="sandbox",
        requested_region=pool.region,
        holder="worker-1",
        purpose="sandbox",
        token_index=token,
        ttl_seconds=60,
    )
    granted, _ = slots.grant(store, stored, row, claim, clock.utcnow(), expires_at)

    retried = capacity.acquire(tenant, pool, lease_id=lease_id)

    assert retried.status_code == 201, retried.text
    assert (retried.json()["slot"], retried.json()["fencing_token"]) == (granted.index, granted.generation)
    assert capacity.pool_view(pool)["held"] == 1
    usage = capacity.call("GET", f"runtime-cloud/tenants/{tenant}/usage", capacity.worker(tenant)).json()
    assert usage["kinds"]["sandbox"]["in_use"] == 1
    assert capacity.release(tenant, lease_id).status_code == 204
    assert capacity.pool_view(pool)["held"] == 0
