"""Edition quotas: "quota exceeded" (this tenant's limit) is told apart from "capacity unavailable" (the pool)."""

from __future__ import annotations

from tests.capacity.conftest import PROBLEM, outbox_events, unique


def test_the_tenants_limit_answers_429_and_a_full_pool_503(capacity, azurite):
    pool = capacity.create_pool(size=2)
    [small] = capacity.tenants_with_limit("sandbox", 1)
    [big] = capacity.tenants_with_limit("sandbox", 5)
    assert capacity.acquire(small, pool).status_code == 201

    over_quota = capacity.acquire(small, pool)

    assert over_quota.status_code == 429, over_quota.text
    assert over_quota.json()["type"] == PROBLEM + "quota-exceeded"
    assert over_quota.json()["limit"] == 1 and over_quota.json()["kind"] == "sandbox"
    assert int(over_quota.headers["Retry-After"]) >= 1

    assert capacity.acquire(big, pool).status_code == 201  # the pool's last slot
    pool_full = capacity.acquire(big, pool)

    assert pool_full.status_code == 503, pool_full.text
    assert pool_full.json()["type"] == PROBLEM + "capacity-unavailable"
    assert pool_full.json()["draining"] is False and pool.id in pool_full.json()["pools"]
    assert int(pool_full.headers["Retry-After"]) >= 1
    denials = capacity.pool_view(pool)["recent_denials"]
    assert denials["by_reason"] == {"quota-exceeded": 1, "capacity-unavailable": 1}
    assert {d["tenant"] for d in denials["latest"]} == {small, big}
    denied = outbox_events(azurite, "CapacityPools", f"denials|{pool.id}|")
    assert sorted((e["type"].rsplit(".", 1)[1], e["data"]["reason"], e["tenant"]) for e in denied) == sorted(
        [("LeaseDenied", "quota-exceeded", small), ("LeaseDenied", "capacity-unavailable", big)]
    )


def test_a_full_quota_is_429_even_when_the_pool_is_full_too(capacity):
    pool = capacity.create_pool(size=1)
    [tenant] = capacity.tenants_with_limit("sandbox", 1)
    assert capacity.acquire(tenant, pool).status_code == 201

    answer = capacity.acquire(tenant, pool)

    assert answer.status_code == 429  # the tenant's own limit is what it can act on


def test_usage_shows_what_the_tenant_holds_against_its_edition(capacity):
    pool = capacity.create_pool(size=3)
    [tenant] = capacity.tenants_with_limit("sandbox", 3)
    lease = capacity.acquire(tenant, pool).json()
    capacity.acquire(tenant, pool)
    capacity.release(tenant, lease["lease_id"])

    usage = capacity.call("GET", f"runtime-cloud/tenants/{tenant}/usage", capacity.worker(tenant))

    assert usage.status_code == 200, usage.text
    assert usage.json()["kinds"]["sandbox"] == {"limit": 3, "in_use": 1, "available": 2}
    assert usage.json()["kinds"]["build"]["limit"] == 0  # kinds an edition does not list allow none
    stranger = capacity.call("GET", f"runtime-cloud/tenants/{tenant}/usage", capacity.worker(unique("tenant")))
    assert stranger.status_code == 404
    admin = capacity.call("GET", f"runtime-cloud/tenants/{tenant}/usage", capacity.admin())
    assert admin.status_code == 200


def test_raising_an_edition_admits_more_leases_at_once(capacity):
    pool = capacity.create_pool(size=3)
    [tenant] = capacity.tenants_with_limit("sandbox", 1)
    capacity.acquire(tenant, pool)
    assert capacity.acquire(tenant, pool).status_code == 429

    capacity.create_edition({"sandbox": 2}, [tenant])

    assert capacity.acquire(tenant, pool).status_code == 201
    listed = capacity.call("GET", "runtime-cloud/quotas", capacity.worker(tenant)).json()
    assert listed["default_edition"] == "standard"
    assert listed["your_edition"].startswith("edition-")


def test_acquire_bodies_are_validated_field_by_field(capacity):
    pool = capacity.create_pool(size=1)
    [tenant] = capacity.tenants_with_limit("sandbox", 1)
    cases = [
        ({"ttl_seconds": 0}, "/ttl_seconds"),
        ({"ttl_seconds": 100_000}, "/ttl_seconds"),  # above RuntimeCloud:Capacity:MaxTtlSeconds
        ({"purpose": "mining"}, "/purpose"),
        ({"kind": "gpu"}, "/kind"),
        ({"holder": ""}, "/holder"),
        ({"lease_id": "has spaces"}, "/lease_id"),
        ({"ttl": 5}, "/ttl"),
    ]
    for change, path in cases:
        answer = capacity.acquire(tenant, pool, **change)
        assert answer.status_code == 422, (change, answer.text)
        assert path in [error["path"] for error in answer.json()["errors"]], (change, answer.json())
    bad_query = capacity.call("GET", "runtime-cloud/leases?state=sleeping&limit=0", capacity.worker(tenant))
    assert bad_query.status_code == 422
    assert {e["path"] for e in bad_query.json()["errors"]} == {"/state", "/limit"}


def test_leases_need_the_lease_scope(capacity, mint):
    pool = capacity.create_pool(size=1)
    reader = mint("tenant-r", scopes=["factory.runtime.read"])

    answer = capacity.call(
        "POST",
        "runtime-cloud/leases",
        reader,
        json={"kind": "sandbox", "region": pool.region, "purpose": "sandbox", "holder": "w", "ttl_seconds": 5},
    )

    assert answer.status_code == 403 and "factory.capacity.lease" in answer.json()["detail"]
    assert capacity.call("GET", "runtime-cloud/leases", reader).status_code == 200
    nobody = mint("tenant-r", scopes=["factory.health.read"])
    assert capacity.call("GET", "runtime-cloud/leases", nobody).status_code == 403


def test_an_edition_nobody_uses_can_be_deleted_and_one_in_use_cannot(capacity):
    admin, name, tenant = capacity.admin(), unique("edition"), unique("tenant")
    assigned = capacity.call("PUT", f"runtime-cloud/quotas/{name}", admin, json={"limits": {}, "tenants": [tenant]})
    assert assigned.status_code == 201, assigned.text

    in_use = capacity.call("DELETE", f"runtime-cloud/quotas/{name}", admin)
    default = capacity.call("DELETE", "runtime-cloud/quotas/standard", admin)
    moved = capacity.call("PUT", f"runtime-cloud/quotas/{unique('other')}", admin, json={"tenants": [tenant]})
    deleted = capacity.call("DELETE", f"runtime-cloud/quotas/{name}", admin)
    again = capacity.call("DELETE", f"runtime-cloud/quotas/{name}", admin)

    assert (in_use.status_code, in_use.json()["type"]) == (409, PROBLEM + "edition-in-use"), in_use.text
    assert (default.status_code, default.json()["type"]) == (409, PROBLEM + "edition-in-use"), default.text
    assert moved.status_code == 201 and deleted.status_code == 204, deleted.text
    assert again.status_code == 404
    listed = capacity.call("GET", "runtime-cloud/quotas", admin).json()["editions"]
    assert name not in [edition["edition"] for edition in listed]
