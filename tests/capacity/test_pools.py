"""Pools as an administrator sees them: create, resize, drain, and who may do it."""

from __future__ import annotations

from tests.capacity.conftest import PROBLEM, outbox_events, unique
from tests.support.host import wait_until


def test_draining_stops_new_grants_and_keeps_held_leases(capacity):
    pool = capacity.create_pool(size=3)
    [tenant] = capacity.tenants_with_limit("sandbox", 3)
    held = capacity.acquire(tenant, pool).json()

    drained = capacity.call("POST", f"runtime-cloud/pools/{pool.id}/drain", capacity.admin())

    assert drained.status_code == 200, drained.text
    assert drained.json()["draining"] is True and drained.json()["held"] == 1
    refused = capacity.acquire(tenant, pool)
    assert refused.status_code == 503
    assert refused.json()["type"] == PROBLEM + "capacity-unavailable" and refused.json()["draining"] is True
    assert int(refused.headers["Retry-After"]) >= 1
    assert capacity.renew(tenant, held["lease_id"]).status_code == 200  # the held lease lives on
    assert capacity.release(tenant, held["lease_id"]).status_code == 204
    assert capacity.pool_view(pool)["held"] == 0

    reopened = capacity.call(
        "PUT",
        f"runtime-cloud/pools/{pool.id}",
        capacity.admin(),
        json={"kind": "sandbox", "region": pool.region, "size": 3, "min": 0, "max": 64, "draining": False},
    )
    assert reopened.status_code == 200 and reopened.json()["draining"] is False
    assert capacity.acquire(tenant, pool).status_code == 201


def test_shrinking_never_revokes_a_held_lease(capacity, azurite):
    pool = capacity.create_pool(size=3)
    [tenant] = capacity.tenants_with_limit("sandbox", 3)
    leases = [capacity.acquire(tenant, pool).json() for _ in range(3)]

    shrunk = capacity.call(
        "PUT",
        f"runtime-cloud/pools/{pool.id}",
        capacity.admin(),
        json={"kind": "sandbox", "region": pool.region, "size": 1, "min": 0, "max": 64},
    )

    assert shrunk.status_code == 200, shrunk.text
    view = shrunk.json()
    assert (view["size"], view["held"]) == (1, 3)
    assert view["held_on_closed_slots"] == 2
    for lease in leases:
        assert capacity.renew(tenant, lease["lease_id"]).status_code == 200
    for lease in leases:
        capacity.release(tenant, lease["lease_id"])
    slots = set()
    for _ in range(3):  # surplus slots vanished: only slot 0 is ever granted again
        lease = capacity.acquire(tenant, pool).json()
        slots.add(lease["slot"])
        capacity.release(tenant, lease["lease_id"])
    assert slots == {0}
    grown = capacity.call(
        "PUT",
        f"runtime-cloud/pools/{pool.id}",
        capacity.admin(),
        json={"kind": "sandbox", "region": pool.region, "size": 3, "min": 0, "max": 64},
    )
    assert (grown.json()["size"], grown.json()["free"]) == (3, 3)
    resized = [
        e
        for e in outbox_events(azurite, "CapacityPools", f"pool|{pool.id}")
        if e["type"] == "factory.runtime-cloud.PoolResized"
    ]
    assert [(e["data"]["old_size"], e["data"]["new_size"]) for e in sorted(resized, key=lambda e: e["sequence"])] == [
        (0, 3),
        (3, 1),
        (1, 3),
    ]


def test_pool_changes_need_the_platform_admin_role(capacity, mint):
    pool_id = unique("pool")
    body = {"kind": "build", "region": "local", "size": 1, "min": 0, "max": 4}
    operator = mint("tenant-x", scopes=["factory.runtime.write", "factory.runtime.read"], roles=["Operator"])
    no_scope = mint("tenant-x", scopes=["factory.runtime.read"], roles=["PlatformAdmin"])

    for token in (operator, no_scope):
        for method, path, json in (
            ("PUT", f"runtime-cloud/pools/{pool_id}", body),
            ("POST", f"runtime-cloud/pools/{pool_id}/drain", None),
            ("PUT", "runtime-cloud/quotas/gold", {"limits": {"build": 1}}),
        ):
            answer = capacity.call(method, path, token, json=json)
            assert answer.status_code == 403, (method, path, answer.text)
            assert answer.json()["type"] == PROBLEM + "forbidden"
    assert capacity.call("GET", f"runtime-cloud/pools/{pool_id}", capacity.admin()).status_code == 404
    anonymous = capacity.call("PUT", f"runtime-cloud/pools/{pool_id}", None, json=body)
    assert anonymous.status_code == 401
    assert anonymous.headers["WWW-Authenticate"].startswith("Bearer")
    assert "send a bearer token" in anonymous.json()["detail"]


def test_pool_bodies_are_validated_field_by_field(capacity):
    pool_id = unique("pool")
    cases = [
        ({"kind": "gpu", "size": 1}, "/kind"),
        ({"kind": "build", "size": 5, "min": 0, "max": 4}, "/size"),
        ({"kind": "build", "size": 1, "min": 0, "max": 4, "colour": "blue"}, "/colour"),
        ({"kind": "build"}, "/size"),
        ({"kind": "build", "size": 1, "min": 0}, "/max"),  # a resize restates its bounds: none resets silently
        ({"kind": "build", "size": 1, "max": 4}, "/min"),
        ({"kind": "build", "size": 1, "min": 0, "max": 4, "draining": 0}, "/draining"),  # JSON's types only
        ({"kind": "build", "size": "1", "min": 0, "max": 4}, "/size"),
        ({"kind": "build", "size": 1, "min": 0, "max": 4, "scope": "dedicated"}, "/tenant"),
    ]
    for body, path in cases:
        answer = capacity.call("PUT", f"runtime-cloud/pools/{pool_id}", capacity.admin(), json=body)
        assert answer.status_code == 422, (body, answer.text)
        assert answer.json()["type"] == PROBLEM + "validation-failed"
        assert path in [error["path"] for error in answer.json()["errors"]], (body, answer.json())
    bad_id = capacity.call(
        "PUT", "runtime-cloud/pools/Not_Valid", capacity.admin(), json={"kind": "build", "size": 1, "min": 0, "max": 4}
    )
    assert bad_id.status_code == 422


def test_a_pool_cannot_change_its_kind_or_sharding(capacity):
    pool = capacity.create_pool(kind="build", size=1)

    answer = capacity.call(
        "PUT",
        f"runtime-cloud/pools/{pool.id}",
        capacity.admin(),
        json={"kind": "browser", "region": pool.region, "size": 1, "min": 0, "max": 4},
    )

    assert answer.status_code == 409 and answer.json()["type"] == PROBLEM + "pool-change-refused"
    reshard = capacity.call(
        "PUT",
        f"runtime-cloud/pools/{pool.id}",
        capacity.admin(),
        json={"kind": "build", "region": pool.region, "size": 2, "min": 0, "max": 4, "slots_per_shard": 1},
    )
    assert reshard.status_code == 409 and "slots_per_shard" in reshard.json()["detail"]


def test_a_dedicated_pool_serves_and_shows_only_its_tenant(capacity):
    [owner, stranger] = capacity.tenants_with_limit("browser", 2, count=2)
    pool = capacity.create_pool(kind="browser", size=1, scope="dedicated", tenant=owner)

    assert capacity.acquire(owner, pool, purpose="browser").status_code == 201
    refused = capacity.acquire(stranger, pool, purpose="browser")
    assert refused.status_code == 404 and refused.json()["type"] == PROBLEM + "no-matching-pool"
    assert capacity.call("GET", f"runtime-cloud/pools/{pool.id}", capacity.worker(stranger)).status_code == 404
    listed = capacity.call("GET", "runtime-cloud/pools", capacity.worker(stranger)).json()["pools"]
    assert pool.id not in [p["id"] for p in listed]
    assert capacity.call("GET", f"runtime-cloud/pools/{pool.id}", capacity.worker(owner)).status_code == 200


def test_the_settings_seed_one_pool_per_kind(capacity):
    def seeded() -> set[str] | None:  # the maintenance timer seeds at host start
        listed = capacity.call("GET", "runtime-cloud/pools", capacity.worker("tenant-seed")).json()["pools"]
        kinds = {p["kind"] for p in listed if p["id"].endswith("-local") and p["free"] + p["held"] == p["size"]}
        return kinds if len(kinds) == 4 else None

    assert wait_until(seeded, timeout=20, message="seeded pools") == {"agent-runtime", "sandbox", "build", "browser"}
