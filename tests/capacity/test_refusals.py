"""Refusals a worker can act on: which answer, when, and how long to wait.

- a full pool is 503 whatever the tenant's own acquires in flight (a quota
  token claimed by a request that then finds no slot is not a held lease);
- Retry-After is the real wait (the earliest lease to end) and never more
  than the longest lease of the pool;
- a kind the edition does not include is a permanent refusal: 403
  ``kind-not-in-edition`` without Retry-After;
- 422 paths are JSON pointers at the offending field;
- after a crash between ending a lease on its slot and recording it, the
  lease reads the same in the list and on GET, and its quota token does not
  lock the tenant out.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import requests

from shared.capacity import slots
from shared.capacity.settings import CapacitySettings
from shared.capacity.store import CapacityStore
from shared.platform import clock
from shared.platform.storage.clients import clients_from_connection_string
from tests.capacity.conftest import PROBLEM, CapacityApi, unique

TTL = 60


def acquire_many(api: CapacityApi, tenant: str, pool: Any, count: int) -> list[requests.Response]:
    def one(_: int) -> requests.Response:
        session = requests.Session()
        body = {"kind": pool.kind, "region": pool.region, "purpose": "sandbox", "holder": "burst", "ttl_seconds": TTL}
        return session.post(
            api.host.url("runtime-cloud/leases"),
            json=body,
            timeout=60,
            headers={"Authorization": f"Bearer {api.worker(tenant)}"},
        )

    with ThreadPoolExecutor(max_workers=count) as clients:
        return list(clients.map(one, range(count)))


def test_a_full_pool_is_503_with_the_real_wait_whatever_the_tenants_acquires_in_flight(capacity):
    pool = capacity.create_pool(size=2)
    [tenant] = capacity.tenants_with_limit("sandbox", 2)
    [other] = capacity.tenants_with_limit("sandbox", 2)
    assert capacity.acquire(tenant, pool, ttl_seconds=TTL).status_code == 201  # 1 of its 2
    assert capacity.acquire(other, pool, ttl_seconds=TTL).status_code == 201  # the pool's last slot

    answers = acquire_many(capacity, tenant, pool, 24)

    kinds = [(a.status_code, a.json()["type"].removeprefix(PROBLEM)) for a in answers]
    assert set(kinds) == {(503, "capacity-unavailable")}, kinds
    waits = [int(a.headers["Retry-After"]) for a in answers]
    # Both leases were granted just now for 60 s: the real wait is about a minute, never more.
    assert all(45 <= wait <= TTL for wait in waits), waits


def test_retry_after_of_a_full_quota_is_the_wait_for_the_tenants_own_lease(capacity):
    pool = capacity.create_pool(size=3)
    [tenant] = capacity.tenants_with_limit("sandbox", 1)
    assert capacity.acquire(tenant, pool, ttl_seconds=TTL).status_code == 201

    refusals = [capacity.acquire(tenant, pool, ttl_seconds=TTL) for _ in range(6)]

    assert {r.status_code for r in refusals} == {429}
    waits = [int(r.headers["Retry-After"]) for r in refusals]
    assert all(45 <= wait <= TTL for wait in waits), waits


def test_a_kind_the_edition_does_not_include_is_a_permanent_403_without_retry_after(capacity):
    pool = capacity.create_pool(size=2)
    [zero] = capacity.tenants_with_limit("sandbox", 0)
    [unlisted] = capacity.tenants_with_limit("build", 3)  # sandbox not listed: none allowed

    for tenant in (zero, unlisted):
        answer = capacity.acquire(tenant, pool)

        assert answer.status_code == 403, answer.text
        assert answer.json()["type"] == PROBLEM + "kind-not-in-edition"
        assert answer.json()["kind"] == "sandbox" and answer.json()["limit"] == 0
        assert "Retry-After" not in answer.headers
    assert set(capacity.pool_view(pool)["recent_denials"]["by_reason"]) == {"kind-not-in-edition"}


def test_validation_errors_point_at_the_offending_field(capacity):
    admin = capacity.admin()
    unknown_kind = capacity.call(
        "PUT", f"runtime-cloud/quotas/{unique('edition')}", admin, json={"limits": {"gpu": 1, "sandbox": -1}}
    )
    assert unknown_kind.status_code == 422, unknown_kind.text
    assert {e["path"] for e in unknown_kind.json()["errors"]} == {"/limits/gpu", "/limits/sandbox"}

    cases = [
        ({"kind": "sandbox", "size": 2, "min": 3, "max": 1}, "/min"),
        ({"kind": "sandbox", "size": 9, "min": 0, "max": 4}, "/size"),
        ({"kind": "sandbox", "size": 1, "min": 0, "max": 4, "scope": "dedicated"}, "/tenant"),
        ({"kind": "sandbox", "size": 1, "min": 0, "max": 4, "tenant": "tenant-a"}, "/tenant"),
    ]
    for body, path in cases:
        answer = capacity.call("PUT", f"runtime-cloud/pools/{unique('pool')}", admin, json=body)
        assert answer.status_code == 422, (body, answer.text)
        assert [e["path"] for e in answer.json()["errors"]] == [path], (body, answer.json())


def test_a_lease_ended_on_its_slot_by_a_crashed_release_reads_released_everywhere_and_frees_its_quota(
    capacity, azurite
):
    pool = capacity.create_pool(size=2)
    [tenant] = capacity.tenants_with_limit("sandbox", 1)
    lease = capacity.acquire(tenant, pool, ttl_seconds=TTL).json()
    store = CapacityStore.from_clients(
        clients_from_connection_string(azurite.connection_string()), CapacitySettings(), "/tests/capacity"
    )
    row = slots.read_slot(store, pool.id, lease["slot"] // 4, lease["slot"])
    slots.end(store, row, clock.utcnow())  # the host died here: token and record were never told

    listed = capacity.call("GET", f"runtime-cloud/leases?pool={pool.id}", capacity.worker(tenant)).json()["leases"]
    read = capacity.lease(tenant, lease["lease_id"]).json()

    assert [(item["lease_id"], item["state"]) for item in listed] == [(lease["lease_id"], "released")]
    assert read["state"] == "released" and read["ended_at"] == listed[0]["ended_at"]
    again = capacity.acquire(tenant, pool, ttl_seconds=TTL)  # the leaked token does not count as held
    assert again.status_code == 201, again.text
